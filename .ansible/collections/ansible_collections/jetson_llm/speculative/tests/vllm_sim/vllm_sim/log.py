# SPDX-License-Identifier: Apache-2.0
"""Log output in vLLM's format.

vLLM's logger writes ``LEVEL MM-DD HH:MM:SS [file.py:line] message`` to stdout; from 0.10.2 every
line of the API server and of the engine core process is prefixed with ``(APIServer pid=N)`` or
``(EngineCore_DP0 pid=N)``. uvicorn lines read ``INFO:     message``. Tracebacks go to stderr.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from .errors import traceback_lines

LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


class VllmLog:
    def __init__(self, version, out=None, err=None, pid=None, level=None):
        self.version = version
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.pid = pid if pid is not None else os.getpid()
        self.level = LEVELS.get((level or os.environ.get("VLLM_LOGGING_LEVEL", "INFO")).upper(), 20)
        self.uvicorn_level = 20
        self._lock = threading.Lock()

    # prefixes -------------------------------------------------------------------------------
    def prefix(self, proc: str) -> str:
        if not self.version.process_prefixes:
            return ""
        name = "APIServer" if proc == "api" else self.version.engine_proc_name
        return f"({name} pid={self.pid}) "

    def _write(self, stream, text: str) -> None:
        with self._lock:
            try:
                stream.write(text)
                stream.flush()
            except (OSError, ValueError):
                pass

    # vLLM logger ------------------------------------------------------------------------------
    def log(self, level: str, source: str, message: str, proc: str = "api") -> None:
        if LEVELS[level] < self.level:
            return
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime())
        prefix = self.prefix(proc)
        lines = str(message).split("\n")
        text = "".join(f"{prefix}{level} {stamp} [{source}] {line}\n" for line in lines)
        self._write(self.out, text)

    def info(self, source, message, proc="api"):
        self.log("INFO", source, message, proc)

    def warning(self, source, message, proc="api"):
        self.log("WARNING", source, message, proc)

    def error(self, source, message, proc="api"):
        self.log("ERROR", source, message, proc)

    def debug(self, source, message, proc="api"):
        self.log("DEBUG", source, message, proc)

    # uvicorn ----------------------------------------------------------------------------------
    def uvicorn(self, message: str, level: str = "INFO") -> None:
        if LEVELS[level] < self.uvicorn_level:
            return
        prefix = self.prefix("api")
        self._write(self.out, f"{prefix}{(level + ':').ljust(9)} {message}\n")

    # tracebacks -------------------------------------------------------------------------------
    def traceback(self, frame_keys, exc_type, message, proc="api") -> None:
        prefix = self.prefix(proc)
        lines = traceback_lines(frame_keys, exc_type, message)
        self._write(self.err, "".join(f"{prefix}{line}\n" for line in lines))

    def logged_traceback(self, source, frame_keys, exc_type, message, proc="engine") -> None:
        """A traceback emitted through ``logger.exception`` (every line carries the log header)."""
        for line in traceback_lines(frame_keys, exc_type, message):
            self.log("ERROR", source, line, proc)

    def raw(self, text: str, proc: str = "api", stream=None) -> None:
        prefix = self.prefix(proc)
        self._write(stream or self.err, "".join(f"{prefix}{line}\n" for line in text.split("\n")))
