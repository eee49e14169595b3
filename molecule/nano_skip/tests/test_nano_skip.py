# SPDX-License-Identifier: Apache-2.0
"""Orin Nano 8 GB: speculation is skipped with its reason and the baseline serves; no trial ran."""

from conftest import KNOWN_GOOD, NATIVE_ARGV, assert_serving, drafts_after_completion, exec_start

MODEL = "Qwen/Qwen3-1.7B"


def test_vllm_serves_the_baseline(host, serve):
    assert_serving(host, MODEL)
    assert exec_start(host) == NATIVE_ARGV
    assert serve["model"] == MODEL
    assert serve["gpu-memory-utilization"] == 0.65
    assert serve["max-model-len"] == 4096
    assert "speculative-config" not in serve


def test_the_served_model_does_not_speculate(host):
    before, after = drafts_after_completion(host, MODEL)
    assert before == after == 0


def test_decision_is_skip_with_the_orin_nano_reason(state):
    assert (state["decision"], state["outcome"], state["label"]) == ("skip", "skip", "skip")
    assert (state["family"], state["variant"]) == ("orin_nano", "8gb")
    assert "Orin Nano" in state["reason"]
    assert state["plan"]["decision"] == "skipped"
    assert state["plan"]["speculative_config"] is None


def test_no_trial_ran(state, history):
    assert state["blocks"] == []
    assert state["fitted"] == {}
    assert history == ["decision-%s-%d.json" % (state["key"], int(state["decided_at"]))]


def test_the_serving_baseline_is_kept_as_known_good(host, serve, known_good):
    # the device had no vLLM before: once the baseline serves, it is the configuration to come back to
    assert known_good == serve
    assert host.file(KNOWN_GOOD + "/vllm.env").mode == 0o600
