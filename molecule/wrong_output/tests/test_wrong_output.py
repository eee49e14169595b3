# SPDX-License-Identifier: Apache-2.0
"""AGX Orin whose build serves wrong text when it speculates: reverted with "outputs differ", the baseline serves."""

from conftest import KNOWN_GOOD, NATIVE_ARGV, assert_serving, drafts_after_completion, exec_start

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_vllm_serves_the_model_without_speculation(host, serve):
    assert_serving(host, MODEL)
    assert "speculative-config" not in serve
    before, after = drafts_after_completion(host, MODEL)
    assert before == after == 0


def test_the_known_good_configuration_was_restored(host):
    for served, kept in (("/etc/vllm/serve.yaml", "serve.yaml"), ("/etc/systemd/system/vllm.service", "vllm.service"), ("/etc/vllm/vllm.env", "vllm.env")):
        assert host.file(served).sha256sum == host.file("%s/%s" % (KNOWN_GOOD, kept)).sha256sum, served
    assert exec_start(host) == NATIVE_ARGV


def test_decision_is_revert_because_the_outputs_differ(state):
    assert (state["decision"], state["outcome"]) == ("revert", "revert")
    assert state["label"] == "revert (outputs differ)"
    assert state["cause"]["code"] == "outputs_differ"
    proof = state["output_proof"]
    assert proof["agree"] is False or proof["agree"] == "False"
    assert int(proof["matches"]) < int(proof["required"])
    assert state["reason"].startswith("outputs differ: %s of %s probe outputs at temperature 0" % (proof["matches"], proof["total"]))
    assert "differs at character" in state["reason"]
    # the speculative server started (the ladder's first rung) and was never benchmarked
    assert state["fitted"]["model"]
    assert {b["arm"] for b in state["blocks"]} <= {"baseline"}
