# SPDX-License-Identifier: Apache-2.0
# Copyright: contributors to the jetson_llm.speculative collection
"""On-device benchmark client for a vLLM server's OpenAI-compatible streaming API.

Runs on the managed device next to the server: Python standard library only, Python 3.8 syntax.

The client mirrors ``vllm bench serve`` closely enough that its numbers and field names can be read
side by side with a ``--save-result`` file:

* streaming requests with ``stream_options.include_usage``, ``ignore_eos``, a fixed ``max_tokens``,
  a pinned ``temperature`` and ``seed``;
* TTFT, ITL (gaps between streamed chunks), TPOT = (E2E - TTFT) / (tokens - 1) and E2E latency per
  request; output tokens from ``usage.completion_tokens``;
* aggregates ``completed``, ``failed``, ``duration``, ``output_throughput``, ``mean_/median_/std_/p99_``
  of ``ttft``, ``tpot``, ``itl`` and ``e2el`` in milliseconds (numpy's definitions: population standard
  deviation, linearly interpolated percentiles);
* speculative-decoding acceptance from the ``vllm:spec_decode_*_total`` Prometheus counters read
  before and after the measured requests.

Differences from ``vllm bench serve``, on purpose: TTFT is taken at the first chunk that carries
text (vLLM's client also counts the role-only first chat chunk), input tokens come from the
server's ``usage.prompt_tokens`` (no local tokenizer on the device), and a run that is empty, has
failed requests beyond the allowed fraction or lacks a metric raises ``BenchError`` instead of
reporting zeros.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import http.client as httplib
import json
import math
import re
import socket
import ssl
import threading
import time
from datetime import datetime, timezone
from urllib.parse import urlsplit

from ansible_collections.jetson_llm.speculative.plugins.module_utils import _bench_prompts

DEFAULT_URL = "http://127.0.0.1:8000"
ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
# Names vLLM's client uses for the same request function (``--backend``).
ENDPOINT_BACKENDS = {"chat": "openai-chat", "completions": "openai"}

PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")
# Fields every measured run (and every block) must carry as finite numbers.
REQUIRED_METRICS = (
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
)
# Jetson benchmark wrapper name -> vLLM --save-result name.
WRAPPER_FIELDS = (
    ("throughput_tok_s", "output_throughput"),
    ("tpot_ms_p50", "median_tpot_ms"),
    ("ttft_ms_p50", "median_ttft_ms"),
    ("ttft_ms_p99", "p99_ttft_ms"),
    ("itl_ms_p50", "median_itl_ms"),
    ("itl_ms_p99", "p99_itl_ms"),
    ("e2e_latency_ms_p50", "median_e2el_ms"),
)

SPEC_COUNTERS = (
    ("vllm:spec_decode_num_drafts_total", "num_drafts"),
    ("vllm:spec_decode_num_draft_tokens_total", "num_draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens_total", "num_accepted_tokens"),
)
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SPEC_FIELDS = (
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
    "spec_decode_per_position_acceptance_rates",
)

MAX_ERROR_BODY = 2000  # bytes of an HTTP error body kept in the error text
MAX_EVENT_BYTES = 4 * 1024 * 1024  # a single SSE event larger than this is a broken stream
MAX_ERRORS_KEPT = 5

clock = time.perf_counter


class BenchError(Exception):
    """The benchmark could not produce a valid result; the message says why and where.

    ``cause`` is ``"hung"`` when the watchdog found that the server stopped answering, else ``"error"``.
    """

    def __init__(self, message, cause="error"):
        super().__init__(message)
        self.cause = cause


class _NotReady(Exception):
    """The server answered but is not ready yet (readiness is retried)."""


# --------------------------------------------------------------------------- HTTP


def describe_exception(exc):
    """Short human-readable text for a connection or protocol error."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer"
    if isinstance(exc, httplib.RemoteDisconnected):
        return "server closed the connection without a response"
    if isinstance(exc, httplib.IncompleteRead):
        return "connection closed in the middle of the response"
    if isinstance(exc, socket.gaierror):
        return "cannot resolve host: %s" % exc
    text = str(exc)
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


class Server:
    """Where the vLLM server is and how to talk to it (one new connection per request)."""

    def __init__(self, url=DEFAULT_URL, api_key=None, timeout=30.0):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BenchError("url must be http://HOST[:PORT] or https://HOST[:PORT], got %r" % url)
        self.url = url.rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        self.api_key = api_key or None
        self.timeout = float(timeout)

    def connection(self, timeout=None):
        timeout = self.timeout if timeout is None else timeout
        if self.scheme == "https":
            return httplib.HTTPSConnection(self.host, self.port, timeout=timeout, context=ssl.create_default_context())
        return httplib.HTTPConnection(self.host, self.port, timeout=timeout)

    def path(self, path):
        return self.base_path + path

    def headers(self, extra=None):
        headers = {"User-Agent": "jetson_llm.speculative-vllm_benchmark"}
        if self.api_key:
            headers["Authorization"] = "Bearer %s" % self.api_key
        if extra:
            headers.update(extra)
        return headers

    def get(self, path, timeout=None, limit=8 * 1024 * 1024):
        """GET ``path``; return ``(status, body bytes)``. Connection errors propagate."""
        conn = self.connection(timeout)
        try:
            conn.request("GET", self.path(path), headers=self.headers())
            resp = conn.getresponse()
            return resp.status, resp.read(limit)
        finally:
            conn.close()


