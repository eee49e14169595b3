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
  served:
    description:
      - The server the arm was applied to, as read right after the switch (and before the measurement)
        with P(jetson_llm.speculative.vllm_server_info#module), plus C(arm), the arm it serves.
      - Without it no arm proof is made.
    type: dict
  after:
    description:
      - The evidence of the measurement, the C(unit) that P(jetson_llm.speculative.vllm_benchmark#module) returns
        with its O(jetson_llm.speculative.vllm_benchmark#module:service) option, or a
        P(jetson_llm.speculative.vllm_server_info#module) read right after it.
    type: dict
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
from ansible_collections.jetson_llm.speculative.plugins.module_utils._trial import prove_block
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._values import plain as _plain

_FQCN = "jetson_llm.speculative.trial_blocks"


def arm_proof(arm, served, after):
    """None when a block of ``arm`` proves its arm, else the reason (the rule itself is _trial.prove_block,
    shared with the trial controller).

    ``served``: the live server read when the arm was applied (vllm_server_info, plus ``arm``).
    ``after``: the evidence of the measurement, either the benchmark's ``unit`` (``invocation_before``,
    ``invocation_after``, ``main_pid_*``, ``speculative``) or a vllm_server_info read after it.
    """
    served = _plain(served or {})
    after = _plain(after or {})
    if served.get("config_current") is False:
        differences = "; ".join(str(d) for d in served.get("differences") or []) or "files changed after the start"
        return "the server was not started from the arm's configuration (%s)" % differences
    if after.get("invocation_before") or after.get("invocation_after"):
        started, before, end = served.get("invocation_id"), after.get("invocation_before"), after.get("invocation_after")
    elif "main_pid_before" in after:  # no invocation ids: compare like with like, the main process ids
        started, before, end = served.get("main_pid"), after.get("main_pid_before"), after.get("main_pid_after")
    else:
        started = served.get("invocation_id") or served.get("main_pid")
        before, end = started, after.get("invocation_id") or after.get("main_pid")
    block = {"arm": arm, "spec_metrics": after.get("speculative"), "invocation_before": before, "invocation_after": end}
    return prove_block(block, {"arm": served.get("arm"), "invocation": started, "server_started": served.get("started_at")})


def trial_blocks(runs, segment, start, result_file=None, served=None, after=None):
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
        if served is not None:
            reason = arm_proof(block["arm"], served, after)
            if reason:
                tagged["arm_proof"] = reason
                tagged["discard"] = "it did not measure the %s arm: %s" % (block["arm"], reason)
        if block.get("num_speculative_tokens") not in (None, "", "None"):
            tagged["num_speculative_tokens"] = int(block["num_speculative_tokens"])
        out.append(tagged)
    return out


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"trial_blocks": trial_blocks}
