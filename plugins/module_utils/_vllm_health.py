# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Licensed under the Apache License 2.0, or at your option under the
# GNU General Public License version 3 or later (see https://www.gnu.org/licenses/gpl-3.0.txt).
"""Readiness probing of a vLLM server and classification of why it did not start.

Standard library only: this runs on the devices. The messages matched below are vLLM's own
(its startup memory checks and engine errors), so a cause named here is the
cause vLLM printed, not a guess.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

try:  # Python 3
    from http.client import HTTPConnection, HTTPException
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2 is not supported on the devices
    raise

# (cause, human description, regular expression), first match wins, most specific first.
CAUSES = (
    (
        "oom_sampler",
        "out of memory while warming up the sampler",
        re.compile(r"CUDA out of memory occurred when warming up sampler"),
    ),
    (
        "oom_free_memory",
        "not enough free memory at startup for the requested GPU memory utilization",
        re.compile(r"Free memory on device .* is less than desired GPU memory utilization"),
    ),
    (
        "oom_kv_cache",
        "no room for the KV cache",
        re.compile(
            r"No available memory for the cache blocks|KV cache is needed, which is larger than the available KV cache"
            r"|Cannot auto-fit max_model_len"
        ),
    ),
    (
        "oom_weights",
        "out of memory while loading the weights",
        re.compile(r"Failed to load model - not enough GPU memory|CUDA out of memory|OutOfMemoryError"),
    ),
    (
        "rejected_config",
        "vLLM rejected the configuration",
        re.compile(
            r"validation error for SpeculativeConfig|unrecognized arguments|error: argument|Unsupported speculative method"
            r"|is not a valid argument in the speculative_config|NotImplementedError|Value error,"
            r"|Config file must be of a yaml/yml type|No model specified"
        ),
    ),
    (
        "model_not_found",
        "the model or speculator could not be found",
        re.compile(r"couldn't connect to 'https://huggingface.co'|Repository Not Found|is not a local folder"),
    ),
)

OOM_CAUSES = ("oom_sampler", "oom_free_memory", "oom_kv_cache", "oom_weights")
ENGINE_FAILED = "Engine core initialization failed"


def classify_log(text):
    """Return (cause, description, evidence line) for a vLLM log, or (None, None, None)."""
    if not text:
        return None, None, None
    lines = text.splitlines()
    for cause, description, pattern in CAUSES:
        for line in lines:
            if pattern.search(line):
                return cause, description, line.strip()[:500]
    for line in lines:
        if ENGINE_FAILED in line:
            return "engine_failed", "the engine failed to initialise", line.strip()[:500]
    return None, None, None


def split_url(url):
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError("url must be http://HOST[:PORT], got %r" % (url,))
    return parts.hostname, parts.port or 80


def http_get(url, path, api_key=None, timeout=5.0):
    """GET url+path; returns (status, body text). Connection errors raise OSError."""
    host, port = split_url(url)
    conn = HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = "Bearer %s" % api_key
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", "replace")
        return resp.status, body
    except HTTPException as exc:
        raise OSError("bad HTTP response: %s" % exc) from exc
    finally:
        conn.close()


def probe(url, served_model_name=None, api_key=None, timeout=5.0):
    """One readiness probe. Returns a dict: state (loading|ready|unhealthy|wrong_model), detail, models."""
    try:
        status, _body = http_get(url, "/health", timeout=timeout)
    except (OSError, ValueError) as exc:
        # vLLM does not listen() while loading: connection refused means "still loading"
        return {"state": "loading", "detail": str(exc), "models": []}
    if status != 200:
        return {"state": "unhealthy", "detail": "/health returned HTTP %d" % status, "models": []}
    try:
        status, body = http_get(url, "/v1/models", api_key=api_key, timeout=timeout)
    except (OSError, ValueError) as exc:
        return {"state": "loading", "detail": str(exc), "models": []}
    if status != 200:
        return {"state": "unhealthy", "detail": "/v1/models returned HTTP %d" % status, "models": []}
    try:
        models = [m.get("id") for m in json.loads(body).get("data", [])]
    except (ValueError, AttributeError):
        return {"state": "unhealthy", "detail": "/v1/models returned no model list", "models": []}
    if served_model_name and served_model_name not in models:
        return {
            "state": "wrong_model",
            "detail": "serving %s, expected %s" % (", ".join(map(str, models)) or "nothing", served_model_name),
            "models": models,
        }
    return {"state": "ready", "detail": "", "models": models}


def parse_systemctl_show(text):
    """Parse `systemctl show -p A,B` output into a dict."""
    out = {}
    for line in (text or "").splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


# --------------------------------------------------------------------------- what the live server serves

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")


def speculation_from_metrics(text):
    """Whether a server's ``/metrics`` text shows a loaded speculative config.

    ``True`` when a ``vllm:spec_decode_*`` sample is exposed (vLLM registers these counters only with
    a speculative config, at 0 from the start), ``False`` when other ``vllm:`` samples are exposed but
    none of those, ``None`` when no ``vllm:`` sample is exposed at all (``--disable-log-stats``: the
    metrics cannot tell).
    """
    vllm = False
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("vllm:spec_decode_"):
            return True
        if line.startswith("vllm:"):
            vllm = True
    return False if vllm else None


def parse_start_record(text):
    """Parse the record the unit writes at start: ``{"invocation_id": str|None, "files": {path: sha256}}``.

    The format is the output of ``sha256sum FILE...`` (``<hex>  <path>`` or ``<hex> *<path>``), with an
    optional first line ``# invocation <InvocationID>``; other ``#`` lines and blank lines are ignored.
    Raises ``ValueError`` on any other line.
    """
    record = {"invocation_id": None, "files": {}}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            words = line[1:].split()
            if len(words) == 2 and words[0] == "invocation":
                record["invocation_id"] = words[1]
            continue
        digest, sep, path = raw.partition(" ")
        if not sep or not _HEX64.match(digest) or len(path) < 2 or path[0] not in " *":
            raise ValueError("not a sha256sum line: %r" % raw[:200])
        record["files"][path[1:]] = digest.lower()
    return record


def systemd_epoch(show, prop, monotonic_now, realtime_now):
    """Seconds since the epoch of a systemd timestamp property from ``systemctl show``.

    Uses ``<prop>Monotonic`` (microseconds of CLOCK_MONOTONIC, the clock of Python's
    ``time.monotonic()`` on Linux) for sub-second precision; ``None`` when the unit never entered
    that state (0 or absent).
    """
    try:
        mono = int(show.get(prop + "Monotonic") or 0)
    except ValueError:
        mono = 0
    if mono <= 0:
        return None
    return realtime_now - (monotonic_now - mono / 1e6)


def serving_gaps(live, speculative, wanted="the wanted configuration"):
    """Why the live server is not the wanted configuration ([] when it is): the one rule, used by
    ``vllm_server_info`` (its ``wanted`` return value), which the roles and the trial's action plugin read.

    ``live``: a ``vllm_server_info`` result (``running``, ``healthy``, ``config_current``, ``differences``, ``speculative``);
    ``speculative``: whether the wanted configuration speculates; ``wanted``: its name in the reasons (for
    example "the decision is keep", "the baseline arm"). Speculation that cannot be read from ``/metrics``
    (``speculative`` null) is no gap.
    """
    gaps = []
    if not live.get("running", False):
        gaps.append("vLLM does not run")
    elif live.get("healthy") is False:
        gaps.append("vLLM runs but does not answer /health")
    if live.get("config_current") is False:
        gaps.extend(str(d) for d in live.get("differences") or ["the configuration files changed after the server started"])
    loaded = live.get("speculative")
    if loaded is not None and bool(loaded) != bool(speculative):
        gaps.append("speculation is %s where %s" % ("loaded" if loaded else "not loaded", wanted))
    return gaps
