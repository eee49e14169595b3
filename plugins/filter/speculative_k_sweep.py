# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: speculative_k_sweep
short_description: Plan a num_speculative_tokens sweep from measured per-position acceptance
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - From vLLM's per-position acceptance rates measured with the largest candidate (position i estimates alpha^(i+1)),
    predicts the Leviathan speedup of every candidate C(num_speculative_tokens), prunes the values that cannot win
    even with optimistic acceptance, and returns the mirrored measurement order for the survivors
    (baseline, k1, k2, ..., then back), all at concurrency 1.
  - The statistics are those of the collection's verdict (see C(docs/decisions.md)).
options:
  _input:
    description: Per-position acceptance rates (C(spec_decode_per_position_acceptance_rates) of a benchmark run).
    type: list
    elements: float
    required: true
  candidates:
    description: Candidate values of C(num_speculative_tokens).
    type: list
    elements: int
    required: true
  draft_cost:
    description: Time of one draft forward over one target forward (about the speculator/target weight ratio on Jetson).
    type: float
    required: true
  num_drafts:
    description: Draft rounds behind the rates (for confidence bounds on them).
    type: int
  confidence:
    description: Confidence of the optimistic bounds.
    type: float
    default: 0.95
  rounds:
    description: Rounds of the mirrored schedule.
    type: int
    default: 2
  n_requests:
    description: Requests per block.
    type: int
    default: 8
"""

EXAMPLES = r"""
- name: Which k values are worth measuring
  ansible.builtin.set_fact:
    sweep: "{{ rates | jetson_llm.speculative.speculative_k_sweep(candidates=[1, 2, 3, 4, 5, 6, 7], draft_cost=0.05) }}"
"""

RETURN = r"""
_value:
  description: C(predictions) per k, C(survivors), and C(schedule) (list of C(arm), C(num_speculative_tokens), C(concurrency), C(n_requests)).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import StatsError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.ksweep import k_sweep, sweep_schedule

_FQCN = "jetson_llm.speculative.speculative_k_sweep"


def speculative_k_sweep(rates, candidates, draft_cost, num_drafts=None, confidence=0.95, rounds=2, n_requests=8):
    try:
        result = k_sweep(
            [int(k) for k in candidates],
            [float(r) for r in rates],
            float(draft_cost),
            num_drafts=None if num_drafts is None else int(num_drafts),
            confidence=float(confidence),
        )
        result["schedule"] = sweep_schedule(result["survivors"], int(rounds), n_requests=int(n_requests)) if result["survivors"] else []
    except (StatsError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc
    return result


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"speculative_k_sweep": speculative_k_sweep}
