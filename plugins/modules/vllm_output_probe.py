#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Licensed under the Apache License 2.0, or at your option under the
# GNU General Public License version 3 or later (see https://www.gnu.org/licenses/gpl-3.0.txt).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_output_probe
short_description: Prove that a vLLM server still answers with the baseline's text
version_added: 0.1.0
description:
  - Sends a fixed set of probe prompts (one of each kind of the shipped prompt set in turn,
    chat, summarisation, code, structured output, translation, rewriting) to a running vLLM
    server on the managed host, one at a time, at temperature 0, and returns the answers.
  - With O(expected), the answers of an earlier probe of the baseline configuration, it compares
    them prompt by prompt. Speculative decoding is lossless up to the precision of hardware numerics
    (vLLM documentation), so a speculative configuration answers with the baseline's text, except that
    numerics may change an answer now and then. The rule is the one of vLLM's own correctness tests of
    every speculative method, the outputs agree when more than O(min_match_fraction) of the prompts
    return exactly the baseline's text.
  - The module changes nothing and never fails because the outputs differ; it returns C(agree=false)
    and the caller decides (the role C(speculative_decoding) reverts with the reason "outputs differ").
    It fails when the server is not ready or a probe request fails.
author:
  - Jetson LLM maintainers (@jetson-llm)
extends_documentation_fragment:
  - jetson_llm.speculative._attributes
attributes:
  check_mode:
    support: partial
    details:
      - In check mode the module sends no request and returns C(skipped=true).
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
  action_group:
    description: Use C(group/jetson_llm.speculative.vllm) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - jetson_llm.speculative.vllm
options:
  url:
    description: Base URL of the vLLM server, without C(/v1).
    type: str
    default: http://127.0.0.1:8000
  model:
    description: Served model id (what C(GET /v1/models) lists); the first listed id when unset.
    type: str
  api_key:
    description: API key of the server (C(vllm serve --api-key)), sent as a bearer token.
    type: str
  endpoint:
    description: C(chat) (C(/v1/chat/completions)) or C(completions) (C(/v1/completions)).
    type: str
    choices: [chat, completions]
    default: chat
  count:
    description: Number of probe prompts, between 3 and 24.
    type: int
    default: 6
  output_len:
    description: Most tokens per answer (the answer may end earlier), between 8 and 512.
    type: int
    default: 64
  expected:
    description:
      - The C(outputs) of an earlier probe (of the baseline configuration) to compare with.
      - Each element needs C(id) and C(text); C(kind) and C(error) are read when present.
    type: list
    elements: dict
  min_match_fraction:
    description: The outputs agree when more than this fraction of the probes match exactly. Between 0 and 1, exclusive.
    type: float
    default: 0.66
  timeout:
    description: Seconds allowed for one probe request.
    type: float
    default: 120.0
  ready_timeout:
    description: Seconds to wait for the server to be ready before the first probe.
    type: float
    default: 60.0
notes:
  - The requests are not streamed and are sent one after the other (batch size 1, the most
    reproducible shape), with C(seed=0) and without C(ignore_eos), so an answer ends where the model ends it.
seealso:
  - module: jetson_llm.speculative.vllm_benchmark
"""

EXAMPLES = r"""
- name: Probe the baseline
  jetson_llm.speculative.vllm_output_probe:
    model: meta-llama/Llama-3.1-8B-Instruct
  register: baseline_outputs

# ... switch the server to the speculative configuration ...

- name: Compare the speculative configuration's answers with the baseline's
  jetson_llm.speculative.vllm_output_probe:
    model: meta-llama/Llama-3.1-8B-Instruct
    expected: "{{ baseline_outputs.outputs }}"
  register: probe

- name: Stop when the answers changed
  ansible.builtin.fail:
    msg: "outputs differ: {{ probe.summary }}"
  when: not probe.agree
"""

RETURN = r"""
model:
  description: The served model id that was probed.
  returned: success
  type: str