def _snippet(body, limit=300):
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    body = " ".join(body.split())
    return body[:limit] + ("..." if len(body) > limit else "")


# --------------------------------------------------------------------------- SSE


class SSEParser:
    """Incremental parser for ``text/event-stream`` bodies.

    ``feed(bytes)`` returns the ``data`` payload (str) of every event completed by these bytes;
    events may be split across any byte boundary. Comment lines and other fields are ignored.
    """

    def __init__(self, max_event_bytes=MAX_EVENT_BYTES):
        self._buf = b""
        self._data = []
        self._max = max_event_bytes

    def feed(self, chunk):
        self._buf += chunk
        events = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                break
            line = self._buf[:nl]
            self._buf = self._buf[nl + 1 :]
            if line.endswith(b"\r"):
                line = line[:-1]
            event = self._line(line)
            if event is not None:
                events.append(event)
        if len(self._buf) > self._max:
            raise ValueError("stream event larger than %d bytes" % self._max)
        return events

    def close(self):
        """Flush an event not terminated by a blank line (end of stream); return it or None."""
        if self._buf:
            self._line(self._buf.rstrip(b"\r"))
            self._buf = b""
        return self._line(b"")

    def _line(self, line):
        if not line:
            if not self._data:
                return None
            event = "\n".join(self._data)
            self._data = []
            return event
        if line.startswith(b":"):
            return None
        field, sep, value = line.partition(b":")
        if field != b"data":
            return None
        if sep and value.startswith(b" "):
            value = value[1:]
        self._data.append(value.decode("utf-8", "replace"))
        return None


def chunk_text(choice):
    """Text carried by one streamed choice (chat ``delta`` content and reasoning, or completion ``text``)."""
    if not isinstance(choice, dict):
        return ""
    delta = choice.get("delta")
    if isinstance(delta, dict):
        parts = []
        for key in ("reasoning_content", "reasoning", "content"):
            value = delta.get(key)
            if isinstance(value, str) and value:
                parts.append(value)
        return "".join(parts)
    text = choice.get("text")
    return text if isinstance(text, str) else ""


class StreamAccumulator:
    """Timing and token accounting for one streamed response, fed with decoded events.

    ``start`` is the time the request was sent; each ``event(data, now)`` call passes the data of one
    SSE event and the time its bytes arrived.
    """

    def __init__(self, start):
        self.start = start
        self.ttft = None
        self.itl = []
        self.last = None
        self.chunks = 0
        self.done = False
        self.completion_tokens = None
        self.prompt_tokens = None
        self.error = ""
        self._hash = hashlib.sha256()

    def event(self, data, now):
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            self.error = "malformed stream event: %s" % _snippet(data)
            return
        if not isinstance(obj, dict):
            self.error = "unexpected stream event: %s" % _snippet(data)
            return
        if obj.get("object") == "error" or (obj.get("error") and not obj.get("choices")):
            # vLLM sends {"error": {"message": ...}} (newer) or {"object": "error", "message": ...} (older)
            err = obj.get("error") or obj
            msg = err.get("message") if isinstance(err, dict) else err
            self.error = "server error in stream: %s" % _snippet(str(msg))
            return
        choices = obj.get("choices") or []
        if choices:
            piece = chunk_text(choices[0])
            if piece:
                self._hash.update(piece.encode("utf-8"))
                self.chunks += 1
                if self.ttft is None:
                    self.ttft = now - self.start
                else:
                    self.itl.append(now - self.last)
                self.last = now
        usage = obj.get("usage")
        if isinstance(usage, dict):
            if isinstance(usage.get("completion_tokens"), int):
                self.completion_tokens = usage["completion_tokens"]
            if isinstance(usage.get("prompt_tokens"), int):
                self.prompt_tokens = usage["prompt_tokens"]

    @property
    def text_sha256(self):
        return self._hash.hexdigest()

    def record(self, end):
        """Per-request result dict (times in seconds)."""
        rec = new_record()
        rec["start"] = self.start
        rec["end"] = end
        rec["chunks"] = self.chunks
        rec["prompt_tokens"] = self.prompt_tokens
        rec["text_sha256"] = self.text_sha256
        rec["itl"] = list(self.itl)
        if self.error:
            rec["error"] = self.error
            return rec
        if not self.done:
            rec["error"] = "stream ended before [DONE] after %d chunks" % self.chunks
            return rec
        if self.ttft is None:
            rec["error"] = "stream carried no generated text"
            return rec
        rec["ttft"] = self.ttft
        rec["latency"] = end - self.start
        if self.completion_tokens is not None:
            rec["output_tokens"] = self.completion_tokens
            rec["tokens_from_usage"] = True
        else:
            rec["output_tokens"] = self.chunks
            rec["tokens_from_usage"] = False
        if rec["output_tokens"] > 1:
            rec["tpot"] = (rec["latency"] - rec["ttft"]) / (rec["output_tokens"] - 1)
        rec["ok"] = True
        return rec


def new_record():
    return {
        "ok": False,
        "error": "",
        "start": None,
        "end": None,
        "ttft": None,
        "tpot": None,
        "itl": [],
        "latency": None,
        "output_tokens": 0,
        "tokens_from_usage": False,
        "prompt_tokens": None,
        "chunks": 0,
        "text_sha256": "",
    }


