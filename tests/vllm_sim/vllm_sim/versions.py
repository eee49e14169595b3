# SPDX-License-Identifier: Apache-2.0
"""Simulated vLLM release numbers and the version-dependent facts the simulator needs."""

from __future__ import annotations

import re

DEFAULT_VERSION = "0.20.0"
MIN_VERSION = (0, 10, 0)

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.+-]?[A-Za-z0-9.+-]*)?$")


class Version:
    """A vLLM release number such as ``0.10.1.1`` or ``0.20.0``; compares with tuples."""

    __slots__ = ("key", "text")

    def __init__(self, text: str):
        match = _VERSION_RE.match(str(text).strip())
        if not match:
            raise ValueError(f"not a vLLM version: {text!r}")
        parts = [int(p) if p is not None else 0 for p in match.groups()]
        self.key = tuple(parts)
        self.text = str(text).strip().lstrip("v")

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    def __str__(self) -> str:
        return self.text

    @staticmethod
    def _other(other) -> tuple:
        if isinstance(other, Version):
            return other.key
        if isinstance(other, str):
            return Version(other).key
        other = tuple(other)
        return other + (0,) * (4 - len(other))

    def __eq__(self, other) -> bool:
        return self.key == self._other(other)

    def __hash__(self) -> int:
        return hash(self.key)

    def __lt__(self, other) -> bool:
        return self.key < self._other(other)

    def __le__(self, other) -> bool:
        return self.key <= self._other(other)

    def __gt__(self, other) -> bool:
        return self.key > self._other(other)

    def __ge__(self, other) -> bool:
        return self.key >= self._other(other)

    # Version-dependent facts: --speculative-config fields, metrics and start-up behaviour (README.md, sections 5, 6 and 8).

    @property
    def process_prefixes(self) -> bool:
        """Log lines carry ``(APIServer pid=N)`` / ``(EngineCore_DP0 pid=N)`` prefixes from 0.10.2."""
        return self >= (0, 10, 2)

    @property
    def engine_proc_name(self) -> str:
        return "EngineCore_DP0" if self >= (0, 11, 0) else "EngineCore_0"

    @property
    def pydantic_version(self) -> str:
        return "2.12" if self >= (0, 12, 0) else "2.11"

    @property
    def integrated_gpu_uses_available(self) -> bool:
        """0.11.2+ takes MemAvailable as free memory on Orin/Thor; older releases see MemFree."""
        return self >= (0, 11, 2)

    @property
    def health_503_on_engine_death(self) -> bool:
        return self >= (0, 11, 0)

    @property
    def nested_error_response(self) -> bool:
        """Error bodies are ``{"error": {...}}`` from 0.10.2; flat ``{"object": "error", ...}`` before."""
        return self >= (0, 10, 2)


def parse(text) -> Version:
    if isinstance(text, Version):
        return text
    return Version(text)
