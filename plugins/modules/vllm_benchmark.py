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
module: vllm_benchmark
short_description: Benchmark a vLLM server from the device it runs on
version_added: 0.1.0
description:
  - Sends streaming requests to the OpenAI-compatible API of a running vLLM server, on the managed
    host itself, and measures throughput, time to first token (TTFT), time per output token (TPOT),
    inter-token latency (ITL), end-to-end latency (E2EL) and, when the server speculates, the
    speculative-decoding acceptance.
  - One run per entry of O(concurrency). Each run sends O(num_warmups) warm-up requests that are
    not counted, then O(num_prompts) measured requests with at most that many in flight.
  - Prompts come from a set of real chat, summarisation, code, structured-output, translation and
    rewriting prompts shipped with the collection (random tokens understate the acceptance of
    speculative decoding), or from the user's own set in O(prompts_file). The selection depends only
    on O(seed) and the set, so two runs with the same seed and set send the same prompts in the same order.
  - Every request sets C(max_tokens=output_len), C(ignore_eos=true), O(temperature) and O(seed),
    so both arms of a before/after comparison generate the same number of tokens.
  - Result fields carry the names of C(vllm bench serve --save-result) (C(output_throughput),
    C(median_tpot_ms), C(spec_decode_acceptance_length), ...) and of the Jetson benchmark wrapper
    (C(throughput_tok_s), C(tpot_ms_p50), ...).
  - Acceptance is read from the C(vllm:spec_decode_*_total) counters of C(GET /metrics) before and
    after the measured requests, summed over engines. The C(spec_decode_*) fields are absent when the
    server exposes no such counters (speculation off, or C(--disable-log-stats)).
  - A run that completes no request, lacks a metric, measures zero throughput or has more failed
    requests than O(max_failed_fraction) allows makes the module fail with a message naming the
    endpoint and the first failure. It never reports zeros for a failed run.
  - The module changes nothing on the server. It reports C(changed=true) only when it wrote a result
    file (O(result_dir)).
author:
  - Jetson LLM maintainers (@jetson-llm)
extends_documentation_fragment:
  - jetson_llm.speculative._attributes
