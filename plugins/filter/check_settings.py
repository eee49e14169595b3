# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: check_settings
short_description: Every error in a host's settings of a role, or in the rollout pacing
version_added: 0.2.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Checks a host's variables against the settings of the C(vllm_server) or C(speculative_decoding)
    role (type, choices and default from the role's C(meta/argument_specs.yml), plus ranges, safe
    names and paths), or the rollout pacing (C(jetson_llm_serial), C(jetson_llm_max_fail_percentage)).
  - A value with a control character (a line break in a token, for example) is refused wherever it
    appears, also inside lists and mappings, so it can never reach a file on a device.
  - Unknown variables with the role's prefix are refused (a misspelt setting would silently do nothing).
  - Returns the list of messages, empty when every value is allowed. Each message names the host, the
    variable, the value (secrets masked) and what is allowed.
  - The collection's preflight play runs it for every device before any device is touched, and each
    role runs it again before it renders anything.
options:
  _input:
    description:
      - The host's variables, for example C(hostvars[host]). Settings it lacks take the role's default.
      - For O(scope=pacing), the playbooks' own settings C(jetson_llm_serial), C(jetson_llm_max_fail_percentage),
        C(jetson_llm_target_group), C(jetson_llm_canary_group) and C(jetson_llm_tune_on_canaries).
    type: dict
    required: true
  scope:
    description: Which settings to check.
    type: str
    required: true
    choices: [vllm_server, speculative_decoding, pacing]
  host:
    description: Host name for the messages.
    type: str
  run:
    description:
      - For O(scope=pacing) with O(host), the pacing the run uses (C(serial), C(max_fail_percentage));
        a device whose own variables set other values is refused, since pacing applies to the whole run.
    type: dict
"""

EXAMPLES = r"""
- name: Refuse bad settings of every device before any device is touched
  ansible.builtin.assert:
    that: __errors | length == 0
    fail_msg: "{{ __errors | join('; ') }}"
  vars:
    __errors: "{{ hostvars[item] | jetson_llm.speculative.check_settings(scope='vllm_server', host=item) }}"
  loop: "{{ groups['specdec_fleet'] }}"
"""

RETURN = r"""
_value:
  description: One message per offending variable; empty when every value is allowed.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._settings import (
    ROLES,
    check_pacing_scope,
    check_playbook,
    check_role,
)

_FQCN = "jetson_llm.speculative.check_settings"


def check_settings(variables, scope, host="", run=None):
    try:
        variables = dict(variables)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("{}: the input must be a mapping of variables".format(_FQCN)) from exc
    if scope == "pacing" and run is not None:
        run = dict(run)
        return check_pacing_scope(
            variables,
            {"jetson_llm_serial": run.get("serial"), "jetson_llm_max_fail_percentage": run.get("max_fail_percentage")},
            host=str(host or ""),
        )
    if scope == "pacing":
        return check_playbook(variables)
    if scope not in ROLES:
        raise AnsibleFilterError("{}: scope={!r}; expected one of {}, pacing".format(_FQCN, scope, ", ".join(ROLES)))
    return check_role(scope, variables, host=str(host or ""))


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"check_settings": check_settings}
