# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: smaller_speculators
short_description: Speculators for a target that are smaller than the one in use
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Lists the EAGLE-3 heads and draft models the catalog pairs with the target model whose weights
    are smaller than those of O(current), smallest last-resort first by preference and size.
  - This is the second step of the published out-of-memory ladder (lower the utilization, then use a
    smaller draft, then give up). Each candidate still goes through the planner, which refuses
    incompatible pairs.
options:
  _input:
    description: Target model id.
    type: str
    required: true
  current:
    description: Speculator in use.
    type: str
    required: true
  catalog:
    description: Extra catalog entries.
    type: dict
"""

EXAMPLES = r"""
- name: Smaller speculators for Llama-3.1-8B
  ansible.builtin.debug:
    msg: "{{ 'meta-llama/Llama-3.1-8B-Instruct' | jetson_llm.speculative.smaller_speculators(current='meta-llama/Llama-3.2-1B-Instruct') }}"
"""

RETURN = r"""
_value:
  description: Speculator model ids, preferred first.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._catalog import (
    CatalogError,
    drafts_for,
    eagle3_heads,
    merged_catalog,
)

_FQCN = "jetson_llm.speculative.smaller_speculators"


def smaller_speculators(target, current, catalog=None):
    try:
        cat = merged_catalog(dict(catalog) if catalog else None)
    except CatalogError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc
    entry = cat.get(target)
    if entry is None:
        return []
    family = entry["family"]
    limit = cat[current]["weights_gb"] if current in cat else float("inf")
    out = []
    for mid in eagle3_heads(cat, family) + drafts_for(cat, family):
        if mid != current and cat[mid]["weights_gb"] < limit and mid not in out:
            out.append(mid)
    return out


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"smaller_speculators": smaller_speculators}
