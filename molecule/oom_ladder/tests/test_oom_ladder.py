# SPDX-License-Identifier: Apache-2.0
"""The planned speculative utilization (0.45) runs out of memory at startup; the ladder's lowered
utilization (0.40) starts, is measured and kept, and exactly one vLLM holds memory afterwards."""

import re

from conftest import assert_serving, drafts_after_completion, speculative_config

MODEL = "Qwen/Qwen3-8B"
HEAD = "AngelSlim/Qwen3-8B_eagle3"
MEM_AVAILABLE_KIB = 36700160  # fleet.yml


def test_vllm_serves_the_model(host):
    assert_serving(host, MODEL)


def test_the_first_rung_ran_out_of_memory_at_startup(state):
    assert state["plan"]["gpu_memory_utilization"] == 0.45
    assert state["plan"]["decision"] == "enabled"
    assert len(state["ladder"]) == 1
    assert re.match(r"^%s at 0\.45: oom_free_memory \(.*less than desired GPU memory utilization" % re.escape(HEAD), state["ladder"][0])


def test_speculation_runs_at_the_lowered_utilization(host, serve, state):
    assert state["fitted"]["rung"] == "utilization"
    assert state["fitted"]["gpu_memory_utilization"] == 0.40
    assert (state["decision"], state["outcome"]) == ("keep", "keep")
    assert serve["gpu-memory-utilization"] == 0.40
    assert speculative_config(serve)["model"] == HEAD
    before, after = drafts_after_completion(host, MODEL)
    assert after > before


def test_only_the_serving_vllm_holds_memory(host):
    # The simulator lowers MemAvailable by its reservation while it serves (memory accounting);
    # the failed start left nothing behind.
    info = {}
    for line in host.file("/proc/meminfo").content_string.splitlines():
        name, rest = line.split(":", 1)
        info[name] = int(rest.split()[0])
    reserved = int(0.40 * info["MemTotal"] * 1024) // 1024
    assert info["MemAvailable"] == MEM_AVAILABLE_KIB - reserved


def test_the_journal_shows_the_refused_start(host):
    log = host.check_output("journalctl -u vllm --no-pager -o cat")
    assert "is less than desired GPU memory utilization (0.45" in log
