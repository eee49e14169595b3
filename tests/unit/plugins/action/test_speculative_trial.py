# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""The trial action plugin refuses bad arguments before it touches the device, naming host and option."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.jetson_llm.speculative.plugins.action.speculative_trial import ActionModule

PLAN = {"decision": "enabled", "method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}
SERVER = {"url": "http://127.0.0.1:8000", "service": "vllm.service", "config_path": "/etc/vllm/serve.yaml", "model": "m"}


def good_args(**changes):
    args = {
        "settings": {"ladder_rungs": 0, "output_proof": 0},
        "serve": {"model": "m"},
        "rungs": [PLAN],
        "server": dict(SERVER),
        "benchmark": {"output_len": 64},
    }
    args.update(changes)
    return args


def action(args, check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    plugin = ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    plugin._host_name = "dev-1"
    plugin._task_vars = {"inventory_hostname": "dev-1"}
    return plugin


@pytest.mark.parametrize(
    "changes, option, allowed",
    [
        ({"colour": "red"}, "colour", "unknown option"),
        ({"serve": "model: m"}, "serve", "a dictionary"),
        ({"rungs": []}, "rungs", "non-empty list of enabled plans"),
        ({"rungs": [{"decision": "disabled"}]}, "rungs", "non-empty list of enabled plans"),
        ({"server": {k: v for k, v in SERVER.items() if k != "url"}}, "server.url", "non-empty string"),
        ({"server": dict(SERVER, port=8000)}, "server.port", "unknown key"),
        ({"server": dict(SERVER, ready_timeout="soon")}, "server.ready_timeout", "of type"),
        ({"benchmark": {"concurrency": [1]}}, "benchmark.concurrency", "unknown key"),
        ({"settings": {"ladder_rungs": 0, "colour": 1}}, "settings", "unknown trial setting"),
        ({"settings": {"ladder_rungs": 2}}, "settings.ladder_rungs", "rungs after the plan (0)"),
        ({"settings": {"ladder_rungs": 0, "output_proof": 4}}, "probe", "output_proof is above 0"),
    ],
)
def test_bad_argument_names_host_option_and_what_is_allowed(changes, option, allowed):
    plugin = action(good_args(**changes))
    with pytest.raises(AnsibleActionFail) as err:
        plugin._args()
    msg = str(err.value)
    assert msg.startswith("host dev-1: jetson_llm.speculative.speculative_trial: option %s must be" % option), msg
    assert allowed in msg


def test_good_arguments_pass():
    args = good_args()
    assert action(args)._args()["rungs"] == [PLAN]


def test_check_mode_touches_nothing():
    plugin = action(good_args(), check_mode=True)
    with mock.patch.object(ActionModule, "_execute_module") as run_module:
        with mock.patch("ansible.plugins.action.ActionBase.run", return_value={}):
            result = plugin.run(task_vars={"inventory_hostname": "dev-1"})
    assert result["skipped"] is True
    run_module.assert_not_called()
