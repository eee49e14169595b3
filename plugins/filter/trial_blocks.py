# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: trial_blocks
short_description: Turn benchmark runs into tagged blocks of a speculative-decoding trial
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Takes the C(runs) of one P(jetson_llm.speculative.vllm_benchmark#module) call and the blocks that call
    measured (C(arm), C(concurrency), C(n_requests), as listed by
    P(jetson_llm.speculative.speculative_verdict#filter) in C(next_blocks)), and returns the runs tagged with
    their arm, concurrency and global measurement index, ready for the verdict.
  - A run measured while the vLLM simulator ran late (C(sim_out_of_spec)) gets a C(discard) reason, and
    P(jetson_llm.speculative.speculative_verdict#filter) leaves such a block out and asks for it again.
options:
  _input:
    description: The C(runs) list of the benchmark result, one per concurrency level, in order.
    type: list
    elements: dict
    required: true
  segment:
    description: The blocks the benchmark measured, in the same order (C(num_speculative_tokens) is copied when present).
    type: list
    elements: dict
    required: true
  start:
    description: Index of the first block in the trial (the number of blocks measured before).
    type: int
    required: true
  result_file:
    description: Path of the saved benchmark result on the device, recorded with each block.
    type: str
"""

EXAMPLES = r"""
- name: Add the measured blocks
  ansible.builtin.set_fact:
    blocks: "{{ blocks + (bench.runs | jetson_llm.speculative.trial_blocks(segment=segment, start=blocks | length)) }}"
"""

RETURN = r"""
_value:
  description: The tagged blocks.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

_FQCN = "jetson_llm.speculative.trial_blocks"


def trial_blocks(runs, segment, start, result_file=None):
    if not isinstance(runs, list) or not isinstance(segment, list):
        raise AnsibleFilterError("{}: runs and segment must be lists".format(_FQCN))
    if len(runs) != len(segment):
        raise AnsibleFilterError("{}: the benchmark returned {} runs for {} blocks".format(_FQCN, len(runs), len(segment)))
    out = []
    for i, (run, block) in enumerate(zip(runs, segment)):
        if int(run.get("concurrency", -1)) != int(block["concurrency"]):
            raise AnsibleFilterError("{}: run {} is at concurrency {}, the block at {}".format(_FQCN, i, run.get("concurrency"), block["concurrency"]))
        tagged = dict(run)
        tagged.update(arm=block["arm"], concurrency=int(block["concurrency"]), index=int(start) + i, result_file=result_file)
        if run.get("sim_out_of_spec"):
            tagged["discard"] = "measured while the vLLM simulator ran late (%.1f %% of modelled time lost, over its limit)" % (
                100.0 * float(run.get("sim_lag_share") or 0.0)
            )
        if block.get("num_speculative_tokens") not in (None, "", "None"):
            tagged["num_speculative_tokens"] = int(block["num_speculative_tokens"])
        out.append(tagged)
    return out


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"trial_blocks": trial_blocks}