attributes:
  check_mode:
    support: partial
    details:
      - In check mode the module sends no request at all and returns C(skipped=true) with a message,
        because a benchmark cannot be predicted without running it.
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
    description:
      - Base URL of the vLLM server, without C(/v1).
      - The requests are sent from the managed host, so the default reaches a server on the same device.
    type: str
    default: http://127.0.0.1:8000
  model:
    description:
      - Served model id to benchmark (what C(GET /v1/models) lists; C(--served-model-name) when set).
      - When unset, the first id listed by C(GET /v1/models) is used.
    type: str
  api_key:
    description:
      - API key of the server (C(vllm serve --api-key)), sent in the C(Authorization) header as a bearer token.
    type: str
  concurrency:
    description:
      - Concurrency levels; one run per entry, in this order. Each run keeps at most this many
        requests in flight (C(--max-concurrency) of C(vllm bench serve)).
    type: list
    elements: int
    default: [1, 8]
  num_prompts:
    description: Number of measured requests per concurrency level.
    type: int
    default: 50
  num_prompts_per_level:
    description:
      - Number of measured requests for each concurrency level, in the order of O(concurrency); overrides
        O(num_prompts). Lets one call measure, for example, 8 requests at concurrency 1 and 32 at concurrency 8.
    type: list
    elements: int
    version_added: 0.1.0
  num_warmups:
    description:
      - Number of warm-up requests before each concurrency level. They are not counted.
      - They use prompts after the measured ones in the seed's order, so they do not warm the prefix
        cache for the measured prompts while O(num_prompts) + O(num_warmups) does not exceed the size of
        the prompt set.
    type: int
    default: 10
  output_len:
    description: Number of tokens every request generates (C(max_tokens) with C(ignore_eos)). At least 2.
    type: int
    default: 128
  endpoint:
    description:
      - API used for the requests. C(chat) is C(/v1/chat/completions) with the model's chat template,
        which is what EAGLE heads are trained on; C(completions) is C(/v1/completions).
    type: str
    choices: [chat, completions]
    default: chat
  seed:
    description: Seed sent with every request; it also picks the prompts and their order.
    type: int
    default: 0
  temperature:
    description:
      - Sampling temperature sent with every request. C(0) is greedy and makes two arms comparable;
        speculative acceptance drops at higher temperatures.
    type: float
    default: 0.0
  blocks:
    description:
      - Split the measured requests of each level into this many consecutive blocks, run one after the
        other, each with its own aggregates and acceptance (returned in C(blocks)), so that drift over
        the run can be seen. Between 1 and O(num_prompts).
    type: int
    default: 1
  timeout:
    description: Limit for one request, from sending it to the end of its stream, in seconds.
    type: float
    default: 300
  deadline:
    description:
      - Limit for the whole module run (readiness check, every warm-up and measured request), in seconds.
        Requests that cannot finish before it count as failed.
    type: float
    default: 3600
  ready_timeout:
    description:
      - How long to wait for the server to be ready (C(GET /health) returns 200 and the served id is in
        C(GET /v1/models)) before the first request, in seconds. A refused connection counts as still
        loading.
    type: float
    default: 60
  result_dir:
    description:
      - Directory on the managed host in which to save the result as JSON, created when missing. Each run
        adds a new file named after O(label), the concurrency levels, the model and a UTC timestamp, and
        never overwrites an existing one, so the directory keeps a history.
      - The path of the new file is returned in RV(result_file).
    type: path
  label:
    description: Free text stored in the result and used as the first part of the result file name.
    type: str
  max_failed_fraction:
    description:
      - Fraction of measured requests per level that may fail before the module fails. The default C(0)
        fails on the first failed request. A level with no completed request always fails.
    type: float
    default: 0.0
  stall_timeout:
    description:
      - Watchdog for a server that stops answering (a hung engine, a stopped process). While requests are
        in flight and no byte of any response arrives for C(max(stall_timeout, stall_factor x the slowest
        inter-token gap seen so far)) seconds (C(3 x stall_timeout) before the first gap is measured), the
        module ends the run at once and fails with RV(cause=hung) and the message C(vLLM stopped answering),
        instead of waiting for O(timeout) or O(deadline).
      - C(0) disables the watchdog.
    type: float
    default: 10
  stall_factor:
    description: Multiple of the slowest inter-token gap seen so far that the watchdog waits at least; see O(stall_timeout).
    type: float
    default: 20
  prompts_file:
    description:
      - >-
        Path on the managed host of a JSONL file of the workload's own prompts, used instead of the shipped
        set. One JSON object per line, the shape of the custom datasets of C(vllm bench serve)
        (C(--dataset-name custom)), either C({"prompt": "..."}) or C({"messages": [...]}) with OpenAI chat
        messages (C(role) one of C(system), C(developer), C(user), C(assistant); C(content) a string or a
        list of C({"type": "text", "text": "..."}) parts). Other keys of a line are ignored; blank lines are skipped.
      - >-
        A C(prompt) line goes to C(/v1/completions) as is, and to C(/v1/chat/completions) as the only user
        message. A C(messages) line can only go to C(/v1/chat/completions); a file with such lines and
        O(endpoint=completions) makes the module fail.
      - >-
        At most 10000 prompts and 16 MiB; text must not be empty and holds no control characters other
        than tab and line breaks. A file that breaks a rule makes the module fail, naming the line.
      - Prompt ids in RV(runs[].samples.prompt_ids) are C(line-N), the line number in the file.
    type: path
    version_added: 0.1.0
  prompts_name:
    description:
      - Name of the O(prompts_file) set in RV(config.prompt_set), for example the file's name on the controller
        it was copied from. Defaults to the base name of O(prompts_file).
    type: str
    version_added: 0.1.0
  service:
    description:
      - systemd unit that runs the server (for example C(vllm.service)). When set, the module reads the unit's
        C(InvocationID) and C(MainPID) right before the first request and right after the last one, and
        whether C(/metrics) shows the C(vllm:spec_decode_*) counters at the end (RV(unit)). This is the evidence
        that the numbers belong to one server, not restarted in between, with or without speculation, at no
        extra connection to the device.
    type: str
    version_added: 0.1.0
notes:
  - Warm-up and measured requests use a new connection each, like a client without connection reuse.
  - TTFT is measured at the first streamed chunk that carries text. ITL is the gap between streamed
    chunks; with speculative decoding one chunk can carry several tokens, so decide on TPOT and
    throughput, not ITL.
  - Output token counts come from the server's C(usage.completion_tokens); when a response has no usage
    the streamed chunks are counted instead and a warning says so.
  - Warnings (failed warm-ups, missing usage, unreadable metrics) are reported as Ansible warnings and
    saved under C(warnings) in the result file.
