# SPDX-License-Identifier: Apache-2.0
"""Realistic per-host results for the fleet report tests, and checks that they have the role's shape.

The results are built the way the speculative_decoding role builds them: benchmark blocks in the mirrored
interleaved order, a verdict from the real statistics (`_stats.sequential.verdict`) after every round from the third
on, and the keys of `roles/speculative_decoding/tasks/record.yml`. Other test modules import `fleet()` and
`result()` from here.
"""

import hashlib
import math
import os
import random

import yaml
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats import ksweep, sequential
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _report

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
RECORD = os.path.join(ROOT, "roles", "speculative_decoding", "tasks", "record.yml")
T0 = 1796218000.0
THRESHOLDS = {"max_rounds": 6, "requests_c8": 32}
HOSTILE_HOST = "evil<script>alert(1)</script>&\"'"
HOSTILE_REASON = 'vLLM said: </td><img src=x onerror=alert(1)> & "quoted" {{ 7 * 6 }} <!-- --> \x00\x1b[31m'

# the keys of a result that the report reads (all recorded by the role)
READ_KEYS = {
    "host",
    "family",
    "variant",
    "l4t",
    "model",
    "vllm_version",
    "outcome",
    "label",
    "reason",
    "reused",
    "method",
    "speculator",
    "num_speculative_tokens",
    "gpu_memory_utilization",
    "baseline_gpu_memory_utilization",
    "verdict",
    "plan",
    "fitted",
    "blocks",
    "elapsed_s",
    "started_at",
    "finished_at",
    "intervals",
    "group",
    "k_source",
    "sweep",
    "prompt_set",
}


def _block(arm, concurrency, index, tput, acc_len, rng, noise, warnings=()):
    tput *= math.exp(rng.gauss(0.0, noise))
    n = 8 if concurrency == 1 else 32
    out_tokens = 128 * n
    block = {
        "arm": arm,
        "concurrency": concurrency,
        "index": index,
        "output_throughput": round(tput, 4),
        "throughput_tok_s": round(tput, 4),
        "median_tpot_ms": round(1000.0 * concurrency / tput * 0.98, 4),
        "completed": n,
        "failed": 0,
        "num_prompts": n,
        "duration": round(out_tokens / tput, 4),
        "total_output_tokens": out_tokens,
        "max_concurrency": concurrency,
        "errors": [],
        "warnings": list(warnings),
        "result_file": "/var/lib/jetson_llm/speculative/history/key-%s-c%d_%d.json" % (arm, concurrency, n),
    }
    if arm == "speculative":
        block["spec_decode_acceptance_length"] = round(acc_len * math.exp(rng.gauss(0.0, 0.01)), 4)
        block["spec_decode_acceptance_rate"] = round(100.0 * (acc_len - 1.0) / 3.0, 4)
        block["spec_decode_per_position_acceptance_rates"] = [0.62, 0.37, 0.24]
    return block


def trial(g1, g8, noise=0.02, base_c1=88.0, base_c8=640.0, acc_len=2.2, seed=0, drift=0.0, block_warning=None, **thresholds):
    """Blocks and the verdict of a sequential trial, round by round as the role runs it."""
    rng = random.Random(seed)
    th = dict(THRESHOLDS, **thresholds)
    blocks, verdict = [], None
    for rnd in range(1, th["max_rounds"] + 1):
        order = [("baseline", 1), ("baseline", 8), ("speculative", 8), ("speculative", 1)]
        if rnd % 2 == 0:
            order.reverse()
        for arm, c in order:
            index = len(blocks)
            gain = 1.0 if arm == "baseline" else 1.0 + (g1 if c == 1 else g8)
            base = base_c1 if c == 1 else base_c8
            warnings = [block_warning] if block_warning and index == 5 else []
            blocks.append(_block(arm, c, index, base * gain * (1.0 + drift * index), acc_len, rng, noise, warnings))
        if rnd >= 3:
            verdict = sequential.verdict(blocks, **th)
            if verdict["decision"] != "continue":
                break
    return blocks, verdict


