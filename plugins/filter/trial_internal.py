# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: trial_internal
short_description: Internal steps of the speculative_decoding role's trial (not an API)
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - The one entry point from the P(jetson_llm.speculative.speculative_decoding#role) role's tasks to the Python
    steps of a trial that the trial's action plugin does not run itself. It is internal; operations and their
    arguments may change in any release. For your own
    playbooks use the public filters (P(jetson_llm.speculative.speculative_plan#filter),
    P(jetson_llm.speculative.speculative_verdict#filter), the report filters).
  - C(ladder) lists the configurations to try when vLLM does not start with a plan (the plan, then lower
    utilization by O(step), O(steps) times, then smaller speculators of the same family that fit).
positional: _input, operation
options:
  _input:
    description:
      - An enabled plan.
    type: raw
    required: true
  operation:
    description: The step.
    type: str
    required: true
    choices: [ladder]
  facts:
    description: C(ansible_facts.jetson).
    type: dict
  target_model:
    description: Served model id.
    type: str
  serve:
    description: Serve settings.
    type: dict
  concurrency:
    description: Expected concurrency.
    type: int
    default: 1
  catalog:
    description: Extra catalog entries.
    type: dict
  overrides:
    description: The host's overrides.
    type: dict
  step:
    description: Utilization step.
    type: float
    default: 0.05
  steps:
    description: Number of utilization steps.
    type: int
    default: 1
  host:
    description: Host name for messages.
    type: str
"""

EXAMPLES = r"""
# Internal: how the role builds its out-of-memory ladder (not for use outside the collection's roles)
- name: Build the speculative configurations the trial may start
  ansible.builtin.set_fact:
    rungs: "{{ plan | jetson_llm.speculative.trial_internal('ladder', facts=ansible_facts.jetson, target_model=model, serve=serve) }}"
"""

RETURN = r"""
_value:
  description:
    - The list of rungs (plans with C(rung)), the plan first.
  type: raw
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rollout_steps import OPERATIONS, RolloutStepError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._values import plain

_FQCN = "jetson_llm.speculative.trial_internal"


def trial_internal(value, operation, **kwargs):
    if operation not in OPERATIONS:
        raise AnsibleFilterError("{}: unknown operation {!r}; known: {}".format(_FQCN, operation, ", ".join(sorted(OPERATIONS))))
    try:
        return OPERATIONS[operation](plain(value), **plain(kwargs))
    except TypeError as exc:
        raise AnsibleFilterError("{}({}): {}".format(_FQCN, operation, exc)) from exc
    except RolloutStepError as exc:
        raise AnsibleFilterError("{}({}): {}".format(_FQCN, operation, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"trial_internal": trial_internal}
