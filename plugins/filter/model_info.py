# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: model_info
short_description: Look a model up in the collection's model catalog
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Returns the catalog entry of a model (kind, family, weights in GB, vocabulary size, layer shape),
    or an empty dict for a model the catalog does not know.
  - Used to derive readiness timeouts from the model size and to report what is served.
options:
  _input:
    description: Model id (Hugging Face repository id or absolute local path).
    type: str
    required: true
  catalog:
    description: Extra catalog entries, in the schema of the built-in catalog, that take precedence.
    type: dict
"""

EXAMPLES = r"""
- name: Weights of the served model
  ansible.builtin.debug:
    msg: "{{ ('meta-llama/Llama-3.1-8B-Instruct' | jetson_llm.speculative.model_info).weights_gb }}"
"""

RETURN = r"""
_value:
  description: The catalog entry, or an empty dict.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._catalog import (
    CatalogError,
    merged_catalog,
)

_FQCN = "jetson_llm.speculative.model_info"


def model_info(model, catalog=None):
    if not isinstance(model, str):
        raise AnsibleFilterError("The input of the {} filter must be a model id string".format(_FQCN))
    try:
        cat = merged_catalog(dict(catalog) if catalog else None)
    except CatalogError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc
    return dict(cat.get(model, {}))


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"model_info": model_info}
