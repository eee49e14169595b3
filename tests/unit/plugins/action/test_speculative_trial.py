# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""The trial action plugin refuses bad arguments before it touches the device, naming host and option."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import math
import os
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail
from ansible_collections.jetson_llm.speculative.plugins.action.speculative_trial import ActionModule
from ansible_collections.jetson_llm.speculative.plugins.module_utils._vllm_health import serving_gaps

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PLAN = {
    "decision": "enabled",
    "method": "eagle3",
    "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    "num_speculative_tokens": 3,
    "draft_tensor_parallel_size": 1,
    "gpu_memory_utilization": 0.6,
}
# the unit settings of the renderer's own tests (one copy)
UNIT = _load("_unit_rendering_for_trial", os.path.join(HERE, "..", "plugin_utils", "test_unit_rendering.py")).UNIT
SERVER = {"url": "http://127.0.0.1:8000", "service": "vllm.service", "config_path": "/etc/vllm/serve.yaml", "model": "m", "unit": UNIT}
SERVE = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "served_model_name": "m",
    "gpu_memory_utilization": 0.5,
    "vllm_version": "0.20.0",
    "env_file": "/etc/vllm/vllm.env",
    "engine_bin": "/usr/bin/docker",
    "container_name": "vllm",
    "family": "agx_orin",
}


def good_args(**changes):
    args = {
        "settings": {"ladder_rungs": 0, "output_proof": 0},
        "serve": dict(SERVE),
        "rungs": [PLAN],
        "server": dict(SERVER),
        "benchmark": {"output_len": 64},
    }
    args.update(changes)
    return args