seealso:
  - name: vLLM benchmark CLI
    description: C(vllm bench serve), whose result field names this module uses.
    link: https://docs.vllm.ai/en/latest/cli/bench/serve.html
"""

EXAMPLES = r"""
- name: Benchmark the local vLLM server at concurrency 1 and 8
  jetson_llm.speculative.vllm_benchmark:
  register: bench

- name: Show throughput and acceptance per concurrency level
  ansible.builtin.debug:
    msg: >-
      c={{ item.concurrency }}: {{ item.output_throughput }} tok/s, TPOT {{ item.median_tpot_ms }} ms,
      acceptance length {{ item.spec_decode_acceptance_length | default('n/a') }}
  loop: "{{ bench.runs }}"

- name: Save each run under a history directory, in five blocks for the statistics
  jetson_llm.speculative.vllm_benchmark:
    model: meta-llama/Llama-3.1-8B-Instruct
    api_key: "{{ vllm_api_key }}"
    concurrency: [1, 4, 8]
    num_prompts: 60
    blocks: 5
    result_dir: /var/lib/vllm-bench/history
    label: speculative
  register: bench

- name: Set the server address once for every module of the vllm group
  module_defaults:
    group/jetson_llm.speculative.vllm:
      url: http://127.0.0.1:8000
  block:
    - name: Quick single-stream check through the completions API
      jetson_llm.speculative.vllm_benchmark:
        endpoint: completions
        concurrency: [1]
        num_prompts: 10
        num_warmups: 2
        output_len: 64
"""

RETURN = r"""
unit:
  description:
    - With O(service), what ran the measurement; null without it.
  returned: success
  type: dict
  contains:
    service:
      description: The unit.
      type: str
      returned: always
    invocation_before:
      description: C(InvocationID) of the unit before the first request (null when it could not be read).
      type: str
      returned: always
    invocation_after:
      description: C(InvocationID) of the unit after the last request.
      type: str
      returned: always
    main_pid_before:
      description: C(MainPID) before the first request.
      type: int
      returned: always
    main_pid_after:
      description: C(MainPID) after the last request.
      type: int
      returned: always
    speculative:
      description:
        - Whether C(/metrics) showed the C(vllm:spec_decode_*) counters after the last request (null when no
          vLLM metric was exposed or it could not be read).
      type: bool
      returned: always
cause:
  description:
    - Why the module failed. C(hung) when the watchdog found that the server stopped answering (see
      O(stall_timeout)), a failure to treat as a crash of the server. C(died) when, with O(service), the
      unit's main process at the end is not the one the benchmark started on (the message starts with
      C(vLLM died during the benchmark)). C(error) for every other failure.
  returned: failure
  type: str
  sample: hung
skipped:
  description: True in check mode, when no request was sent.
  returned: check mode
  type: bool
  sample: true
msg:
  description: Why nothing was run (check mode).
  returned: check mode
  type: str
  sample: Check mode - the benchmark sends load to the server and is not run.
started_at:
  description: When the module started (readiness check included), in seconds since the epoch.
  returned: success
  type: float
finished_at:
  description: When the last level finished, in seconds since the epoch.
  returned: success
  type: float
result_file:
  description: Path of the saved result JSON on the managed host; null without O(result_dir).
  returned: success
  type: str
  sample: /var/lib/vllm-bench/history/speculative-c1_8-Llama-3.1-8B-Instruct-20250601T101500Z.json
runtime:
  description: Serving runtime; always C(vllm).
  returned: success
  type: str
  sample: vllm
date:
  description: UTC start time of the benchmark.
  returned: success
  type: str
  sample: "2025-06-01T10:15:00Z"
backend:
  description: Name of the equivalent C(vllm bench serve --backend) (C(openai-chat) or C(openai)).
  returned: success
  type: str
  sample: openai-chat
endpoint:
  description: API path the requests went to.
  returned: success
  type: str
  sample: /v1/chat/completions
url:
  description: The O(url) option, without a trailing slash.
  returned: success
  type: str
  sample: http://127.0.0.1:8000
model_id:
  description: Same as RV(model); the name C(vllm bench serve --save-result) uses.
  returned: success
  type: str
  sample: meta-llama/Llama-3.1-8B-Instruct
