# SPDX-License-Identifier: Apache-2.0
"""Decision quality of the statistical verdict against the published single-run rule.

Runs every scenario on the vLLM simulator in virtual time (``vllm_sim.engine.simulate_run``) and
prints, per true effect and noise level, how often each procedure decides wrongly and how many
requests it spends:

* the statistical rule: ``_stats.SequentialTrial`` with its defaults, one simulated block per
  step (interleaved arms, one vLLM restart per arm switch);
* the published procedure: one run of 50 prompts at c=1 and c=8 on the baseline, then the same on
  the speculative server (NVIDIA's Jetson skill: keep at >= +30 % throughput and >= 20 % lower
  median TPOT at c=1, disable at < +10 % or any c=8 regression, undefined in between).

The device drifts: the simulator's own run-to-run noise (``noise`` setting) plus a thermal decay
of bandwidth and compute by up to ``--thermal`` over ``--tau`` modelled seconds. The truth of each
scenario comes from long noise-free runs. A second table repeats the error rates on synthetic
lognormal blocks (as in the unit tests) for the noise levels the simulator does not reach.

Usage: ``python tests/bench/bench_decisions.py [--reps N] [--seed S]`` (``make bench-decisions``).
"""

import argparse
import math
import multiprocessing
import os
import random
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
sys.path.insert(0, os.path.join(ROOT, "tests", "vllm_sim"))

from ansible_collections.jetson_llm.speculative.plugins.module_utils import _stats  # noqa: E402
from vllm_sim import prompts  # noqa: E402
from vllm_sim.calibration import DEVICES  # noqa: E402
from vllm_sim.engine import simulate_run  # noqa: E402

