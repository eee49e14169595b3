# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: speculative_choose_k
short_description: Pick num_speculative_tokens from a measured sweep
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Compares each measured C(num_speculative_tokens) with the baseline blocks of the same sweep by the
    drift-corrected interval of the verdict; the score is the lower confidence bound of the throughput gain at
    concurrency 1. Values within the tie tolerance of the best are tied and the smallest k wins (as vLLM's K tuner).
options:
  _input:
    description: Sweep blocks (baseline blocks and speculative blocks tagged with C(num_speculative_tokens)).
    type: list
    elements: dict
    required: true
  confidence:
    description: Confidence of the intervals.
    type: float
    default: 0.95
  tie_tolerance:
    description: Relative tolerance within which candidates are tied.
    type: float
    default: 0.01
"""

EXAMPLES = r"""
- name: Choose k
  ansible.builtin.set_fact:
    best: "{{ (sweep_blocks | jetson_llm.speculative.speculative_choose_k).k }}"
"""

RETURN = r"""
_value:
  description: C(k) (the choice), C(candidates) (score per k), C(reason).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import StatsError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.ksweep import choose_k

_FQCN = "jetson_llm.speculative.speculative_choose_k"


def speculative_choose_k(blocks, confidence=0.95, tie_tolerance=0.01):
    try:
        # a block that failed its arm proof measured another server than its own: never used
        usable = [b for b in blocks if not (isinstance(b, dict) and b.get("arm_proof"))]
        return choose_k(usable, confidence=float(confidence), tie_tolerance=float(tie_tolerance))
    except (StatsError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"speculative_choose_k": speculative_choose_k}
