# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: speculative_textfile
short_description: A device's speculative-decoding decision and last acceptance in the Prometheus text format
version_added: 0.1.0
author:
  - jetson_llm.speculative contributors
description:
  - Formats the decision recorded on a device (its C(state.json)) in the Prometheus text exposition
    format 0.0.4, for node_exporter's textfile collector.
  - Every metric name starts with C(jetson_llm_speculative_) and has C(# HELP) and C(# TYPE) lines.
    Label values are escaped as the format requires (backslash, double quote and line feed).
  - Families - C(decision) (one series per decision keep, revert, skip, failed, none; 1 for the current
    one), C(info) (label, model, method, speculator, vLLM version; value 1), C(num_speculative_tokens)
    (kept configurations), C(decided_timestamp_seconds), C(acceptance_rate) and C(acceptance_length)
    (label C(source) - C(verify) when verify_speculation measured it, else C(trial)),
    C(acceptance_timestamp_seconds), C(gain_ratio) (C(source) trial and verify) and
    C(verify_timestamp_seconds) (label C(action)).
options:
  _input:
    description: The recorded decision (the content of C(state.json)), with its C(verify) entry when verify ran.
    type: dict
    required: true
  host:
    description: Value of the C(host) label, normally C(inventory_hostname).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Export the decision for node_exporter
  ansible.builtin.copy:
    content: "{{ state | jetson_llm.speculative.speculative_textfile(host=inventory_hostname) }}"
    dest: /var/lib/node_exporter/textfile_collector/jetson_llm_speculative.prom
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The exposition text, ending with a line feed.
  type: string
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._dayafter import DayTwoError, textfile

_FQCN = "jetson_llm.speculative.speculative_textfile"


def speculative_textfile(state, host):
    if state is not None and not isinstance(state, dict):
        raise AnsibleFilterError("{}: the input must be the recorded decision (a dict); got {}".format(_FQCN, type(state).__name__))
    try:
        return textfile(state or {}, host)
    except DayTwoError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"speculative_textfile": speculative_textfile}
