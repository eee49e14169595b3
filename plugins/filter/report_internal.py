# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: report_internal
short_description: Internal steps of the fleet report of the collection's playbooks (not an API)
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - The one entry point from the collection's summary play to the Python steps of the fleet report that are not
    the report itself. It is internal; operations and their arguments may change in any release. The report
    filters P(jetson_llm.speculative.fleet_report#filter), P(jetson_llm.speculative.fleet_report_html#filter) and
    P(jetson_llm.speculative.fleet_table#filter) are the public ones.
  - C(timing) says where a run's time went (per phase and host, with a text for the console) from the hosts'
    results; C(index) adds a run document to the index of earlier runs (oldest first; an index that could not
    be read is started again and says so once).
positional: _input, operation
options:
  _input:
    description: C(timing), the per-host results; C(index), the text of the existing index (empty when none).
    type: raw
    required: true
  operation:
    description: The step.
    type: str
    required: true
    choices: [timing, index]
  started:
    description: C(timing) only. When the run started (seconds since the epoch).
    type: float
  report:
    description: C(index) only. The run document from P(jetson_llm.speculative.fleet_report#filter).
    type: dict
"""

EXAMPLES = r"""
# Internal: how the summary play prints where the time went (not for use outside the collection's playbooks)
- name: Where the time went
  ansible.builtin.debug:
    msg: "{{ (results | jetson_llm.speculative.report_internal('timing', started=started)).text }}"
"""

RETURN = r"""
_value:
  description: C(timing), the phases, hosts and C(text); C(index), the updated index document.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._report import timing, update_index

_FQCN = "jetson_llm.speculative.report_internal"


def _timing(results, started=None):
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise ValueError("the input must be a list of per-host results")
    return timing(results, started=started)


def _index(index, report=None):
    if not isinstance(report, dict) or not isinstance(report.get("run"), dict) or not report["run"].get("id"):
        raise ValueError("report must be a run document from jetson_llm.speculative.fleet_report")
    return update_index(index, report)


OPERATIONS = {"timing": _timing, "index": _index}


def report_internal(value, operation, **kwargs):
    if operation not in OPERATIONS:
        raise AnsibleFilterError("{}: unknown operation {!r}; known: {}".format(_FQCN, operation, ", ".join(sorted(OPERATIONS))))
    try:
        return OPERATIONS[operation](value, **kwargs)
    except (TypeError, ValueError, IndexError, AttributeError) as exc:
        raise AnsibleFilterError("{}({}): {}".format(_FQCN, operation, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"report_internal": report_internal}
