# SPDX-License-Identifier: Apache-2.0
"""AGX Orin with a speculator that rarely guesses right: the trial shows no real gain and speculation is reverted."""

from conftest import KNOWN_GOOD, NATIVE_ARGV, assert_serving, drafts_after_completion, exec_start

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_vllm_serves_the_model(host):
    assert_serving(host, MODEL)


def test_serve_config_is_the_baseline_without_speculation(serve):
    assert serve["model"] == MODEL
    assert serve["gpu-memory-utilization"] == 0.70
    assert "speculative-config" not in serve


def test_the_known_good_configuration_was_restored(host):
    # The handler copies the known-good files back: the served files are byte for byte the kept ones.
    for served, kept in (("/etc/vllm/serve.yaml", "serve.yaml"), ("/etc/systemd/system/vllm.service", "vllm.service"), ("/etc/vllm/vllm.env", "vllm.env")):
        assert host.file(served).sha256sum == host.file("%s/%s" % (KNOWN_GOOD, kept)).sha256sum, served
    assert exec_start(host) == NATIVE_ARGV


def test_the_served_model_does_not_speculate(host):
    before, after = drafts_after_completion(host, MODEL)
    assert before == after == 0


def test_decision_is_revert_because_the_gain_is_not_shown(state):
    assert (state["decision"], state["outcome"]) == ("revert", "revert")
    assert state["label"].startswith("revert")
    # the speculative arm was measured (the first rung started) but its gain did not reach the threshold
    assert state["fitted"]["model"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert state["ladder"] == []
    assert state["verdict"]["gain_c1"]["ci"][0] < state["verdict"]["thresholds"]["min_gain"]
    arms = {b["arm"] for b in state["blocks"]}
    assert arms == {"baseline", "speculative"}


def test_history_keeps_the_decision(state, history):
    assert [n for n in history if n.startswith("decision-%s-" % state["key"])]
    assert any(n.startswith("%s-speculative-" % state["key"]) for n in history)
