# SPDX-License-Identifier: Apache-2.0
"""Decision quality and device cost of the role's trial against the published single-run procedure.

Both procedures run on the vLLM simulator in virtual time (``vllm_sim.engine.simulate_run``):

* ours: the trial controller, ``plugins/module_utils/_trial.py`` (``_trial.run``), in groups of
  ``--group`` identical devices (20): the first device of a group is its canary (setting ``canary``: it
  calibrates the group's step-cost ratio, then decides from it), the others decide from their own
  acceptance with that calibration (setting ``calibration``, ``_stats/predicted.py``). The simulated
  device answers the ``apply`` and ``measure`` actions (a restart costs the simulator's start-up time,
  ``vllm_sim.startup_time``; a ``measure`` sends the warm-ups it asks for, then the blocks, on the
  prompts it names) and returns the arm evidence the controller checks. Every device of a group is
  scored; each one's device seconds and requests carry an equal share of its canary's (the canary's
  own figure is its share too), so a row's cost is what the group pays per device;
* published: one run of 50 prompts at c=1 and c=8 on the serving baseline, a restart, the same on the
  speculative server (NVIDIA's Jetson skill: keep at >= +30 % throughput and >= 20 % lower median TPOT
  at c=1, disable below +10 % or at any c=8 regression; in between the skill decides nothing, so the
  speculative server that was measured last stays).

Both are scored on the FINAL STATE (what serves when the procedure ends: an inconclusive revert is a
revert) against the truth from long noise-free runs (keep when the c=1 gain is at least the threshold,
TPOT drops and the c=8 change is at least -tolerance). Cost: requests (warm-ups included), device
seconds (request time plus restart time, including the restart that leaves the decided arm serving)
and restarts. Gain left on the table: the mean true c=1 gain of the trials that wrongly end reverted.

The device drifts: the simulator's run-to-run noise plus a thermal slow-down of up to ``--thermal``
over ``--tau`` modelled seconds. Writes ``build/bench/decisions.json`` and prints the table.

Usage: ``python tests/bench/bench_decisions.py [--trials N] [--jobs J]`` (``make bench-decisions``).
"""

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import time

# The collection comes from the collections tree that `make bench-decisions` puts on PYTHONPATH; the
# simulator is an installed package (tests/vllm_sim/pyproject.toml).
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _trial
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import DEFAULTS
from vllm_sim import prompts
from vllm_sim.calibration import DEVICES
from vllm_sim.engine import simulate_run
from vllm_sim.startup_time import startup_seconds

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

