# SPDX-License-Identifier: Apache-2.0
"""Filters used by the rollout roles (model info, trial_internal's ladder), the unit's argv and the blocks of a measurement."""

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter.model_info import model_info
from ansible_collections.jetson_llm.speculative.plugins.filter.trial_internal import FilterModule, trial_internal
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _jetson
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _rollout_steps
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning import planner
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.argv import serve_argv

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen3-8B"


def speculative_ladder(value, **kwargs):
    return trial_internal(value, "ladder", **kwargs)


def trial_blocks(value, **kwargs):
    return _rollout_steps.trial_blocks(value, **kwargs)


def facts(total_gib=61.3, avail_gib=50.0):
    return _jetson.detect(
        {
            "model": b"NVIDIA Jetson AGX Orin Developer Kit\0",
            "compatible": b"nvidia,p3737-0000+p3701-0005\0nvidia,p3701-0005\0nvidia,tegra234\0",
            "nv_tegra_release": "# R36 (release), REVISION: 4.3, GCID: 1, BOARD: generic, EABI: aarch64\n",
            "meminfo": "MemTotal: %d kB\nMemAvailable: %d kB\n" % (total_gib * 1048576, avail_gib * 1048576),
        }
    )


SERVE = {"gpu_memory_utilization": 0.7, "max_model_len": 4096, "vllm_version": "0.20.0", "running": False}


def test_ladder_lowers_utilization_then_smaller_speculators():
    plan = planner.plan(facts(), LLAMA, SERVE, 1, overrides={"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct"})
    assert plan["decision"] == "enabled"
    rungs = speculative_ladder(plan, facts=facts(), target_model=LLAMA, serve=SERVE, steps=2, step=0.05)
    assert [r["rung"] for r in rungs[:3]] == ["plan", "utilization", "utilization"]
    assert [r["gpu_memory_utilization"] for r in rungs[:3]] == [0.65, 0.6, 0.55]
    smaller = [r for r in rungs if r["rung"] == "smaller speculator"]
    assert smaller, rungs
    assert all(r["budget"]["speculator_weights_gb"] < plan["budget"]["speculator_weights_gb"] for r in smaller)
    assert smaller[0]["method"] == "eagle3"


def test_ladder_refuses_a_skipped_plan():
    with pytest.raises(AnsibleFilterError, match="enabled plan"):
        speculative_ladder({"decision": "skipped"}, facts=facts(), target_model=LLAMA, serve=SERVE)


def test_model_info():
    assert model_info(LLAMA)["vocab_size"] == 128256
    assert model_info("org/unknown") == {}


def test_serve_argv_native_and_jetson_image():
    assert serve_argv({"vllm_bin": "/usr/local/bin/vllm"}, "/etc/vllm/serve.yaml", "native") == [
        "/usr/local/bin/vllm",
        "serve",
        "--config",
        "/etc/vllm/serve.yaml",
    ]
    argv = serve_argv({}, "/etc/vllm/serve.yaml", "docker", image="ghcr.io/nvidia-ai-iot/vllm:r36.4", image_flavor="jetson")
    assert argv[argv.index("--entrypoint") : argv.index("--entrypoint") + 4] == ["--entrypoint", "vllm", "ghcr.io/nvidia-ai-iot/vllm:r36.4", "serve"]
    with pytest.raises(SpecdecError, match="config_path"):
        serve_argv({}, "/etc/vllm/serve.conf", "native")


def test_trial_blocks_tag_arm_concurrency_index_and_k():
    runs = [{"concurrency": 1, "output_throughput": 10.0}, {"concurrency": 8, "output_throughput": 70.0}]
    seg = [{"arm": "speculative", "concurrency": 1, "num_speculative_tokens": 4}, {"arm": "speculative", "concurrency": 8}]
    got = trial_blocks(runs, segment=seg, start=6, result_file="/x.json")
    assert [(b["arm"], b["concurrency"], b["index"]) for b in got] == [("speculative", 1, 6), ("speculative", 8, 7)]
    assert got[0]["num_speculative_tokens"] == 4 and "num_speculative_tokens" not in got[1]
    assert "discard" not in got[0] and "discard" not in got[1]
    late = [dict(runs[0], sim_out_of_spec=True, sim_lag_share=0.0672), dict(runs[1], sim_out_of_spec=False, sim_lag_share=0.001)]
    got = trial_blocks(late, segment=seg, start=6)
    assert got[0]["discard"] == "measured while the vLLM simulator ran late (6.7 % of modelled time lost, over its limit)"
    assert "discard" not in got[1]
    with pytest.raises(_rollout_steps.RolloutStepError, match="2 runs for 1 blocks"):
        trial_blocks(runs, segment=seg[:1], start=0)
    with pytest.raises(_rollout_steps.RolloutStepError, match="concurrency 8, the block at 1"):
        trial_blocks(runs[1:], segment=seg[:1], start=0)


def test_trial_internal_is_one_filter_with_named_operations():
    assert list(FilterModule().filters()) == ["trial_internal"]
    # the blocks and the proofs beside the statistics are the trial controller's (the action plugin runs them)
    for gone in ("verdict", "blocks", "proof"):
        with pytest.raises(AnsibleFilterError, match="unknown operation '%s'; known: ladder$" % gone):
            trial_internal([], gone)
    with pytest.raises(AnsibleFilterError, match=r"trial_internal\(ladder\): .*unexpected keyword argument 'bogus'"):
        trial_internal({"decision": "enabled"}, "ladder", bogus=1)
