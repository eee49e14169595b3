# SPDX-License-Identifier: Apache-2.0
"""The user's own prompt set (speculative_decoding_prompts_file): parsing, selection and the requests."""

import hashlib
import importlib.util
import json
import os

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import prompts as bp
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import runner as _bench

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_http = _load("_bench_http_helpers", os.path.join(HERE, "test_bench_http.py"))
fake = _http.fake
MODEL = _http.MODEL


def jsonl(*objs):
    return ("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n").encode("utf-8")


USER = jsonl(
    {"prompt": "Summarise the last shift's alarms for the night crew."},
    "",
    {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "List the open tickets."}]},
    {"prompt": "Translate 'valve' to German.", "output_len": 12},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "Explain the fault code E42."}]}]},
)


def test_a_file_of_prompt_and_messages_lines_parses():
    prompts, info = bp.parse_prompts_file(USER)
    assert [p["id"] for p in prompts] == ["line-1", "line-3", "line-4", "line-5"]
    assert [p["kind"] for p in prompts] == ["prompt", "messages", "prompt", "messages"]
    # a prompt line: sent as is to /v1/completions, as the only user message to /v1/chat/completions
    assert prompts[0]["prompt"] == "Summarise the last shift's alarms for the night crew."
    assert prompts[0]["messages"] == [{"role": "user", "content": prompts[0]["prompt"]}]
    assert prompts[1]["prompt"] is None and prompts[1]["messages"][0] == {"role": "system", "content": "You are terse."}
    assert info == {"count": 4, "sha256": hashlib.sha256(USER).hexdigest(), "kinds": ["messages", "prompt"]}


def test_crlf_lines_tabs_and_newlines_in_text_are_allowed():
    prompts = bp.parse_prompts_file(b'{"prompt": "a\\tb\\nc\\r\\nd"}\r\n{"prompt": "e"}\r\n')[0]
    assert [p["prompt"] for p in prompts] == ["a\tb\nc\r\nd", "e"]


@pytest.mark.parametrize(
    ("data", "line", "problem"),
    [
        (b"", None, "holds no prompt"),
        (b"\n  \n", None, "holds no prompt"),
        (b'{"prompt": "ok"}\nnot json\n', 2, "not JSON"),
        (b'{"prompt": "ok"}\n\n\n["a list"]\n', 4, "expected a JSON object, got list"),
        (b'{"text": "hi"}', 1, "found neither"),
        (b'{"prompt": "hi", "messages": []}', 1, "found both"),
        (b'{"prompt": ""}', 1, "prompt is empty"),
        (b'{"prompt": "   \\n"}', 1, "prompt is empty"),
        (b'{"prompt": 42}', 1, "prompt must be a string"),
        (b'{"prompt": "bell\\u0007"}', 1, "control character '\\x07'"),
        (b'{"prompt": "esc\\u001b[31m"}', 1, "control character '\\x1b'"),
        (b'{"prompt": "c1\\u0085"}', 1, "control character '\\x85'"),
        (b'{"prompt": "\\ud800"}', 1, "lone surrogate"),
        (b'{"messages": []}', 1, "non-empty list"),
        (b'{"messages": "hi"}', 1, "non-empty list"),
        (b'{"messages": [{"role": "bot", "content": "x"}]}', 1, "role must be one of system, developer, user, assistant"),
        (b'{"messages": [{"role": "user"}]}', 1, "has no content"),
        (b'{"messages": [{"role": "user", "content": ""}]}', 1, "messages[0].content is empty"),
        (b'{"messages": [{"role": "user", "content": "x", "tool_calls": []}]}', 1, "has the key 'tool_calls'"),
        (b'{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}', 1, "only text parts"),
        (b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "a\\u0000"}]}]}', 1, "content[0].text holds the control"),
        (b'{"prompt": "ok"}\n\xff\xfe\n', 2, "not UTF-8"),
    ],
)
def test_bad_files_name_the_line_and_the_problem(data, line, problem):
    with pytest.raises(bp.PromptsFileError) as caught:
        bp.parse_prompts_file(data)
    assert caught.value.line == line
    assert problem in str(caught.value)
    if line is not None:
        assert str(caught.value).startswith("line %d: " % line)


def test_too_many_prompts_and_too_many_bytes_are_refused(monkeypatch):
    monkeypatch.setattr(bp, "MAX_PROMPTS", 3)
    with pytest.raises(bp.PromptsFileError, match="line 4: more than 3 prompts"):
        bp.parse_prompts_file(jsonl(*[{"prompt": "p%d" % i} for i in range(4)]))
    monkeypatch.setattr(bp, "MAX_FILE_BYTES", 64)
    with pytest.raises(bp.PromptsFileError, match="more than the limit"):
        bp.parse_prompts_file(b'{"prompt": "%s"}' % (b"x" * 80))


