# SPDX-License-Identifier: Apache-2.0
"""Fault injection, engine death and memory accounting."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest

from vllm_sim import memory

MODEL = ["Qwen/Qwen3-1.7B", "--max-model-len", "2048", "--gpu-memory-utilization", "0.5"]
BODY = {"prompt": "Tell me a story.", "max_tokens": 8, "ignore_eos": True}


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def health(server):
    return server.request("GET", "/health", timeout=5)[0]


@pytest.mark.parametrize(("version", "code"), [("0.11.0", 503), ("0.20.0", 503), ("0.33.0", 503)])
def test_engine_death_makes_health_503(sim_env, start_server, version, code):
    server = start_server(MODEL, sim_env({"version": version, "faults": {"engine_dead_after_requests": 2}}))
    for _unused in range(2):
        assert server.json("POST", "/v1/completions", BODY)[0] == 200
    wait_for(lambda: health(server) == code)
    status, body = server.json("POST", "/v1/completions", BODY)
    assert status == 500 and body["error"]["type"] == "InternalServerError"
    assert server.proc.poll() is None
    assert "EngineCore encountered a fatal error." in server.log


def test_engine_death_in_0_10_answers_500_then_exits(sim_env, start_server):
    keep = start_server(
        MODEL,
        sim_env(
            {"version": "0.10.2", "faults": {"engine_dead_after_requests": 1}},
            extra={"VLLM_KEEP_ALIVE_ON_ENGINE_DEATH": "1"},
        ),
    )
    keep.json("POST", "/v1/completions", BODY)
    wait_for(lambda: health(keep) == 500)
    exits = start_server(MODEL, sim_env({"version": "0.10.2", "faults": {"engine_dead_after_requests": 1}}))
    exits.json("POST", "/v1/completions", BODY)
    assert exits.proc.wait(timeout=30) == 1


def test_engine_death_by_file_and_signal(sim_env, start_server, tmp_path):
    flag = tmp_path / "dead"
    server = start_server(MODEL, sim_env({"faults": {"engine_dead_file": str(flag)}}))
    assert health(server) == 200
    flag.write_text("")
    assert health(server) == 503
    other = start_server(MODEL, sim_env())
    other.proc.send_signal(signal.SIGUSR1)
    wait_for(lambda: health(other) == 503)


def test_in_flight_requests_fail_when_the_engine_dies(sim_env, start_server):
    server = start_server(MODEL, sim_env({"time_scale": 0.05}))
    conn = __import__("http.client").client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request(
        "POST",
        "/v1/completions",
        json.dumps({"prompt": "x", "max_tokens": 2000, "ignore_eos": True}),
        {"Content-Type": "application/json"},
    )
    time.sleep(0.3)
    server.proc.send_signal(signal.SIGUSR1)
    resp = conn.getresponse()
    assert resp.status == 500
    assert json.loads(resp.read())["error"]["message"].startswith("EngineCore encountered an issue.")
    conn.close()


def test_crash_after_requests(sim_env, start_server):
    server = start_server(MODEL, sim_env({"faults": {"crash_after_requests": 2}}))
    assert server.json("POST", "/v1/completions", BODY)[0] == 200
    assert server.json("POST", "/v1/completions", BODY)[0] == 200
    assert server.proc.wait(timeout=30) == 1
    assert "EngineDeadError: EngineCore encountered an issue." in server.log


def test_hang_after_requests(sim_env, start_server):
    server = start_server(MODEL, sim_env({"faults": {"hang_after_requests": 1}}))
    assert server.json("POST", "/v1/completions", BODY)[0] == 200
    time.sleep(0.2)
    with pytest.raises((TimeoutError, socket.timeout)):
        server.request("GET", "/health", timeout=1.5)
    assert server.proc.poll() is None


def test_slow_start_delays_readiness(sim_env, start_server, tmp_path):
    server = start_server(MODEL, sim_env({"time_scale": 0.01, "faults": {"slow_start_s": 200}}), wait=False)
    status = tmp_path / "state" / f"status-{server.port}.json"
    wait_for(lambda: status.exists() and json.loads(status.read_text())["phase"] == "loading")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
    server.wait_healthy()


# --------------------------------------------------------------------------- memory accounting


def meminfo_values(path):
    return memory.read_meminfo(path)


def test_memory_accounting_reserves_and_releases(sim_env, start_server, tmp_path):
    env = sim_env({"account_memory": True}, total_gib=61.3, available_gib=56.0)
    path = env["VLLM_SIM_MEMINFO"]
    original = meminfo_values(path)
    server = start_server(MODEL, env)
    reserved = meminfo_values(path)
    expected = int(0.5 * original["MemTotal"] * 1024 // 1024)
    assert original["MemAvailable"] - reserved["MemAvailable"] == expected
    assert original["MemFree"] - reserved["MemFree"] == expected
    assert reserved["MemTotal"] == original["MemTotal"]
    entries = json.loads((tmp_path / "state" / "reservations.json").read_text())
    assert [e["pid"] for e in entries] == [server.proc.pid]
    # a second server now sees less free memory and fails the start-up check
    second = start_server(["Qwen/Qwen3-1.7B", "--max-model-len", "2048", "--gpu-memory-utilization", "0.5"], env, wait=False)
    assert second.proc.wait(timeout=30) == 1
    assert "Free memory on device" in second.log
    assert server.stop() == 0
    assert meminfo_values(path) == original
    assert json.loads((tmp_path / "state" / "reservations.json").read_text()) == []


def test_crashed_reservation_is_released_by_the_next_start(sim_env, start_server, tmp_path):
    env = sim_env({"account_memory": True})
    path = env["VLLM_SIM_MEMINFO"]
    original = meminfo_values(path)
    first = start_server(MODEL, env)
    first.proc.kill()
    first.proc.wait(timeout=10)
    assert meminfo_values(path)["MemAvailable"] < original["MemAvailable"]
    second = start_server(MODEL, env)
    assert "released a stale memory reservation" in second.log
    assert second.stop() == 0
    assert meminfo_values(path) == original


def test_proc_meminfo_is_never_written(sim_env, start_server):
    """With the real /proc/meminfo, accounting is off: nothing is reserved or written."""
    assert memory.MemoryAccount.writable("/proc/meminfo") is False
    env = sim_env({"account_memory": True}, extra={"VLLM_SIM_MEMINFO": "/proc/meminfo"})
    total_gib = memory.read_meminfo("/proc/meminfo")["MemTotal"] / 1024 / 1024
    server = start_server(["Qwen/Qwen3-0.6B", "--max-model-len", "1024", "--gpu-memory-utilization", f"{2.0 / total_gib:.3f}"], env)
    status = json.loads(open(os.path.join(json.loads(open(env["VLLM_SIM_SETTINGS"]).read())["state_dir"], f"status-{server.port}.json")).read())
    assert status["memory_reserved_kib"] == 0
