# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_report_html
short_description: Self-contained HTML page of a speculative-decoding rollout report
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Renders a run document of the P(jetson_llm.speculative.fleet_report#filter) filter as one HTML page with inline
    CSS and inline SVG charts; it loads nothing and runs no script, so it can be opened from disk, mailed or archived.
  - "The page shows: counts per outcome; a chart of each host's throughput gain at concurrency 1 with its confidence
    interval as error bars, grouped by family, with the keep threshold (C(min_gain)) drawn; a table per host with
    the verdict and its reason, method and k, throughput of each arm at concurrency 1 and 8 with the gains, median
    TPOT, acceptance length, the trial's size, noise and warnings; where the time went, with a timeline of vLLM
    restarts and benchmarks per host; and the history of runs from O(index)."
  - The page is rendered from a Jinja2 template shipped with the collection, with autoescaping on. Every text that
    comes from inventories or devices (host names, reasons, warnings) is HTML-escaped and loses its control characters.
  - A document with only C(hosts) and C(timing) (the C(fleet.json) of earlier versions) renders too.
options:
  _input:
    description: The run document.
    type: dict
    required: true
  index:
    description: The index of runs (the content of C(index.json) in the report directory, parsed or as text) for the history section.
    type: raw
  location:
    description:
      - Where the page is written, for the links to other runs in the history section. C(latest) is the report
        directory (C(latest.html)); C(run) is the run's own directory (C(runs/<id>/report.html)).
    type: str
    choices: [latest, run]
    default: latest
"""

EXAMPLES = r"""
- name: Write the HTML report of this run
  ansible.builtin.copy:
    content: "{{ fleet_report | jetson_llm.speculative.fleet_report_html(index=fleet_index, location='run') }}"
    dest: "{{ report_dir }}/runs/{{ fleet_report.run.id }}/report.html"
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The HTML page.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._report_html import html
from jinja2 import TemplateError

FQCN = "jetson_llm.speculative.fleet_report_html"


def fleet_report_html(doc, index=None, location="latest"):
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts", []), list):
        raise AnsibleFilterError("%s: the input must be a run document from jetson_llm.speculative.fleet_report" % FQCN)
    if location not in ("latest", "run"):
        raise AnsibleFilterError("%s: location must be 'latest' or 'run', got %r" % (FQCN, location))
    try:
        return html(doc, index=index, location=location)
    except (TypeError, ValueError, AttributeError, KeyError, TemplateError) as exc:
        raise AnsibleFilterError("%s: %s" % (FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"fleet_report_html": fleet_report_html}
