# SPDX-License-Identifier: Apache-2.0
"""SSE stream and Prometheus text parsing of the benchmark client."""

import hashlib
import json

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import BenchError, SSEParser, StreamAccumulator, build_payload
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.metrics import parse_prometheus, spec_decode_counters, spec_decode_fields
from hypothesis import given
from hypothesis import strategies as st

# ---------------------------------------------------------------------------- real-format streams


def _chat_chunk(delta, finish=None, cid="chatcmpl-5f0e8c1d"):
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 1748771700,
        "model": "Qwen/Qwen3-8B",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "stop_reason": None}],
    }


def _usage_chunk(obj, prompt_tokens, completion_tokens):
    return {
        "id": "chatcmpl-5f0e8c1d",
        "object": obj,
        "created": 1748771700,
        "model": "Qwen/Qwen3-8B",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
        },
    }


def sse(events):
    """Serialise events the way vLLM does: ``data: <json>\\n\\n`` and a final ``data: [DONE]``."""
    out = b""
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))
        out += b"data: " + data.encode("utf-8") + b"\n\n"
    return out


# A chat stream as vLLM sends it with stream_options.include_usage: a role-only first chunk, content
# chunks (the speculative ones carry several tokens), a last chunk with finish_reason, the usage
# chunk with empty choices, then [DONE].
CHAT_EVENTS = [
    _chat_chunk({"role": "assistant", "content": ""}),
    _chat_chunk({"content": "The"}),
    _chat_chunk({"content": " sky is"}),
    _chat_chunk({"content": " blue because"}),
    _chat_chunk({"content": " of Rayleigh scattering."}, finish="length"),
    _usage_chunk("chat.completion.chunk", 31, 8),
    "[DONE]",
]
CHAT_TEXT = "The sky is blue because of Rayleigh scattering."

COMPLETION_EVENTS = [
    {
        "id": "cmpl-9a1",
        "object": "text_completion",
        "created": 1748771700,
        "model": "Qwen/Qwen3-8B",
        "choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": None, "stop_reason": None}],
    }
    for piece in (" def", " add(a,", " b):\n", "    return a + b")
] + [_usage_chunk("text_completion", 12, 9), "[DONE]"]


def feed_timed(events, times, start=100.0):
    acc = StreamAccumulator(start)
    parser = SSEParser()
    payload = sse(events)
    # one network read per event, arriving at the given times
    pieces = payload.split(b"\n\n")[:-1]
    assert len(pieces) == len(times)
    for piece, now in zip(pieces, times):
        for data in parser.feed(piece + b"\n\n"):
            acc.event(data, now)
    return acc


def test_chat_stream_timing_usage_and_hash():
    times = [100.05, 100.10, 100.30, 100.45, 100.60, 100.61, 100.62]
    acc = feed_timed(CHAT_EVENTS, times)
    rec = acc.record(100.62)
    assert rec["ok"], rec["error"]
    # TTFT at the first chunk with text, not at the role-only chunk
    assert rec["ttft"] == pytest.approx(0.10)
    assert rec["itl"] == pytest.approx([0.20, 0.15, 0.15])
    assert rec["latency"] == pytest.approx(0.62)
    assert rec["output_tokens"] == 8 and rec["tokens_from_usage"]
    assert rec["prompt_tokens"] == 31
    assert rec["tpot"] == pytest.approx((0.62 - 0.10) / 7)
    assert rec["chunks"] == 4
    assert rec["text_sha256"] == hashlib.sha256(CHAT_TEXT.encode()).hexdigest()


def test_completion_stream():
    times = [1.0, 1.5, 2.0, 2.5, 2.6, 2.6]
    acc = feed_timed(COMPLETION_EVENTS, times, start=0.5)
    rec = acc.record(2.7)
    assert rec["ok"]
    assert rec["ttft"] == pytest.approx(0.5)
    assert rec["itl"] == pytest.approx([0.5, 0.5, 0.5])
    assert rec["output_tokens"] == 9
    assert rec["prompt_tokens"] == 12
    assert rec["tpot"] == pytest.approx((2.2 - 0.5) / 8)
    assert rec["text_sha256"] == hashlib.sha256(b" def add(a, b):\n    return a + b").hexdigest()


def test_reasoning_content_counts_as_generated_text():
    events = [
        _chat_chunk({"role": "assistant", "content": ""}),
        _chat_chunk({"reasoning_content": "Let me think."}),
        _chat_chunk({"content": "Done."}),
        _usage_chunk("chat.completion.chunk", 5, 4),
        "[DONE]",
    ]
    rec = feed_timed(events, [1, 2, 3, 3, 3], start=0).record(3)
    assert rec["ok"] and rec["ttft"] == 2 and rec["itl"] == [1]


