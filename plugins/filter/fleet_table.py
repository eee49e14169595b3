# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_table
short_description: Per-host table of a speculative-decoding rollout
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Formats the per-host results of the speculative_decoding role as a fixed-width table with the host,
    family, method, k, baseline and speculative throughput at concurrency 1 and 8, the gain with its
    confidence interval, the outcome and its reason, followed by a count per outcome.
options:
  _input:
    description: Per-host results (C(hostvars[host].__speculative_decoding_result)).
    type: list
    elements: dict
    required: true
  missing:
    description: Hosts that produced no result.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Print the table
  ansible.builtin.debug:
    msg: "{{ results | jetson_llm.speculative.fleet_table }}"
"""

RETURN = r"""
_value:
  description: Lines of the table.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._report import table


def fleet_table(results, missing=None):
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise AnsibleFilterError("jetson_llm.speculative.fleet_table: the input must be a list of per-host results")
    return table(results, missing=list(missing or []))


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"fleet_table": fleet_table}
