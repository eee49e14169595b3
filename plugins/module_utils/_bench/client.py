# SPDX-License-Identifier: Apache-2.0
# Copyright: contributors to the jetson_llm.speculative collection
"""HTTP side of the on-device benchmark: the server address and connections, the streamed
response (SSE parsing, per-request timing and token accounting), readiness, and the watchdog that
ends a run when the server stops answering. ``BenchError`` is the error of the whole benchmark.

Runs on the managed device next to the server: Python standard library only, Python 3.8 syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import http.client as httplib
import json
import math
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:8000"
ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
# Names vLLM's client uses for the same request function (``--backend``).
ENDPOINT_BACKENDS = {"chat": "openai-chat", "completions": "openai"}

MAX_ERROR_BODY = 2000  # bytes of an HTTP error body kept in the error text
MAX_EVENT_BYTES = 4 * 1024 * 1024  # a single SSE event larger than this is a broken stream

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
