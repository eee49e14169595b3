# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: speculative_overrides
short_description: Validate a host's speculative-decoding overrides before any host is touched
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Takes a host's variables (for example C(hostvars[host])), picks the per-host overrides
    C(speculative_decoding_enabled), C(_force), C(_method), C(_model), C(_num_speculative_tokens),
    C(_draft_tensor_parallel_size), C(_gpu_memory_utilization), C(_min_gain) and C(_max_concurrency),
    and validates them with the planner's own rules.
  - Any other variable that starts with the prefix and is not in O(known) is refused as unknown, so
    that a misspelt override cannot be silently ignored.
  - Errors name the host, the variable, the value and what is allowed.
options:
  _input:
    description: The host's variables.
    type: dict
    required: true
  host:
    description: Host name for the messages.
    type: str
  known:
    description: Other variable names with the prefix that are valid (the role's settings).
    type: list
    elements: str
  prefix:
    description: Variable prefix.
    type: str
    default: speculative_decoding_
"""

EXAMPLES = r"""
- name: Validate every host's overrides on the controller
  ansible.builtin.debug:
    msg: "{{ hostvars[item] | jetson_llm.speculative.speculative_overrides(host=item) }}"
  loop: "{{ groups['all'] }}"
"""

RETURN = r"""
_value:
  description: The overrides that are set, normalised (unset ones left out).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import OVERRIDE_KEYS, SpecdecError, validate_overrides

_FQCN = "jetson_llm.speculative.speculative_overrides"


def speculative_overrides(variables, host="", known=None, prefix="speculative_decoding_"):
    if not isinstance(variables, dict):
        try:
            variables = dict(variables)
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError("The input of the {} filter must be a dict of variables".format(_FQCN)) from exc
    host = str(host or "")
    where = "host {}: ".format(host) if host else ""
    allowed = set(prefix + key for key in OVERRIDE_KEYS) | set(known or [])
    unknown = sorted(str(name) for name in variables if str(name).startswith(prefix) and str(name) not in allowed)
    if unknown:
        raise AnsibleFilterError(
            "{}{}: unknown variable {}; known variables: {}".format(
                _FQCN, where.rstrip(": ") and " " + where.rstrip(": "), ", ".join(unknown), ", ".join(sorted(allowed))
            )
        )
    overrides = dict((key, variables[prefix + key]) for key in OVERRIDE_KEYS if prefix + key in variables)
    try:
        return validate_overrides(overrides, host=host, var_prefix=prefix)
    except SpecdecError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"speculative_overrides": speculative_overrides}