def test_missing_usage_falls_back_to_chunk_count_and_is_flagged():
    events = [e for e in CHAT_EVENTS if not (isinstance(e, dict) and "usage" in e)]
    rec = feed_timed(events, [1, 2, 3, 4, 5, 6], start=0).record(6)
    assert rec["ok"]
    assert rec["output_tokens"] == 4
    assert rec["tokens_from_usage"] is False
    assert rec["prompt_tokens"] is None


def test_stream_without_done_is_a_failure():
    rec = feed_timed(CHAT_EVENTS[:-1], [1, 2, 3, 4, 5, 6], start=0).record(6)
    assert not rec["ok"]
    assert "before [DONE]" in rec["error"]


def test_stream_without_text_is_a_failure():
    events = [_chat_chunk({"role": "assistant", "content": ""}), _usage_chunk("chat.completion.chunk", 3, 0), "[DONE]"]
    rec = feed_timed(events, [1, 2, 3], start=0).record(3)
    assert not rec["ok"]
    assert "no generated text" in rec["error"]


@pytest.mark.parametrize(
    "error_event",
    [
        {"error": {"object": "error", "message": "The model does not exist.", "type": "NotFoundError", "code": 404}},
        {"object": "error", "message": "The model does not exist.", "type": "NotFoundError", "code": 404},
    ],
)
def test_error_event_in_stream(error_event):
    rec = feed_timed([CHAT_EVENTS[1], error_event, "[DONE]"], [1, 2, 3], start=0).record(3)
    assert not rec["ok"]
    assert "The model does not exist." in rec["error"]


def test_malformed_event():
    rec = feed_timed([CHAT_EVENTS[1], "{not json", "[DONE]"], [1, 2, 3], start=0).record(3)
    assert not rec["ok"]
    assert "malformed stream event" in rec["error"]


def test_single_token_has_no_tpot():
    events = [_chat_chunk({"content": "Hi"}), _usage_chunk("chat.completion.chunk", 3, 1), "[DONE]"]
    rec = feed_timed(events, [1, 1, 1], start=0).record(1)
    assert rec["ok"] and rec["tpot"] is None and rec["itl"] == []


# ---------------------------------------------------------------------------- SSE framing


def _all_events(chunks):
    parser = SSEParser()
    out = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    tail = parser.close()
    if tail is not None:
        out.append(tail)
    return out


@given(st.lists(st.integers(min_value=0, max_value=2000), max_size=12))
def test_sse_split_at_any_boundary_gives_the_same_events(cuts):
    payload = sse(CHAT_EVENTS)
    points = sorted({min(c, len(payload)) for c in cuts})
    chunks = [payload[a:b] for a, b in zip([0, *points], [*points, len(payload)])]
    events = _all_events(chunks)
    assert events[-1] == "[DONE]"
    assert [json.loads(e) for e in events[:-1]] == CHAT_EVENTS[:-1]


def test_sse_crlf_comments_multiline_and_other_fields():
    payload = b': keep-alive comment\r\n\r\nevent: message\r\nid: 7\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata:[DONE]\r\n\r\n'
    assert _all_events([payload]) == ['{"a":\n1}', "[DONE]"]


def test_sse_unterminated_last_event_is_flushed_on_close():
    assert _all_events([b'data: {"x": 1}\n']) == ['{"x": 1}']
    assert _all_events([b'data: {"x": 1}']) == ['{"x": 1}']


def test_sse_rejects_runaway_event():
    parser = SSEParser(max_event_bytes=100)
    with pytest.raises(ValueError, match="larger than"):
        parser.feed(b"data: " + b"x" * 200)


# ---------------------------------------------------------------------------- payloads


def test_chat_payload():
    prompt = {"id": "p", "kind": "chat", "messages": [{"role": "user", "content": "hi"}], "prompt": "hi"}
    payload = build_payload("chat", "m", prompt, 128, temperature=0.0, seed=3)
    assert payload == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 128,
        "temperature": 0.0,
        "seed": 3,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    completion = build_payload("completions", "m", prompt, 16)
    assert completion["prompt"] == "hi" and "messages" not in completion
    with pytest.raises(BenchError, match="endpoint"):
        build_payload("responses", "m", prompt, 16)


# ---------------------------------------------------------------------------- Prometheus

