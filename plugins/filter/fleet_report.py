# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_report
short_description: Machine-readable report of a speculative-decoding rollout
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Builds the document of one run (written as C(fleet.json)) from the per-host results of the
    speculative_decoding role.
  - The run gets an id from its UTC start (C(20261202T132759Z)), made unique against the runs listed in O(history)
    by a C(-2), C(-3), ... suffix; the report directory keeps each run under C(runs/<id>/).
  - C(summary) holds one normalised row per host (what the console table and the HTML report show), C(hosts) the
    raw results with their benchmark blocks, so that a run can be analysed again later.
options:
  _input:
    description: Per-host results (C(hostvars[host].speculative_decoding_result),
      the public result of the P(jetson_llm.speculative.speculative_decoding#role) role).
    type: list
    elements: dict
    required: true
  missing:
    description: Hosts of the target group that produced no result.
    type: list
    elements: str
  started:
    description: Start of the run, seconds since the epoch (C(jetson_llm_run_started)). Without it the run is named after the time the report is built.
    type: float
  history:
    description:
      - The index of earlier runs, as C(index.json) holds it (its text, the parsed document, or empty when there is
        none yet). Only used to keep the run id unique.
    type: raw
  target_group:
    description: Inventory group the run targeted, recorded in the report.
    type: str
"""

EXAMPLES = r"""
- name: Compose the report of this run
  ansible.builtin.set_fact:
    fleet_report: >-
      {{ results | jetson_llm.speculative.fleet_report(missing=['jetson-07'], started=jetson_llm_run_started,
                                                       history=previous_index_text, target_group='specdec_fleet') }}
"""

RETURN = r"""
_value:
  description: The run document.
  type: dict
  contains:
    schema:
      description: Version of this document's layout (1).
      type: int
    run:
      description: C(id), C(started), C(started_utc), C(finished), C(finished_utc), C(target_group).
      type: dict
    counts:
      description: Hosts per outcome (C(keep), C(revert), C(skip)) and C(missing), the hosts without a result.
      type: dict
    summary:
      description:
        - One row per host, sorted by host, with C(host), C(family), C(variant), C(l4t), C(model), C(vllm_version),
          C(prompts) (which prompts the benchmark sent, C(shipped prompts) or the file name, count and SHA-256 prefix),
          C(outcome), C(label), C(cause) (C(code) and C(text) of the verdict, or null), C(reason), C(reused), C(method), C(speculator), C(k), C(k_source),
          C(gpu_memory_utilization) (baseline and speculative), C(high_concurrency), C(throughput) (C(c1) and C(c8),
          mean tokens/s of each arm), C(tpot_ms), C(gain_c1), C(tpot_reduction_c1), C(gain_c8) (each
          C(estimate), C(ci), C(confidence), C(status), C(threshold), C(rounds), or null), C(min_gain),
          C(acceptance) (mean acceptance C(length) and C(rate_percent) of the speculative blocks per concurrency),
          C(rounds), C(requests_spent), C(arm_switches), C(blocks), C(noise), C(warnings), C(plan_warnings),
          C(benchmark_warnings), C(elapsed_s), C(restarts) and C(downtime_s) (the device's vLLM restarts in this run
          and the seconds it did not serve, the union of their windows, each from the stop or start until ready),
          C(started_at), C(finished_at).
      type: list
      elements: dict
    missing:
      description: Hosts without a result, sorted.
      type: list
      elements: str
    timing:
      description: Where the run's time went, per phase and host, with a C(text) for the console.
      type: dict
    downtime:
      description:
        - What the run cost in serving time, from the summary rows; C(total_s) (seconds, summed over the devices),
          C(hosts) (devices that restarted), C(restarts), C(longest) (C(host), C(downtime_s), C(restarts); null when
          no device restarted) and a C(text) for the console.
      type: dict
    hosts:
      description: The raw per-host results, sorted by host.
      type: list
      elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._report import report

FQCN = "jetson_llm.speculative.fleet_report"


def fleet_report(results, missing=None, started=None, history=None, target_group=None):
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise AnsibleFilterError("%s: the input must be a list of per-host results" % FQCN)
    if missing is not None and (isinstance(missing, (str, dict)) or not all(isinstance(h, str) for h in missing)):
        raise AnsibleFilterError("%s: missing must be a list of host names, got %r" % (FQCN, missing))
    if started not in (None, ""):
        try:
            started = float(started)
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError("%s: started must be seconds since the epoch, got %r" % (FQCN, started)) from exc
    else:
        started = None
    try:
        return report(results, missing=list(missing or []), started=started, history=history, target_group=target_group)
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise AnsibleFilterError("%s: %s" % (FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"fleet_report": fleet_report}