def build_payload(endpoint, model, prompt, output_len, *, temperature=0.0, seed=0, ignore_eos=True):
    """Request body for one benchmark request (``endpoint`` is ``chat`` or ``completions``)."""
    payload = {
        "model": model,
        "max_tokens": int(output_len),
        "temperature": float(temperature),
        "seed": int(seed),
        "ignore_eos": bool(ignore_eos),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if endpoint == "chat":
        payload["messages"] = prompt["messages"]
    elif endpoint == "completions":
        payload["prompt"] = prompt["prompt"]
    else:
        raise BenchError("endpoint must be one of chat, completions; got %r" % (endpoint,))
    return payload


def stream_request(server, path, payload, timeout, deadline=None, watchdog=None):
    """POST one streaming request and time it; never raises for request-level failures.

    The request is bounded by ``timeout`` seconds and by the absolute ``deadline`` (``clock()``
    time). Returns a record (see ``new_record``) whose ``error`` is set when the request failed.
    """
    start = clock()
    limit = start + float(timeout)
    if deadline is not None:
        limit = min(limit, deadline)
    if limit <= start:
        rec = new_record()
        rec["start"] = rec["end"] = start
        rec["error"] = "deadline reached before the request started"
        return rec
    acc = StreamAccumulator(start)
    parser = SSEParser()
    body = json.dumps(payload).encode("utf-8")
    conn = server.connection(timeout=limit - start)
    try:
        conn.connect()
        sock = conn.sock
        if watchdog is not None:
            watchdog.started(id(conn), sock)
        conn.request(
            "POST",
            server.path(path),
            body=body,
            headers=server.headers({"Content-Type": "application/json", "Accept": "text/event-stream"}),
        )
        resp = conn.getresponse()
        if resp.status != 200:
            detail = resp.read(MAX_ERROR_BODY)
            acc.error = "HTTP %d %s: %s" % (resp.status, resp.reason, _snippet(detail))
            return acc.record(clock())
        while not (acc.done or acc.error):
            now = clock()
            if now >= limit:
                raise socket.timeout()
            try:
                sock.settimeout(max(0.001, limit - now))
            except OSError:
                pass
            data = resp.read1(65536)
            now = clock()
            if not data:
                tail = parser.close()
                if tail is not None:
                    acc.event(tail, now)
                break
            gaps = len(acc.itl)
            for event in parser.feed(data):
                acc.event(event, now)
                if acc.done or acc.error:
                    break
            if watchdog is not None:
                watchdog.progress(now, acc.itl[gaps:])
        return acc.record(clock())
    except (socket.timeout, TimeoutError):
        cause = "run deadline reached" if limit < start + float(timeout) else "request timeout"
        acc.error = "timed out after %.1f s (%s, %d chunks received)" % (clock() - start, cause, acc.chunks)
        return acc.record(clock())
    except (OSError, httplib.HTTPException, ValueError) as exc:
        acc.error = describe_exception(exc)
        return acc.record(clock())
    finally:
        if watchdog is not None:
            watchdog.finished(id(conn))
        conn.close()


# --------------------------------------------------------------------------- statistics


def percentile(values, p):
    """Percentile ``p`` (0-100) with linear interpolation between closest ranks (numpy's default)."""
    data = sorted(values)
    if not data:
        raise ValueError("percentile of an empty list")
    if not 0 <= p <= 100:
        raise ValueError("percentile must be in [0, 100], got %r" % (p,))
    pos = (len(data) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    frac = pos - lo
    return data[lo] + (data[hi] - data[lo]) * frac


def describe(values, scale=1.0):
    """``(mean, median, std, p99)`` of ``values`` times ``scale``; population standard deviation."""
    data = [v * scale for v in values]
    n = len(data)
    mean = math.fsum(data) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in data) / n)
    return mean, percentile(data, 50), std, percentile(data, 99)


def aggregate(records, duration, concurrency, num_prompts):
    """Aggregates of a list of request records, with ``vllm bench serve --save-result`` names."""
    ok = [r for r in records if r["ok"]]
    total_in = sum(r["prompt_tokens"] or 0 for r in ok)
    total_out = sum(r["output_tokens"] for r in ok)
    out = {
        "max_concurrency": int(concurrency),
        "num_prompts": int(num_prompts),
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
    }
    if duration and duration > 0:
        out["request_throughput"] = len(ok) / duration
        out["output_throughput"] = total_out / duration
        out["total_token_throughput"] = (total_in + total_out) / duration
    else:
        out["request_throughput"] = out["output_throughput"] = out["total_token_throughput"] = None
    series = {
        "ttft": [r["ttft"] for r in ok],
        "tpot": [r["tpot"] for r in ok if r["tpot"] is not None],
        "itl": [gap for r in ok for gap in r["itl"]],
        "e2el": [r["latency"] for r in ok],
    }
    for name in PERCENTILE_METRICS:
        values = series[name]
        if values:
            mean, median, std, p99 = describe(values, 1000.0)
        else:
            mean = median = std = p99 = None
        out["mean_%s_ms" % name] = mean
        out["median_%s_ms" % name] = median
        out["std_%s_ms" % name] = std
        out["p99_%s_ms" % name] = p99
    for alias, source in WRAPPER_FIELDS:
        out[alias] = out[source]
    return out


