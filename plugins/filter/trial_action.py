# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: trial_action
short_description: The next action of a speculative-decoding trial
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Replays the observations of a trial so far (arms applied, blocks measured with their arm evidence) and returns
    the next action of the trial controller, the same code C(make bench-decisions) measures.
  - C(apply) names the arm (and out-of-memory ladder rung) to start; C(measure) lists the blocks to benchmark on the
    served arm with their seed, prompt offset and warm-ups; C(done) gives the outcome (C(keep) or C(revert)) and a
    structured cause (C(verdict), C(start_failed) or C(arm_proof)).
  - A measured block counts only when it proves its arm (speculation metrics present if and only if the speculative
    arm, the server's invocation unchanged during the block and the one started for the arm, the server started after
    the arm's configuration was written); otherwise it is discarded, counted in RV(counters.discarded) and the arm is
    applied again.
options:
  _input:
    description: The observations so far, in order (C(type) C(applied) or C(measured)).
    type: list
    elements: dict
    required: true
  settings:
    description:
      - Trial settings (C(warmups), C(max_discards), C(ladder_rungs), C(require_proof), C(seed)) and verdict
        thresholds (the options of P(jetson_llm.speculative.speculative_verdict#filter)).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Ask the controller what to do next
  ansible.builtin.set_fact:
    action: "{{ observations | jetson_llm.speculative.trial_action(settings=trial_settings) }}"
"""

RETURN = r"""
_value:
  description: C(action) (apply, measure or done) and its fields, C(counters) (blocks, discarded, restarts, requests).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import StatsError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._trial import TrialError, next_action

_FQCN = "jetson_llm.speculative.trial_action"


def trial_action(observations, settings=None):
    if not isinstance(observations, list):
        raise AnsibleFilterError("{}: the observations must be a list".format(_FQCN))
    try:
        return next_action(dict(settings or {}), [dict(o) for o in observations])
    except (TrialError, StatsError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"trial_action": trial_action}
