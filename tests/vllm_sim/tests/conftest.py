# SPDX-License-Identifier: Apache-2.0
"""Fixtures: a zoo-filled HF cache, fake meminfo files, settings files and simulator servers.

Every server runs as a subprocess on 127.0.0.1 with a free port and a small ``time_scale``; the
fixtures stop each one by its PID.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from vllm_sim import zoo

# tests/vllm_sim: the simulator's project directory (its package is installed from here by `make venv`).
SIM_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GiB_KB = 1024 * 1024


@pytest.fixture(scope="session")
def hub_home(tmp_path_factory):
    """An HF_HOME whose hub cache holds the whole zoo."""
    home = tmp_path_factory.mktemp("hf_home")
    zoo.install(str(home / "hub"))
    return str(home)


def write_meminfo(path, total_gib, available_gib, free_gib=None) -> str:
    free_gib = available_gib if free_gib is None else free_gib
    text = (
        f"MemTotal:       {int(total_gib * GiB_KB):>8} kB\n"
        f"MemFree:        {int(free_gib * GiB_KB):>8} kB\n"
        f"MemAvailable:   {int(available_gib * GiB_KB):>8} kB\n"
        "Buffers:          102400 kB\n"
        "Cached:          2097152 kB\n"
    )
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)
    return str(path)


@pytest.fixture
def sim_env(tmp_path, hub_home):
    """Factory: environment for a simulator run (settings, meminfo, HF cache)."""

    def make(settings=None, total_gib=61.3, available_gib=56.0, free_gib=None, extra=None):
        merged = {"time_scale": 0.002, "noise": 0.0, "seed": 7, "state_dir": str(tmp_path / "state")}
        merged.update(settings or {})
        settings_path = tmp_path / "settings.json"
        settings_path.write_text(json.dumps(merged))
        meminfo = tmp_path / "meminfo"
        if "VLLM_SIM_MEMINFO" not in (extra or {}):
            write_meminfo(meminfo, total_gib, available_gib, free_gib)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "HF_HOME": hub_home,
            "HF_HUB_OFFLINE": "1",
            "VLLM_SIM_SETTINGS": str(settings_path),
            "VLLM_SIM_MEMINFO": str(meminfo),
            "PYTHONUNBUFFERED": "1",
        }
        env.update(extra or {})
        return env

    return make


def run_vllm(args, env, timeout=60):
    """Run ``vllm ARGS`` to completion (start-up failures, --version, argparse errors)."""
    return subprocess.run(
        [sys.executable, "-m", "vllm_sim", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SimServer:
    def __init__(self, proc, port, log_path, env):
        self.proc = proc
        self.port = port
        self.log_path = log_path
        self.env = env
        self.base_url = f"http://127.0.0.1:{port}"

    @property
    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def request(self, method, path, body=None, headers=None, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body) if body is not None else None
            hdrs = {"Content-Type": "application/json"} if body is not None else {}
            hdrs.update(headers or {})
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, resp.read(), dict(resp.getheaders())
        finally:
            conn.close()

    def json(self, method, path, body=None, headers=None):
        status, data, _unused = self.request(method, path, body, headers)
        return status, json.loads(data) if data else None

    def wait_healthy(self, timeout=60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.log}")
            try:
                status, _unused, _unused = self.request("GET", "/health", timeout=5)
                if status == 200:
                    return
            except (ConnectionRefusedError, ConnectionResetError, OSError):
                pass
            time.sleep(0.05)
        raise AssertionError(f"server not healthy after {timeout}s:\n{self.log}")

    def stop(self, sig=signal.SIGTERM, timeout=15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode


@pytest.fixture
def start_server(tmp_path):
    """Factory: start ``vllm serve`` with the given args and env; every server is stopped by PID."""
    servers = []

    def start(args, env, wait=True, port=None):
        port = port or free_port()
        log_path = tmp_path / f"server-{port}.log"
        handle = open(log_path, "w", encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm_sim", "serve", *args, "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        server = SimServer(proc, port, str(log_path), env)
        server._handle = handle
        servers.append(server)
        if wait:
            server.wait_healthy()
        return server

    yield start
    for server in servers:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=10)
        server._handle.close()


def sse_events(raw: bytes) -> list:
    """``data:`` payloads of an SSE body (``[DONE]`` kept as the string)."""
    events = []
    for raw_block in raw.decode("utf-8").split("\n\n"):
        block = raw_block.strip()
        if not block:
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events
