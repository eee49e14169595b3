# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: vllm_service_files
short_description: The vLLM service's files that depend on the configuration served
version_added: 0.2.0
author:
  - jetson_llm.speculative contributors
description:
  - Renders the C(vllm serve --config) file (as P(jetson_llm.speculative.vllm_serve_config#filter)) and the
    systemd unit of one configuration, the baseline or a speculative plan.
  - The unit's C(ExecStart=) runs C(vllm serve --config FILE) natively or through a container engine
    (quoted as P(jetson_llm.speculative.systemd_quote#filter) does). For the upstream image
    (C(vllm/vllm-openai), whose entrypoint is C(vllm serve)) only the arguments after C(vllm serve) follow
    the image; for the Jetson images the entrypoint is set to C(vllm). A container mounts the configuration
    directory read-only, the Hugging Face cache, and every model at a local path (the served model, the
    speculator of the plan) read-only at its own path. Secrets never appear on the command line.
  - The one renderer of these files; the C(vllm_server) role writes its output, and the trial's action
    plugin P(jetson_llm.speculative.speculative_trial#module) writes the same for every configuration it
    starts, so a container's mount of a speculator at a local path is there in every configuration.
  - The environment file (secrets) does not depend on the configuration and is not part of the output.
  - The output is deterministic (same input, same bytes).
options:
  _input:
    description: The serve settings (C(vllm_server_result.serve)).
    type: dict
    required: true
  unit:
    description:
      - What the unit needs besides the serve settings (C(vllm_server_result.server.unit)), with the keys
        C(unit_path), C(config_path), C(env_file), C(runtime), C(engine), C(container_name),
        C(image), C(image_flavor), C(runtime_dir), C(start_record), C(start_record_files), C(user),
        C(user_home), C(sandbox), C(read_write_paths).
    type: dict
    required: true
  plan:
    description: A plan from P(jetson_llm.speculative.speculative_plan#filter); only an enabled plan adds speculation.
    type: dict
  host:
    description: Host name used in error messages.
    type: str
"""

EXAMPLES = r"""
- name: Write the files of the configuration
  ansible.builtin.copy:
    content: "{{ item.content }}"
    dest: "{{ item.path }}"
    mode: "{{ item.mode }}"
  loop: "{{ vllm_server_result.serve | jetson_llm.speculative.vllm_service_files(unit=vllm_server_result.server.unit) }}"
  loop_control:
    label: "{{ item.path }}"
"""

RETURN = r"""
_value:
  description: The files, the configuration first, then the unit; each with C(path), C(content) and C(mode).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.unit import service_files
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._values import plain

_FQCN = "jetson_llm.speculative.vllm_service_files"


def vllm_service_files(serve, unit=None, plan=None, host=""):
    if not isinstance(serve, dict):
        raise AnsibleFilterError("The input of the {} filter must be a dict of serve settings".format(_FQCN))
    try:
        return service_files(plain(dict(serve)), plain(unit), plain(plan) if isinstance(plan, dict) else None, host=str(host or ""))
    except SpecdecError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"vllm_service_files": vllm_service_files}
