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
    steps of a trial. It is internal; operations and their arguments may change in any release. For your own
    playbooks use the public filters (P(jetson_llm.speculative.speculative_plan#filter),
    P(jetson_llm.speculative.speculative_verdict#filter), the report filters).
  - C(blocks) turns the C(runs) of one P(jetson_llm.speculative.vllm_benchmark#module) call into trial blocks tagged
    with arm, concurrency and index; a block that did not measure its arm (checked against O(served) and O(after))
    or was measured while the vLLM simulator ran late gets a C(discard) reason and never enters the verdict.
  - C(proof) returns the verdict (the input) turned into a revert when a proof beside the statistics fails, the
    output probe (O(outputs), a result of P(jetson_llm.speculative.vllm_output_probe#module) with C(expected), cause
    C(outputs_differ)), or, for a kept verdict, the acceptance floor O(min_acceptance) over the speculative O(blocks)
    (cause C(not_accepted)); otherwise the verdict unchanged.
  - C(ladder) lists the configurations to try when vLLM does not start with a plan (the plan, then lower
    utilization by O(step), O(steps) times, then smaller speculators of the same family that fit).
positional: _input, operation
options:
  _input:
    description:
      - C(blocks), the benchmark's C(runs); C(ladder), an enabled plan; C(proof), a verdict.
    type: raw
    required: true
  operation:
    description: The step.
    type: str
    required: true
    choices: [blocks, ladder, proof]
  segment:
    description: C(blocks) only. The blocks the benchmark measured, in the order of its runs.
    type: list
    elements: dict
  start:
    description: C(blocks) only. Index of the first block in the trial.
    type: int
  result_file:
    description: C(blocks) only. Path of the saved benchmark result on the device.
    type: str
  served:
    description: C(blocks) only. The live server the arm was applied to, plus C(arm); without it no arm proof is made.
    type: dict
  after:
    description: C(blocks) only. The benchmark's C(unit) evidence of the measurement.
    type: dict
  facts:
    description: C(ladder) only. C(ansible_facts.jetson).
    type: dict
  target_model:
    description: C(ladder) only. Served model id.
    type: str
  serve:
    description: C(ladder) only. Serve settings.
    type: dict
  concurrency:
    description: C(ladder) only. Expected concurrency.
    type: int
    default: 1
  catalog:
    description: C(ladder) only. Extra catalog entries.
    type: dict
  overrides:
    description: C(ladder) only. The host's overrides.
    type: dict
  step:
    description: C(ladder) only. Utilization step.
    type: float
    default: 0.05
  steps:
    description: C(ladder) only. Number of utilization steps.
    type: int
    default: 1
  host:
    description: C(ladder) only. Host name for messages.
    type: str
  outputs:
    description: C(proof) only. The registered result of P(jetson_llm.speculative.vllm_output_probe#module) with C(expected).
    type: dict
  blocks:
    description: C(proof) only. The trial's blocks (the speculative ones give the acceptance).
    type: list
    elements: dict
  min_acceptance:
    description: C(proof) only. Acceptance floor (accepted over drafted tokens) of a kept verdict.
    type: float
"""

EXAMPLES = r"""
# Internal: how the role adds the blocks of one measurement (not for use outside the collection's roles)
- name: Add the blocks to the trial
  ansible.builtin.set_fact:
    blocks: "{{ blocks + (bench.runs | jetson_llm.speculative.trial_internal('blocks', segment=segment, start=blocks | length)) }}"
"""

RETURN = r"""
_value:
  description:
    - C(blocks), the tagged blocks; C(ladder), the list of rungs (plans with C(rung)); C(proof), the verdict.
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
