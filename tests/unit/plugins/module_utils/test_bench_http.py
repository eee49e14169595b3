# SPDX-License-Identifier: Apache-2.0
"""The benchmark client over real HTTP, against a small loopback server that plays back vLLM-shaped
streams and the protocol faults the simulator does not produce (split chunks, resets, stalls)."""

import hashlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import (
    BenchError,
    Server,
    build_payload,
    clock,
    server_version,
    stream_request,
    wait_ready,
)
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.runner import run_level

MODEL = "Qwen/Qwen3-8B"
WORDS = ["alpha ", "beta ", "gamma ", "delta ", "epsilon ", "zeta ", "eta ", "theta "]


def chat_events(n_tokens, per_chunk=1):
    events = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        }
    ]
    produced = 0
    while produced < n_tokens:
        take = min(per_chunk, n_tokens - produced)
        text = "".join(WORDS[(produced + i) % len(WORDS)] for i in range(take))
        produced += take
        events.append(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
            }
        )
    events.append(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 17, "completion_tokens": n_tokens, "total_tokens": 17 + n_tokens},
        }
    )
    return events


def expected_hash(n_tokens):
    return hashlib.sha256("".join(WORDS[i % len(WORDS)] for i in range(n_tokens)).encode()).hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.calls.append(("GET", self.path, dict(self.headers), None))
        self.server.behaviour["get"](self)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        payload = json.loads(body)
        with self.server.lock:
            self.server.calls.append(("POST", self.path, dict(self.headers), payload))
            self.server.posts += 1
            number = self.server.posts
        self.server.behaviour["post"](self, payload, number)

    # helpers for behaviours
    def send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_chunked(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def default_get(handler):
    if handler.path == "/health":
        handler.send_response(200)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
    elif handler.path == "/v1/models":
        handler.send_json(
            200,
            {"object": "list", "data": [{"id": MODEL, "object": "model", "root": "/models/q", "max_model_len": 4096}]},
        )
    elif handler.path == "/version":
        handler.send_json(200, {"version": "0.11.0"})
    elif handler.path == "/metrics":
        text = handler.server.metrics_text()
        data = text.encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    else:
        handler.send_json(404, {"detail": "Not Found"})


def stream_ok(handler, payload, number, per_chunk=1, split=7):
    """Stream the events, writing the bytes in pieces of ``split`` bytes (SSE events cut anywhere)."""
    handler.start_chunked()
    data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in chat_events(payload["max_tokens"], per_chunk)) + b"data: [DONE]\n\n"
    for i in range(0, len(data), split):
        handler.chunk(data[i : i + split])
    handler.end_chunked()
    with handler.server.lock:
        handler.server.drafts += payload["max_tokens"] // 2
        handler.server.accepted += payload["max_tokens"] // 3


class Fake:
    def __init__(self, post=stream_ok, get=default_get, speculative=False):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, address: None  # clients that time out break pipes
        self.httpd.behaviour = {"post": post, "get": get}
        self.httpd.calls = []
        self.httpd.posts = 0
        self.httpd.lock = threading.Lock()
        self.httpd.drafts = 0
        self.httpd.accepted = 0
        self.httpd.metrics_text = self.metrics_text
        self.speculative = speculative
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]

    def metrics_text(self):
        lines = [
            "# HELP vllm:num_requests_running x",
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{engine="0",model_name="%s"} 0.0' % MODEL,
        ]
        if self.speculative:
            d, a = self.httpd.drafts, self.httpd.accepted
            lines += [
                "# TYPE vllm:spec_decode_num_drafts_total counter",
                'vllm:spec_decode_num_drafts_total{engine="0",model_name="%s"} %d.0' % (MODEL, d),
                'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="%s"} %d.0' % (MODEL, 3 * d),
                'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="%s"} %d.0' % (MODEL, a),
                'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="%s",position="0"} %d.0' % (MODEL, a),
            ]
        return "\n".join(lines) + "\n"

    @property
    def calls(self):
        return self.httpd.calls

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake(request):
    servers = []

    def make(**kwargs):
        server = Fake(**kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROMPT = {"id": "t", "kind": "chat", "messages": [{"role": "user", "content": "hello"}], "prompt": "hello"}


def one(server_url, post_timeout=10.0, deadline=None, api_key=None, tokens=16):
    server = Server(server_url, api_key=api_key)
    payload = build_payload("chat", MODEL, PROMPT, tokens)
    return stream_request(server, "/v1/chat/completions", payload, post_timeout, deadline)


def test_stream_over_chunked_http_with_split_events(fake):
    srv = fake()
    rec = one(srv.url, api_key="s3cret")
    assert rec["ok"], rec["error"]
    assert rec["output_tokens"] == 16 and rec["tokens_from_usage"]
    assert rec["prompt_tokens"] == 17
    assert rec["chunks"] == 16
    assert len(rec["itl"]) == 15
    assert rec["text_sha256"] == expected_hash(16)
    method, path, headers, payload = srv.calls[-1]
    assert (method, path) == ("POST", "/v1/chat/completions")
    assert headers["Authorization"] == "Bearer s3cret"
    assert payload["stream"] is True and payload["stream_options"] == {"include_usage": True}
    assert payload["ignore_eos"] is True and payload["max_tokens"] == 16 and payload["temperature"] == 0.0


def test_no_authorization_header_without_key(fake):
    srv = fake()
    assert one(srv.url)["ok"]
    assert "Authorization" not in srv.calls[-1][2]


def test_multi_token_chunks_use_usage_for_tokens(fake):
    srv = fake(post=lambda h, p, n: stream_ok(h, p, n, per_chunk=3, split=1000))
    rec = one(srv.url, tokens=16)
    assert rec["ok"] and rec["output_tokens"] == 16 and rec["chunks"] == 6
    assert rec["text_sha256"] == expected_hash(16)


def test_connection_close_framing(fake):
    def post(handler, payload, number):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        for event in chat_events(payload["max_tokens"]):
            handler.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            handler.wfile.flush()
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.close_connection = True

    rec = one(fake(post=post).url)
    assert rec["ok"], rec["error"]
    assert rec["output_tokens"] == 16


def test_http_error_status_is_reported_with_body(fake):
    def post(handler, payload, number):
        handler.send_json(404, {"error": {"message": "The model `x` does not exist.", "type": "NotFoundError", "code": 404}})

    rec = one(fake(post=post).url)
    assert not rec["ok"]
    assert rec["error"].startswith("HTTP 404")
    assert "does not exist" in rec["error"]


def test_stream_cut_off_mid_way(fake):
    def post(handler, payload, number):
        handler.start_chunked()
        for event in chat_events(payload["max_tokens"])[:5]:
            handler.chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)

    rec = one(fake(post=post).url)
    assert not rec["ok"]
    assert rec["error"]


