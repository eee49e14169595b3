# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_timing
short_description: Where the time of a speculative-decoding rollout went
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - From the per-host results, the wall time of the run and the part of it in which at least one device was
    restarting vLLM (until ready) or benchmarking; the rest of the wall time is Ansible's own overhead.
  - Overlapping intervals of different hosts count once, so C(waiting_seconds) never exceeds the wall time.
options:
  _input:
    description: Per-host results (C(hostvars[host].__speculative_decoding_result)).
    type: list
    elements: dict
    required: true
  started:
    description: Start of the run, seconds since the epoch. Without it the wall time and the shares are null.
    type: float
"""

EXAMPLES = r"""
- name: Print the timing
  ansible.builtin.debug:
    msg: "{{ (results | jetson_llm.speculative.fleet_timing(started=jetson_llm_run_started)).text }}"
"""

RETURN = r"""
_value:
  description:
    - C(wall_s), C(waiting_seconds), C(restart_seconds), C(benchmark_seconds), C(waiting_share),
      C(ansible_overhead_share) and C(text), a one-line summary.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._report import timing

FQCN = "jetson_llm.speculative.fleet_timing"


def fleet_timing(results, started=None):
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise AnsibleFilterError("%s: the input must be a list of per-host results" % FQCN)
    try:
        return timing(results, started=started)
    except (TypeError, ValueError, IndexError) as exc:
        raise AnsibleFilterError("%s: %s" % (FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"fleet_timing": fleet_timing}
