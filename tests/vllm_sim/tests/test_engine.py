# SPDX-License-Identifier: Apache-2.0
"""The performance model in virtual time: calibration against published Jetson figures and the
properties the collection's benchmarks rely on. Everything here runs without sockets or sleeping."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from vllm_sim import calibration, engine, prompts, textgen
from vllm_sim.engine import simulate_run

DEVICES = calibration.DEVICES
CHAT = prompts.chat_messages()

CALIBRATION = [row for row in calibration.ROWS if row[-1]]


def bench(device, target, spec, concurrency, seed=11, **kw):
    settings = {"device": DEVICES[device], "noise": 0.0, "seed": seed}
    n = kw.pop("num_prompts", 24 if concurrency == 1 else 8 * concurrency)
    return simulate_run(
        settings,
        target,
        spec,
        kw.pop("prompts", CHAT),
        concurrency,
        kw.pop("max_tokens", 256),
        seed=seed,
        num_prompts=n,
        **kw,
    )


@pytest.mark.parametrize("row", CALIBRATION, ids=[row[0] for row in CALIBRATION])
def test_calibration_against_published_jetson_figures(row):
    """Simulated speedup within the stated tolerance of the published one (the figures of vllm_sim.calibration), in virtual time."""
    _label, device, target, head, k, conc, base_pub, spec_pub, _asserted = row
    base, spec = calibration.run_pair(device, target, head, k, conc)
    simulated = spec["output_throughput"] / base["output_throughput"]
    published = spec_pub / base_pub
    assert abs(simulated / published - 1.0) <= calibration.TOLERANCE, (simulated, published)
    assert (simulated > 1.0) == (published > 1.0)


def test_calibration_table_renders():
    rows = calibration.table()
    assert len(rows) == len(calibration.ROWS)
    text = calibration.markdown(rows)
    assert text.count("\n") == len(rows) + 1 and "not asserted" in text


def test_speculation_wins_at_1_and_loses_at_8_on_orin():
    spec = {"method": "eagle3", "model": "AngelSlim/Qwen3-8B_eagle3", "num_speculative_tokens": 3}
    target = "RedHatAI/Qwen3-8B-quantized.w4a16"
    for conc, wins in ((1, True), (8, False)):
        base = bench("agx-orin-64gb", target, None, conc)
        with_spec = bench("agx-orin-64gb", target, spec, conc)
        assert (with_spec["output_throughput"] > base["output_throughput"]) is wins
        assert (with_spec["median_tpot_ms"] < base["median_tpot_ms"]) is wins


def test_acceptance_length_follows_leviathan():
    """Mean acceptance length is the empirical E = (1 - a^(k+1)) / (1 - a), a = per-position probability."""
    run = bench(
        "thor-t5000",
        "meta-llama/Llama-3.1-8B-Instruct",
        {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 4},
        1,
        num_prompts=40,
    )
    alpha = engine.PAIR_ALPHA[("llama3-8b", "eagle3")]
    expected = (1 - alpha**5) / (1 - alpha)
    assert abs(run["spec_decode_acceptance_length"] - expected) < 0.1
    rates = run["spec_decode_per_position_acceptance_rates"]
    for i, rate in enumerate(rates):
        assert abs(rate - alpha ** (i + 1)) < 0.05
    assert run["spec_decode_acceptance_rate"] == pytest.approx(100 * (expected - 1) / 4, abs=3)


def test_prompt_kinds_change_acceptance():
    spec = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 4}
    lengths = {}
    for kind, items in (("code", prompts.CODE), ("chat", CHAT), ("random", prompts.random_prompts(6, 200))):
        assert all(textgen.classify(p if isinstance(p, str) else p["messages"][0]["content"]) == kind for p in items)
        run = bench("thor-t5000", "meta-llama/Llama-3.1-8B-Instruct", spec, 1, prompts=items, num_prompts=12)
        lengths[kind] = run["spec_decode_acceptance_length"]
    assert lengths["code"] > lengths["chat"] > lengths["random"]
    assert lengths["random"] < 1.6


def test_acceptance_scale_and_temperature():
    spec = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 4}

    def length(settings_extra=None, **kw):
        settings = {"device": DEVICES["thor-t5000"], "noise": 0.0, "seed": 3, **(settings_extra or {})}
        run = simulate_run(settings, "meta-llama/Llama-3.1-8B-Instruct", spec, CHAT, 1, 128, seed=3, num_prompts=12, **kw)
        return run["spec_decode_acceptance_length"]

    assert length({"acceptance_scale": 0.5}) < length() < length({"acceptance_scale": 1.2})
    assert length(temperature=1.0) < length(temperature=0.0)


def test_draft_model_and_mismatched_pairs():
    llama = "meta-llama/Llama-3.1-8B-Instruct"
    draft = bench(
        "thor-t5000",
        llama,
        {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4},
        1,
    )
    alpha = engine.PAIR_ALPHA[("llama3-8b", "llama3.2-1b")]
    assert abs(draft["spec_decode_acceptance_length"] - (1 - alpha**5) / (1 - alpha)) < 0.15
    wrong = bench(
        "thor-t5000",
        "Qwen/Qwen3-8B",
        {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 4},
        1,
    )
    assert wrong["spec_decode_acceptance_length"] < 1.1
    base = bench("thor-t5000", "Qwen/Qwen3-8B", None, 1)
    assert wrong["output_throughput"] < base["output_throughput"]


def test_eagle1_classification_trap_costs_acceptance():
    """vLLM 0.10.0 treats yuhuili's EAGLE-3 head as EAGLE-1 when method is omitted."""
    settings = {"version": "0.10.0", "device": DEVICES["thor-t5000"], "noise": 0.0, "seed": 1}
    run = simulate_run(
        settings,
        "meta-llama/Llama-3.1-8B-Instruct",
        {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3},
        CHAT,
        1,
        64,
        num_prompts=4,
    )
    assert run["spec_decode_acceptance_length"] < 1.2