def samples(records):
    """Per-request lists of the completed requests, in dispatch order."""
    ok = [r for r in records if r["ok"]]
    return {
        "prompt_ids": [r.get("prompt_id") for r in ok],
        "ttft_ms": [r["ttft"] * 1000.0 for r in ok],
        "tpot_ms": [r["tpot"] * 1000.0 for r in ok if r["tpot"] is not None],
        "e2el_ms": [r["latency"] * 1000.0 for r in ok],
        "output_tokens": [r["output_tokens"] for r in ok],
        "text_sha256": [r["text_sha256"] for r in ok],
    }


def missing_metrics(run):
    """Names of required metrics that are absent, not numbers or not finite."""
    missing = []
    for key in REQUIRED_METRICS:
        value = run.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            missing.append(key)
    return missing


def check_run(run, url, max_failed_fraction=0.0, what="run"):
    """Raise ``BenchError`` unless ``run`` is a complete, non-empty measurement."""
    first = (run.get("errors") or ["(no error text)"])[0]
    total = run["completed"] + run["failed"]
    if run["completed"] == 0:
        raise BenchError("%s against %s completed no request (%d failed); first failure: %s" % (what, url, run["failed"], first))
    if total and run["failed"] / total > max_failed_fraction:
        raise BenchError(
            "%s against %s: %d of %d requests failed (max_failed_fraction %g); first failure: %s"
            % (what, url, run["failed"], total, max_failed_fraction, first)
        )
    missing = missing_metrics(run)
    if missing:
        raise BenchError(
            "%s against %s is missing metrics %s (completed %d, failed %d); first failure: %s"
            % (what, url, ", ".join(missing), run["completed"], run["failed"], first if run["failed"] else "none")
        )
    if run["output_throughput"] <= 0:
        raise BenchError("%s against %s measured an output throughput of 0 tok/s" % (what, url))


# --------------------------------------------------------------------------- Prometheus

_SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_ESCAPES = {"n": "\n", "\\": "\\", '"': '"'}


def _parse_labels(text):
    labels = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " ,":
            i += 1
        if i >= n:
            break
        eq = text.find("=", i)
        if eq < 0:
            raise ValueError("label without value: %r" % text[i:])
        name = text[i:eq].strip()
        i = eq + 1
        if i >= n or text[i] != '"':
            raise ValueError("label value not quoted: %r" % text[eq:])
        i += 1
        value = []
        while True:
            if i >= n:
                raise ValueError("unterminated label value: %r" % text)
            ch = text[i]
            if ch == "\\" and i + 1 < n:
                value.append(_ESCAPES.get(text[i + 1], "\\" + text[i + 1]))
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            value.append(ch)
            i += 1
        labels[name] = "".join(value)
    return labels