OUTPUT_TOKENS = 128
PUBLISHED_PROMPTS = 50
PUBLISHED_WARMUPS = 2
THRESHOLD = DEFAULTS["min_gain"]
TOLERANCE = DEFAULTS["c8_tolerance"]
LLAMA = ("agx-orin-64gb", "meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 3)
QWEN_INT4 = ("agx-orin-64gb", "RedHatAI/Qwen3-8B-quantized.w4a16", "AngelSlim/Qwen3-8B_eagle3", 3)
THOR_FP4 = ("thor-t5000", "nvidia/Llama-3.1-8B-Instruct-FP4", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 5)

# (setup, wanted true c=1 gain or None for acceptance scale 1.0): the acceptance scale that gives the
# wanted gain is found by bisection on noise-free runs.
CASES = [
    (LLAMA, 0.0),
    (LLAMA, THRESHOLD - 0.05),
    (LLAMA, THRESHOLD + 0.05),
    (LLAMA, 0.50),
    (QWEN_INT4, THRESHOLD + 0.05),
    (QWEN_INT4, 0.50),
    (THOR_FP4, THRESHOLD + 0.05),
]
NOISES = (0.02, 0.05, 0.10)
CHAT = prompts.chat_messages()


def spec_config(setup):
    _device, _target, head, k = setup
    return {"method": "eagle3", "model": head, "num_speculative_tokens": k}


def truth(setup, scale):
    """Noise-free, drift-free long runs: (c=1 gain, c=1 median TPOT reduction, c=8 change)."""
    device, target, _head, _k = setup
    settings = {"device": DEVICES[device], "noise": 0.0, "seed": 1, "acceptance_scale": scale}
    out = []
    for c, n in ((1, 96), (8, 256)):
        b = simulate_run(settings, target, None, CHAT, c, OUTPUT_TOKENS, seed=3, num_prompts=n)
        s = simulate_run(settings, target, spec_config(setup), CHAT, c, OUTPUT_TOKENS, seed=3, num_prompts=n)
        out.append((s["output_throughput"] / b["output_throughput"] - 1, 1 - s["median_tpot_ms"] / b["median_tpot_ms"]))
    return out[0][0], out[0][1], out[1][0]


def scale_for(setup, gain):
    lo, hi = 0.0, 1.5
    for _step in range(14):
        mid = 0.5 * (lo + hi)
        if truth(setup, mid)[0] < gain:
            lo = mid
        else:
            hi = mid
    # the side of the wanted gain away from the threshold, so that "threshold +/- 5 points" is at least that far
    return hi if gain > THRESHOLD else lo


class Device:
    """One simulated device across a trial: virtual clock, thermal state, served arm and its invocation."""

    def __init__(self, setup, scale, noise, rng, thermal, tau):
        device, target, _head, _k = setup
        self.device = dict(DEVICES[device])
        self.target = target
        self.spec = spec_config(setup)
        self.scale = scale
        self.noise = noise
        self.rng = rng
        self.thermal = thermal
        self.tau = tau
        self.clock = 0.0
        self.arm = "baseline"
        self.invocation = 1
        self.config_written = -1.0
        self.started = 0.0
        self.restarts = 0
        self.requests = 0
        self.startup = {"baseline": startup_seconds(target), "speculative": startup_seconds(target, self.spec)}

    def restart(self, arm):
        self.config_written = self.clock
        self.clock += self.startup[arm]
        self.started = self.clock
        self.arm = arm
        self.invocation += 1
        self.restarts += 1

    def run(self, arm, concurrency, n, offset=0):
        factor = 1.0 - self.thermal * (1.0 - math.exp(-self.clock / self.tau))
        device = dict(self.device, bandwidth_gbs=self.device["bandwidth_gbs"] * factor)
        device["tflops"] = self.device["tflops"] * factor
        seed = self.rng.randrange(2**31)  # device noise: never the benchmark's seed
        settings = {"device": device, "noise": self.noise, "seed": seed, "acceptance_scale": self.scale}
        chat = CHAT[offset % len(CHAT) :] + CHAT[: offset % len(CHAT)]
        spec = self.spec if arm == "speculative" else None
        r = simulate_run(settings, self.target, spec, chat, concurrency, OUTPUT_TOKENS, seed=seed, num_prompts=n)
        self.clock += r["duration"]
        self.requests += n
        return r

    # the controller's actions
    def apply(self, action):
        restarted = action["arm"] != self.arm
        if restarted:
            self.restart(action["arm"])
        return {
            "restarted": restarted,
            "arm": action["arm"],
            "rung": action.get("rung", 0),
            "ok": True,
            "invocation": self.invocation,
            "config_written": self.config_written,
            "server_started": self.started,
        }

    def measure(self, action):
        blocks = []
        for step in action["blocks"]:
            before = self.invocation
            if step.get("warmups"):
                self.run(self.arm, step["concurrency"], step["warmups"], step["prompt_offset"])
            r = self.run(self.arm, step["concurrency"], step["n_requests"], step["prompt_offset"])
            block = dict(step)
            block.update(
                output_throughput=r["output_throughput"],
                median_tpot_ms=r["median_tpot_ms"],
                completed=r["completed"],
                failed=r["failed"],
                samples={"output_tokens": [q["output_tokens"] for q in r["requests"]]},
                spec_metrics="spec_decode_num_drafts" in r,
                invocation_before=before,
                invocation_after=self.invocation,
            )
            if "spec_decode_num_drafts" in r:
                # the counter deltas under the names vllm_benchmark returns them
                block["spec_decode_num_drafts"] = r["spec_decode_num_drafts"]
                block["spec_decode_accepted_tokens"] = r["spec_decode_accepted_tokens"]
            blocks.append(block)
        return {"blocks": blocks}

    def leave(self, arm):
        """Make the decided arm serve (a restart when another arm serves)."""
        if arm != self.arm:
            self.restart(arm)


def ours(dev, settings):
    final, _observations = _trial.run(settings, dev.apply, dev.measure, limit=5000)
    kept = final["outcome"] == "keep"
    dev.leave("speculative" if kept else "baseline")
    inconclusive = final["cause"].get("label") == "revert (inconclusive)"
    verdict = final.get("verdict") or {}
    return kept, inconclusive, verdict.get("calibration") if verdict.get("method") == "canary" else None, verdict.get("method")


def published_rule(gain, tpot_drop, c8):
    if gain < 0.10 or c8 < 0:
        return "revert"
    if gain >= 0.30 and tpot_drop >= 0.20:
        return "keep"
    return "undefined"


def published(dev):
    runs = {}
    for arm in ("baseline", "speculative"):
        dev.leave(arm)
        for c in (1, 8):
            dev.run(arm, c, PUBLISHED_WARMUPS)
            runs[(arm, c)] = dev.run(arm, c, PUBLISHED_PROMPTS)
    gain = runs[("speculative", 1)]["output_throughput"] / runs[("baseline", 1)]["output_throughput"] - 1
    drop = 1 - runs[("speculative", 1)]["median_tpot_ms"] / runs[("baseline", 1)]["median_tpot_ms"]
    c8 = runs[("speculative", 8)]["output_throughput"] / runs[("baseline", 8)]["output_throughput"] - 1
    decision = published_rule(gain, drop, c8)
    kept = decision != "revert"  # "undefined" leaves the measured speculative server serving
    dev.leave("speculative" if kept else "baseline")
    return kept, decision == "undefined"


def summarise(results, truth_keep, true_gain):
    n = len(results)
    wrong = [r for r in results if r["kept"] != truth_keep]
    return {
        "outcome_error": len(wrong) / n,
        "inconclusive": sum(r["inconclusive"] for r in results) / n,
        "requests_median": statistics.median(r["requests"] for r in results),
        "device_seconds_median": round(statistics.median(r["seconds"] for r in results), 1),
        "restarts_median": statistics.median(r["restarts"] for r in results),
        # expected true c=1 gain lost per trial: the gain of the wrongly reverted runs over all runs
        "gain_left_on_table": round(true_gain * len(wrong) / n, 4) if truth_keep else 0.0,
    }


def cell(task):
    ci, ni, trials, seed, thermal, tau, scale, truth_keep, true_gain, settings, group = task
    setup = CASES[ci][0]
    noise = NOISES[ni]
    out = {}
    rng = random.Random("%d:published:%d:%d" % (seed, ci, ni))
    results = []
    for _trial_number in range(trials):
        dev = Device(setup, scale, noise, rng, thermal, tau)
        kept, undefined = published(dev)
        results.append({"kept": kept, "inconclusive": undefined, "requests": dev.requests, "seconds": dev.clock, "restarts": dev.restarts})
    out["published"] = summarise(results, truth_keep, true_gain)
    # ours: groups of `group` identical devices; the first of each is the canary that calibrates the
    # group's step cost, the others decide from their acceptance with it. Every device is scored; each
    # one's device seconds carry its share of the canary's calibration (the canary's own trial / group).
    rng = random.Random("%d:ours:%d:%d" % (seed, ci, ni))
    results, canaries, methods = [], [], {}
    calibration = None
    canary_share = canary_requests = 0.0
    for number in range(trials):
        dev = Device(setup, scale, noise, rng, thermal, tau)
        is_canary = number % group == 0
        run_settings = dict(settings, canary=True) if is_canary else dict(settings, calibration=calibration)
        kept, inconclusive, cal, method = ours(dev, run_settings)
        methods[method] = methods.get(method, 0) + 1
        if is_canary:
            calibration = cal
            canary_share, canary_requests = dev.clock / group, dev.requests / group
            canaries.append({"seconds": dev.clock, "requests": dev.requests, "restarts": dev.restarts})
            # the canary's own share is its trial's cost divided like everyone else's
            seconds, requests = canary_share, canary_requests
        else:
            seconds, requests = dev.clock + canary_share, dev.requests + canary_requests
        results.append({"kept": kept, "inconclusive": inconclusive, "requests": requests, "seconds": seconds, "restarts": dev.restarts})
    out["ours"] = summarise(results, truth_keep, true_gain)
    out["ours"]["methods"] = methods
    out["ours"]["canary_seconds_median"] = round(statistics.median(c["seconds"] for c in canaries), 1)
    out["ours"]["canary_restarts_median"] = statistics.median(c["restarts"] for c in canaries)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--trials", type=int, default=int(os.environ.get("BENCH_TRIALS", "200")))
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--thermal", type=float, default=0.05, help="largest thermal slow-down (fraction)")
    parser.add_argument("--group", type=int, default=int(os.environ.get("BENCH_GROUP", "20")), help="devices per group (one canary each)")
    parser.add_argument("--tau", type=float, default=600.0, help="thermal time constant (modelled seconds)")
    parser.add_argument("--output", default=os.path.join(ROOT, "build", "bench", "decisions.json"))
    args = parser.parse_args(argv)
    started = time.time()
    settings = {}
    tasks, meta = [], []
    with multiprocessing.Pool(args.jobs) as pool:
        scales = pool.starmap(scale_for, CASES)
        truths = pool.starmap(truth, [(setup, scale) for (setup, _gain), scale in zip(CASES, scales)])
    for ci, (setup, _gain) in enumerate(CASES):
        scale = scales[ci]
        g1, q1, g8 = truths[ci]
        truth_keep = g1 >= THRESHOLD and q1 > 0 and g8 >= -TOLERANCE
        for ni in range(len(NOISES)):
            tasks.append((ci, ni, args.trials, args.seed, args.thermal, args.tau, scale, truth_keep, g1, settings, args.group))
            meta.append((setup, scale, g1, q1, g8, truth_keep))
    with multiprocessing.Pool(args.jobs) as pool:
        results = pool.map(cell, tasks)
    rows = []
    for task, (setup, scale, g1, q1, g8, truth_keep), res in zip(tasks, meta, results):
        rows.append(
            {
                "setup": "%s %s k=%d" % (setup[0], setup[1].split("/")[-1], setup[3]),
                "acceptance_scale": round(scale, 4),
                "true_gain_c1": round(g1, 4),
                "true_tpot_drop_c1": round(q1, 4),
                "true_gain_c8": round(g8, 4),
                "noise": NOISES[task[1]],
                "truth": "keep" if truth_keep else "revert",
                "trials": args.trials,
                "ours": res["ours"],
                "published": res["published"],
            }
        )
    report = {
        "threshold": THRESHOLD,
        "c8_tolerance": TOLERANCE,
        "thermal": args.thermal,
        "tau_s": args.tau,
        "published_prompts": PUBLISHED_PROMPTS,
        "group": args.group,
        "settings": settings,
        "rows": rows,
    }
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1)
    print_table(report)
    print()
    print("(%d trials a row, %.0f s; %s)" % (args.trials, time.time() - started, os.path.relpath(args.output, ROOT)))
    return 0