OUTPUT_TOKENS = 128
RESTART_S = 90.0  # modelled seconds lost per vLLM restart (arm switch)
PUBLISHED_PROMPTS = 50
# Synthetic blocks: the noise level is the run-to-run noise of a block of the default size.
DEFAULT_BLOCK = {1: _stats.DEFAULTS["requests_c1"], 8: _stats.DEFAULTS["requests_c8"]}
LLAMA = ("agx-orin-64gb", "meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 3)
QWEN_INT4 = ("agx-orin-64gb", "RedHatAI/Qwen3-8B-quantized.w4a16", "AngelSlim/Qwen3-8B_eagle3", 3)
THOR_FP4 = ("thor-t5000", "nvidia/Llama-3.1-8B-Instruct-FP4", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 5)

# (label, (device, target, speculator, k), acceptance_scale): the acceptance scale moves the true gain.
SCENARIOS = [
    ("no gain, c=8 regresses (Thor FP4, k=5, weak head)", THOR_FP4, 0.8),
    ("+4 % (AGX Orin Llama BF16, weak head)", LLAMA, 0.24),
    ("+15 % (AGX Orin Llama BF16)", LLAMA, 0.35),
    ("+21 % (AGX Orin Llama BF16)", LLAMA, 0.40),
    ("+51 % (AGX Orin Llama BF16)", LLAMA, 0.60),
    ("+55 % at c=1, c=8 -41 % (AGX Orin Qwen3 INT4)", QWEN_INT4, 1.0),
]
NOISES = (0.02, 0.05, 0.10)
SYNTHETIC_CASES = [(0.0, 0.05), (0.05, 0.05), (0.15, 0.05), (0.30, 0.05), (0.60, 0.05), (0.60, 0.0), (0.60, -0.10)]


class Host:
    """One simulated device across a trial: a virtual clock, thermal state and the served arm."""

    def __init__(self, scenario, noise, rng, thermal, tau):
        _label, (device, target, head, k), scale = scenario
        self.device = dict(DEVICES[device])
        self.target = target
        self.spec = {"method": "eagle3", "model": head, "num_speculative_tokens": k}
        self.scale = scale
        self.noise = noise
        self.rng = rng
        self.thermal = thermal
        self.tau = tau
        self.clock = 0.0
        self.arm = "baseline"
        self.chat = prompts.chat_messages()

    def run(self, arm, concurrency, n, offset=0):
        if arm != self.arm:
            self.clock += RESTART_S
            self.arm = arm
        factor = 1.0 - self.thermal * (1.0 - math.exp(-self.clock / self.tau))
        device = dict(self.device, bandwidth_gbs=self.device["bandwidth_gbs"] * factor)
        device["tflops"] = self.device["tflops"] * factor
        seed = self.rng.randrange(2**31)
        settings = {"device": device, "noise": self.noise, "seed": seed, "acceptance_scale": self.scale}
        chat = self.chat[offset % len(self.chat) :] + self.chat[: offset % len(self.chat)]
        spec = self.spec if arm == "speculative" else None
        r = simulate_run(settings, self.target, spec, chat, concurrency, OUTPUT_TOKENS, seed=seed, num_prompts=n)
        self.clock += r["duration"]
        return {
            "output_throughput": r["output_throughput"],
            "median_tpot_ms": r["median_tpot_ms"],
            "completed": r["completed"],
            "failed": r["failed"],
            "samples": {"output_tokens": [q["output_tokens"] for q in r["requests"]]},
        }


def truth(scenario):
    """Noise-free, drift-free long runs: (c=1 gain, c=1 median TPOT reduction, c=8 change)."""
    _label, (device, target, head, k), scale = scenario
    settings = {"device": DEVICES[device], "noise": 0.0, "seed": 1, "acceptance_scale": scale}
    spec = {"method": "eagle3", "model": head, "num_speculative_tokens": k}
    chat = prompts.chat_messages()
    out = []
    for c, n in ((1, 96), (8, 256)):
        b = simulate_run(settings, target, None, chat, c, OUTPUT_TOKENS, seed=3, num_prompts=n)
        s = simulate_run(settings, target, spec, chat, c, OUTPUT_TOKENS, seed=3, num_prompts=n)
        out.append((s["output_throughput"] / b["output_throughput"] - 1, 1 - s["median_tpot_ms"] / b["median_tpot_ms"]))
    return out[0][0], out[0][1], out[1][0]


def ours(scenario, noise, rng, thermal, tau):
    host = Host(scenario, noise, rng, thermal, tau)
    pairs = {}

    def measure(step):
        key = (step["concurrency"], step["arm"])
        pairs[key] = pairs.get(key, 0) + 1
        offset = (pairs[key] - 1) * step["n_requests"]  # both arms of a round see the same prompts
        return host.run(step["arm"], step["concurrency"], step["n_requests"], offset)

    return _stats.SequentialTrial().run(measure)


def published_rule(gain, tpot_drop, c8):
    if gain < 0.10 or c8 < 0:
        return "revert"
    if gain >= 0.30 and tpot_drop >= 0.20:
        return "keep"
    return "undefined"


def published(scenario, noise, rng, thermal, tau):
    host = Host(scenario, noise, rng, thermal, tau)
    runs = {}
    for arm in ("baseline", "speculative"):
        for c in (1, 8):
            runs[(arm, c)] = host.run(arm, c, PUBLISHED_PROMPTS)
    gain = runs[("speculative", 1)]["output_throughput"] / runs[("baseline", 1)]["output_throughput"] - 1
    drop = 1 - runs[("speculative", 1)]["median_tpot_ms"] / runs[("baseline", 1)]["median_tpot_ms"]
    c8 = runs[("speculative", 8)]["output_throughput"] / runs[("baseline", 8)]["output_throughput"] - 1
    return published_rule(gain, drop, c8)


def synthetic_measure(rng, g1, g8, sigma, drift_total):
    q1 = 1.0 - 1.0 / (1.0 + 1.2 * g1)

    def measure(step):
        i = step["index"]
        drift = -drift_total * (1.0 - math.exp(-i / 12.0))
        sd = sigma * math.sqrt(DEFAULT_BLOCK[step["concurrency"]] / step["n_requests"])
        spec = step["arm"] == "speculative"
        e = rng.gauss(0.0, sd)
        if step["concurrency"] == 1:
            thr = 30.0 * ((1 + g1) if spec else 1.0) * math.exp(drift + e)
            tpot = 33.0 * ((1 - q1) if spec else 1.0) * math.exp(-drift - 0.8 * e + rng.gauss(0.0, 0.6 * sd))
        else:
            thr = 140.0 * ((1 + g8) if spec else 1.0) * math.exp(drift + e)
            tpot = 50.0 * math.exp(-drift + rng.gauss(0.0, sd))
        return {"output_throughput": thr, "median_tpot_ms": tpot, "completed": step["n_requests"], "failed": 0}

    return measure


def summarise(verdicts, truth_keep):
    n = len(verdicts)
    keep = sum(v["decision"] == "keep" for v in verdicts)
    inconclusive = sum(v["label"] == "revert (inconclusive)" for v in verdicts)
    wrong = sum(1 for v in verdicts if v["label"] != "revert (inconclusive)" and (v["decision"] == "keep") != truth_keep)
    requests = sum(v["requests_spent"] for v in verdicts) / n
    switches = sum(v["arm_switches"] for v in verdicts) / n
    return keep, inconclusive, wrong, requests, switches


def simulator_cell(task):
    """One scenario x noise cell: (our verdict summary, published decisions)."""
    si, ni, reps, seed, thermal, tau, truth_keep = task
    scenario, noise = SCENARIOS[si], NOISES[ni]
    rng = random.Random("%d:%d:%d" % (seed, si, ni))
    verdicts = [ours(scenario, noise, rng, thermal, tau) for _trial in range(reps)]
    pub = [published(scenario, noise, rng, thermal, tau) for _trial in range(reps)]
    return summarise(verdicts, truth_keep), pub


def synthetic_cell(task):
    ci, ni, reps, seed, g1, g8, truth_keep = task
    rng = random.Random("%d:synthetic:%d:%d" % (seed, ci, ni))
    verdicts = [_stats.SequentialTrial().run(synthetic_measure(rng, g1, g8, NOISES[ni], 0.05)) for _trial in range(reps)]
    return summarise(verdicts, truth_keep)


def pct(count, n):
    return "%.1f %%" % (100.0 * count / n)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_REPS", "50")))
    parser.add_argument("--synthetic-reps", type=int, default=int(os.environ.get("BENCH_SYNTHETIC_REPS", "300")))
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--thermal", type=float, default=0.05, help="largest thermal slow-down (fraction)")
    parser.add_argument("--tau", type=float, default=600.0, help="thermal time constant (modelled seconds)")
    args = parser.parse_args(argv)
    defaults = _stats.DEFAULTS
    min_gain, tol = defaults["min_gain"], defaults["c8_tolerance"]
    started = time.time()

    print("## Statistical rule vs the published single-run rule (vLLM simulator, virtual time)")
    print()
    print(
        "Repetitions per cell: %d; thermal slow-down up to %.0f %% (time constant %.0f s); %d s per restart."
        % (args.reps, 100 * args.thermal, args.tau, RESTART_S)
    )
    print(
        "Statistical rule: defaults (min_gain %.2f, c8_tolerance %.2f, confidence %.2f, %s, rounds %d-%d, "
        "%d/%d requests per block at c=1/c=8). Wrong = a conclusive decision against the truth; "
        "inconclusive runs revert by design and are counted apart. Published: one run of %d prompts per "
        "arm and concurrency (%d requests); flips = decisions that differ from the same rule on noise-free data."
        % (
            min_gain,
            tol,
            defaults["confidence"],
            defaults["spending"],
            defaults["min_rounds"],
            defaults["max_rounds"],
            defaults["requests_c1"],
            defaults["requests_c8"],
            PUBLISHED_PROMPTS,
            4 * PUBLISHED_PROMPTS,
        )
    )
    print()
    print(
        "| Scenario | Noise | True c=1 gain / TPOT drop / c=8 | Truth | Keep | Inconclusive | Wrong | Requests "
        "| Restarts | Published keep / revert / undefined | Published flips |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    totals = {"wrong": 0, "n": 0, "pub_flips": 0, "pub_wrong": 0}
    truths = [truth(scenario) for scenario in SCENARIOS]
    tasks = []
    for si, (g1, q1, g8) in enumerate(truths):
        truth_keep = g1 >= min_gain and q1 > 0 and g8 >= -tol
        tasks.extend((si, ni, args.reps, args.seed, args.thermal, args.tau, truth_keep) for ni in range(len(NOISES)))
    with multiprocessing.Pool(args.jobs) as pool:
        results = pool.map(simulator_cell, tasks)
        synthetic_tasks = []
        for ci, (g1, g8) in enumerate(SYNTHETIC_CASES):
            truth_keep = g1 >= min_gain and g8 >= -tol
            synthetic_tasks.extend((ci, ni, args.synthetic_reps, args.seed, g1, g8, truth_keep) for ni in range(len(NOISES)))
        synthetic_results = pool.map(synthetic_cell, synthetic_tasks)
    for task, ((keep, inconclusive, wrong, requests, switches), pub) in zip(tasks, results):
        si, ni, _reps, _seed, _thermal, _tau, truth_keep = task
        g1, q1, g8 = truths[si]
        pub_truth = published_rule(g1, q1, g8)
        counts = {d: pub.count(d) for d in ("keep", "revert", "undefined")}
        flips = sum(d != pub_truth for d in pub)
        pub_wrong = sum(d in ("keep", "revert") and (d == "keep") != truth_keep for d in pub)
        totals["wrong"] += wrong
        totals["n"] += args.reps
        totals["pub_flips"] += flips
        totals["pub_wrong"] += pub_wrong
        print(
            "| %s | %.0f %% | %+.1f %% / %.1f %% / %+.1f %% | %s | %s | %s | %s | %.0f | %.1f | %d / %d / %d | %s |"
            % (
                SCENARIOS[si][0],
                100 * NOISES[ni],
                100 * g1,
                100 * q1,
                100 * g8,
                "keep" if truth_keep else "revert",
                pct(keep, args.reps),
                pct(inconclusive, args.reps),
                pct(wrong, args.reps),
                requests,
                switches,
                counts["keep"],
                counts["revert"],
                counts["undefined"],
                pct(flips, args.reps),
            )
        )
    print()
    print(
        "Overall: statistical rule wrong in %s of %d trials; published rule flipped in %s and decided "
        "against the statistical truth in %s."
        % (
            pct(totals["wrong"], totals["n"]),
            totals["n"],
            pct(totals["pub_flips"], totals["n"]),
            pct(totals["pub_wrong"], totals["n"]),
        )
    )
    print()
    print("## Statistical rule on synthetic lognormal blocks (unit-test model, thermal drift -5 %)")
    print()
    print("| True c=1 gain | True c=8 | Block noise | Truth | Keep | Inconclusive | Wrong | Requests |")
    print("|---|---|---|---|---|---|---|---|")
    for task, (keep, inconclusive, wrong, requests, _switches) in zip(synthetic_tasks, synthetic_results):
        ci, ni, n, _seed, g1, g8, truth_keep = task
        print(
            "| %+.0f %% | %+.0f %% | %.0f %% | %s | %s | %s | %s | %.0f |"
            % (
                100 * g1,
                100 * g8,
                100 * NOISES[ni],
                "keep" if truth_keep else "revert",
                pct(keep, n),
                pct(inconclusive, n),
                pct(wrong, n),
                requests,
            )
        )
    print()
    print("(%.0f s)" % (time.time() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
