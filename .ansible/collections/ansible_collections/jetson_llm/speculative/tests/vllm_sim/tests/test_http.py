# SPDX-License-Identifier: Apache-2.0
"""The HTTP API of a real simulator process: endpoints, auth, streaming, the OpenAI client, metrics."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import re
import socket
import time

import openai
import pytest
from conftest import sse_events

from vllm_sim import textgen

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
HEAD = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
SPEC = json.dumps({"method": "eagle3", "model": HEAD, "num_speculative_tokens": 4})
BASE = [LLAMA, "--max-model-len", "4096", "--gpu-memory-utilization", "0.8"]
PROMPTS = [
    "Explain how a heat pump works.",
    "Write a Python function `def add(a, b):` and return the sum. Use `import math` if needed.",
    "List three facts about the Moon.",
]


@pytest.fixture
def spec_server(sim_env, start_server):
    return start_server([*BASE, "--speculative-config", SPEC, "--served-model-name", "llama", "llama-alias"], sim_env())


def metric(text: str, name: str, **labels) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


# --------------------------------------------------------------------------- lifecycle


def test_connection_refused_while_loading(sim_env, start_server, tmp_path):
    env = sim_env({"time_scale": 0.01, "faults": {"slow_start_s": 300}})
    server = start_server(["Qwen/Qwen3-1.7B", "--max-model-len", "4096"], env, wait=False)
    status_path = tmp_path / "state" / f"status-{server.port}.json"
    deadline = time.monotonic() + 30
    while not status_path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert json.loads(status_path.read_text())["phase"] == "loading"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
    server.wait_healthy()
    assert json.loads(status_path.read_text())["phase"] == "ready"
    log = server.log
    markers = [
        "Initializing a V1 LLM engine (v0.20.0) with config: model='Qwen/Qwen3-1.7B', speculative_config=None",
        "Model loading took 3.1665 GiB memory and",
        "Available KV cache memory:",
        "GPU KV cache size:",
        "Maximum concurrency for 4,096 tokens per request:",
        "Application startup complete.",
    ]
    positions = [log.index(m) for m in markers]
    assert positions == sorted(positions)


def test_startup_logs_the_speculative_config(spec_server):
    assert f"speculative_config=SpeculativeConfig(method='eagle3', model='{HEAD}', num_spec_tokens=4)" in spec_server.log
    assert "Loading drafter model..." in spec_server.log


def test_sigterm_exits_cleanly(spec_server):
    assert spec_server.stop() == 0
    assert "INFO:     Shutting down" in spec_server.log
    assert "Finished server process" in spec_server.log


# --------------------------------------------------------------------------- endpoints


def test_health_version_models(spec_server):
    status, body, _headers = spec_server.request("GET", "/health")
    assert (status, body) == (200, b"")
    assert spec_server.json("GET", "/version") == (200, {"version": "0.20.0"})
    status, models = spec_server.json("GET", "/v1/models")
    assert status == 200 and models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["llama", "llama-alias"]
    first = models["data"][0]
    assert (first["object"], first["owned_by"], first["root"], first["parent"], first["max_model_len"]) == (
        "model",
        "vllm",
        LLAMA,
        None,
        4096,
    )
    assert first["permission"][0]["object"] == "model_permission"


def test_unknown_model_404_by_version(sim_env, start_server):
    new = start_server(["Qwen/Qwen3-1.7B", "--max-model-len", "2048"], sim_env())
    status, body = new.json("POST", "/v1/completions", {"model": "gpt-4", "prompt": "hi"})
    assert status == 404
    assert body == {"error": {"message": "The model `gpt-4` does not exist.", "type": "NotFoundError", "param": None, "code": 404}}
    old = start_server(["Qwen/Qwen3-1.7B", "--max-model-len", "2048"], sim_env({"version": "0.10.0"}))
    status, body = old.json("POST", "/v1/completions", {"model": "gpt-4", "prompt": "hi"})
    assert status == 404 and body["object"] == "error" and body["message"] == "The model `gpt-4` does not exist."


def test_unknown_route_and_wrong_method(spec_server):
    assert spec_server.json("GET", "/v2/nothing") == (404, {"detail": "Not Found"})
    assert spec_server.json("GET", "/v1/completions") == (405, {"detail": "Method Not Allowed"})


def test_api_key(sim_env, start_server):
    server = start_server(["Qwen/Qwen3-1.7B", "--max-model-len", "2048", "--api-key", "s3cret"], sim_env())
    assert server.json("GET", "/v1/models") == (401, {"error": "Unauthorized"})
    assert server.json("GET", "/v1/models", headers={"Authorization": "Bearer nope"}) == (
        401,
        {"error": "Unauthorized"},
    )
    assert server.json("GET", "/v1/models", headers={"Authorization": "Bearer s3cret"})[0] == 200
    assert server.request("GET", "/health")[0] == 200
    assert server.request("GET", "/metrics")[0] == 200
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()


def test_api_key_from_environment(sim_env, start_server):
    server = start_server(["Qwen/Qwen3-1.7B", "--max-model-len", "2048"], sim_env(extra={"VLLM_API_KEY": "envkey"}))
    assert server.json("GET", "/v1/models")[0] == 401
    assert server.json("GET", "/v1/models", headers={"Authorization": "Bearer envkey"})[0] == 200


def test_context_length_and_parameter_errors(sim_env, start_server):
    server = start_server(["Qwen/Qwen3-1.7B", "--max-model-len", "256"], sim_env())
    prompt = "word " * 100
    n = textgen.count_tokens(prompt)
    status, body = server.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 200})
    assert status == 400
    assert body["error"]["message"] == (
        f"This model's maximum context length is 256 tokens. However, you requested {200 + n} tokens "
        f"({n} in the messages, 200 in the completion). Please reduce the length of the messages or completion."
    )
    status, body = server.json("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 0})
    assert (status, body["error"]["message"]) == (400, "max_tokens must be at least 1, got 0.")
    assert server.json("POST", "/v1/chat/completions", {"messages": []})[0] == 400


def test_keep_alive_serves_several_requests_on_one_connection(spec_server):
    conn = http.client.HTTPConnection("127.0.0.1", spec_server.port, timeout=30)
    try:
        for _unused in range(3):
            conn.request(
                "POST",
                "/v1/completions",
                json.dumps({"prompt": "hi", "max_tokens": 5}),
                {"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            assert resp.status == 200 and resp.getheader("connection") is None
            assert json.loads(resp.read())["usage"]["completion_tokens"] == 5
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_raw_sse_stream(spec_server):
    status, raw, headers = spec_server.request(
        "POST",
        "/v1/completions",
        {
            "prompt": "hello",
            "max_tokens": 12,
            "stream": True,
            "temperature": 0,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert status == 200
    assert headers["content-type"] == "text/event-stream; charset=utf-8"
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"] == {
        "prompt_tokens": 1,
        "total_tokens": 13,
        "completion_tokens": 12,
    }
    chunks = events[:-2]
    assert all(c["object"] == "text_completion" and c["model"] == "llama" for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    # speculation delivers several tokens per chunk: fewer chunks than tokens
    assert len(chunks) < 12


# --------------------------------------------------------------------------- OpenAI client


def test_openai_client_completions(spec_server):
    client = openai.OpenAI(base_url=spec_server.base_url + "/v1", api_key="unused", max_retries=0)
    full = client.completions.create(model="llama", prompt=PROMPTS[0], max_tokens=40, temperature=0, extra_body={"ignore_eos": True})
    assert full.usage.completion_tokens == 40 and full.choices[0].finish_reason == "length"
    stream = client.completions.create(
        model="llama",
        prompt=PROMPTS[0],
        max_tokens=40,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    text, usage, reasons = "", None, []
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].text
            reasons.append(chunk.choices[0].finish_reason)
        if chunk.usage:
            usage = chunk.usage
    assert text == full.choices[0].text
    assert usage.completion_tokens == 40 and usage.prompt_tokens == full.usage.prompt_tokens
    assert reasons[-1] == "length"


def test_openai_client_chat(spec_server):
    client = openai.OpenAI(base_url=spec_server.base_url + "/v1", api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": PROMPTS[2]}]
    full = client.chat.completions.create(model="llama-alias", messages=messages, max_tokens=30, temperature=0, extra_body={"ignore_eos": True})
    assert full.choices[0].message.role == "assistant" and full.usage.completion_tokens == 30
    stream = client.chat.completions.create(
        model="llama-alias",
        messages=messages,
        max_tokens=30,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == 30 and chunks[-1].choices == []


def test_eos_without_ignore_eos(spec_server):
    prompt = next(p for p in (f"Question number {i}?" for i in range(500)) if textgen.Generation(LLAMA, p).eos_at < 120)
    eos_at = textgen.Generation(LLAMA, prompt).eos_at
    status, body = spec_server.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 200, "temperature": 0})
    assert status == 200
    assert body["choices"][0]["finish_reason"] == "stop" and body["usage"]["completion_tokens"] == eos_at
    status, body = spec_server.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 200, "temperature": 0, "ignore_eos": True})
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 200


def test_stop_strings(spec_server):
    _status, body = spec_server.json("POST", "/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 60, "temperature": 0, "ignore_eos": True})
    text = body["choices"][0]["text"]
    stop = text.split()[5]
    _status, body = spec_server.json(
        "POST",
        "/v1/completions",
        {"prompt": PROMPTS[0], "max_tokens": 60, "temperature": 0, "ignore_eos": True, "stop": [stop]},
    )
    choice = body["choices"][0]
    assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", stop)
    assert choice["text"] == text[: text.index(stop)]


def test_generation_config_default_temperature_and_seed(spec_server):
    def ask(**kw):
        return spec_server.json("POST", "/v1/completions", {"prompt": PROMPTS[1], "max_tokens": 20, "ignore_eos": True, **kw})[1]["choices"][0]["text"]

    assert ask(temperature=0.8, seed=5) == ask(temperature=0.8, seed=5)
    assert ask(temperature=0.8, seed=5) != ask(temperature=0.8, seed=6)
    assert ask(temperature=0) == ask(temperature=0)
    assert "Default sampling parameters have been overridden by the model's Hugging Face generation config" in spec_server.log


def test_greedy_output_is_the_same_with_and_without_speculation(sim_env, start_server):
    plain = start_server(BASE, sim_env())
    spec = start_server([*BASE, "--speculative-config", SPEC], sim_env())
    wrong = start_server([*BASE, "--speculative-config", SPEC], sim_env({"faults": {"wrong_answers": True}}))

    def text(server, prompt, chat=False):
        if chat:
            body = {
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": 48,
                "temperature": 0,
                "ignore_eos": True,
            }
            return server.json("POST", "/v1/chat/completions", body)[1]["choices"][0]["message"]["content"]
        body = {"prompt": prompt, "max_tokens": 48, "temperature": 0, "ignore_eos": True}
        return server.json("POST", "/v1/completions", body)[1]["choices"][0]["text"]

    for prompt in PROMPTS:
        for chat in (False, True):
            reference = text(plain, prompt, chat)
            assert text(spec, prompt, chat) == reference
            assert text(wrong, prompt, chat) != reference


def test_concurrent_streams_are_kept_apart(spec_server):
    def run(prompt):
        body = {"prompt": prompt, "max_tokens": 50, "temperature": 0, "ignore_eos": True}
        streamed = sse_events(spec_server.request("POST", "/v1/completions", {**body, "stream": True})[1])
        text = "".join(e["choices"][0]["text"] for e in streamed if e != "[DONE]" and e["choices"])
        return text, spec_server.json("POST", "/v1/completions", body)[1]["choices"][0]["text"]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for streamed, single in pool.map(run, [*PROMPTS, "another prompt"]):
            assert streamed == single


# --------------------------------------------------------------------------- metrics


def test_spec_decode_metrics_advance_only_with_speculation(spec_server, sim_env, start_server):
    before = spec_server.request("GET", "/metrics")[1].decode()
    assert "# TYPE vllm:spec_decode_num_drafts_total counter" in before
    assert metric(before, "vllm:spec_decode_num_drafts_total", model_name="llama", engine="0") == 0.0
    body = {"prompt": PROMPTS[0], "max_tokens": 64, "temperature": 0, "ignore_eos": True}
    usage = spec_server.json("POST", "/v1/completions", body)[1]["usage"]
    after = spec_server.request("GET", "/metrics")[1].decode()
    drafts = metric(after, "vllm:spec_decode_num_drafts_total")
    draft_tokens = metric(after, "vllm:spec_decode_num_draft_tokens_total")
    accepted = metric(after, "vllm:spec_decode_num_accepted_tokens_total")
    per_pos = [metric(after, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i)) for i in range(4)]
    assert drafts > 0 and draft_tokens == 4 * drafts and 0 < accepted <= draft_tokens
    assert sum(per_pos) == accepted and per_pos == sorted(per_pos, reverse=True)
    assert metric(after, "vllm:generation_tokens_total") == 64
    assert metric(after, "vllm:prompt_tokens_total") == usage["prompt_tokens"]
    assert metric(after, "vllm:request_success_total", finished_reason="length") == 1
    assert metric(after, "vllm:num_requests_running") == 0
    # 64 tokens = 1 from prefill + one per verify step plus the accepted ones
    assert 1 + drafts + accepted >= 64

    plain = start_server(BASE, sim_env())
    plain.json("POST", "/v1/completions", body)
    text = plain.request("GET", "/metrics")[1].decode()
    assert "spec_decode" not in text and metric(text, "vllm:generation_tokens_total") == 64

    quiet = start_server([*BASE, "--speculative-config", SPEC, "--disable-log-stats"], sim_env())
    quiet.json("POST", "/v1/completions", body)
    assert "vllm:" not in quiet.request("GET", "/metrics")[1].decode()


@pytest.mark.parametrize(
    ("version", "pattern"),
    [
        (
            "0.20.0",
            r"SpecDecoding metrics: Mean acceptance length: \d+\.\d\d, Accepted throughput: \d+\.\d\d tokens/s, "
            r"Drafted throughput: \d+\.\d\d tokens/s, Accepted: \d+ tokens, Drafted: \d+ tokens, "
            r"Per-position acceptance rate: (\d\.\d{3}, ){3}\d\.\d{3}, Avg Draft acceptance rate: \d+\.\d%",
        ),
        (
            "0.10.0",
            r"SpecDecoding metrics: Draft acceptance rate: \d+\.\d%, Mean acceptance length: \d+\.\d\d, "
            r"Accepted: \d+ tokens, Drafted: \d+ tokens, Per-position acceptance rate: (\d\.\d{3}, ){3}\d\.\d{3}$",
        ),
    ],
)
def test_periodic_spec_decode_log_line(sim_env, start_server, version, pattern):
    env = sim_env({"version": version, "time_scale": 0.02}, extra={"VLLM_LOG_STATS_INTERVAL": "0.2"})
    server = start_server([*BASE, "--speculative-config", SPEC], env)
    body = {"prompt": PROMPTS[0], "max_tokens": 400, "temperature": 0, "ignore_eos": True}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "SpecDecoding metrics" not in server.log:
        server.json("POST", "/v1/completions", body)
    line = next(x for x in server.log.splitlines() if "SpecDecoding metrics" in x)
    assert re.search(pattern, line), line
    assert re.search(r"Engine 000: Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ tokens/s", server.log)


def test_speculators_checkpoint_as_the_model(sim_env, start_server):
    server = start_server(["RedHatAI/Qwen3-8B-speculator.eagle3", "--max-model-len", "4096"], sim_env())
    assert "SpeculativeConfig(method='eagle3', model='RedHatAI/Qwen3-8B-speculator.eagle3', num_spec_tokens=3)" in server.log
    assert server.json("GET", "/v1/models")[1]["data"][0]["id"] == "RedHatAI/Qwen3-8B-speculator.eagle3"
    server.json("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 16, "ignore_eos": True})
    assert metric(server.request("GET", "/metrics")[1].decode(), "vllm:spec_decode_num_drafts_total") > 0


def test_status_file_records_token_presence_only(sim_env, start_server, tmp_path):
    server = start_server(["Qwen/Qwen3-1.7B", "--max-model-len", "2048"], sim_env(extra={"HF_TOKEN": "hf_SECRETVALUE"}))
    status = json.loads((tmp_path / "state" / f"status-{server.port}.json").read_text())
    assert status["hf_token_present"] is True and status["phase"] == "ready" and status["pid"] == server.proc.pid
    server.stop()
    assert "hf_SECRETVALUE" not in server.log
    assert "hf_SECRETVALUE" not in (tmp_path / "state" / f"status-{server.port}.json").read_text()