def test_stalled_stream_times_out(fake):
    release = threading.Event()

    def post(handler, payload, number):
        handler.start_chunked()
        handler.chunk(b"data: " + json.dumps(chat_events(4)[1]).encode() + b"\n\n")
        release.wait(10)

    srv = fake(post=post)
    try:
        rec = one(srv.url, post_timeout=0.3)
    finally:
        release.set()
    assert not rec["ok"]
    assert rec["error"].startswith("timed out after")
    assert "(request timeout, 1 chunks received)" in rec["error"]


def test_connection_refused():
    rec = one("http://127.0.0.1:%d" % free_port())
    assert not rec["ok"] and rec["error"] == "connection refused"


def test_deadline_already_passed(fake):
    srv = fake()
    rec = one(srv.url, deadline=clock() - 1)
    assert rec["error"] == "deadline reached before the request started"
    assert not [c for c in srv.calls if c[0] == "POST"]


# ---------------------------------------------------------------------------- readiness


def test_wait_ready_treats_503_as_loading(fake):
    state = {"n": 0}

    def get(handler):
        if handler.path == "/health":
            state["n"] += 1
            if state["n"] < 3:
                handler.send_json(503, {"error": "EngineDeadError"})
                return
        default_get(handler)

    srv = fake(get=get)
    info = wait_ready(Server(srv.url), None, timeout=5, interval=0.01)
    assert info == {"model": MODEL, "max_model_len": 4096, "root": "/models/q", "models": [MODEL]}
    assert state["n"] == 3


def test_wait_ready_wrong_model(fake):
    srv = fake()
    with pytest.raises(BenchError) as err:
        wait_ready(Server(srv.url), "other/model", timeout=0.05, interval=0.01)
    assert "'other/model' not in /v1/models (serving: Qwen/Qwen3-8B)" in str(err.value)
    assert srv.url in str(err.value)


def test_wait_ready_refused_is_bounded():
    url = "http://127.0.0.1:%d" % free_port()
    sleeps = []
    with pytest.raises(BenchError, match="not ready after 1 s: connection refused"):
        wait_ready(Server(url), None, timeout=1, interval=0.25, sleep=sleeps.append)
    assert 1 <= len(sleeps) <= 4


def test_wait_ready_rejected_key_fails_at_once(fake):
    def get(handler):
        if handler.path == "/v1/models":
            handler.send_json(401, {"error": "Unauthorized"})
        else:
            default_get(handler)

    srv = fake(get=get)
    sleeps = []
    with pytest.raises(BenchError, match="HTTP 401: the api_key is missing or wrong"):
        wait_ready(Server(srv.url, api_key="bad"), None, timeout=30, interval=1, sleep=sleeps.append)
    assert sleeps == []


def test_server_version(fake):
    assert server_version(Server(fake().url)) == "0.11.0"

    def get(handler):
        handler.send_json(404, {"detail": "Not Found"})

    assert server_version(Server(fake(get=get).url)) is None


