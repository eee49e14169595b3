# SPDX-License-Identifier: Apache-2.0
"""The output proof: probe prompts at temperature 0 and the comparison rule, on the simulator."""

import importlib.util
import json
import os

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import probe
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import prompts as prompt_set
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import Server

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("_bench_sim_helpers_probe", os.path.join(HERE, "test_bench_sim.py"))
_sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sim)
hf_home = _sim.hf_home
sim = _sim.sim
needs_sim = pytest.mark.skipif(not os.path.exists(_sim.SIM_CLI), reason="the vLLM simulator is not in the tree")


def out(pid, text, error=""):
    return {"id": pid, "kind": "chat", "text": text, "error": error}


def test_probe_prompts_are_fixed_and_cover_every_kind():
    first = probe.probe_prompts(6)
    assert [p["id"] for p in first] == [p["id"] for p in probe.probe_prompts(6)]
    assert sorted(p["kind"] for p in first) == sorted(prompt_set.KINDS)
    assert len({p["id"] for p in probe.probe_prompts(12)}) == 12


def test_rule_is_more_than_two_thirds_exact_matches():
    ref = [out("p%d" % i, "answer %d" % i) for i in range(6)]
    same = [dict(r) for r in ref]
    assert probe.compare(ref, same)["agree"] is True
    # numerics: one or two answers change late -> still agree (4 of 6 > int(0.66 * 6) = 3)
    two_off = [dict(r) for r in ref]
    two_off[0]["text"] = "answer 0 but then"
    two_off[1]["text"] = "answer X"
    result = probe.compare(ref, two_off)
    assert (result["matches"], result["required"], result["agree"]) == (4, 4, True)
    assert [d["id"] for d in result["differing"]] == ["p0", "p1"]
    assert result["differing"][1]["at"] == len("answer ")
    three_off = [dict(r, text="x") if i < 3 else dict(r) for i, r in enumerate(ref)]
    assert probe.compare(ref, three_off)["agree"] is False


def test_failed_or_missing_probe_does_not_match():
    ref = [out("a", "one"), out("b", "two"), out("c", "three")]
    result = probe.compare(ref, [out("a", "one"), out("b", "", error="HTTP 500")])
    assert result["matches"] == 1 and result["agree"] is False
    assert {d["id"]: d["got"] for d in result["differing"]} == {"b": "HTTP 500", "c": "missing"}
    with pytest.raises(ValueError, match="no reference"):
        probe.compare([], ref)
    with pytest.raises(ValueError, match="min_match_fraction"):
        probe.compare(ref, ref, min_match_fraction=1.0)


def test_describe_names_the_first_difference():
    ref = [out("a", "The answer is forty two."), out("b", "b"), out("c", "c")]
    got = [out("a", "The answer is forty three."), out("b", "b"), out("c", "c")]
    line = probe.describe(probe.compare(ref, got))
    assert line.startswith("2 of 3 probe outputs at temperature 0 equal the baseline's (at least 2 needed)")
    assert "a differs at character 21" in line


@needs_sim
def test_speculation_keeps_the_greedy_text_and_wrong_answers_break_it(sim):
    base = sim()
    reference = probe.run_probes(Server(base.url), _sim.TARGET, max_tokens=24)
    assert all(o["text"] and not o["error"] for o in reference)
    assert probe.run_probes(Server(base.url), _sim.TARGET, max_tokens=24) == reference
    spec = sim(args=_sim.SPEC_ARGS)
    spec_outputs = probe.run_probes(Server(spec.url), _sim.TARGET, max_tokens=24)
    assert probe.compare(reference, spec_outputs) == dict(probe.compare(reference, reference))
    assert probe.compare(reference, spec_outputs)["matches"] == 6
    broken = sim(args=_sim.SPEC_ARGS, settings={"faults": {"wrong_answers": True}})
    wrong = probe.run_probes(Server(broken.url), _sim.TARGET, max_tokens=24)
    result = probe.compare(reference, wrong)
    assert result["agree"] is False and result["matches"] <= 1, json.dumps(result)
    # completions endpoint works too
    comp = probe.run_probes(Server(base.url), _sim.TARGET, endpoint="completions", count=3, max_tokens=16)
    assert len(comp) == 3 and all(o["text"] for o in comp)
