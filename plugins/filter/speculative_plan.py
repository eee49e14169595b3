# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: speculative_plan
short_description: Plan vLLM speculative decoding for one Jetson host
version_added: 0.1.0
author:
  - jetson_llm.speculative contributors
description:
  - Decides whether speculative decoding should be enabled on a host, with which method
    (C(eagle3) or C(draft_model)), which speculator model, how many speculative tokens and which
    C(--gpu-memory-utilization), from the host's Jetson facts, the served model, the baseline serve
    settings and the expected concurrency.
  - EAGLE-3 is preferred where a head is published for the target's family, then a same-family
    draft model (vLLM 0.15 or later). Drafts whose vocabulary size differs from the target's are
    refused with vLLM's own message.
  - The memory decision is computed from the live figures in the facts - target weights,
    speculator weights, the KV cache of one O(max_model_len) sequence and an overhead of
    0.5 GB plus 5 % of the weights must fit in the new utilization times total memory; vLLM's
    startup check must pass and at least O(min_headroom_gb) must stay free.
  - Orin NX and Orin Nano are skipped unless O(overrides.force=true) and the budget fits; Xavier and
    unknown boards are always skipped. An expected concurrency at or above
    O(overrides.max_concurrency) (default 8) is skipped; 3 to 7 is planned with a warning.
  - Invalid input (for example an override of the wrong type) fails with a message naming the host,
    the variable, the value and what is allowed.
options:
  _input:
    description:
      - The host's Jetson facts (C(ansible_facts.jetson) as returned by
        M(jetson_llm.speculative.jetson_facts)). Used keys are C(family), C(memory.total_mb),
        C(memory.available_mb), C(speculation_supported), C(speculation_reason) and C(l4t.major).
    type: dict
    required: true
  target_model:
    description:
      - The model vLLM serves, as a Hugging Face repository id or an absolute local path. It must be
        a target in the catalog (built-in or added with O(catalog)).
    type: str
    required: true
  serve:
    description:
      - The baseline serve settings.
    type: dict
    required: true
    suboptions:
      gpu_memory_utilization:
        description: Baseline C(--gpu-memory-utilization).
        type: float
        required: true
      max_model_len:
        description: C(--max-model-len).
        type: int
        required: true
      max_num_seqs:
        description: C(--max-num-seqs).
        type: int
      tensor_parallel_size:
        description: C(--tensor-parallel-size).
        type: int
        default: 1
      vllm_version:
        description:
          - Installed vLLM version (C(vllm --version)). The speculative configuration depends on it;
            an unknown version skips the plan.
        type: str
      running:
        description:
          - Whether the baseline server runs now. Its reservation (baseline utilization times total
            memory) is then counted as available again at restart.
        type: bool
        default: false
  concurrency:
    description:
      - Expected number of concurrent requests on the host.
    type: int
    required: true
  catalog:
    description:
      - Extra catalog entries, keyed by model id, with the same schema as the built-in catalog
        (C(kind), C(family), C(model_type), C(quantization), C(weights_gb), C(vocab_size),
        C(num_hidden_layers), C(num_key_value_heads), C(head_dim), C(max_position_embeddings),
        optional C(preference) and C(notes); C(checkpoint_format) for C(eagle3_head) entries,
        C(draft_for) for C(draft) entries). Entries are validated strictly and replace built-in
        entries with the same id.
    type: dict
  overrides:
    description:
      - Per-host overrides, keyed without the C(speculative_decoding_) prefix. A null value means
        "not set". Booleans must be real booleans and numbers real numbers.
    type: dict
    suboptions:
      enabled:
        description: C(false) skips the host.
        type: bool
      force:
        description: Plan on Orin NX / Orin Nano when the memory budget fits.
        type: bool
      method:
        description: Speculation method.
        type: str
        choices: [eagle3, draft_model]
      model:
        description: Speculator model id (must be in the catalog).
        type: str
      num_speculative_tokens:
        description: Number of speculative tokens, 1 to 15 (default 5 on Thor, 3 on Orin).
        type: int
      draft_tensor_parallel_size:
        description: 1 or the target tensor parallel size.
        type: int
      gpu_memory_utilization:
        description: New utilization, 0.05 to 0.95 (default baseline - 0.05).
        type: float
      min_gain:
        description: Minimum gain (fraction) the benchmark verdict asks for; validated here.
        type: float
      max_concurrency:
        description: Expected concurrency at which speculation is skipped (default 8).
        type: int
  host:
    description:
      - Host name used in messages, normally C(inventory_hostname).
    type: str
    default: ""
  min_headroom_gb:
    description:
      - Memory (GB) that must stay free beyond vLLM's reservation at restart.
    type: float
    default: 2.0
  weights:
    description:
      - What the device holds where vLLM will read it, as M(jetson_llm.speculative.vllm_weights_info) returns it
        (C(hub), C(repos), C(paths)); null when not looked at (vLLM may download what is missing).
      - The served model missing skips the plan (RV(_value.target_present) false); a speculator missing is not
        planned, the next one that fits is, and the reason says where the files should be and how to fetch them.
    type: dict
