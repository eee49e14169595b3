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
module: speculative_trial
short_description: Run one host's whole speculative-decoding trial in one task
version_added: 0.1.0
description:
  - Runs the interleaved baseline/speculative trial of one device as one task, in the shape of
    M(ansible.builtin.reboot) - an action plugin on the controller that runs modules on the device in a loop.
  - Each step asks the trial controller (C(next_action) of the collection's trial reducer, the code that
    C(make bench-decisions) scores) what to do and carries it out on the device. C(apply) writes the arm's files, the serve
    configuration and the unit (rendered on the controller by the renderer of the
    P(jetson_llm.speculative.vllm_service_files#filter) filter, the one the P(jetson_llm.speculative.vllm_server#role) role
    writes with, from O(serve), the C(unit) of O(server) and the rung of O(rungs)) with M(ansible.builtin.copy), so that
    every arm carries what it needs (the container's mount of a speculator at a local path), restarts the unit with
    M(ansible.builtin.systemd_service) unless the live server already serves that arm from those files, waits with
    M(jetson_llm.speculative.vllm_ready), and reads the live server with M(jetson_llm.speculative.vllm_server_info).
    C(measure) runs M(jetson_llm.speculative.vllm_benchmark) on the blocks the verdict asks for. C(probe) runs
    M(jetson_llm.speculative.vllm_output_probe) (the output proof). Before each step the rollout lock O(lock) is renewed.
  - Every block proves its arm before it counts (the server's invocation before and after the block is the one the arm
    started, speculation metrics exactly on the speculative arm); a block that fails is discarded and the arm applied
    again. A speculative start that runs out of memory climbs the ladder O(rungs); another start failure ends the
    trial with RV(outcome=skip).
  - One progress line per host per step (the step, the arm, the blocks, the current estimates); no polling output.
  - Faults of the device (the baseline does not serve, its benchmark fails, a restarted server is not the arm)
    fail the task with a message that names the host; the caller restores the known-good configuration.
    A failed task returns what was measured so far (RV(blocks), RV(intervals)).
  - When the trial keeps speculation, the kept configuration serves when the task ends; on a revert or a skip the
    caller restores the baseline (the role's handler).
author:
  - Jetson LLM maintainers (@jetson-llm)
extends_documentation_fragment:
  - jetson_llm.speculative._attributes
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
    details:
      - The trial runs on the controller and reaches the device through the task's connection.
  async:
    description: Supports being used with the C(async) keyword.
    support: none
  check_mode:
    support: partial
    details:
      - In check mode the arguments are validated and nothing is run (the task is skipped).
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
  action_group:
    description: Use C(group/jetson_llm.speculative.rollout) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - jetson_llm.speculative.rollout
options:
  settings:
    description:
      - Trial settings and verdict thresholds. Trial settings are C(warmups) (warm-up requests per level after a
        restart), C(max_discards), C(ladder_rungs) (must equal the number of O(rungs) after the first),
        C(require_proof), C(seed), C(output_proof) (number of probe prompts; 0 turns the output proof off),
        C(min_acceptance) (acceptance floor of a kept verdict, accepted over drafted tokens), C(max_late),
        C(calibration), C(canary), C(prediction) and C(k_sweep).
      - C(k_sweep) (a canary's tuning of C(num_speculative_tokens) before the verdict) is a dict of C(candidates)
        (the k values), C(rounds) (of the mirrored sweep, default 2), C(n_requests) (per block at c=1, default 8),
        C(confidence) (default 0.95), C(tie_tolerance) (default 0.01) and C(draft_cost) (one draft forward over one
        target forward, a number or one per rung; by default each rung's speculator weights over the target's).
        The baseline and the largest candidate are measured at c=1, the candidates that cannot win are pruned
        from the per-position acceptance, the survivors are measured in a mirrored order, each with its output
        proof, and the verdict then runs on the chosen k. Sweep blocks never enter the verdict.
      - Every other key is a threshold of P(jetson_llm.speculative.speculative_verdict#filter) (C(min_gain),
        C(confidence), C(max_rounds), C(requests_c1), ...). An unknown key fails the task.
    type: dict
    required: true
  serve:
    description: The composed serve settings (C(vllm_server_result.serve) of the P(jetson_llm.speculative.vllm_server#role) role).
    type: dict
    required: true
  rungs:
    description:
      - The speculative configurations to try in order when vLLM runs out of memory at start, the plan first
        (the C(ladder) of the role); each an enabled plan of P(jetson_llm.speculative.speculative_plan#filter).
    type: list
    elements: dict
    required: true
  server:
    description:
      - The server on the device. C(url), C(service) (the unit, with C(.service)), C(config_path) (the serve
        configuration file), C(model) (the served model id) and C(unit) (what the unit needs besides the serve settings,
        C(vllm_server_result.server.unit)) are required; C(api_key), C(ready_timeout),
        C(ready_delay), C(config_files) and C(start_record) (passed to M(jetson_llm.speculative.vllm_server_info))
        are optional.
    type: dict
    required: true
  benchmark:
    description:
      - Options of M(jetson_llm.speculative.vllm_benchmark) shared by every measurement (C(output_len), C(endpoint),
        C(prompts_file), C(prompts_name), C(deadline), C(result_dir), C(label), C(timeout), C(api_key)); the trial sets the
        concurrency levels, requests, warm-ups and seed of each measurement.
    type: dict
    required: true
  probe:
    description:
      - Options of M(jetson_llm.speculative.vllm_output_probe) (C(count), C(endpoint), C(min_match_fraction),
        C(output_len), C(timeout), C(api_key)). Required when C(settings.output_proof) is above 0.
    type: dict
  lock:
    description: Options of M(jetson_llm.speculative.speculative_lock) to renew the rollout lock before each step.
    type: dict
  log_progress:
    description: Print one line per step.
    type: bool
    default: true
notes:
  - The whole trial is one task, so C(async) does not apply; hosts of a batch run their trials in parallel (forks).
seealso:
  - module: jetson_llm.speculative.vllm_benchmark
  - module: jetson_llm.speculative.vllm_output_probe
"""

EXAMPLES = r"""
- name: Run the trial of this device
  jetson_llm.speculative.speculative_trial:
    settings: {warmups: 2, ladder_rungs: 0, output_proof: 4, min_gain: 0.1, max_rounds: 6}
    serve: "{{ vllm_server_result.serve }}"
    rungs: ["{{ plan }}"]
    server: "{{ vllm_server_result.server }}"
    benchmark: {output_len: 128, deadline: 900}
    probe: {count: 4}
  register: trial

- name: Show the outcome
  ansible.builtin.debug:
    msg: "{{ trial.outcome }}: {{ trial.cause.detail }} ({{ trial.round_trips.total }} round trips)"
"""

RETURN = r"""
outcome:
  description: C(keep), C(revert), or C(skip) (the speculative configuration did not start or failed under load).
  returned: success
  type: str
  sample: keep
decision:
  description: The trial controller's own outcome (C(keep) or C(revert)).
  returned: success
  type: str
cause:
  description:
    - Why the trial ended. C(kind) is C(verdict) (with the verdict's C(code) and C(label)), C(start_failed),
      C(measure_failed), C(arm_proof) or C(late); C(detail) says it in words.
  returned: success
  type: dict
verdict:
  description: The last verdict of P(jetson_llm.speculative.speculative_verdict#filter) (empty when the trial ended before one).
  returned: success
  type: dict
counters:
  description:
    - C(blocks), C(discarded), C(late), C(restarts), C(requests), C(warmup_requests) and C(rung) of the trial;
      C(sweep_blocks) with a k sweep. C(requests) counts the sweep's requests too.
  returned: success
  type: dict
blocks:
  description:
    - Every block measured, in order, with the benchmark's fields; a block that did not count has C(discard)
      (and C(arm_proof) when it failed the arm proof).
  returned: always
  type: list
  elements: dict
sweep:
  description:
    - The k sweep's record, null without C(settings.k_sweep). It holds C(candidates), the prediction (C(alpha),
      C(alpha_optimistic), C(best_predicted), C(predictions) with C(pruned) and C(reason), C(survivors),
      C(schedule)), C(choice) (C(k), C(candidates) with their estimates and intervals, C(reason); null when
      nothing was chosen), C(reason), C(blocks) and C(requests).
  returned: success
  type: dict
sweep_blocks:
  description: Every block the k sweep measured, in order, as RV(blocks) shows the verdict's.
  returned: success
  type: list
  elements: dict
k:
  description: The C(num_speculative_tokens) the k sweep chose and the verdict ran on (null without a choice, the rung's own).
  returned: success
  type: int
fitted:
  description: The speculative rung that started last, at the k it served (empty when none did).
  returned: success
  type: dict
restarts:
  description: Each restart, with C(arm), C(rung), C(ready) and C(elapsed) or C(cause).
  returned: always
  type: list
  elements: dict
intervals:
  description: C([kind, began, ended]) on the device's clock for each restart and benchmark.
  returned: always
  type: list
  elements: list
output_proof:
  description: The last output proof of a speculative configuration (C(agree), C(matches), C(required), C(summary)); null without one.
  returned: success
  type: dict
prompt_set:
  description: The prompt set the benchmark used.
  returned: success
  type: str
steps:
  description: Number of steps carried out (apply, measure, probe).
  returned: success
  type: int
modules_run:
  description: Number of modules the trial ran on the device.
  returned: success
  type: int
round_trips:
  description: Commands (C(exec)) and file transfers (C(put), C(fetch)) sent over the connection, and their C(total).
  returned: success
  type: dict
elapsed:
  description: Seconds the trial took.
  returned: success
  type: float
"""
