# SPDX-License-Identifier: Apache-2.0
"""Seeded Monte Carlo checks of the sequential rule on synthetic blocks.

Each block's throughput and TPOT carry lognormal noise (``sigma`` is the run-to-run noise of a block
of the default size at its concurrency, scaled by sqrt(default / n_requests) for other sizes) and a slow drift in the measurement index
(a thermal decay towards -``drift_total`` plus a small linear term). "Wrong" counts conclusive
decisions against the truth; a budget-exhausted ``revert (inconclusive)`` is counted apart.
Small trial counts keep each test to a few seconds; the bounds leave room for sampling error
while failing if the error control is lost (for example without the error spending).
"""

import math
import random

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import DEFAULTS
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.sequential import SequentialTrial, verdict

PUBLISHED_REQUESTS = 4 * 50  # one run of 50 prompts at c=1 and c=8, before and after
DEFAULT_BLOCK = {1: DEFAULTS["requests_c1"], 8: DEFAULTS["requests_c8"]}


def make_measure(rng, g1, g8, sigma, drift_total=0.05):
    q1 = 1.0 - 1.0 / (1.0 + 1.2 * g1)  # TPOT drops a little more than throughput rises (prefill)

    def measure(step):
        i = step["index"]
        drift = -drift_total * (1.0 - math.exp(-i / 12.0)) - 0.0005 * i
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


def simulate(g1, g8, sigma, trials, seed, **thresholds):
    rng = random.Random(seed)
    c8_ok = thresholds.get("high_concurrency", 8) is None or g8 >= -thresholds.get("c8_tolerance", 0.05)
    truth_keep = g1 >= thresholds.get("min_gain", 0.10) and c8_ok
    out = {"wrong": 0, "inconclusive": 0, "keep": 0, "requests": 0.0}
    for _trial in range(trials):
        v = SequentialTrial(**thresholds).run(make_measure(rng, g1, g8, sigma))
        if v["label"] == "revert (inconclusive)":
            out["inconclusive"] += 1
        elif (v["decision"] == "keep") != truth_keep:
            out["wrong"] += 1
        out["keep"] += v["decision"] == "keep"
        out["requests"] += v["requests_spent"] / trials
    return out


@pytest.mark.parametrize(("sigma", "trials"), [(0.02, 400), (0.05, 300), (0.10, 150)])
def test_wrong_keeps_are_rare_five_points_below_the_threshold(sigma, trials):
    out = simulate(0.05, 0.05, sigma, trials, seed=11)
    assert out["wrong"] <= 0.01 * trials
    assert out["keep"] == out["wrong"]


@pytest.mark.parametrize(("sigma", "trials"), [(0.02, 400), (0.05, 300), (0.10, 600)])
def test_wrong_reverts_are_rare_five_points_above_the_threshold(sigma, trials):
    out = simulate(0.15, 0.05, sigma, trials, seed=12)
    assert out["wrong"] <= 0.01 * trials
    if sigma == 0.02:  # low noise: the budget suffices almost always
        assert out["inconclusive"] <= 0.10 * trials


def test_regressions_at_c8_are_caught_even_with_a_large_c1_gain():
    trials = 300
    out = simulate(0.6, -0.10, 0.05, trials, seed=13)
    assert out["wrong"] <= 0.01 * trials
    assert out["keep"] == out["wrong"]


def naive_repeated_looks(rng, g1, sigma):
    """c=1 only: the same intervals at the full confidence at every look (no error spending)."""
    measure = make_measure(rng, g1, 0.0, sigma)
    blocks = []
    for rounds in range(1, 11):
        for arm in ("baseline", "speculative") if rounds % 2 else ("speculative", "baseline"):
            step = {"arm": arm, "concurrency": 1, "n_requests": 8, "index": len(blocks)}
            blocks.append(dict(step, **measure(step)))
        if rounds >= 3:
            v = verdict(blocks, min_rounds=rounds, max_rounds=rounds, high_concurrency=None)
            if v["label"] != "revert (inconclusive)":
                return v["decision"]
    return "revert"


def test_without_error_spending_the_wrong_keep_rate_grows():
    # Just below the threshold, looking after every round at the full confidence keeps several
    # times more often than the rule that spends the error over the looks.
    trials = 400
    spent = simulate(0.099, 0.0, 0.03, trials, seed=14, high_concurrency=None)
    rng = random.Random(14)
    naive = sum(naive_repeated_looks(rng, 0.099, 0.03) == "keep" for _trial in range(trials))
    assert spent["keep"] <= 0.025 * trials  # one-sided alpha / 2 at the threshold itself
    assert naive >= 2 * spent["keep"] + 0.02 * trials


def test_clear_cases_stop_early_and_spend_fewer_requests():
    clear = simulate(0.6, 0.10, 0.02, 200, seed=15)
    clear_revert = simulate(0.0, -0.3, 0.02, 200, seed=16)
    borderline = simulate(0.15, 0.05, 0.05, 100, seed=17)
    assert clear["keep"] == 200 and clear_revert["keep"] == 0
    assert clear["requests"] <= 0.5 * PUBLISHED_REQUESTS  # the aim: at most half the published procedure
    assert clear_revert["requests"] <= 0.5 * PUBLISHED_REQUESTS
    assert borderline["requests"] > 1.3 * clear["requests"]


def test_strong_drift_does_not_cause_wrong_decisions():
    trials = 200
    rng = random.Random(18)
    wrong = 0
    for g1, truth in ((0.05, "revert"), (0.15, "keep")):
        for _trial in range(trials):
            measure = make_measure(rng, g1, 0.05, 0.02, drift_total=0.15)
            v = SequentialTrial().run(measure)
            if v["label"] != "revert (inconclusive)" and v["decision"] != truth:
                wrong += 1
    assert wrong <= 0.01 * 2 * trials
