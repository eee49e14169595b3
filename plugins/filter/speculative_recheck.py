# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: speculative_recheck
short_description: Re-check a kept speculative-decoding decision against a short live benchmark
version_added: 0.1.0
author:
  - jetson_llm.speculative contributors
description:
  - Compares a short benchmark of the live (speculative) server at concurrency 1 with the decision
    recorded on the device, and says whether the kept configuration is still worth keeping.
  - Acceptance is the token-weighted rate (accepted / drafted tokens) of the live runs, read from the
    C(vllm:spec_decode_*_total) counters of C(GET /metrics) before and after each run. It falls under
    the floor when it is below O(min_acceptance). A live server with no such counters does not speculate.
  - The gain is the median throughput of the live runs over the median throughput of the recorded
    baseline blocks at concurrency 1, minus 1. The noise allowance is the relative half-range (largest
    distance from the median) of the recorded baseline blocks plus that of the live runs, at least
    O(noise_floor). The gain has disappeared when gain + noise is still below O(min_gain).
  - A device whose recorded decision is not C(keep) (or that has none) gets the action C(leave).
options:
  _input:
    description: The recorded decision (the content of C(state.json)).
    type: dict
    required: true
  runs:
    description: The C(runs) of the short P(jetson_llm.speculative.vllm_benchmark#module) call, all at concurrency 1.
    type: list
    elements: dict
    required: true
  min_acceptance:
    description: Acceptance floor (fraction of drafted tokens accepted).
    type: float
    default: 0.30
  min_gain:
    description: Smallest gain over the recorded baseline that still counts (0.0 = any gain).
    type: float
    default: 0.0
  noise_floor:
    description: Smallest noise allowance on the gain.
    type: float
    default: 0.03
  metrics:
    description: Body of C(GET /metrics) of the live server; lifetime acceptance and the check that it speculates.
    type: str
"""

EXAMPLES = r"""
- name: Re-check the kept decision
  ansible.builtin.set_fact:
    check: "{{ state | jetson_llm.speculative.speculative_recheck(runs=bench.runs, min_acceptance=0.3) }}"
"""

RETURN = r"""
_value:
  description:
    - C(action) (C(keep), C(revert), C(leave)), C(reason), C(recorded_decision), C(acceptance_rate),
      C(acceptance_length), C(lifetime_acceptance_rate), C(recorded_acceptance_rate), C(gain), C(noise),
      C(baseline_tok_s), C(live_tok_s), C(min_acceptance), C(min_gain).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._dayafter import DayTwoError, recheck

_FQCN = "jetson_llm.speculative.speculative_recheck"


def speculative_recheck(state, runs, min_acceptance=0.30, min_gain=0.0, noise_floor=0.03, metrics=None):
    if state is not None and not isinstance(state, dict):
        raise AnsibleFilterError("{}: the input must be the recorded decision (a dict)".format(_FQCN))
    try:
        return recheck(state or {}, runs, min_acceptance=float(min_acceptance), min_gain=float(min_gain), noise_floor=float(noise_floor), metrics=metrics)
    except (DayTwoError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"speculative_recheck": speculative_recheck}
