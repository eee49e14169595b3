# SPDX-License-Identifier: Apache-2.0
"""trial_internal('proof'): the output probe and the acceptance floor overrule a verdict."""

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter.trial_internal import trial_internal
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.sequential import VERDICT_CAUSES, overrule

KEEP = {
    "decision": "keep",
    "label": "keep (strong)",
    "cause": {"code": "strong", "text": "strong"},
    "reason": "gain 25 %",
    "gain_c1": {"estimate": 0.25},
    "next_blocks": [],
}
CONTINUE = dict(KEEP, decision="continue", label="continue", cause={"code": "continue", "text": "continue"}, next_blocks=[{"arm": "baseline"}])


def spec_block(accepted, drafted, drafts, discard=None):
    block = {"arm": "speculative", "concurrency": 1, "spec_decode_accepted_tokens": accepted, "spec_decode_draft_tokens": drafted}
    block["spec_decode_num_drafts"] = drafts
    if discard:
        block["discard"] = discard
    return block


def test_outputs_that_differ_revert_with_the_summary():
    probe = {"agree": False, "summary": "0 of 6 probe outputs at temperature 0 equal the baseline's (at least 4 needed)"}
    out = trial_internal(CONTINUE, "proof", outputs=probe)
    assert out["decision"] == "revert" and out["next_blocks"] == []
    assert out["cause"] == {"code": "outputs_differ", "text": "outputs differ"}
    assert out["label"] == "revert (outputs differ)"
    assert out["reason"] == "outputs differ: " + probe["summary"]
    assert out["gain_c1"] == KEEP["gain_c1"]
    assert trial_internal(CONTINUE, "proof", outputs={"agree": True, "summary": "6 of 6"}) == CONTINUE


def test_a_kept_speculator_under_the_acceptance_floor_is_reverted():
    low = [spec_block(3, 100, 25), spec_block(2, 100, 25), {"arm": "baseline", "concurrency": 1}]
    out = trial_internal(KEEP, "proof", blocks=low, min_acceptance=0.10)
    assert out["cause"]["code"] == "not_accepted" and out["label"] == "revert (speculator not accepted)"
    assert "acceptance 2.5 % of the drafted tokens over 2 speculative blocks is under the floor 10.0 %" in out["reason"]
    healthy = [spec_block(60, 100, 25), spec_block(55, 100, 25)]
    assert trial_internal(KEEP, "proof", blocks=healthy, min_acceptance=0.10) == KEEP
    # a discarded block does not count; a verdict that is not "keep" is left alone
    assert trial_internal(KEEP, "proof", blocks=[*healthy, spec_block(0, 100, 25, discard="late")], min_acceptance=0.5) == KEEP
    assert trial_internal(CONTINUE, "proof", blocks=low, min_acceptance=0.10) == CONTINUE
    # no counters (speculation metrics off): nothing to judge
    assert trial_internal(KEEP, "proof", blocks=[{"arm": "speculative", "concurrency": 1}], min_acceptance=0.10) == KEEP


def test_bad_input_is_named():
    with pytest.raises(AnsibleFilterError, match="must be a verdict"):
        trial_internal([], "proof")
    with pytest.raises(AnsibleFilterError, match="result of vllm_output_probe"):
        trial_internal(KEEP, "proof", outputs={"outputs": []})
    with pytest.raises(ValueError, match="unknown proof"):
        overrule(KEEP, "regression", "x")
    assert VERDICT_CAUSES["outputs_differ"] == "outputs differ"