def _plan(method, speculator, k, gmu, warnings=()):
    return {
        "decision": "enabled" if method else "skipped",
        "reason": "eagle3 with %s, k=%s: fits" % (speculator, k) if method else "speculation is not supported",
        "method": method,
        "model": speculator,
        "num_speculative_tokens": k,
        "draft_tensor_parallel_size": 1 if method else None,
        "gpu_memory_utilization": gmu,
        "baseline_gpu_memory_utilization": round(gmu + 0.05, 2),
        "speculative_config": {"method": method, "model": speculator, "num_speculative_tokens": k} if method else None,
        "budget": {"total_gb": 65.82, "required_gb": 19.75, "allowed_gb": 42.78},
        "warnings": list(warnings),
    }


def _intervals(start, blocks):
    out, t = [["restart", start, start + 5.8]], start + 8.0
    for i, b in enumerate(blocks):
        if i and b["arm"] != blocks[i - 1]["arm"]:
            out.append(["restart", t, t + 5.6])
            t += 7.0
        out.append(["benchmark", t, t + b["duration"]])
        t += b["duration"] + 1.5
    return out, t


def result(host, family, variant, outcome="trial", g1=0.5, g8=0.3, k=3, start=T0, seed=0, reused=False, reason=None, **trial_kw):
    """One host's result as record.yml composes it. ``outcome="skip"`` gives a planned skip (no blocks)."""
    model = "Qwen/Qwen3-8B"
    speculator = "AngelSlim/Qwen3-8B_eagle3"
    l4t = "38.2.0" if family == "thor" else "36.4.3"
    mem_warning = "L4T r%s (< r39) does not return memory freed by stopping vLLM until caches are dropped" % l4t.split(".", maxsplit=1)[0]
    base = {
        "host": host,
        "family": family,
        "variant": variant,
        "l4t": l4t,
        "model": model,
        "vllm_version": "0.20.0",
        "prompt_set": {"name": "jetson_llm.speculative", "count": 67, "sha256": "4f0c" * 16},
        "key": hashlib.sha256(host.encode()).hexdigest()[:16],
        "ladder": [],
        "group": "|".join([family, variant, model, speculator]),
        "k_source": "family default",
        "sweep": {},
        "started_at": start,
    }
    if outcome == "skip":
        plan = _plan(None, None, None, 0.65)
        plan["reason"] = reason or "speculation is not suggested on %s: target plus draft rarely fit" % family
        base.update(
            outcome="skip",
            decision="skip",
            label="skip",
            reason=plan["reason"],
            reused=False,
            method=None,
            speculator=None,
            num_speculative_tokens=None,
            gpu_memory_utilization=0.65,
            baseline_gpu_memory_utilization=0.65,
            verdict={},
            plan=plan,
            fitted={},
            blocks=[],
            intervals=[],
            k_source=None,
            decided_at=start + 8.4,
            elapsed_s=8.4,
            finished_at=start + 8.4,
        )
        return base
    plan = _plan("eagle3", speculator, k, 0.65, [mem_warning])
    fitted = dict(plan, rung="none")
    if reused:
        blocks, verdict = trial(g1, g8, seed=seed, **trial_kw)
        intervals, end = [["restart", start + 2.0, start + 7.5]], start + 9.0
        blocks = []  # a decision from an earlier run: no blocks measured in this one
    else:
        blocks, verdict = trial(g1, g8, seed=seed, **trial_kw)
        intervals, end = _intervals(start + 3.0, blocks)
    outcome = "keep" if verdict["decision"] == "keep" else "revert"
    base.update(
        outcome=outcome,
        decision=outcome,
        label=verdict["label"],
        cause=verdict["cause"],
        reason=reason or verdict["reason"],
        reused=reused,
        method="eagle3",
        speculator=speculator,
        num_speculative_tokens=k,
        gpu_memory_utilization=fitted["gpu_memory_utilization"],
        baseline_gpu_memory_utilization=plan["baseline_gpu_memory_utilization"],
        verdict=verdict,
        plan=plan,
        fitted=fitted,
        blocks=blocks,
        intervals=intervals,
        decided_at=end,
        elapsed_s=round(end - start, 1),
        finished_at=end,
    )
    return base


