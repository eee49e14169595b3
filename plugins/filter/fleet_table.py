# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_table
short_description: Per-host console table of a speculative-decoding rollout
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Formats the per-host results of the speculative_decoding role as a fixed-width table sorted by host, one line
    per host with the family and variant, the method, the number of speculative tokens (k), the mean baseline and
    speculative throughput at concurrency 1 and at the high concurrency (8 by default), the drift-corrected gain at
    each concurrency with its confidence interval, the requests the trial spent and the verdict.
  - Below each host its reason, wrapped to O(width) and cut after O(reason_lines) lines, and one line per warning
    of its trial. Then the count per outcome, one line per host without a result, and a legend.
  - Hosts that skipped speculation show C(-) for what was not measured; hosts decided in an earlier run are marked
    C((decided earlier)).
options:
  _input:
    description: Per-host results (C(hostvars[host].speculative_decoding_result),
      the public result of the P(jetson_llm.speculative.speculative_decoding#role) role).
    type: list
    elements: dict
    required: true
  missing:
    description: Hosts that produced no result.
    type: list
    elements: str
  width:
    description: Column at which reasons and warnings wrap; by default the table's width, from 100 to 160.
    type: int
  reason_lines:
    description: Most lines of a host's reason; a longer reason ends with C(...). 0 leaves reasons out.
    type: int
    default: 3
"""

EXAMPLES = r"""
- name: Print the table
  ansible.builtin.debug:
    msg: "{{ results | jetson_llm.speculative.fleet_table(missing=['jetson-07']) }}"

- name: Narrow table, one line of reason per host
  ansible.builtin.debug:
    msg: "{{ results | jetson_llm.speculative.fleet_table(width=100, reason_lines=1) }}"
"""

RETURN = r"""
_value:
  description: Lines of the table.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._report import table

FQCN = "jetson_llm.speculative.fleet_table"


def fleet_table(results, missing=None, width=None, reason_lines=3):
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise AnsibleFilterError("%s: the input must be a list of per-host results" % FQCN)
    if missing is not None and (isinstance(missing, (str, dict)) or not all(isinstance(h, str) for h in missing)):
        raise AnsibleFilterError("%s: missing must be a list of host names, got %r" % (FQCN, missing))
    for name, value in (("width", width), ("reason_lines", reason_lines)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < (20 if name == "width" else 0)):
            raise AnsibleFilterError("%s: %s must be an integer of at least %d, got %r" % (FQCN, name, 20 if name == "width" else 0, value))
    try:
        return table(results, missing=list(missing or []), width=width, reason_lines=reason_lines)
    except (TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError("%s: %s" % (FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"fleet_table": fleet_table}
