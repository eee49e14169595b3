#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Licensed under the Apache License 2.0, or at your option under the
# GNU General Public License version 3 or later (see https://www.gnu.org/licenses/gpl-3.0.txt).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_weights_info
short_description: Which models' files are where vLLM will read them on the device
version_added: 0.1.0
description:
  - vLLM in offline mode (C(HF_HUB_OFFLINE=1)) loads a Hugging Face repository id only from the hub cache, and a
    local path only when it holds a C(config.json). This module looks before any restart, so that a model whose
    files are missing is a reason given up front instead of a server that does not start.
  - A repository id is present when C(<hub>/models--ORG--NAME/refs/main) names a snapshot whose C(config.json)
    exists (the resolution of C(huggingface_hub) for revision C(main)), where C(<hub>) is O(hub_cache), or
    O(hf_home)C(/hub).
  - Lists every repository id present in the cache (RV(repos)), and answers for each local path of O(paths).
  - Reads only.
author:
  - Jetson LLM maintainers (@jetson-llm)
extends_documentation_fragment:
  - jetson_llm.speculative._attributes
  - jetson_llm.speculative._attributes.info_module
attributes:
  platform:
    support: full
    platforms: posix
  action_group:
    description: Use C(group/jetson_llm.speculative.vllm) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - jetson_llm.speculative.vllm
options:
  hf_home:
    description: The C(HF_HOME) vLLM runs with, as a path on the device (for a container, the host directory mounted as its cache).
    type: path
    default: /root/.cache/huggingface
  hub_cache:
    description: C(HF_HUB_CACHE) when vLLM runs with one; default O(hf_home)C(/hub).
    type: path
  paths:
    description: Local model directories to look at (absolute paths).
    type: list
    elements: path
    default: []
"""

EXAMPLES = r"""
- name: Which models can vLLM load offline on this device?
  jetson_llm.speculative.vllm_weights_info:
    hf_home: /var/lib/vllm/.cache/huggingface
    paths: [/opt/models/llama31-8b-eagle3]
  register: weights

- name: Say whether the served model is there
  ansible.builtin.debug:
    msg: "{{ 'meta-llama/Llama-3.1-8B-Instruct' in weights.repos }}"
"""

RETURN = r"""
hub:
  description: The hub cache directory looked at.
  returned: always
  type: str
  sample: /root/.cache/huggingface/hub
repos:
  description: Every repository id whose snapshot for C(main) has a C(config.json), sorted.
  returned: always
  type: list
  elements: str
  sample: [meta-llama/Llama-3.1-8B-Instruct, yuhuili/EAGLE3-LLaMA3.1-Instruct-8B]
paths:
  description: For each path of O(paths), whether it holds a C(config.json).
  returned: always
  type: dict
  sample: {/opt/models/llama31-8b-eagle3: true}
"""

import os

from ansible.module_utils.basic import AnsibleModule


def repo_id(dirname):
    """``models--ORG--NAME`` -> ``ORG/NAME`` (None for other entries of the cache)."""
    if not dirname.startswith("models--"):
        return None
    parts = dirname[len("models--") :].split("--", 1)
    return "/".join(parts) if len(parts) == 2 and all(parts) else None


def snapshot(base, revision="main"):
    """The snapshot directory ``revision`` resolves to under a repository's cache directory, when it has a config.json."""
    try:
        with open(os.path.join(base, "refs", revision)) as handle:
            commit = handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not commit or "/" in commit or commit in (".", ".."):
        return None
    snap = os.path.join(base, "snapshots", commit)
    return snap if os.path.isfile(os.path.join(snap, "config.json")) else None


def present_repos(hub):
    try:
        names = os.listdir(hub)
    except OSError:
        return []
    found = []
    for name in names:
        rid = repo_id(name)
        if rid and snapshot(os.path.join(hub, name)):
            found.append(rid)
    return sorted(found)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hf_home=dict(type="path", default="/root/.cache/huggingface"),
            hub_cache=dict(type="path"),
            paths=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    hub = module.params["hub_cache"] or os.path.join(module.params["hf_home"], "hub")
    paths = {}
    for path in module.params["paths"]:
        if not os.path.isabs(path):
            module.fail_json(msg="paths: %r is not an absolute path" % path)
        paths[path] = os.path.isfile(os.path.join(path, "config.json"))
    module.exit_json(changed=False, hub=hub, repos=present_repos(hub), paths=paths)


if __name__ == "__main__":
    main()