def test_the_documented_limits():
    assert bp.MAX_PROMPTS == 10000 and bp.MAX_FILE_BYTES == 16 * 1024 * 1024
    assert "10000 prompts" in bp.PROMPTS_FILE_FORMAT and "16 MiB" in bp.PROMPTS_FILE_FORMAT


def test_read_prompts_file_reads_no_more_than_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(bp, "MAX_FILE_BYTES", 100)
    path = tmp_path / "big.jsonl"
    path.write_bytes(b'{"prompt": "x"}\n' * 50)
    with pytest.raises(bp.PromptsFileError, match="101 bytes, more than the limit of 100"):
        bp.read_prompts_file(str(path))


# ---------------------------------------------------------------- selection: the same pairing as the shipped set


def user_set(n):
    return bp.parse_prompts_file(jsonl(*[{"prompt": "question number %d" % i} for i in range(n)]))[0]


def test_selection_of_a_user_set_is_deterministic_per_seed_and_pairs_the_arms():
    prompts = user_set(40)
    baseline = [p["id"] for p in bp.select(20, seed=5, prompts=prompts)]
    speculative = [p["id"] for p in bp.select(20, seed=5, prompts=user_set(40))]  # parsed again, as on another run
    assert baseline == speculative
    assert baseline != [p["id"] for p in bp.select(20, seed=6, prompts=prompts)]
    assert len(set(baseline)) == 20
    assert sorted(bp.order(5, prompts)) == sorted(p["id"] for p in prompts)


def test_user_set_uses_the_same_shuffle_as_the_shipped_set():
    # the order depends only on the seed and the ids, the same rule as for the shipped prompts
    prompts = user_set(10)
    import random

    ids = [p["id"] for p in prompts]
    random.Random("jetson_llm.speculative/prompts/%d" % 3).shuffle(ids)
    assert bp.order(3, prompts) == ids


def test_warmups_follow_the_measured_prompts_and_small_sets_wrap():
    prompts = user_set(12)
    measured = {p["id"] for p in bp.select(8, seed=1, prompts=prompts)}
    warm = {p["id"] for p in bp.select(4, seed=1, offset=8, prompts=prompts)}
    assert not measured & warm
    few = user_set(3)
    assert [p["id"] for p in bp.select(7, seed=0, prompts=few)] == (bp.order(0, few) * 3)[:7]


def test_an_empty_user_set_is_refused():
    with pytest.raises(ValueError, match="empty"):
        bp.select(1, prompts=[])


def test_the_shipped_set_is_unchanged_without_a_user_set():
    assert bp.select(5, seed=2) == bp.select(5, seed=2, prompts=bp.PROMPTS)


# ---------------------------------------------------------------- the requests carry the user's prompts


def _posts(srv):
    return [c for c in srv.calls if c[0] == "POST"]


def test_chat_requests_carry_the_users_prompts_and_messages(fake):
    srv = fake()
    prompts, info = bp.parse_prompts_file(USER)
    prompt_set = dict(info, name="workload.jsonl", source="file")
    settings = dict(concurrency=[1], num_prompts=4, num_warmups=2, output_len=8, endpoint="chat", seed=0, timeout=10, deadline=60)
    result = _bench.run_benchmark(srv.url, prompts=prompts, prompt_set=prompt_set, **settings)
    posts = _posts(srv)
    assert len(posts) == 6 and all(p[1] == "/v1/chat/completions" for p in posts)
    by_id = dict((p["id"], p) for p in prompts)
    measured = result["runs"][0]["samples"]["prompt_ids"]
    assert sorted(measured) == sorted(by_id)  # all four user prompts, in the seed's order
    assert measured == [p["id"] for p in bp.select(4, 0, prompts=prompts)]
    sent = [p[3]["messages"] for p in posts[2:]]
    assert sent == [by_id[i]["messages"] for i in measured]
    assert result["config"]["prompt_set"] == prompt_set
    shipped = {json.dumps(p["messages"]) for p in bp.PROMPTS}
    assert result["config"]["num_prompts"] == 4
    assert not any(json.dumps(p[3]["messages"]) in shipped for p in posts)


def test_completions_requests_send_the_prompt_text_as_is(fake):
    srv = fake()
    prompts = bp.parse_prompts_file(jsonl({"prompt": "alpha question"}, {"prompt": "beta question"}))[0]
    _bench.run_benchmark(srv.url, concurrency=[1], num_prompts=2, num_warmups=0, output_len=8, endpoint="completions", timeout=10, deadline=60, prompts=prompts)
    posts = _posts(srv)
    assert [p[1] for p in posts] == ["/v1/completions"] * 2
    assert sorted(p[3]["prompt"] for p in posts) == ["alpha question", "beta question"]
    assert all("messages" not in p[3] for p in posts)


def test_without_a_user_set_the_shipped_set_is_named(fake):
    srv = fake()
    result = _bench.run_benchmark(srv.url, concurrency=[1], num_prompts=2, num_warmups=0, output_len=8, timeout=10, deadline=60)
    assert result["config"]["prompt_set"]["name"] == "jetson_llm.speculative"
