# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: vllm_serve_argv
short_description: Command line of the vLLM service, native or in a container
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Builds the argument list that runs C(vllm serve --config FILE) on a device, natively or through a
    container engine, for use in a systemd unit through P(jetson_llm.speculative.systemd_quote#filter).
  - For the upstream image (C(vllm/vllm-openai), whose entrypoint is C(vllm serve)) only the arguments
    after C(vllm serve) follow the image; for the Jetson images the entrypoint is set to C(vllm) and
    C(serve) follows, so the command is right whatever the image's own entrypoint is.
  - Secrets never appear in the arguments; containers get them from an environment file.
options:
  _input:
    description: Serve settings (C(vllm_bin), C(engine_bin), C(container_name), C(oci_runtime),
      C(hf_cache_dir), C(env_file), C(family), C(model)).
    type: dict
    required: true
  config_path:
    description: Path of the rendered configuration file (must end in C(.yaml) or C(.yml)).
    type: str
    required: true
  runtime:
    description: C(native), C(docker) or C(podman).
    type: str
    default: native
  image:
    description: Container image reference (container runtimes only).
    type: str
  image_flavor:
    description: C(upstream) or C(jetson).
    type: str
    default: upstream
  plan:
    description: A plan from P(jetson_llm.speculative.speculative_plan#filter); local speculator paths are mounted.
    type: dict
  host:
    description: Host name used in error messages.
    type: str
"""

EXAMPLES = r"""
- name: ExecStart value for a native install
  ansible.builtin.debug:
    msg: "{{ {'vllm_bin': '/usr/local/bin/vllm'} | jetson_llm.speculative.vllm_serve_argv(config_path='/etc/vllm/serve.yaml')
      | jetson_llm.speculative.systemd_quote }}"
"""

RETURN = r"""
_value:
  description: The argument list.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.argv import serve_argv

_FQCN = "jetson_llm.speculative.vllm_serve_argv"


def vllm_serve_argv(serve, config_path, runtime="native", image=None, image_flavor="upstream", plan=None, host=""):
    if not isinstance(serve, dict):
        raise AnsibleFilterError("The input of the {} filter must be a dict of serve settings".format(_FQCN))
    try:
        return serve_argv(
            dict(serve),
            str(config_path),
            str(runtime),
            image=None if image is None else str(image),
            image_flavor=str(image_flavor),
            plan=dict(plan) if isinstance(plan, dict) else None,
            host=str(host or ""),
        )
    except SpecdecError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"vllm_serve_argv": vllm_serve_argv}
