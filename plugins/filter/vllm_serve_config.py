# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: vllm_serve_config
short_description: Render the YAML file for vllm serve --config
version_added: 0.1.0
author:
  - jetson_llm.speculative contributors
description:
  - Renders the configuration file read by C(vllm serve --config FILE) from the serve settings and,
    optionally, a plan from P(jetson_llm.speculative.speculative_plan#filter).
  - Keys are vLLM's long option names (C(model), C(host), C(port), C(served-model-name),
    C(gpu-memory-utilization), C(max-model-len), C(max-num-seqs), C(tensor-parallel-size),
    C(speculative-config)), in that order; settings that are not given are left out.
  - With an enabled plan the plan's utilization is written and C(speculative-config) is a JSON
    string (sorted keys, no spaces) holding only keys the vLLM version knows, so every vLLM release
    parses it whether or not it maps nested YAML mappings.
  - Secrets are never written; vLLM reads C(VLLM_API_KEY) and C(HF_TOKEN) from its environment.
  - The output is deterministic (same input, same bytes) and needs no YAML library on the device;
    every string is double-quoted.
options:
  _input:
    description:
      - The serve settings.
    type: dict
    required: true
    suboptions:
      model:
        description: Served model, a Hugging Face repository id or an absolute local path.
        type: str
        required: true
      host:
        description: Address vLLM binds to.
        type: str
      port:
        description: Port vLLM listens on.
        type: int
      served_model_name:
        description: Name the API reports for the model.
        type: str
      gpu_memory_utilization:
        description: Baseline C(--gpu-memory-utilization).
        type: float
        required: true
      max_model_len:
        description: C(--max-model-len).
        type: int
      max_num_seqs:
        description: C(--max-num-seqs).
        type: int
      tensor_parallel_size:
        description: C(--tensor-parallel-size).
        type: int
      vllm_version:
        description: Installed vLLM version; required with an enabled plan.
        type: str
  plan:
    description:
      - A plan from P(jetson_llm.speculative.speculative_plan#filter). Without it, or with a skipped
        plan, the baseline configuration is rendered.
    type: dict
  host:
    description:
      - Host name used in error messages, normally C(inventory_hostname).
    type: str
    default: ""
seealso:
  - plugin: jetson_llm.speculative.speculative_plan
    plugin_type: filter
  - plugin: jetson_llm.speculative.systemd_quote
    plugin_type: filter
"""

EXAMPLES = r"""
---
- name: Write the vLLM configuration file
  ansible.builtin.copy:
    dest: /etc/vllm/serve.yaml
    content: "{{ vllm_serve | jetson_llm.speculative.vllm_serve_config(plan=__plan, host=inventory_hostname) }}"
    mode: "0644"
  vars:
    vllm_serve:
      model: meta-llama/Llama-3.1-8B-Instruct
      host: 127.0.0.1
      port: 8000
      gpu_memory_utilization: 0.75
      max_model_len: 8192
      vllm_version: "0.20.2"
"""

RETURN = r"""
_value:
  description:
    - The YAML text, ending in a newline.
  type: string
  sample: |
    # vllm serve --config file rendered by jetson_llm.speculative; local changes are overwritten.
    model: "meta-llama/Llama-3.1-8B-Instruct"
    gpu-memory-utilization: 0.7
    max-model-len: 8192
    speculative-config: "{\"draft_tensor_parallel_size\":1,\"method\":\"eagle3\",\"model\":\"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\",\
      \"num_speculative_tokens\":5}"
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.config import serve_config_yaml
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._values import plain as _plain

_FQCN = "jetson_llm.speculative.vllm_serve_config"


def vllm_serve_config_filter(serve, plan=None, host=""):
    if not isinstance(serve, dict):
        raise AnsibleFilterError("The input of the {} filter must be a dictionary of serve settings; got {}".format(_FQCN, type(serve).__name__))
    try:
        return serve_config_yaml(_plain(serve), _plain(plan), host=str(host or ""))
    except SpecdecError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"vllm_serve_config": vllm_serve_config_filter}