label:
  description: The O(label) option.
  returned: success
  type: str
  sample: speculative
model:
  description: Served model id that was benchmarked.
  returned: success
  type: str
  sample: meta-llama/Llama-3.1-8B-Instruct
vllm_version:
  description: Version reported by the server's C(GET /version); null when the endpoint is absent.
  returned: success
  type: str
  sample: 0.11.0
server:
  description: What the server reported in C(GET /v1/models) for the served model.
  returned: success
  type: dict
  contains:
    model:
      description: Served model id.
      type: str
      returned: success
      sample: meta-llama/Llama-3.1-8B-Instruct
    max_model_len:
      description: Context length of the served model; null when not reported.
      type: int
      returned: success
      sample: 8192
    root:
      description: Model path or repository the server loaded; null when not reported.
      type: str
      returned: success
      sample: meta-llama/Llama-3.1-8B-Instruct
config:
  description: Benchmark settings, so that results can be checked for comparability.
  returned: success
  type: dict
  contains:
    input_len:
      description: Mean prompt length in tokens measured from the server's usage reports (the prompts are fixed text).
      type: int
      returned: success
      sample: 84
    output_len:
      description: Tokens generated per request.
      type: int
      returned: success
      sample: 128
    num_prompts:
      description: Measured requests per concurrency level.
      type: int
      returned: success
      sample: 50
    num_warmups:
      description: Warm-up requests per concurrency level.
      type: int
      returned: success
      sample: 10
    concurrency:
      description: Concurrency levels, in run order.
      type: list
      elements: int
      returned: success
      sample: [1, 8]
    endpoint:
      description: O(endpoint).
      type: str
      returned: success
      sample: chat
    seed:
      description: O(seed).
      type: int
      returned: success
      sample: 0
    temperature:
      description: O(temperature).
      type: float
      returned: success
      sample: 0.0
    ignore_eos:
      description: Always true.
      type: bool
      returned: success
      sample: true
    blocks:
      description: O(blocks).
      type: int
      returned: success
      sample: 1
    timeout:
      description: O(timeout).
      type: float
      returned: success
      sample: 300.0
    deadline:
      description: O(deadline).
      type: float
      returned: success
      sample: 3600.0
    max_failed_fraction:
      description: O(max_failed_fraction).
      type: float
      returned: success
      sample: 0.0
    stall_timeout:
      description: O(stall_timeout).
      type: float
      returned: success
      sample: 10.0
    stall_factor:
      description: O(stall_factor).
      type: float
      returned: success
      sample: 20.0
    prompt_set:
      description:
        - Identity of the prompt set (C(name), C(count) and C(sha256) of its content); results
          compare only when it is equal.
        - For the shipped set the name is C(jetson_llm.speculative). With O(prompts_file) the name is
          O(prompts_name) (or the file's base name), C(sha256) is that of the file's bytes, C(source) is
          C(file) and C(kinds) lists the kinds of its lines (C(prompt), C(messages)).
      type: dict
      returned: success
      sample: {"name": "jetson_llm.speculative", "count": 67, "sha256": "4f0c..."}
runs:
  description:
    - One entry per concurrency level, in the order of O(concurrency).
    - Times are in milliseconds and throughputs in tokens (or requests) per second. C(mean_), C(median_),
      C(std_) (population) and C(p99_) (linear interpolation) exist for C(ttft), C(tpot), C(itl) and C(e2el).
  returned: success and, for the levels finished before a failure, on failure
  type: list
  elements: dict
  contains:
    concurrency:
      description: Concurrency level (same as C(max_concurrency)).
      type: int
      returned: always
      sample: 8
    max_concurrency:
      description: Maximum requests in flight.
      type: int
      returned: always
      sample: 8
    num_prompts:
      description: Measured requests sent.
      type: int
      returned: always
      sample: 50
    completed:
      description: Measured requests that finished with a complete stream.
      type: int
      returned: always
      sample: 50
    failed:
      description: Measured requests that failed.
      type: int
      returned: always
      sample: 0
    duration:
      description: Wall time of the measured requests in seconds (sum over blocks).
      type: float
      returned: always
      sample: 41.52
    total_input_tokens:
      description: Sum of C(usage.prompt_tokens) of the completed requests.
      type: int
      returned: always
      sample: 4213
    total_output_tokens:
      description: Sum of the output tokens of the completed requests.
      type: int
      returned: always
      sample: 6400
    request_throughput:
      description: Completed requests per second.
      type: float
      returned: always
      sample: 1.2
    output_throughput:
      description: Output tokens per second over all requests in flight; decide on this and C(median_tpot_ms).
      type: float
      returned: always
      sample: 154.1
    total_token_throughput:
      description: Input plus output tokens per second.
      type: float
      returned: always
      sample: 255.6
    mean_ttft_ms:
      description: Mean time to first token.
      type: float
      returned: always
      sample: 95.2
    median_ttft_ms:
      description: Median time to first token.
      type: float
      returned: always
      sample: 90.1
    std_ttft_ms:
      description: Standard deviation of the time to first token.
      type: float
      returned: always
      sample: 12.3
    p99_ttft_ms:
      description: 99th percentile of the time to first token.
      type: float
      returned: always
      sample: 130.4
    mean_tpot_ms:
      description: Mean time per output token after the first, (E2EL - TTFT) / (output tokens - 1).
      type: float
      returned: always
      sample: 48.7
    median_tpot_ms:
      description: Median time per output token.
      type: float
      returned: always
      sample: 48.1
    std_tpot_ms:
      description: Standard deviation of the time per output token.
      type: float
      returned: always
      sample: 2.2
    p99_tpot_ms:
      description: 99th percentile of the time per output token.
      type: float
      returned: always
      sample: 54.0
    mean_itl_ms:
      description: Mean gap between streamed chunks.
      type: float
      returned: always
      sample: 60.3
    median_itl_ms:
      description: Median gap between streamed chunks.
      type: float
      returned: always
      sample: 58.8
    std_itl_ms:
      description: Standard deviation of the gap between streamed chunks.
      type: float
      returned: always
      sample: 20.6
    p99_itl_ms:
      description: 99th percentile of the gap between streamed chunks.
      type: float
      returned: always
      sample: 120.2
    mean_e2el_ms:
      description: Mean end-to-end latency of a request.
      type: float
      returned: always
      sample: 6280.1
    median_e2el_ms:
      description: Median end-to-end latency.
      type: float
      returned: always
      sample: 6250.0
    std_e2el_ms:
      description: Standard deviation of the end-to-end latency.
      type: float
      returned: always
      sample: 150.3
    p99_e2el_ms:
      description: 99th percentile of the end-to-end latency.
      type: float
      returned: always
      sample: 6700.8
    throughput_tok_s:
      description: Jetson wrapper name of C(output_throughput).
      type: float
      returned: always
      sample: 154.1
    tpot_ms_p50:
      description: Jetson wrapper name of C(median_tpot_ms).
      type: float
      returned: always
      sample: 48.1
    ttft_ms_p50:
      description: Jetson wrapper name of C(median_ttft_ms).
      type: float
      returned: always
      sample: 90.1
    ttft_ms_p99:
      description: Jetson wrapper name of C(p99_ttft_ms).
      type: float
      returned: always
      sample: 130.4
    itl_ms_p50:
      description: Jetson wrapper name of C(median_itl_ms).
      type: float
      returned: always
      sample: 58.8
    itl_ms_p99:
      description: Jetson wrapper name of C(p99_itl_ms).
      type: float
      returned: always
      sample: 120.2
    e2e_latency_ms_p50:
      description: Jetson wrapper name of C(median_e2el_ms) (measured, never 0).
      type: float
      returned: always
      sample: 6250.0
    spec_decode_acceptance_rate:
      description: Accepted draft tokens per proposed draft token during the run, in percent.
      type: float
      returned: when the server exposes speculative-decoding counters and drafted during the run
      sample: 52.4
    spec_decode_acceptance_length:
      description: Mean tokens per target step, 1 + accepted tokens / drafts (includes the bonus token).
      type: float
      returned: when the server exposes speculative-decoding counters and drafted during the run
      sample: 2.57
    spec_decode_num_drafts:
      description: Draft rounds during the run.
      type: int
      returned: when the server exposes speculative-decoding counters and drafted during the run
      sample: 2490
    spec_decode_draft_tokens:
      description: Proposed draft tokens during the run.
      type: int
      returned: when the server exposes speculative-decoding counters and drafted during the run
      sample: 7470
    spec_decode_accepted_tokens:
      description: Accepted draft tokens during the run.
      type: int
      returned: when the server exposes speculative-decoding counters and drafted during the run
      sample: 3912
    spec_decode_per_position_acceptance_rates:
      description: Accepted tokens at each draft position per draft round, as fractions, position 0 first.
      type: list
      elements: float
      returned: when the server exposes speculative-decoding counters and drafted during the run
      sample: [0.78, 0.52, 0.27]
    errors:
      description: First distinct error texts of failed requests (at most five).
      type: list
      elements: str
      returned: always
      sample: []
    warnings:
      description: Warnings of this level (also reported as Ansible warnings).
      type: list
      elements: str
      returned: always
      sample: []
    samples:
      description:
        - Per-request values of the completed requests, in the order they were sent, for statistics.
        - C(tpot_ms) leaves out requests that produced fewer than two tokens (never the case while the
          server honours C(ignore_eos) and O(output_len)).
      type: dict
      returned: always
      contains:
        prompt_ids:
          description: Prompt id of each request.
          type: list
          elements: str
          returned: always
          sample: [code-05, translate-01]
        ttft_ms:
          description: Time to first token of each request.
          type: list
          elements: float
          returned: always
          sample: [88.1, 91.7]
        tpot_ms:
          description: Time per output token of each request.
          type: list
          elements: float
          returned: always
          sample: [47.9, 48.3]
        e2el_ms:
          description: End-to-end latency of each request.
          type: list
          elements: float
          returned: always
          sample: [6171.4, 6227.9]
        output_tokens:
          description: Output tokens of each request.
          type: list
          elements: int
          returned: always
          sample: [128, 128]
        text_sha256:
          description:
            - SHA-256 of the generated text of each request. With greedy sampling the two arms of a comparison
              should mostly generate the same text; many differences point to a broken speculator.
          type: list
          elements: str
          returned: always
          sample: ["9b74c9897bac770ffc029102a200c5de8f8a2ea6cdd8c95f1d4f5b6d3d2c3d8f"]
    blocks:
      description:
        - One entry per block of O(blocks) consecutive measured requests, each with the aggregate fields
          above (without C(samples)) plus C(block), its index from 0.
        - Against the vLLM simulator of the project's test fleet (its C(vllm_sim:) metrics), also
          C(sim_lag_share) (share of modelled time the simulator lost to running late during the block),
          C(sim_late_steps) and C(sim_out_of_spec) (true when the share exceeded the simulator's limit;
          the host was too busy to keep the simulated device's timing and the block's figures are skewed).
      type: list
      elements: dict
      returned: always
      sample: [{"block": 0, "completed": 25, "output_throughput": 153.2, "median_tpot_ms": 48.0}]
    sim_out_of_spec:
      description:
        - Only against the vLLM simulator of the project's test fleet; true when any block has
          C(sim_out_of_spec) (see O(blocks)).
      type: bool
      returned: when the server exposes the simulator's C(vllm_sim:) metrics
      sample: false
    sim_lag_share:
      description:
        - Only against the vLLM simulator of the project's test fleet; the largest C(sim_lag_share) of the
          blocks (see O(blocks)).
      type: float
      returned: when the server exposes the simulator's C(vllm_sim:) metrics
      sample: 0.003
"""

import errno
import json
import os
import re
import tempfile
import time
from datetime import datetime, timezone

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import prompts as _bench_prompts
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import DEFAULT_URL, BenchError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.runner import run_benchmark
from ansible_collections.jetson_llm.speculative.plugins.module_utils._vllm_health import http_get, parse_systemctl_show, speculation_from_metrics

CHECK_MODE_MSG = "Check mode - the benchmark sends load to the server and is not run."


def _slug(text, limit=60):
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", text or "").strip("._-")
    return text[:limit] or "vllm"


def result_filename(result, now):
    """``{label or vllm}-c{levels}-{model basename}-{UTC timestamp}.json``."""
    levels = "_".join(str(c) for c in result["config"]["concurrency"])
    model = (result.get("model") or "model").rstrip("/").split("/")[-1]
    return "%s-c%s-%s-%s.json" % (_slug(result.get("label")), levels, _slug(model), now.strftime("%Y%m%dT%H%M%SZ"))


def save_result(directory, result, now=None):
    """Write ``result`` as JSON into ``directory`` under a new name; never overwrite. Returns the path."""
    now = now or datetime.now(timezone.utc)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    base = result_filename(result, now)
    stem, ext = os.path.splitext(base)
    fd, tmp = tempfile.mkstemp(prefix=".vllm-bench-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(result, handle, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        for attempt in range(1000):
            name = base if attempt == 0 else "%s-%d%s" % (stem, attempt, ext)
            path = os.path.join(directory, name)
            try:
                os.link(tmp, path)  # atomic and fails when the name exists
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    continue
                raise
            return path
        raise OSError(errno.EEXIST, "no free result file name in %s for %s" % (directory, base))
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def validate(params):
    """Option errors as a list of messages."""
    errors = []
    levels = params["concurrency"]
    if not levels:
        errors.append("concurrency must list at least one level")
    elif any(c < 1 for c in levels):
        errors.append("concurrency levels must be >= 1, got %s" % levels)
    per_level = params.get("num_prompts_per_level")
    if per_level is not None:
        if len(per_level) != len(params["concurrency"]):
            errors.append("num_prompts_per_level must list one count per concurrency level (%d), got %d" % (len(params["concurrency"]), len(per_level)))
        if any(n < 1 for n in per_level):
            errors.append("num_prompts_per_level counts must be >= 1, got %s" % per_level)
        if per_level and min(per_level) < params["blocks"]:
            errors.append("blocks must not exceed the smallest count of num_prompts_per_level (%d)" % min(per_level))
    if params["num_prompts"] < 1:
        errors.append("num_prompts must be >= 1, got %d" % params["num_prompts"])
    if params["num_warmups"] < 0:
        errors.append("num_warmups must be >= 0, got %d" % params["num_warmups"])
    if params["output_len"] < 2:
        errors.append("output_len must be >= 2, got %d" % params["output_len"])
    if not 1 <= params["blocks"] <= max(1, params["num_prompts"]):
        errors.append("blocks must be between 1 and num_prompts (%d), got %d" % (params["num_prompts"], params["blocks"]))
    for key in ("timeout", "deadline", "ready_timeout"):
        if params[key] <= 0:
            errors.append("%s must be > 0, got %s" % (key, params[key]))
    if not 0.0 <= params["max_failed_fraction"] <= 1.0:
        errors.append("max_failed_fraction must be between 0 and 1, got %s" % params["max_failed_fraction"])
    if params.get("stall_timeout", 0) < 0:
        errors.append("stall_timeout must be >= 0, got %s" % params["stall_timeout"])
    if params.get("stall_factor", 1) <= 0:
        errors.append("stall_factor must be > 0, got %s" % params["stall_factor"])
    if params["temperature"] < 0:
        errors.append("temperature must be >= 0, got %s" % params["temperature"])
    return errors


def load_prompts(path, name=None, endpoint="chat"):
    """The user's prompt set and its ``prompt_set`` identity; ``ValueError`` naming the file and line."""
    try:
        prompts, info = _bench_prompts.read_prompts_file(path)
    except OSError as exc:
        raise ValueError("cannot read prompts_file %s: %s" % (path, to_native(exc))) from None
    except _bench_prompts.PromptsFileError as exc:
        raise ValueError("prompts_file %s is not allowed: %s; expected %s" % (path, exc, _bench_prompts.PROMPTS_FILE_FORMAT)) from None
    if endpoint == "completions":
        chat_only = [p["id"] for p in prompts if p["prompt"] is None]
        if chat_only:
            raise ValueError(
                "prompts_file %s: %s is a messages line, which only the chat endpoint can send; use endpoint=chat "
                "or prompt lines" % (path, chat_only[0].replace("line-", "line "))
            )
    prompt_set = dict(info, name=name or os.path.basename(path), source="file")
    return prompts, prompt_set


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default=DEFAULT_URL),
            model=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            concurrency=dict(type="list", elements="int", default=[1, 8]),
            num_prompts=dict(type="int", default=50),
            num_prompts_per_level=dict(type="list", elements="int"),
            num_warmups=dict(type="int", default=10),
            output_len=dict(type="int", default=128),
            endpoint=dict(type="str", default="chat", choices=["chat", "completions"]),
            seed=dict(type="int", default=0),
            temperature=dict(type="float", default=0.0),
            blocks=dict(type="int", default=1),
            timeout=dict(type="float", default=300.0),
            deadline=dict(type="float", default=3600.0),
            ready_timeout=dict(type="float", default=60.0),
            result_dir=dict(type="path"),
            label=dict(type="str"),
            max_failed_fraction=dict(type="float", default=0.0),
            stall_timeout=dict(type="float", default=10.0),
            stall_factor=dict(type="float", default=20.0),
            prompts_file=dict(type="path"),
            prompts_name=dict(type="str"),
            service=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    errors = validate(params)
    if errors:
        module.fail_json(msg="; ".join(errors))
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg=CHECK_MODE_MSG)
    prompts, prompt_set = None, None
    if params["prompts_file"]:
        try:
            prompts, prompt_set = load_prompts(params["prompts_file"], params["prompts_name"], params["endpoint"])
        except ValueError as exc:
            module.fail_json(msg=to_native(exc))

    finished = []
    started_at = time.time()
    unit_before = unit_state(module, params["service"])
    try:
        result = run_benchmark(
            url=params["url"],
            model=params["model"],
            api_key=params["api_key"],
            concurrency=params["concurrency"],
            num_prompts=params["num_prompts_per_level"] or params["num_prompts"],
            num_warmups=params["num_warmups"],
            output_len=params["output_len"],
            endpoint=params["endpoint"],
            seed=params["seed"],
            temperature=params["temperature"],
            blocks=params["blocks"],
            timeout=params["timeout"],
            deadline=params["deadline"],
            ready_timeout=params["ready_timeout"],
            label=params["label"],
            max_failed_fraction=params["max_failed_fraction"],
            on_run=finished.append,
            stall_timeout=params["stall_timeout"],
            stall_factor=params["stall_factor"],
            prompts=prompts,
            prompt_set=prompt_set,
        )
    except BenchError as exc:
        cause, msg = getattr(exc, "cause", "error"), to_native(exc)
        died = died_during(unit_before, unit_state(module, params["service"])) if params["service"] else None
        if died and cause != "hung":
            cause, msg = "died", "%s: %s" % (died, msg)
        module.fail_json(msg=msg, runs=finished, cause=cause)

    result_file = None
    if params["result_dir"]:
        try:
            result_file = save_result(params["result_dir"], result)
        except OSError as exc:
            module.fail_json(msg="cannot save the result in %s: %s" % (params["result_dir"], to_native(exc)), runs=result["runs"])
    for warning in result["warnings"]:
        module.warn(warning)
    output = dict(result)
    output.pop("warnings")
    if params["service"]:
        unit_after = unit_state(module, params["service"])
        output["unit"] = {
            "service": params["service"],
            "invocation_before": unit_before.get("invocation"),
            "invocation_after": unit_after.get("invocation"),
            "main_pid_before": unit_before.get("main_pid"),
            "main_pid_after": unit_after.get("main_pid"),
            "speculative": served_speculation(params["url"], params["api_key"]),
        }
    else:
        output["unit"] = None
    output["started_at"] = round(started_at, 3)
    output["finished_at"] = round(time.time(), 3)
    module.exit_json(changed=result_file is not None, result_file=result_file, **output)