METRICS_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 0.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen3-8B"} 1200.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="Qwen/Qwen3-8B"} 800.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7487717e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 3600.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 2400.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 2000.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 1000.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-8B",position="0"} 1000.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-8B",position="1"} 650.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-8B",position="2"} 350.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="Qwen/Qwen3-8B",position="0"} 600.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="Qwen/Qwen3-8B",position="1"} 300.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="Qwen/Qwen3-8B",position="2"} 100.0
vllm:spec_decode_num_drafts_total{engine="0",model_name="other-model"} 99999.0
"""


def test_parse_prometheus_samples_and_labels():
    samples = parse_prometheus(METRICS_TEXT)
    assert ("vllm:num_requests_running", {"engine": "0", "model_name": "Qwen/Qwen3-8B"}, 0.0) in (samples)
    assert all(not name.startswith("#") for name, _unused, _unused in samples)
    assert len(samples) == 15


def test_parse_prometheus_escapes_timestamps_and_specials():
    text = (
        'm{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb"} 1.5 1700000000000\n'
        "plain 3\n"
        "nan_metric NaN\n"
        "inf_metric +Inf\n"
        "this line is not a sample\n"
        "broken{label=unquoted} 1\n"
    )
    samples = parse_prometheus(text)
    assert samples[0] == ("m", {"path": "C:\\dir", "quote": 'say "hi"', "nl": "a\nb"}, 1.5)
    assert samples[1] == ("plain", {}, 3.0)
    assert samples[3][2] == float("inf")
    assert len(samples) == 4


def test_spec_counters_sum_engines_and_filter_model():
    counters = spec_decode_counters(METRICS_TEXT, "Qwen/Qwen3-8B")
    assert counters == {
        "num_drafts": 2000.0,
        "num_draft_tokens": 6000.0,
        "num_accepted_tokens": 3000.0,
        "per_pos": {0: 1600.0, 1: 950.0, 2: 450.0},
    }
    unfiltered = spec_decode_counters(METRICS_TEXT)
    assert unfiltered["num_drafts"] == 2000.0 + 99999.0


def test_spec_counters_absent_without_speculation():
    text = "\n".join(line for line in METRICS_TEXT.splitlines() if "spec_decode" not in line)
    assert spec_decode_counters(text) is None
    assert spec_decode_counters("") is None
    # only the _created gauge is not a counter sample
    assert spec_decode_counters('vllm:spec_decode_num_drafts_created{engine="0"} 1.7e9\n') is None


def test_spec_fields_as_vllm_defines_them():
    before = spec_decode_counters(METRICS_TEXT, "Qwen/Qwen3-8B")
    after = {
        "num_drafts": before["num_drafts"] + 400,
        "num_draft_tokens": before["num_draft_tokens"] + 1200,
        "num_accepted_tokens": before["num_accepted_tokens"] + 660,
        "per_pos": {0: 1600.0 + 320, 1: 950.0 + 220, 2: 450.0 + 120},
    }
    fields, warnings = spec_decode_fields(before, after)
    assert warnings == []
    assert fields["spec_decode_acceptance_rate"] == pytest.approx(660 / 1200 * 100)
    assert fields["spec_decode_acceptance_length"] == pytest.approx(1 + 660 / 400)
    assert fields["spec_decode_num_drafts"] == 400
    assert fields["spec_decode_draft_tokens"] == 1200
    assert fields["spec_decode_accepted_tokens"] == 660
    assert isinstance(fields["spec_decode_num_drafts"], int)
    assert fields["spec_decode_per_position_acceptance_rates"] == pytest.approx([0.8, 0.55, 0.3])
    # the per-position rates add up to accepted / drafts
    assert sum(fields["spec_decode_per_position_acceptance_rates"]) == pytest.approx(660 / 400)


def test_spec_fields_absent_or_partial():
    assert spec_decode_fields(None, None) == ({}, [])
    counters = {"num_drafts": 1.0, "num_draft_tokens": 3.0, "num_accepted_tokens": 1.0, "per_pos": {}}
    fields, warnings = spec_decode_fields(None, counters)
    assert fields == {} and "only after" in warnings[0]
    fields, warnings = spec_decode_fields(counters, dict(counters))
    assert fields == {} and "drafted nothing" in warnings[0]


def test_spec_counter_reset_is_an_error():
    before = {"num_drafts": 10.0, "num_draft_tokens": 30.0, "num_accepted_tokens": 12.0, "per_pos": {0: 8.0}}
    after = {"num_drafts": 2.0, "num_draft_tokens": 6.0, "num_accepted_tokens": 3.0, "per_pos": {0: 2.0}}
    with pytest.raises(BenchError, match="server restarted"):
        spec_decode_fields(before, after)