def targets(report):
    """The targets of the benchmark: (all met, lines)."""
    lines, ok = [], True
    ratios = []
    for row in report["rows"]:
        far = abs(row["true_gain_c1"] - report["threshold"]) >= 0.05 - 1e-3 and abs(row["true_gain_c8"] + report["c8_tolerance"]) >= 0.05 - 1e-3
        limit = 0.05 if row["noise"] >= 0.10 else 0.01
        ratio = row["ours"]["device_seconds_median"] / row["published"]["device_seconds_median"]
        ratios.append(ratio)
        if far and row["ours"]["outcome_error"] > limit:
            ok = False
            lines.append(
                "error %.1f %% > %.0f %%: %s gain %+.1f %% noise %.2f"
                % (100 * row["ours"]["outcome_error"], 100 * limit, row["setup"], 100 * row["true_gain_c1"], row["noise"])
            )
        if ratio > 1.0:
            ok = False
            lines.append("device time %.0f %% of published: %s gain %+.1f %% noise %.2f" % (100 * ratio, row["setup"], 100 * row["true_gain_c1"], row["noise"]))
    median_ratio = statistics.median(ratios)
    if median_ratio > 0.5:
        ok = False
    lines.append("median device-time ratio ours/published over the grid: %.0f %% (target <= 50 %%)" % (100 * median_ratio))
    return ok, lines


