# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_report_index
short_description: Add a run to the index of speculative-decoding rollout reports
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Returns the index of runs (written as C(index.json) in the report directory) with the run of O(report) added,
    or replaced when its id is already listed; runs are sorted oldest first.
  - Each run lists its C(id), C(started_utc), C(finished_utc), C(target_group), the number of C(hosts) with a
    result, C(counts) per outcome (C(keep), C(revert), C(skip), C(missing)), C(requests_spent), C(wall_s) and the
    C(path) of its directory.
  - An index that is not valid JSON, or entries that are not runs, are dropped rather than failing the end of a
    rollout; the HTML report of that run says so.
options:
  _input:
    description: The previous index, as C(index.json) holds it (its text, the parsed document, or empty when there is none yet).
    type: raw
    required: true
  report:
    description: The run document from P(jetson_llm.speculative.fleet_report#filter).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Add this run to the index
  ansible.builtin.set_fact:
    fleet_index: "{{ previous_index_text | jetson_llm.speculative.fleet_report_index(fleet_report) }}"
"""

RETURN = r"""
_value:
  description: The index, a dictionary with C(schema) (1) and C(runs), the list of runs.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._report import update_index

FQCN = "jetson_llm.speculative.fleet_report_index"


def fleet_report_index(index, report):
    if not isinstance(report, dict) or not isinstance(report.get("run"), dict) or not report["run"].get("id"):
        raise AnsibleFilterError("%s: report must be a run document from jetson_llm.speculative.fleet_report" % FQCN)
    try:
        return update_index(index, report)
    except (TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError("%s: %s" % (FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"fleet_report_index": fleet_report_index}