seealso:
  - module: jetson_llm.speculative.vllm_weights_info
  - plugin: jetson_llm.speculative.vllm_serve_config
    plugin_type: filter
"""

EXAMPLES = r"""
---
- name: Plan speculative decoding for this host
  ansible.builtin.set_fact:
    __plan: >-
      {{ ansible_facts.jetson | jetson_llm.speculative.speculative_plan(
           target_model='meta-llama/Llama-3.1-8B-Instruct',
           serve={'gpu_memory_utilization': 0.75, 'max_model_len': 8192, 'max_num_seqs': 8,
                  'tensor_parallel_size': 1, 'vllm_version': '0.20.2', 'running': true},
           concurrency=1,
           overrides={'num_speculative_tokens': speculative_decoding_num_speculative_tokens | default(none)},
           host=inventory_hostname) }}

- name: Report the decision
  ansible.builtin.debug:
    msg: "{{ __plan.decision }}: {{ __plan.reason }}"
"""

RETURN = r"""
_value:
  description:
    - The plan.
  type: dict
  contains:
    decision:
      description: C(enabled) or C(skipped).
      type: str
    reason:
      description: Human-readable reason, always set.
      type: str
    method:
      description: C(eagle3), C(draft_model) or null when skipped.
      type: str
    model:
      description: Speculator model id, null when skipped.
      type: str
    num_speculative_tokens:
      description: Number of speculative tokens, null when skipped.
      type: int
    draft_tensor_parallel_size:
      description: Draft tensor parallel size, null when skipped.
      type: int
    gpu_memory_utilization:
      description: The utilization to serve with (the baseline when skipped).
      type: float
    baseline_gpu_memory_utilization:
      description: The baseline utilization.
      type: float
    speculative_config:
      description: The C(--speculative-config) mapping for the vLLM version, null when skipped.
      type: dict
    budget:
      description:
        - Memory figures in GB (10^9 bytes, 2 decimals); null where not computed. Keys
          C(total_gb), C(available_gb), C(target_weights_gb), C(speculator_weights_gb),
          C(kv_cache_gb), C(headroom_gb), C(required_gb), C(overhead_gb), C(reclaimable_gb),
          C(available_at_restart_gb), C(allowed_gb), C(min_headroom_gb).
      type: dict
    target_present:
      description: Whether the served model's files are where vLLM reads them (O(weights)); null when not looked at.
      type: bool
    warnings:
      description: Warnings about the plan.
      type: list
      elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.planner import DEFAULT_MIN_HEADROOM_GB, plan
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._values import plain as _plain

_FQCN = "jetson_llm.speculative.speculative_plan"


def speculative_plan_filter(
    facts,
    target_model=None,
    serve=None,
    concurrency=None,
    *,
    catalog=None,
    overrides=None,
    host="",
    min_headroom_gb=DEFAULT_MIN_HEADROOM_GB,
    weights=None,
):
    if not isinstance(facts, dict):
        raise AnsibleFilterError("The input of the {} filter must be a dictionary (ansible_facts.jetson); got {}".format(_FQCN, type(facts).__name__))
    try:
        return plan(
            _plain(facts),
            _plain(target_model),
            _plain(serve),
            _plain(concurrency),
            catalog=_plain(catalog),
            overrides=_plain(overrides),
            host=str(host or ""),
            min_headroom_gb=_plain(min_headroom_gb),
            weights=_plain(weights),
        )
    except SpecdecError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"speculative_plan": speculative_plan_filter}