def sweep(gains, pruned=(6,), seed=7):
    """A canary's sweep record as sweep.yml keeps it: the pruning prediction and the choice from real
    mirrored c=1 blocks (``gains``: true gain per measured k)."""
    rng = random.Random(seed)
    arms = [("baseline", None)] + [("speculative", k) for k in sorted(gains)]
    blocks = []
    for r in range(3):
        for arm, k in arms if r % 2 == 0 else list(reversed(arms)):
            tput = 88.0 * (1.0 + (gains[k] if k else 0.0)) * math.exp(rng.gauss(0.0, 0.01))
            block = {"arm": arm, "num_speculative_tokens": k, "concurrency": 1, "index": len(blocks), "output_throughput": tput}
            blocks.append(dict(block, median_tpot_ms=1000.0 / tput, completed=8, failed=0))
    choice = ksweep.choose_k(blocks)
    predictions = [{"k": k, "pruned": False} for k in sorted(gains)] + [{"k": k, "pruned": True} for k in pruned]
    return {"predictions": predictions, "survivors": sorted(gains), "choice": choice, "blocks": len(blocks), "requests": 8 * len(blocks)}


def fleet():
    """Six hosts: a strong keep, a c=8 regression, a planned skip, a noisy drifting host with warnings,
    a host decided in an earlier run and a host with its own keep threshold."""
    canary = result("orin-01", "agx_orin", "64gb", g1=0.95, g8=0.75, k=4, start=T0)
    canary.update(sweep=sweep({3: 0.80, 4: 0.95, 5: 0.90}), k_source="tuned on orin-01")
    tuned = result("orin-02", "agx_orin", "64gb", g1=0.2, g8=0.05, k=4, noise=0.12, drift=0.01, seed=3, start=T0 + 410, block_warning="2 requests timed out")
    tuned["k_source"] = "tuned on orin-01"
    return [
        canary,
        result("thor-01", "thor", "t5000", g1=0.75, g8=-0.33, k=5, start=T0 + 200, seed=1),
        result("nano-01", "orin_nano", "8gb", outcome="skip", start=T0 + 400),
        tuned,
        result("orin-03", "agx_orin", "32gb", g1=0.6, g8=0.4, seed=4, start=T0 + 420, reused=True),
        result("thor-02", "thor", "t4000", g1=0.35, g8=0.1, k=5, seed=5, start=T0 + 430, min_gain=0.2),
    ]


def _role_keys():
    with open(RECORD) as f:
        tasks = yaml.safe_load(f)
    for task in tasks:
        facts = task.get("ansible.builtin.set_fact") or {}
        if "__speculative_decoding_result" in facts:
            return set(facts["__speculative_decoding_result"])
    raise AssertionError("record.yml no longer composes __speculative_decoding_result")


def test_the_report_reads_only_what_the_role_records():
    assert READ_KEYS <= _role_keys(), READ_KEYS - _role_keys()


def test_fixture_results_have_every_key_the_report_reads():
    for r in fleet():
        assert READ_KEYS <= set(r), (r["host"], READ_KEYS - set(r))
        assert set(r) <= _role_keys(), (r["host"], set(r) - _role_keys())


def test_fixture_covers_the_cases_the_report_must_show():
    hosts = {r["host"]: r for r in fleet()}
    assert hosts["orin-01"]["label"] == "keep (strong)"
    assert hosts["thor-01"]["label"] == "revert (regression at c=8)"
    assert hosts["nano-01"]["outcome"] == "skip" and hosts["nano-01"]["blocks"] == []
    assert hosts["orin-02"]["verdict"]["warnings"], "the noisy host must carry verdict warnings"
    assert hosts["orin-03"]["reused"] and hosts["orin-03"]["blocks"] == [] and hosts["orin-03"]["verdict"]["gain_c1"]["ci"]
    assert hosts["thor-02"]["verdict"]["thresholds"]["min_gain"] == 0.2
    summary = _report.host_summary(hosts["orin-01"])
    assert summary["acceptance"]["c1"]["length"] > 2.0 and summary["throughput"]["c8"]["speculative"] > 1000