def test_counters_only_with_speculation_and_consistency():
    base = bench("agx-orin-64gb", "Qwen/Qwen3-8B", None, 2, num_prompts=6)
    assert base["spec_decode"] == {
        "num_drafts": 0,
        "num_draft_tokens": 0,
        "num_accepted_tokens": 0,
        "accepted_per_pos": [],
    }
    assert "spec_decode_acceptance_length" not in base
    run = bench(
        "agx-orin-64gb",
        "Qwen/Qwen3-8B",
        {"method": "eagle3", "model": "AngelSlim/Qwen3-8B_eagle3", "num_speculative_tokens": 3},
        2,
        num_prompts=6,
    )
    sd = run["spec_decode"]
    assert sd["num_draft_tokens"] == 3 * sd["num_drafts"] and sum(sd["accepted_per_pos"]) == sd["num_accepted_tokens"]
    assert run["total_output_tokens"] == 6 * 256 == base["total_output_tokens"]
    # every output token after the first comes from a verify step: 1 + accepted per draft
    assert run["total_output_tokens"] <= 6 + sd["num_drafts"] + sd["num_accepted_tokens"]


def test_deterministic_for_a_seed_and_noisy_across_seeds():
    settings = {"device": DEVICES["agx-orin-64gb"], "noise": 0.05}
    spec = {"method": "eagle3", "model": "AngelSlim/Qwen3-8B_eagle3", "num_speculative_tokens": 3}

    def run(seed):
        return simulate_run(dict(settings, seed=seed), "RedHatAI/Qwen3-8B-quantized.w4a16", spec, CHAT, 1, 64, seed=seed, num_prompts=4)

    assert run(1)["output_throughput"] == run(1)["output_throughput"]
    values = [run(s)["output_throughput"] for s in range(2, 22)]
    cv = statistics.stdev(values) / statistics.fmean(values)
    assert 0.02 < cv < 0.15  # noise 0.05 plus acceptance sampling


def test_noise_zero_leaves_only_acceptance_sampling():
    settings = {"device": DEVICES["agx-orin-64gb"], "noise": 0.0}
    values = {simulate_run(dict(settings, seed=s), "Qwen/Qwen3-8B", None, CHAT, 1, 64, seed=s, num_prompts=3)["output_throughput"] for s in range(4)}
    assert len(values) == 1


def test_latency_metrics_are_consistent():
    run = bench(
        "agx-orin-64gb",
        "Qwen/Qwen3-8B",
        {"method": "eagle3", "model": "AngelSlim/Qwen3-8B_eagle3", "num_speculative_tokens": 3},
        4,
        num_prompts=8,
        max_tokens=64,
    )
    assert run["completed"] == 8 and run["failed"] == 0
    for req in run["requests"]:
        assert req["ttft"] > 0 and req["e2e"] > req["ttft"]
        assert req["tpot"] == pytest.approx((req["e2e"] - req["ttft"]) / (req["output_tokens"] - 1))
        assert sum(req["itls"]) == pytest.approx(req["e2e"] - req["ttft"])
    # with speculation a chunk carries several tokens, so ITL exceeds TPOT
    assert run["median_itl_ms"] > run["median_tpot_ms"]
    assert run["output_throughput"] == pytest.approx(run["total_output_tokens"] / run["duration"])