outputs:
  description: One entry per probe prompt, in the order sent.
  returned: success
  type: list
  elements: dict
  contains:
    id:
      description: Id of the prompt in the shipped set.
      type: str
    kind:
      description: Kind of the prompt (chat, summarize, code, structured, translate, rewrite).
      type: str
    text:
      description: The answer.
      type: str
    sha256:
      description: SHA-256 of the answer's UTF-8 text.
      type: str
    output_tokens:
      description: Tokens generated, from the answer's C(usage); null when absent.
      type: int
    error:
      description: Empty, or why the request failed.
      type: str
agree:
  description: Whether the outputs agree with O(expected) (null without O(expected)).
  returned: success
  type: bool
matches:
  description: Probes whose answer equals the expected one exactly (null without O(expected)).
  returned: success
  type: int
required:
  description: Matches needed for C(agree) (null without O(expected)).
  returned: success
  type: int
differing:
  description: The probes that differ, with C(id), C(kind), C(at) (first differing character), C(expected) and C(got) (text around it).
  returned: success
  type: list
  elements: dict
summary:
  description: One line saying how many answers matched and where the first one differs.
  returned: success
  type: str
rule:
  description: The comparison rule in words.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import probe as _probe
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import BenchError, Server, wait_ready


def validate(params):
    errors = []
    if not 3 <= params["count"] <= 24:
        errors.append("count must be between 3 and 24, got %d" % params["count"])
    if not 8 <= params["output_len"] <= 512:
        errors.append("output_len must be between 8 and 512, got %d" % params["output_len"])
    if not 0.0 < params["min_match_fraction"] < 1.0:
        errors.append("min_match_fraction must be between 0 and 1 (exclusive), got %s" % params["min_match_fraction"])
    if params["timeout"] <= 0 or params["ready_timeout"] < 0:
        errors.append("timeout must be > 0 and ready_timeout >= 0")
    for i, item in enumerate(params["expected"] or []):
        if not isinstance(item.get("id"), str) or not isinstance(item.get("text", ""), str):
            errors.append("expected[%d] needs id and text as strings" % i)
    if params["expected"] is not None and not params["expected"]:
        errors.append("expected is empty: pass the outputs of an earlier probe")
    return errors


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:8000"),
            model=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            endpoint=dict(type="str", default="chat", choices=["chat", "completions"]),
            count=dict(type="int", default=_probe.PROBE_COUNT),
            output_len=dict(type="int", default=_probe.PROBE_MAX_TOKENS),
            expected=dict(type="list", elements="dict"),
            min_match_fraction=dict(type="float", default=_probe.MIN_MATCH_FRACTION),
            timeout=dict(type="float", default=120.0),
            ready_timeout=dict(type="float", default=60.0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    errors = validate(params)
    if errors:
        module.fail_json(msg="; ".join(errors))
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="Check mode: no probe was sent.")
    try:
        server = Server(params["url"], params["api_key"], timeout=params["timeout"])
        served = wait_ready(server, params["model"], timeout=params["ready_timeout"])
        outputs = _probe.run_probes(server, served["model"], params["endpoint"], params["count"], params["output_len"], params["timeout"])
    except BenchError as exc:
        module.fail_json(msg=to_native(exc))
    failed = [o for o in outputs if o["error"]]
    if failed:
        module.fail_json(
            msg="%d of %d probe requests to %s failed; first: %s: %s" % (len(failed), len(outputs), params["url"], failed[0]["id"], failed[0]["error"]),
            outputs=outputs,
        )
    result = {"model": served["model"], "outputs": outputs, "agree": None, "matches": None, "required": None, "differing": [], "summary": "", "rule": ""}
    if params["expected"]:
        expected = [dict(item, text=item.get("text") or "", error=item.get("error") or "") for item in params["expected"]]
        verdict = _probe.compare(expected, outputs, params["min_match_fraction"])
        result.update(
            agree=verdict["agree"],
            matches=verdict["matches"],
            required=verdict["required"],
            differing=verdict["differing"],
            summary=_probe.describe(verdict),
            rule=verdict["rule"],
        )
    else:
        result["summary"] = "%d probe answers at temperature 0 recorded" % len(outputs)
        result["rule"] = _probe.RULE % round(params["min_match_fraction"] * 100)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
