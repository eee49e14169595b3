# SPDX-License-Identifier: Apache-2.0
"""The trial_action filter: the controller's next action through Jinja."""

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter.trial_action import FilterModule

trial_action = FilterModule().filters()["trial_action"]


def test_starts_by_applying_the_baseline_then_measures_it():
    action = trial_action([])
    assert action["action"] == "apply" and action["arm"] == "baseline"
    applied = {"type": "applied", "arm": "baseline", "ok": True, "invocation": 7, "config_written": 1.0, "server_started": 2.0}
    action = trial_action([applied])
    assert action["action"] == "measure"
    assert {b["arm"] for b in action["blocks"]} == {"baseline"}
    assert all(b["warmups"] == 2 for b in action["blocks"])


def test_settings_pass_through_and_failure_ends_the_trial():
    failed = {"type": "applied", "arm": "speculative", "ok": False, "cause": "oom", "rung": 0}
    action = trial_action([failed], settings={"ladder_rungs": 0})
    assert action["action"] == "done" and action["outcome"] == "revert"
    assert action["cause"]["kind"] == "start_failed"


def test_bad_input_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="trial_action"):
        trial_action([{"type": "nonsense"}])
    with pytest.raises(AnsibleFilterError, match="trial_action"):
        trial_action("not a list")