def test_prefill_makes_long_prompts_slower_to_first_token():
    short = bench("agx-orin-64gb", "Qwen/Qwen3-8B", None, 1, prompts=prompts.random_prompts(4, 64), num_prompts=4, max_tokens=16)
    long = bench("agx-orin-64gb", "Qwen/Qwen3-8B", None, 1, prompts=prompts.random_prompts(4, 2000), num_prompts=4, max_tokens=16)
    assert long["median_ttft_ms"] > 3 * short["median_ttft_ms"]


def test_kv_capacity_and_max_num_seqs_limit_the_batch():
    free = bench("agx-orin-64gb", "Qwen/Qwen3-8B", None, 8, num_prompts=8, max_tokens=64)
    capped = bench("agx-orin-64gb", "Qwen/Qwen3-8B", None, 8, num_prompts=8, max_tokens=64, max_num_seqs=2)
    tight = bench("agx-orin-64gb", "Qwen/Qwen3-8B", None, 8, num_prompts=8, max_tokens=64, kv_tokens=256)
    assert capped["output_throughput"] < free["output_throughput"]
    assert tight["output_throughput"] < free["output_throughput"]
    assert capped["median_ttft_ms"] > free["median_ttft_ms"]


def test_dynamic_schedule_switches_speculation_off_at_high_batch():
    spec = {
        "method": "eagle3",
        "model": "AngelSlim/Qwen3-8B_eagle3",
        "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[1, 2, 3], [3, 512, 0]],
    }
    settings = {"version": "0.24.0", "device": DEVICES["agx-orin-64gb"], "noise": 0.0, "seed": 2}
    run = simulate_run(settings, "RedHatAI/Qwen3-8B-quantized.w4a16", spec, CHAT, 8, 64, num_prompts=8)
    base = simulate_run(settings, "RedHatAI/Qwen3-8B-quantized.w4a16", None, CHAT, 8, 64, num_prompts=8)
    assert run["spec_decode"]["num_drafts"] < 8 * 64 / 4  # drafting only while the batch is small
    assert run["output_throughput"] == pytest.approx(base["output_throughput"], rel=0.35)


def test_invalid_speculative_config_is_rejected_like_the_cli():
    from vllm_sim.errors import VllmError

    with pytest.raises(VllmError, match="Unexpected keyword argument"):
        simulate_run(
            {},
            "Qwen/Qwen3-8B",
            {"method": "eagle3", "model": "AngelSlim/Qwen3-8B_eagle3", "num_speculative_tokens": 3, "x": 1},
            CHAT,
            1,
            8,
        )


def test_step_time_model_shapes():
    """Decode is bandwidth-bound at batch 1 and compute-bound when verifying many tokens."""
    target = engine.model_from_zoo("RedHatAI/Qwen3-8B-quantized.w4a16")
    perf = engine.PerfModel(engine.Device(DEVICES["agx-orin-64gb"]), target)
    one = perf.decode_step(1, 512)
    mem = target.decode_read_bytes / (204.8e9 * perf.device.mem_eff)
    assert one == pytest.approx(perf.device.overhead + mem, rel=0.02)
    assert perf.decode_step(1, 512, k=3) < 1.2 * one  # verifying 4 tokens costs about one decode step
    assert perf.decode_step(8, 512, k=3) > 3 * perf.decode_step(8, 512)  # 32 tokens: compute-bound
    rng = random.Random(0)
    assert all(math.isfinite(perf.decode_step(rng.randint(1, 64), rng.randint(1, 8192))) for _unused in range(20))


def test_ngram_helps_code_more_than_chat():
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    code = bench("agx-orin-64gb", "Qwen/Qwen3-8B", spec, 1, prompts=prompts.CODE, num_prompts=6, max_tokens=128)
    chat = bench("agx-orin-64gb", "Qwen/Qwen3-8B", spec, 1, num_prompts=6, max_tokens=128)
    assert code["spec_decode_acceptance_length"] > chat["spec_decode_acceptance_length"] > 1.0
    assert code["spec_decode"]["num_draft_tokens"] == 3 * code["spec_decode"]["num_drafts"]
