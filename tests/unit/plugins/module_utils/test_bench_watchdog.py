# SPDX-License-Identifier: Apache-2.0
"""The benchmark watchdog: a server that stops answering ends the run in seconds, with cause "hung"."""

import importlib.util
import os
import signal
import socket
import threading
import time

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import BenchError, Watchdog, clock
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.runner import run_benchmark

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_sim = _load("_bench_sim_helpers_watchdog", os.path.join(HERE, "test_bench_sim.py"))
hf_home = _sim.hf_home
sim = _sim.sim


def test_limit_follows_the_slowest_gap():
    dog = Watchdog(10.0, 20.0)
    assert dog.limit() == 30.0  # no gap measured yet
    dog.progress(clock(), [0.05, 0.2, 0.1])
    assert dog.slowest_gap == 0.2
    assert dog.limit() == pytest.approx(10.0)
    dog.progress(clock(), [1.5])
    assert dog.limit() == pytest.approx(30.0)
    assert not Watchdog(0, 20).enabled


def test_trips_only_with_requests_in_flight_and_shuts_their_sockets():
    dog = Watchdog(1.0, 20.0)
    dog.progress(clock(), [0.001])
    now = clock()
    assert not dog.check(now + 100)  # nothing in flight: idle is not a hang
    left, right = socket.socketpair()
    try:
        dog.started("a", left)
        start = dog.last
        assert not dog.check(start + 0.5)
        dog.progress(start + 0.9)
        assert not dog.check(start + 1.5)  # progress moved the clock
        assert dog.check(start + 2.0)
        assert dog.hung and dog.stalled_for == pytest.approx(1.1)
        assert left.recv(10) == b""  # the blocked read returns at once
        assert dog.reason().startswith("vLLM stopped answering: no token and no progress for 1.1 s (limit 1.0 s")
    finally:
        left.close()
        right.close()


def bench(url, **kw):
    args = dict(concurrency=(2,), num_prompts=8, num_warmups=2, output_len=24, timeout=300, deadline=600, stall_timeout=1.0)
    args.update(kw)
    return run_benchmark(url, **args)


def test_hang_fault_is_reported_in_seconds(sim):
    server = sim(settings={"faults": {"hang_after_requests": 5}})
    start = time.monotonic()
    with pytest.raises(BenchError) as err:
        bench(server.url, output_len=400)  # long enough that requests are in flight when the server hangs
    elapsed = time.monotonic() - start
    assert err.value.cause == "hung"
    assert "vLLM stopped answering" in str(err.value)
    assert "concurrency 2, block 0" in str(err.value)
    assert elapsed < 20, elapsed  # the request timeout is 300 s


def test_sigstopped_server_is_reported_in_seconds(sim):
    server = sim()
    stopped = []

    def stop_after_first_level(_run):
        os.kill(server.proc.pid, signal.SIGSTOP)
        stopped.append(time.monotonic())

    try:
        with pytest.raises(BenchError) as err:
            bench(server.url, concurrency=(1, 2), on_run=stop_after_first_level)
        elapsed = time.monotonic() - stopped[0]
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert err.value.cause == "hung"
    assert "warm-up at concurrency 2" in str(err.value)
    assert elapsed < 20, elapsed


def test_watchdog_off_waits_for_the_request_timeout(sim):
    server = sim(settings={"faults": {"hang_after_requests": 3}})
    result = {}

    def run():
        try:
            bench(server.url, stall_timeout=0, timeout=4, num_warmups=0, output_len=400)
        except BenchError as exc:
            result["error"] = exc

    start = time.monotonic()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert result["error"].cause == "error"
    assert "timed out" in str(result["error"])
    assert time.monotonic() - start >= 4
