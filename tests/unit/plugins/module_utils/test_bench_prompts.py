# SPDX-License-Identifier: Apache-2.0
"""The benchmark prompt set: shape, variety and deterministic selection."""

import collections
import json

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import prompts as bp


def test_at_least_sixty_prompts_with_unique_ids():
    ids = [p["id"] for p in bp.PROMPTS]
    assert len(ids) >= 60
    assert len(set(ids)) == len(ids)


def test_every_kind_is_well_represented():
    counts = collections.Counter(p["kind"] for p in bp.PROMPTS)
    assert set(counts) == set(bp.KINDS)
    assert min(counts.values()) >= 8


def test_code_prompts_cover_python_c_and_shell():
    code = " ".join(p["messages"][0]["content"] for p in bp.PROMPTS if p["kind"] == "code")
    for language in ("Python", " C ", "shell", "Bash"):
        assert language in code


def test_structured_prompts_ask_for_json_yaml_and_tables():
    text = " ".join(p["messages"][0]["content"] for p in bp.PROMPTS if p["kind"] == "structured")
    for form in ("JSON", "YAML", "table", "CSV"):
        assert form in text


@pytest.mark.parametrize("prompt", bp.PROMPTS, ids=[p["id"] for p in bp.PROMPTS])
def test_chat_and_completion_forms_carry_the_same_text(prompt):
    assert prompt["id"].startswith(prompt["kind"] + "-")
    assert prompt["messages"] == [{"role": "user", "content": prompt["messages"][0]["content"]}]
    text = prompt["messages"][0]["content"]
    assert len(text.split()) >= 10, "too short to be a realistic prompt"
    assert prompt["prompt"] == bp.COMPLETION_TEMPLATE % text
    json.dumps(prompt)  # serialisable as a request body


def test_selection_is_deterministic_per_seed():
    first = [p["id"] for p in bp.select(50, seed=0)]
    again = [p["id"] for p in bp.select(50, seed=0)]
    other = [p["id"] for p in bp.select(50, seed=1)]
    assert first == again
    assert first != other
    assert len(set(first)) == 50  # no repeats while the set is large enough


def test_order_is_a_permutation_of_the_whole_set():
    assert sorted(bp.order(7)) == sorted(p["id"] for p in bp.PROMPTS)


def test_warmup_offset_does_not_overlap_measured_prompts():
    measured = {p["id"] for p in bp.select(50, seed=3)}
    warm = {p["id"] for p in bp.select(10, seed=3, offset=50)}
    assert not measured & warm


def test_selection_wraps_around_in_the_same_order():
    n = len(bp.PROMPTS)
    ids = [p["id"] for p in bp.select(2 * n + 3, seed=5)]
    assert ids[:n] == ids[n : 2 * n]
    assert ids[2 * n :] == ids[:3]


def test_negative_count_is_rejected():
    with pytest.raises(ValueError, match="count"):
        bp.select(-1)


def test_by_id():
    assert bp.by_id("code-01")["kind"] == "code"
    with pytest.raises(KeyError):
        bp.by_id("nope")