def unit_state(module, service):
    """InvocationID and MainPID of the unit; empty without a service or when systemctl cannot tell."""
    if not service:
        return {}
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return {}
    rc, out, _err = module.run_command([systemctl, "show", "-p", "InvocationID", "-p", "MainPID", "--", service])
    if rc != 0:
        return {}
    props = parse_systemctl_show(out)
    pid = props.get("MainPID") or ""
    return {"invocation": props.get("InvocationID") or None, "main_pid": int(pid) if pid.isdigit() and int(pid) > 0 else None}


def died_during(before, after):
    """Why the server is not the one the benchmark started on, or None: its main process is gone (the unit
    has none now, or systemd started another one)."""
    pid = before.get("main_pid")
    if not pid or after.get("main_pid") == pid:
        return None
    if after.get("main_pid"):
        return "vLLM died during the benchmark (main process %d is gone; systemd started it again as %d)" % (pid, after["main_pid"])
    return "vLLM died during the benchmark (main process %d is gone and the unit has no main process)" % pid


def served_speculation(url, api_key):
    """Whether the server's /metrics shows a loaded speculative config (None when it cannot tell)."""
    try:
        status, body = http_get(url, "/metrics", api_key=api_key, timeout=5.0)
    except OSError:
        return None
    return speculation_from_metrics(body) if status == 200 else None


if __name__ == "__main__":
    main()