def action(args, check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    plugin = ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    plugin._host_name = "dev-1"
    plugin._task_vars = {"inventory_hostname": "dev-1"}
    return plugin


@pytest.mark.parametrize(
    "changes, option, allowed",
    [
        ({"colour": "red"}, "colour", "unknown option"),
        ({"serve": "model: m"}, "serve", "a dictionary"),
        ({"rungs": []}, "rungs", "non-empty list of enabled plans"),
        ({"rungs": [{"decision": "disabled"}]}, "rungs", "non-empty list of enabled plans"),
        ({"server": {k: v for k, v in SERVER.items() if k != "url"}}, "server.url", "non-empty string"),
        ({"server": dict(SERVER, port=8000)}, "server.port", "unknown key"),
        ({"server": {k: v for k, v in SERVER.items() if k != "unit"}}, "server.unit", "vllm_server_result.server.unit"),
        ({"server": dict(SERVER, unit="vllm.service")}, "server.unit", "of type dict"),
        ({"server": dict(SERVER, ready_timeout="soon")}, "server.ready_timeout", "of type"),
        ({"benchmark": {"concurrency": [1]}}, "benchmark.concurrency", "unknown key"),
        ({"settings": {"ladder_rungs": 0, "colour": 1}}, "settings", "unknown trial setting"),
        ({"settings": {"ladder_rungs": 2}}, "settings.ladder_rungs", "rungs after the plan (0)"),
        ({"settings": {"ladder_rungs": 0, "output_proof": 4}}, "probe", "output_proof is above 0"),
    ],
)
def test_bad_argument_names_host_option_and_what_is_allowed(changes, option, allowed):
    plugin = action(good_args(**changes))
    with pytest.raises(AnsibleActionFail) as err:
        plugin._args()
    msg = str(err.value)
    assert msg.startswith("host dev-1: jetson_llm.speculative.speculative_trial: option %s must be" % option), msg
    assert allowed in msg


def test_good_arguments_pass():
    args = good_args()
    assert action(args)._args()["rungs"] == [PLAN]


def test_check_mode_touches_nothing():
    plugin = action(good_args(), check_mode=True)
    with mock.patch.object(ActionModule, "_execute_module") as run_module:
        with mock.patch("ansible.plugins.action.ActionBase.run", return_value={}):
            result = plugin.run(task_vars={"inventory_hostname": "dev-1"})
    assert result["skipped"] is True
    run_module.assert_not_called()


# ---------------------------------------------------------------- the plugin's own loop over a fake device


class FakeDevice:
    """What the plugin's module calls meet: the files the plugin writes (the collection's renderer's serve.yaml
    and unit) and the ones a restart serves, a restart that may run out of memory above a utilization, per-k
    gains at c=1 and per-position acceptance."""

    def __init__(self, gains, alpha=0.7, g8=0.05, oom_above=None, seed=0):
        import random

        self.gains, self.alpha, self.g8, self.oom_above = gains, alpha, g8, oom_above
        self.rng = random.Random(seed)
        self.clock = 1000.0
        self.written, self.mtime, self.running, self.started = None, None, None, None
        self.unit_written, self.unit_running = None, None
        self.starts = []
        self.invocation = 0
        self.calls = []

    def plan(self, content):
        """The speculative configuration a serve.yaml holds ({} for the baseline), with its utilization."""
        import json

        import yaml

        data = yaml.safe_load(content) if content else {}
        if not data.get("speculative-config"):
            return {}
        return dict(json.loads(data["speculative-config"]), gpu_memory_utilization=data["gpu-memory-utilization"])

    def write(self, files):
        assert [f["path"] for f in files] == [UNIT["config_path"], UNIT["unit_path"]], files
        assert all(f["mode"] == "0644" for f in files)
        self.clock += 1
        config, unit = files[0]["content"], files[1]["content"]
        changed = config != self.written or unit != self.unit_written
        self.written, self.unit_written, self.mtime = config, unit, self.clock
        return changed

    def module(self, module_name=None, module_args=None, task_vars=None):
        name = module_name.rsplit(".", 1)[-1]
        self.calls.append(name)
        running = self.plan(self.running)
        if name == "systemd_service":
            self.clock += 1
            self.running, self.unit_running, self.started = self.written, self.unit_written, self.clock
            self.starts.append((self.plan(self.written), self.unit_written))
            self.invocation += 1
            return {"status": {"ActiveState": "active"}}
        if name == "vllm_ready":
            if running and self.oom_above is not None and running.get("gpu_memory_utilization", 0) > self.oom_above:
                return {"ready": False, "out_of_memory": True, "cause": "out_of_memory", "detail": "CUDA out of memory"}
            return {"ready": True, "started_at": self.started, "elapsed": 1.0, "restart_began_at": self.started - 1}
        if name == "vllm_server_info":
            info = {
                "running": True,
                "config_current": self.running == self.written and self.unit_running == self.unit_written,
                "speculative": bool(running),
                "invocation_id": "inv-%d" % self.invocation,
                "started_at": self.started,
                "config_files": [{"path": SERVER["config_path"], "mtime": self.mtime}],
            }
            # the module's one rule, as vllm_server_info applies it
            gaps = serving_gaps(info, module_args["want_speculative"], module_args["want_label"])
            info["wanted"] = {"speculative": module_args["want_speculative"], "serves": not gaps, "gaps": gaps}
            return info
        if name == "vllm_output_probe":
            return {"outputs": ["a", "b", "c"], "agree": True, "matches": 3, "required": 2, "summary": "3 of 3 answers match"}
        if name == "speculative_lock":
            return {}
        assert name == "vllm_benchmark", name
        k = running.get("num_speculative_tokens")
        runs = []
        for c, n in zip(module_args["concurrency"], module_args["num_prompts_per_level"]):
            gain = (self.gains.get(k, 0.0) if c == 1 else self.g8) if running else 0.0
            tput = 100.0 * (1.0 + gain) * math.exp(self.rng.gauss(0.0, 0.01))
            run = {"concurrency": c, "output_throughput": tput, "median_tpot_ms": 3000.0 / tput, "completed": n, "failed": 0}
            if running:
                run.update(
                    spec_decode_num_drafts=400,
                    spec_decode_draft_tokens=400 * k,
                    spec_decode_accepted_tokens=int(400 * sum(self.alpha ** (i + 1) for i in range(k))),
                    spec_decode_per_position_acceptance_rates=[self.alpha ** (i + 1) for i in range(k)],
                )
            runs.append(run)
        inv = "inv-%d" % self.invocation
        return {"runs": runs, "unit": {"invocation_before": inv, "invocation_after": inv, "speculative": bool(running)}, "started_at": 1, "finished_at": 2}


def run_trial(device, settings, rungs, server=None):
    args = good_args(settings=settings, rungs=rungs, probe={"count": 3}, server=dict(server or SERVER))
    plugin = action(args)
    plugin._connection = mock.MagicMock()
    with mock.patch.object(ActionModule, "_execute_module", side_effect=device.module), mock.patch.object(
        ActionModule, "_write_files", side_effect=device.write
    ), mock.patch("ansible.plugins.action.ActionBase.run", return_value={}):
        return plugin.run(task_vars={"inventory_hostname": "dev-1"})


SWEEP = {"candidates": [1, 2, 3, 4, 5, 6], "rounds": 2, "n_requests": 8}
ALPHA = 0.7
# a speculator of 2.4 GB over a 16 GB target: one draft forward costs 0.15 of a target forward
BUDGET = {"speculator_weights_gb": 2.4, "target_weights_gb": 16.0}
# the true c=1 gain of each k on the fake device: Leviathan's speedup at ALPHA and that cost (best k=3)
GAINS = {k: (1.0 + sum(ALPHA ** (i + 1) for i in range(k))) / (k * 0.15 + 1.0) - 1.0 for k in SWEEP["candidates"]}


def test_the_plugins_own_loop_sweeps_k_proves_each_k_and_serves_the_chosen_k():
    device = FakeDevice(GAINS, alpha=ALPHA)
    plan = dict(PLAN, gpu_memory_utilization=0.6, budget=BUDGET)
    result = run_trial(device, {"ladder_rungs": 0, "output_proof": 3, "k_sweep": SWEEP}, [plan])
    assert result["outcome"] == "keep", result["cause"]
    k = result["k"]
    assert k == result["sweep"]["choice"]["k"], result["sweep"].get("reason")
    # the pruning kept the best k, and the choice is the best or within the tie tolerance of it, smaller
    assert 3 in result["sweep"]["survivors"] and 1 not in result["sweep"]["survivors"], result["sweep"]["predictions"]
    assert k in (2, 3) and GAINS[k] >= max(GAINS.values()) - 0.02, (k, GAINS)
    # the device serves the chosen k and the record says so
    assert device.plan(device.running)["num_speculative_tokens"] == k
    assert result["fitted"]["num_speculative_tokens"] == k
    # sweep blocks and verdict blocks are kept apart; every verdict block of the speculative arm ran k=3
    assert result["sweep_blocks"] and all(b["phase"] == "sweep" and b["concurrency"] == 1 for b in result["sweep_blocks"])
    assert result["counters"]["sweep_blocks"] == len(result["sweep_blocks"])
    assert result["blocks"] and not any(b.get("phase") for b in result["blocks"])
    assert {b["num_speculative_tokens"] for b in result["blocks"] if b["arm"] == "speculative"} == {k}
    # the output proof: the baseline's reference, then once per k at its first start
    swept = {b["num_speculative_tokens"] for b in result["sweep_blocks"] if b["arm"] == "speculative"}
    assert device.calls.count("vllm_output_probe") == 1 + len(swept)
    # the draft cost came from the plan's budget: at 0.15 a draft, k=6 is predicted slower than k=3
    speed = {p["k"]: p["speedup"] for p in result["sweep"]["predictions"]}
    assert speed[3] > speed[6] and abs(speed[3] - 1.0 - GAINS[3]) < 0.05, speed


def test_the_plugins_sweep_climbs_the_ladder_after_an_out_of_memory_start():
    device = FakeDevice(GAINS, alpha=ALPHA, oom_above=0.55)
    rungs = [dict(PLAN, gpu_memory_utilization=0.6, budget=BUDGET), dict(PLAN, gpu_memory_utilization=0.55, budget=BUDGET)]
    result = run_trial(device, {"ladder_rungs": 1, "output_proof": 0, "k_sweep": SWEEP}, rungs)
    assert result["outcome"] == "keep", result["cause"]
    failed = [r for r in result["restarts"] if not r["ready"]]
    assert len(failed) == 1 and failed[0]["rung"] == 0 and failed[0]["k"] == 6
    assert result["ladder"] and "0.6" in result["ladder"][0]
    assert result["fitted"]["gpu_memory_utilization"] == 0.55 and result["fitted"]["num_speculative_tokens"] == result["k"]
    served = device.plan(device.running)
    assert (served["gpu_memory_utilization"], served["num_speculative_tokens"]) == (0.55, result["k"]), served


def test_every_arm_in_a_container_carries_the_mount_of_a_speculator_at_a_local_path():
    """One renderer of the service's files: the unit of every speculative start mounts the local speculator
    (the container cannot read it otherwise), the baseline's does not, and the server ends on the unit it needs."""
    device = FakeDevice(GAINS, alpha=ALPHA, oom_above=0.55)
    local = "/opt/models/llama31-8b-eagle3"
    mount = '"-v" "%s:%s:ro"' % (local, local)
    rungs = [dict(PLAN, model=local, gpu_memory_utilization=0.6, budget=BUDGET), dict(PLAN, model=local, gpu_memory_utilization=0.55, budget=BUDGET)]
    server = dict(SERVER, unit=dict(UNIT, runtime="docker", user=""))
    result = run_trial(device, {"ladder_rungs": 1, "output_proof": 3, "k_sweep": SWEEP}, rungs, server=server)
    assert result["outcome"] == "keep", result["cause"]
    speculative = [unit for plan, unit in device.starts if plan]
    baseline = [unit for plan, unit in device.starts if not plan]
    assert speculative and baseline, device.starts
    for unit in speculative:
        assert mount in unit and '"/usr/bin/docker" "run"' in unit, unit
    for unit in baseline:
        assert mount not in unit and '"/usr/bin/docker" "run"' in unit, unit
    assert mount in device.unit_running and device.plan(device.running)["model"] == local
    # the start that ran out of memory was the first rung's; the arm that serves is the second's, mount and all
    assert [r["rung"] for r in result["restarts"] if not r["ready"]] == [0]
    assert device.plan(device.running)["gpu_memory_utilization"] == 0.55