def print_table(report):
    print(
        "| Setup | True c=1 / c=8 | Noise | Truth | Ours: error / inconclusive / requests / device s / restarts "
        "| Published: error / undefined / requests / device s / restarts | Device time ours/published |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in report["rows"]:
        o, p = row["ours"], row["published"]
        print(
            "| %s | %+.1f %% / %+.1f %% | %.0f %% | %s | %.1f %% / %.1f %% / %g / %.0f / %g | %.1f %% / %.1f %% / %g / %.0f / %g | %.0f %% |"
            % (
                row["setup"],
                100 * row["true_gain_c1"],
                100 * row["true_gain_c8"],
                100 * row["noise"],
                row["truth"],
                100 * o["outcome_error"],
                100 * o["inconclusive"],
                o["requests_median"],
                o["device_seconds_median"],
                o["restarts_median"],
                100 * p["outcome_error"],
                100 * p["inconclusive"],
                p["requests_median"],
                p["device_seconds_median"],
                p["restarts_median"],
                100 * o["device_seconds_median"] / p["device_seconds_median"],
            )
        )
    ok, lines = targets(report)
    print()
    for line in lines:
        print(line)
    print("targets %s" % ("met" if ok else "NOT met"))


if __name__ == "__main__":
    sys.exit(main())