def parse_prometheus(text):
    """Parse Prometheus text exposition into a list of ``(name, labels dict, float value)``.

    Comment (``# HELP``/``# TYPE``) and blank lines are skipped; malformed lines are skipped too,
    so one odd line does not hide the counters the benchmark needs.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE_RE.match(line)
        if not match:
            continue
        name, labels, value = match.groups()
        try:
            out.append((name, _parse_labels(labels) if labels else {}, float(value)))
        except ValueError:
            continue
    return out


def spec_decode_counters(text, model_name=None):
    """Sum of the speculative-decoding counters over ``engine`` label values.

    Returns ``None`` when the server exposes none of them (speculation off or stats logging
    disabled), else ``{num_drafts, num_draft_tokens, num_accepted_tokens, per_pos: {position: n}}``.
    Samples whose ``model_name`` label differs from ``model_name`` (when given) are ignored.
    """
    names = dict(SPEC_COUNTERS)
    found = False
    totals = {"num_drafts": 0.0, "num_draft_tokens": 0.0, "num_accepted_tokens": 0.0, "per_pos": {}}
    for name, labels, value in parse_prometheus(text):
        if name not in names and name != SPEC_PER_POS:
            continue
        if model_name is not None and "model_name" in labels and labels["model_name"] != model_name:
            continue
        if not math.isfinite(value):
            continue
        found = True
        if name == SPEC_PER_POS:
            try:
                pos = int(labels.get("position", ""))
            except ValueError:
                continue
            totals["per_pos"][pos] = totals["per_pos"].get(pos, 0.0) + value
        else:
            totals[names[name]] += value
    return totals if found else None


def _count(value):
    return round(value) if abs(value - round(value)) < 1e-9 else value


def spec_decode_fields(before, after):
    """Derived speculative-decoding fields from two ``spec_decode_counters`` readings.

    Returns ``(fields, warnings)``. ``fields`` is empty when the server exposes no counters, or
    when it drafted nothing during the run (with a warning). Raises ``BenchError`` when a counter
    went down (the server restarted during the run).
    """
    if before is None and after is None:
        return {}, []
    if before is None or after is None:
        return {}, ["speculative-decoding counters were readable only %s the run" % ("after" if before is None else "before")]
    delta = {}
    for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        delta[key] = after[key] - before[key]
        if delta[key] < 0:
            raise BenchError("vllm:spec_decode counter %s went down during the run (%g -> %g): the server restarted" % (key, before[key], after[key]))
    positions = sorted(set(before["per_pos"]) | set(after["per_pos"]))
    per_pos = []
    for pos in positions:
        d = after["per_pos"].get(pos, 0.0) - before["per_pos"].get(pos, 0.0)
        if d < 0:
            raise BenchError("per-position acceptance counter went down during the run: the server restarted")
        per_pos.append(d)
    if delta["num_drafts"] <= 0 or delta["num_draft_tokens"] <= 0:
        return {}, ["the server exposes speculative-decoding counters but drafted nothing during the run"]
    drafts = delta["num_drafts"]
    fields = {
        "spec_decode_acceptance_rate": delta["num_accepted_tokens"] / delta["num_draft_tokens"] * 100.0,
        "spec_decode_acceptance_length": 1.0 + delta["num_accepted_tokens"] / drafts,
        "spec_decode_num_drafts": _count(drafts),
        "spec_decode_draft_tokens": _count(delta["num_draft_tokens"]),
        "spec_decode_accepted_tokens": _count(delta["num_accepted_tokens"]),
        "spec_decode_per_position_acceptance_rates": [d / drafts for d in per_pos],
    }
    return fields, []


def read_spec_counters(server, model_name=None, timeout=10.0):
    """``(counters or None, warning or None)`` from ``GET /metrics``."""
    try:
        status, body = server.get("/metrics", timeout=timeout)
    except (OSError, httplib.HTTPException) as exc:
        return None, "GET %s/metrics failed: %s" % (server.url, describe_exception(exc))
    if status != 200:
        return None, "GET %s/metrics returned HTTP %d" % (server.url, status)
    return spec_decode_counters(body, model_name), None


SIM_LAG_COUNTERS = {
    "vllm_sim:busy_seconds_total": "busy",
    "vllm_sim:lost_seconds_total": "lost",
    "vllm_sim:steps_total": "steps",
    "vllm_sim:late_steps_total": "late_steps",
    "vllm_sim:lag_limit": "limit",
}


def read_sim_lag(server, timeout=10.0):
    """The vLLM simulator's own timing counters from ``GET /metrics`` (``vllm_sim:`` names), or
    ``None`` when the server has none (a real vLLM) or the read fails."""
    try:
        status, body = server.get("/metrics", timeout=timeout)
    except (OSError, httplib.HTTPException):
        return None
    if status != 200:
        return None
    found = {}
    for name, _labels, value in parse_prometheus(body):
        if name in SIM_LAG_COUNTERS and math.isfinite(value):
            found[SIM_LAG_COUNTERS[name]] = value
    return found if "busy" in found and "lost" in found else None


def sim_lag_fields(before, after):
    """Fields of a block measured on the simulator, from two ``read_sim_lag`` readings.

    ``sim_lag_share``: modelled time the simulator lost to running late over its modelled busy time
    during the block; ``sim_out_of_spec``: that share exceeded the simulator's ``lag_limit`` (the host
    was too busy to keep the simulated device's timing, so the block's figures are skewed). Empty
    when either reading is missing.
    """
    if not before or not after:
        return {}
    busy = after["busy"] - before["busy"]
    lost = after["lost"] - before["lost"]
    share = lost / busy if busy > 0 else 0.0
    fields = {"sim_lag_share": round(share, 4), "sim_out_of_spec": bool(share > after.get("limit", 0.02))}
    if "late_steps" in after and "late_steps" in before:
        fields["sim_late_steps"] = _count(after["late_steps"] - before["late_steps"])
    return fields


# --------------------------------------------------------------------------- readiness


def wait_ready(server, model=None, timeout=60.0, interval=2.0, sleep=time.sleep):
    """Wait until ``GET /health`` is 200 and the served id is in ``GET /v1/models``.

    ``model`` None means the first served id. Connection refused counts as "still loading". At most
    ``timeout / interval + 1`` attempts; raises ``BenchError`` with the last error when the server
    is not ready in time. Returns ``{"model", "max_model_len", "root", "models"}``.
    """
    attempts = max(1, math.ceil(float(timeout) / max(interval, 0.01)) + 1)
    end = clock() + float(timeout)
    last = "no attempt made"
    for attempt in range(attempts):
        try:
            status, body = server.get("/health", timeout=min(server.timeout, 10.0))
            if status != 200:
                last = "GET /health returned HTTP %d %s" % (status, _snippet(body, 120))
            else:
                status, body = server.get("/v1/models", timeout=min(server.timeout, 10.0))
                if status in (401, 403):
                    raise BenchError("GET %s/v1/models returned HTTP %d: the api_key is missing or wrong (%s)" % (server.url, status, _snippet(body, 120)))
                if status != 200:
                    raise _NotReady("GET /v1/models returned HTTP %d %s" % (status, _snippet(body, 120)))
                try:
                    listing = json.loads(body.decode("utf-8"))
                except ValueError as exc:
                    raise _NotReady("GET /v1/models returned invalid JSON: %s" % exc) from exc
                entries = [e for e in (listing.get("data") or []) if isinstance(e, dict) and e.get("id")]
                ids = [e["id"] for e in entries]
                wanted = model if model else (ids[0] if ids else None)
                if wanted and wanted in ids:
                    entry = entries[ids.index(wanted)]
                    return {
                        "model": wanted,
                        "max_model_len": entry.get("max_model_len"),
                        "root": entry.get("root"),
                        "models": ids,
                    }
                last = "served id %r not in /v1/models (serving: %s)" % (wanted, ", ".join(ids) or "nothing")
        except _NotReady as exc:
            last = str(exc)
        except (OSError, httplib.HTTPException, AttributeError) as exc:
            last = describe_exception(exc)
        if attempt + 1 >= attempts or clock() >= end:
            break
        sleep(interval)
    raise BenchError("vLLM server at %s is not ready after %.0f s: %s" % (server.url, float(timeout), last))


def server_version(server, timeout=10.0):
    """vLLM version string from ``GET /version``; None when the endpoint is absent."""
    try:
        status, body = server.get("/version", timeout=timeout)
        if status != 200:
            return None
        version = json.loads(body.decode("utf-8")).get("version")
        return str(version) if version else None
    except (OSError, httplib.HTTPException, ValueError, AttributeError):
        return None


# --------------------------------------------------------------------------- watchdog


class Watchdog:
    """Detects a server that stopped answering while requests are in flight.

    Progress is any byte received on any in-flight request; the clock also restarts when a request
    starts while none was in flight. When nothing arrives for ``limit()`` seconds the watchdog trips:
    it shuts down the sockets of every in-flight request (their blocking reads return at once) and
    the runner starts no further request. ``limit()`` is ``max(minimum, factor x the slowest
    inter-token gap seen so far)``; before the first gap is known it is ``3 x minimum``. A
    ``minimum`` of 0 disables the watchdog.
    """

    def __init__(self, minimum=10.0, factor=20.0):
        self.minimum = float(minimum)
        self.factor = float(factor)
        self.slowest_gap = None
        self.last = clock()
        self.inflight = {}
        self.hung = False
        self.stalled_for = 0.0
        self._lock = threading.Lock()

    @property
    def enabled(self):
        return self.minimum > 0

    def limit(self):
        if self.slowest_gap is None:
            return 3.0 * self.minimum
        return max(self.minimum, self.factor * self.slowest_gap)

    def started(self, key, sock):
        with self._lock:
            if not self.inflight:
                self.last = clock()
            self.inflight[key] = sock

    def finished(self, key):
        with self._lock:
            self.inflight.pop(key, None)

    def progress(self, now, gaps=()):
        with self._lock:
            self.last = max(self.last, now)
            for gap in gaps:
                if self.slowest_gap is None or gap > self.slowest_gap:
                    self.slowest_gap = gap

    def check(self, now=None):
        """Trip when requests are in flight and nothing arrived for ``limit()`` s; returns ``hung``."""
        if not self.enabled or self.hung:
            return self.hung
        now = clock() if now is None else now
        with self._lock:
            if not self.inflight or now - self.last < self.limit():
                return False
            self.hung = True
            self.stalled_for = now - self.last
            socks = list(self.inflight.values())
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return True

    def reason(self):
        gap = "no inter-token gap measured yet" if self.slowest_gap is None else "slowest inter-token gap %.0f ms" % (self.slowest_gap * 1000.0)
        return "vLLM stopped answering: no token and no progress for %.1f s (limit %.1f s: %s)" % (self.stalled_for, self.limit(), gap)


# --------------------------------------------------------------------------- runner


def run_requests(server, path, jobs, concurrency, *, timeout, deadline, watchdog=None):
    """Run ``jobs`` (list of ``(prompt_id, payload)``) with ``concurrency`` worker threads.

    Each worker takes the next job in order; a job that cannot start before ``deadline`` fails
    without being sent. Returns ``(records in job order, wall duration in seconds)``.
    """
    records = [None] * len(jobs)
    lock = threading.Lock()
    cursor = [0]

    def worker():
        for _attempt in range(len(jobs)):  # bounded: at most every job once
            with lock:
                index = cursor[0]
                cursor[0] += 1
            if index >= len(jobs):
                return
            prompt_id, payload = jobs[index]
            if watchdog is not None and watchdog.hung:
                rec = new_record()
                rec["start"] = rec["end"] = clock()
                rec["error"] = "not sent: " + watchdog.reason()
            else:
                rec = stream_request(server, path, payload, timeout, deadline, watchdog)
                if watchdog is not None and watchdog.hung and not rec["ok"]:
                    rec["error"] = watchdog.reason()
            rec["prompt_id"] = prompt_id
            records[index] = rec

    threads = [threading.Thread(target=worker, name="bench-%d" % i) for i in range(min(concurrency, len(jobs)))]
    for thread in threads:
        thread.daemon = True
    start = clock()
    for thread in threads:
        thread.start()
    join_until = max(deadline, clock()) + 5.0
    for thread in threads:
        # stream_request is bounded by ``deadline``; the grace covers the last read and cleanup.
        while thread.is_alive() and clock() < join_until:
            thread.join(min(0.2, max(0.0, join_until - clock())) if watchdog is not None else max(0.0, join_until - clock()))
            if watchdog is not None:
                watchdog.check()
    end = clock()
    for index, found in enumerate(records):
        if found is None:
            rec = new_record()
            rec["start"] = rec["end"] = end
            rec["error"] = "not finished before the run deadline"
            rec["prompt_id"] = jobs[index][0]
            records[index] = rec
    ends = [r["end"] for r in records if r["end"] is not None]
    duration = (max(ends) - start) if ends else end - start
    return records, duration


def block_sizes(num_prompts, blocks):
    """Split ``num_prompts`` into ``blocks`` consecutive blocks as evenly as possible."""
    num_prompts, blocks = int(num_prompts), int(blocks)
    if blocks < 1 or blocks > num_prompts:
        raise BenchError("blocks must be between 1 and num_prompts (%d), got %d" % (num_prompts, blocks))
    base, extra = divmod(num_prompts, blocks)
    return [base + (1 if i < extra else 0) for i in range(blocks)]


def _errors(records):
    seen = []
    for rec in records:
        if rec["error"] and rec["error"] not in seen:
            seen.append(rec["error"])
            if len(seen) >= MAX_ERRORS_KEPT:
                break
    return seen


def _round(value, digits=4):
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, list):
        return [_round(v, digits) for v in value]
    if isinstance(value, dict):
        return dict((k, _round(v, digits)) for k, v in value.items())
    return value


def _raise_if_hung(watchdog, url, where):
    if watchdog is not None and watchdog.hung:
        raise BenchError("%s (%s, %s)" % (watchdog.reason(), url, where), cause="hung")


def run_level(
    server,
    model,
    concurrency,
    num_prompts,
    *,
    num_warmups=10,
    output_len=128,
    endpoint="chat",
    seed=0,
    temperature=0.0,
    blocks=1,
    timeout=300.0,
    deadline=None,
    max_failed_fraction=0.0,
    metrics=True,
    watchdog=None,
    prompts=None,
):
    """Benchmark one concurrency level: warm-ups (not counted), then ``blocks`` measured blocks.

    Blocks run one after the other (each drains before the next starts) and get their own
    aggregates and acceptance, so a consumer can see drift. Raises ``BenchError`` when the run is
    empty or incomplete (see ``check_run``).
    """
    if deadline is None:
        deadline = clock() + 3600.0
    path = ENDPOINT_PATHS.get(endpoint)
    if path is None:
        raise BenchError("endpoint must be one of chat, completions; got %r" % (endpoint,))
    if int(output_len) < 2:
        raise BenchError("output_len must be >= 2 so that TPOT and ITL are defined, got %s" % output_len)
    sizes = block_sizes(num_prompts, blocks)
    warnings = []

    def jobs_for(prompts):
        return [
            (
                p["id"],
                build_payload(endpoint, model, p, output_len, temperature=temperature, seed=seed, ignore_eos=True),
            )
            for p in prompts
        ]

    if num_warmups > 0:
        warm = _bench_prompts.select(num_warmups, seed, offset=num_prompts, prompts=prompts)
        warm_records = run_requests(server, path, jobs_for(warm), concurrency, timeout=timeout, deadline=deadline, watchdog=watchdog)[0]
        _raise_if_hung(watchdog, server.url + path, "warm-up at concurrency %d" % int(concurrency))
        warm_failed = [r for r in warm_records if not r["ok"]]
        if len(warm_failed) == len(warm_records):
            raise BenchError(
                "every warm-up request against %s%s failed (%d); first failure: %s" % (server.url, path, len(warm_failed), warm_failed[0]["error"])
            )
        if warm_failed:
            warnings.append("%d of %d warm-up requests failed: %s" % (len(warm_failed), len(warm_records), warm_failed[0]["error"]))

    measured = _bench_prompts.select(num_prompts, seed, offset=0, prompts=prompts)
    counters = None
    if metrics:
        counters, warning = read_spec_counters(server, model)
        if warning:
            warnings.append(warning)
    records = []
    block_results = []
    first_counters = counters
    lag_before = read_sim_lag(server) if metrics else None
    offset = 0
    for index, size in enumerate(sizes):
        block_records, duration = run_requests(
            server, path, jobs_for(measured[offset : offset + size]), concurrency, timeout=timeout, deadline=deadline, watchdog=watchdog
        )
        _raise_if_hung(watchdog, server.url + path, "concurrency %d, block %d" % (int(concurrency), index))
        offset += size
        block = aggregate(block_records, duration, concurrency, size)
        block["block"] = index
        block["errors"] = _errors(block_records)
        if metrics:
            after, warning = read_spec_counters(server, model)
            if warning and warning not in warnings:
                warnings.append(warning)
            fields, spec_warnings = spec_decode_fields(counters, after)
            block.update(fields)
            counters = after
            if len(sizes) > 1:
                warnings.extend(w for w in spec_warnings if w not in warnings)
            lag_after = read_sim_lag(server) if lag_before is not None else None
            block.update(sim_lag_fields(lag_before, lag_after))
            lag_before = lag_after
            if block.get("sim_out_of_spec"):
                warnings.append(
                    "block %d was measured on a simulator running late (%.1f %% of modelled time lost, over its limit): "
                    "its figures are skewed" % (index, 100.0 * block["sim_lag_share"])
                )
        records.extend(block_records)
        block_results.append(block)

    total_duration = sum(b["duration"] for b in block_results)
    run = aggregate(records, total_duration, concurrency, num_prompts)
    run["concurrency"] = int(concurrency)
    run["errors"] = _errors(records)
    if metrics:
        fields, spec_warnings = spec_decode_fields(first_counters, counters)
        run.update(fields)
        warnings.extend(w for w in spec_warnings if w not in warnings)
    run["samples"] = samples(records)
    run["blocks"] = block_results
    if any("sim_out_of_spec" in b for b in block_results):
        run["sim_out_of_spec"] = any(b.get("sim_out_of_spec") for b in block_results)
        run["sim_lag_share"] = max(b.get("sim_lag_share", 0.0) for b in block_results)

    ok = [r for r in records if r["ok"]]
    no_usage = [r for r in ok if not r["tokens_from_usage"]]
    if no_usage:
        warnings.append(
            "%d responses had no usage.completion_tokens; their output tokens are counted as streamed "
            "chunks, which undercounts with speculative decoding" % len(no_usage)
        )
    short = [r for r in ok if r["output_tokens"] != int(output_len)]
    if short:
        warnings.append("%d requests returned a token count other than output_len %d (e.g. %d)" % (len(short), int(output_len), short[0]["output_tokens"]))
    if any(r["prompt_tokens"] is None for r in ok):
        warnings.append("some responses had no usage.prompt_tokens; total_input_tokens undercounts")
    run["warnings"] = warnings

    what = "benchmark at concurrency %d" % int(concurrency)
    check_run(run, server.url + path, max_failed_fraction, what)
    for block in block_results:
        if block["completed"] == 0 or missing_metrics(block) or block["output_throughput"] <= 0:
            check_run(block, server.url + path, 1.0, "%s, block %d" % (what, block["block"]))
    return _round(run)


def prompt_set_info():
    digest = hashlib.sha256(
        json.dumps([[p["id"], p["kind"], p["messages"], p["prompt"]] for p in _bench_prompts.PROMPTS], sort_keys=True).encode("utf-8")
    ).hexdigest()
    return {"name": "jetson_llm.speculative", "count": len(_bench_prompts.PROMPTS), "sha256": digest}


def run_benchmark(
    url=DEFAULT_URL,
    *,
    model=None,
    api_key=None,
    concurrency=(1, 8),
    num_prompts=50,
    num_warmups=10,
    output_len=128,
    endpoint="chat",
    seed=0,
    temperature=0.0,
    blocks=1,
    timeout=300.0,
    deadline=3600.0,
    ready_timeout=60.0,
    label=None,
    max_failed_fraction=0.0,
    on_run=None,
    stall_timeout=10.0,
    stall_factor=20.0,
    prompts=None,
    prompt_set=None,
):
    """Readiness check, then one ``run_level`` per concurrency; returns the result document.

    ``num_prompts`` is one count for every concurrency level, or a list with one count per level.

    ``deadline`` (seconds) bounds the whole call. ``on_run(run)`` is called after each level (the
    module uses it to keep partial results for its failure report).

    ``stall_timeout`` and ``stall_factor`` set the ``Watchdog`` shared by every level: a server that
    sends nothing for ``max(stall_timeout, stall_factor x slowest inter-token gap)`` seconds while
    requests are in flight ends the run with a ``BenchError`` whose ``cause`` is ``"hung"``.

    ``prompts`` replaces the shipped prompt set (a user's set from ``_bench_prompts.parse_prompts_file``)
    and ``prompt_set`` describes it in ``config.prompt_set``.
    """
    if isinstance(num_prompts, (list, tuple)):
        counts = [int(n) for n in num_prompts]
        if len(counts) != len(concurrency):
            raise BenchError("num_prompts lists %d counts for %d concurrency levels" % (len(counts), len(concurrency)))
    else:
        counts = [int(num_prompts)] * len(concurrency)
    end = clock() + float(deadline)
    server = Server(url, api_key=api_key, timeout=min(float(timeout), 30.0))
    ready = wait_ready(server, model, timeout=min(float(ready_timeout), float(deadline)))
    served = ready["model"]
    version = server_version(server)
    watchdog = Watchdog(stall_timeout, stall_factor) if float(stall_timeout) > 0 else None
    started = datetime.now(timezone.utc)
    result = {
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "label": label,
        "runtime": "vllm",
        "backend": ENDPOINT_BACKENDS[endpoint],
        "endpoint": ENDPOINT_PATHS[endpoint],
        "url": server.url,
        "model": served,
        "model_id": served,
        "server": {"model": served, "max_model_len": ready["max_model_len"], "root": ready["root"]},
        "vllm_version": version,
        "config": {
            "input_len": None,
            "output_len": int(output_len),
            "num_prompts": counts[0] if len(set(counts)) == 1 else counts,
            "num_warmups": int(num_warmups),
            "concurrency": [int(c) for c in concurrency],
            "endpoint": endpoint,
            "seed": int(seed),
            "temperature": float(temperature),
            "ignore_eos": True,
            "blocks": int(blocks),
            "timeout": float(timeout),
            "deadline": float(deadline),
            "max_failed_fraction": float(max_failed_fraction),
            "stall_timeout": float(stall_timeout),
            "stall_factor": float(stall_factor),
            "prompt_set": prompt_set if prompt_set is not None else prompt_set_info(),
        },
        "runs": [],
        "warnings": [],
    }
    for level, count in zip(concurrency, counts):
        if clock() >= end:
            raise BenchError("run deadline of %.0f s reached before concurrency %d started" % (deadline, level))
        run = run_level(
            server,
            served,
            int(level),
            count,
            num_warmups=int(num_warmups),
            output_len=int(output_len),
            endpoint=endpoint,
            seed=int(seed),
            temperature=float(temperature),
            blocks=int(blocks),
            timeout=float(timeout),
            deadline=end,
            max_failed_fraction=float(max_failed_fraction),
            watchdog=watchdog,
            prompts=prompts,
        )
        result["runs"].append(run)
        result["warnings"].extend("concurrency %d: %s" % (int(level), w) for w in run["warnings"])
        if on_run is not None:
            on_run(run)
    inputs = [r["total_input_tokens"] / r["completed"] for r in result["runs"] if r["completed"]]
    if inputs:
        result["config"]["input_len"] = round(sum(inputs) / len(inputs))
    return result
