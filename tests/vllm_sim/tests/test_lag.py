# SPDX-License-Identifier: Apache-2.0
"""The simulator's own timing: steps follow the modelled clock, lag is measured and reported."""

from __future__ import annotations

import json

from vllm_sim.server import LagMeter

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
BASE = [LLAMA, "--max-model-len", "4096", "--gpu-memory-utilization", "0.8"]


def sim_metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split(" ", 1)[1])
    return None


def test_lag_meter_counts_late_steps_and_lost_time():
    meter = LagMeter(0.02)
    for _unused in range(50):
        meter.step(0.02, 0.0)
    meter.step(0.02, 0.05)  # ends more than its own duration late
    assert meter.steps == 51 and meter.late_steps == 1 and meter.max_lag == 0.05
    meter.idle()
    meter.resume(0.03)  # of 0.03 s of idle, the 0.05 s lag explains all of it
    assert meter.lost == 0.03
    assert abs(meter.share - 0.03 / (51 * 0.02)) < 1e-12
    assert meter.share > 0.02 and not meter.out_of_spec  # under 10 modelled seconds: no verdict yet
    for _unused in range(500):
        meter.step(0.02, 0.0)
    assert meter.out_of_spec is False and meter.share < 0.02
    meter.step(0.02, 0.5)
    meter.idle()
    meter.resume(1.0)  # half a second of the idle is the lag of the last step
    assert abs(meter.lost - 0.53) < 1e-9
    assert meter.out_of_spec
    text = meter.prometheus()
    assert "# TYPE vllm_sim:late_steps counter" in text
    assert sim_metric(text, "vllm_sim:late_steps_total") == 2.0
    assert sim_metric(text, "vllm_sim:out_of_spec") == 1.0
    assert sim_metric(text, "vllm_sim:lag_limit") == 0.02


def test_server_keeps_schedule_and_reports_lag(sim_env, start_server):
    server = start_server(BASE, sim_env({"time_scale": 0.05}))
    body = {"prompt": "Say hello.", "max_tokens": 128, "temperature": 0, "ignore_eos": True}
    for _unused in range(4):
        assert server.json("POST", "/v1/completions", body)[0] == 200
    text = server.request("GET", "/metrics")[1].decode()
    assert sim_metric(text, "vllm_sim:steps_total") >= 4 * 128
    assert sim_metric(text, "vllm_sim:busy_seconds_total") > 10.0
    assert sim_metric(text, "vllm_sim:busy_seconds_total") > 1.0
    assert sim_metric(text, "vllm_sim:out_of_spec") == 0.0
    assert sim_metric(text, "vllm_sim:lag_share") <= 0.02
    assert "out of spec" not in server.log


def test_server_too_fast_for_the_host_is_out_of_spec(sim_env, start_server):
    # A thousandth of real time: an 8B step of ~25 modelled ms is 25 wall microseconds, which
    # no Python event loop keeps; the simulator must say so rather than serve skewed figures.
    server = start_server(BASE, sim_env({"time_scale": 0.0002, "lag_limit": 0.01}))
    body = {"prompt": "Say hello.", "max_tokens": 200, "temperature": 0, "ignore_eos": True}
    for _unused in range(12):
        assert server.json("POST", "/v1/completions", body)[0] == 200
    text = server.request("GET", "/metrics")[1].decode()
    assert sim_metric(text, "vllm_sim:out_of_spec") == 1.0, text
    assert sim_metric(text, "vllm_sim:late_steps_total") > 0
    assert sim_metric(text, "vllm_sim:lag_share") > 0.01
    assert "simulator out of spec" in server.log
    assert json.loads(json.dumps(sim_metric(text, "vllm_sim:lag_max_seconds"))) > 0