def test_bad_url():
    with pytest.raises(BenchError, match="url must be"):
        Server("127.0.0.1:8000")


# ---------------------------------------------------------------------------- runner


def test_run_level_counts_blocks_warmups_and_acceptance(fake):
    srv = fake(speculative=True)
    server = Server(srv.url)
    run = run_level(server, MODEL, 3, 12, num_warmups=4, output_len=12, blocks=3, timeout=10, deadline=clock() + 60)
    posts = [c for c in srv.calls if c[0] == "POST"]
    assert len(posts) == 16  # 4 warm-ups + 12 measured
    measured_ids = [p[3]["messages"][0]["content"] for p in posts[4:]]
    assert run["completed"] == 12 and run["failed"] == 0 and run["concurrency"] == 3
    assert run["total_output_tokens"] == 144
    assert run["samples"]["output_tokens"] == [12] * 12
    assert len(run["samples"]["prompt_ids"]) == 12
    assert len(set(measured_ids)) == 12
    assert [b["num_prompts"] for b in run["blocks"]] == [4, 4, 4]
    assert [b["block"] for b in run["blocks"]] == [0, 1, 2]
    assert all(b["completed"] == 4 for b in run["blocks"])
    # fake counters: 6 drafts x 3 tokens and 4 accepted per request of 12 tokens; warm-ups not counted
    assert run["spec_decode_num_drafts"] == 72
    assert run["spec_decode_draft_tokens"] == 216
    assert run["spec_decode_accepted_tokens"] == 48
    assert run["spec_decode_acceptance_length"] == pytest.approx(1 + 48 / 72, abs=1e-4)
    assert run["spec_decode_acceptance_rate"] == pytest.approx(48 / 216 * 100, abs=1e-3)
    assert run["spec_decode_per_position_acceptance_rates"] == pytest.approx([48 / 72], abs=1e-4)
    assert all(b["spec_decode_num_drafts"] == 24 for b in run["blocks"])
    assert run["warnings"] == []


def test_run_level_without_speculation_has_no_spec_fields(fake):
    srv = fake(speculative=False)
    run = run_level(Server(srv.url), MODEL, 2, 4, num_warmups=0, output_len=8, timeout=10)
    assert run["completed"] == 4
    assert not [k for k in run if k.startswith("spec_decode")]


def test_run_level_fails_on_a_failed_request(fake):
    def post(handler, payload, number):
        if number == 3:
            handler.send_json(500, {"error": {"message": "engine step failed"}})
        else:
            stream_ok(handler, payload, number)

    srv = fake(post=post)
    with pytest.raises(BenchError) as err:
        run_level(Server(srv.url), MODEL, 1, 5, num_warmups=0, output_len=8, timeout=10)
    text = str(err.value)
    assert "1 of 5 requests failed" in text
    assert srv.url + "/v1/chat/completions" in text
    assert "HTTP 500" in text and "engine step failed" in text

    srv2 = fake(post=post)
    run = run_level(Server(srv2.url), MODEL, 1, 5, num_warmups=0, output_len=8, timeout=10, max_failed_fraction=0.2)
    assert run["completed"] == 4 and run["failed"] == 1
    assert "HTTP 500" in run["errors"][0]


def test_run_level_with_every_warmup_failing_stops_early(fake):
    def post(handler, payload, number):
        handler.send_json(400, {"error": {"message": "max_tokens is too large"}})

    srv = fake(post=post)
    with pytest.raises(BenchError, match=r"every warm-up request .* failed .*max_tokens is too large"):
        run_level(Server(srv.url), MODEL, 2, 10, num_warmups=3, output_len=8, timeout=10)
    assert len([c for c in srv.calls if c[0] == "POST"]) == 3


def test_run_level_deadline_bounds_the_run(fake):
    def post(handler, payload, number):
        time.sleep(0.2)
        stream_ok(handler, payload, number)

    srv = fake(post=post)
    with pytest.raises(BenchError) as err:
        run_level(Server(srv.url), MODEL, 1, 50, num_warmups=0, output_len=4, timeout=10, deadline=clock() + 0.5)
    assert "requests failed" in str(err.value)
    assert "run deadline reached" in str(err.value)
    assert len([c for c in srv.calls if c[0] == "POST"]) < 50


def test_missing_usage_is_warned(fake):
    def post(handler, payload, number):
        handler.start_chunked()
        for event in chat_events(payload["max_tokens"])[:-1]:
            handler.chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
        handler.chunk(b"data: [DONE]\n\n")
        handler.end_chunked()

    run = run_level(Server(fake(post=post).url), MODEL, 1, 3, num_warmups=0, output_len=8, timeout=10)
    assert any("no usage.completion_tokens" in w for w in run["warnings"])
    assert run["total_output_tokens"] == 24  # one token per chunk here, so the count is still right
