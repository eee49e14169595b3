# SPDX-License-Identifier: Apache-2.0
"""Choosing num_speculative_tokens: Leviathan predictions, pruning, and the measured comparison."""

import math
import random

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import StatsError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.ksweep import choose_k, expected_tokens, k_sweep, leviathan_speedup, sweep_schedule

# Leviathan et al. (arXiv:2211.17192), E and S computed from their formulas (section 3 of the paper):
# alpha -> {gamma: (E, S at c = 0.05, S at c = 0.2)}, two decimals.
LEVIATHAN_TABLE = {
    0.6: {1: (1.60, 1.52, 1.33), 3: (2.18, 1.89, 1.36), 5: (2.38, 1.91, 1.19), 7: (2.46, 1.82, 1.02)},
    0.7: {1: (1.70, 1.62, 1.42), 3: (2.53, 2.20, 1.58), 5: (2.94, 2.35, 1.47), 7: (3.14, 2.33, 1.31)},
    0.8: {1: (1.80, 1.71, 1.50), 3: (2.95, 2.57, 1.85), 5: (3.69, 2.95, 1.84), 7: (4.16, 3.08, 1.73)},
}
CASES = [(a, g, *vals) for a, row in LEVIATHAN_TABLE.items() for g, vals in row.items()]


@pytest.mark.parametrize(("alpha", "gamma", "tokens", "s005", "s02"), CASES)
def test_leviathan_speedup_matches_the_reference_table(alpha, gamma, tokens, s005, s02):
    assert leviathan_speedup(alpha, gamma, 0.0) == pytest.approx(tokens, abs=0.005)
    assert leviathan_speedup(alpha, gamma, 0.05) == pytest.approx(s005, abs=0.005)
    assert leviathan_speedup(alpha, gamma, 0.2) == pytest.approx(s02, abs=0.005)
    # the geometric per-position rates alpha^(i+1) give the same expected tokens
    rates = [alpha ** (i + 1) for i in range(gamma)]
    assert expected_tokens(gamma, rates) == pytest.approx(tokens, abs=0.005)


def test_leviathan_edge_cases():
    assert leviathan_speedup(1.0, 4, 0.0) == 5.0
    assert leviathan_speedup(0.0, 4, 0.1) == pytest.approx(1 / 1.4)
    with pytest.raises(StatsError, match="alpha"):
        leviathan_speedup(1.2, 3, 0.1)


# Per-position acceptance 0.84 / 0.60 / 0.39 / 0.27 (eugr/spark-vllm-docker issue #343, k=4).
SPARK = [0.84, 0.60, 0.39, 0.27]


def test_k_sweep_predicts_from_the_measured_positions_and_extrapolates():
    out = k_sweep([1, 2, 3, 4, 5, 6, 7], SPARK, draft_cost=0.05)
    pred = {p["k"]: p for p in out["predictions"]}
    assert out["alpha"] == 0.84
    # measured positions: E(k) = 1 + sum of the first k rates
    assert pred[4]["speedup"] == pytest.approx((1 + sum(SPARK)) / 1.2)
    assert pred[4]["extrapolated"] is False and pred[5]["extrapolated"] is True
    # beyond the measured positions the rates continue with the last conditional acceptance
    ratio = 0.27 / 0.39
    assert pred[5]["speedup"] == pytest.approx((1 + sum(SPARK) + 0.27 * ratio) / 1.25)
    # the optimistic continuation uses the largest conditional acceptance: position 0 here
    assert out["alpha_optimistic"] == pytest.approx(0.84)
    assert pred[5]["speedup_optimistic"] == pytest.approx((1 + sum(SPARK) + 0.27 * 0.84) / 1.25)
    for p in out["predictions"]:
        assert p["speedup_optimistic"] >= p["speedup"] - 1e-12


def test_k_sweep_of_a_geometric_draft_reduces_to_leviathan():
    alpha = 0.7
    out = k_sweep(range(1, 8), [alpha, alpha**2], draft_cost=0.1)
    for p in out["predictions"]:
        assert p["speedup"] == pytest.approx(leviathan_speedup(alpha, p["k"], 0.1))
        assert p["speedup_optimistic"] == pytest.approx(p["speedup"])


def test_k_sweep_prunes_hopeless_k_for_a_cheap_draft():
    out = k_sweep([1, 2, 3, 4, 5, 6, 7], SPARK, draft_cost=0.05)
    best = max(p["speedup"] for p in out["predictions"])
    for p in out["predictions"]:
        assert p["pruned"] == (p["speedup_optimistic"] < 0.95 * best)
    assert out["survivors"] == [4, 5, 6, 7]
    assert "below the best" in next(p for p in out["predictions"] if p["k"] == 1)["reason"]
    assert out["best_predicted"] in out["survivors"]


def test_k_sweep_for_an_expensive_draft_keeps_the_middle():
    out = k_sweep([1, 2, 3, 4, 5, 6, 7], SPARK, draft_cost=0.2)
    assert out["best_predicted"] == 3
    assert out["survivors"] == [2, 3, 4]
    # against a measured reference no candidate is worth trying
    assert k_sweep([1, 2, 3, 4, 5, 6, 7], SPARK, draft_cost=0.2, reference=2.0)["survivors"] == []
    out = k_sweep([1, 2, 3], [0.2, 0.04, 0.008], draft_cost=0.3)
    # no k can beat the baseline even optimistically
    assert out["survivors"] == []
    assert all("no speedup" in p["reason"] for p in out["predictions"])


def test_k_sweep_uses_the_upper_confidence_bound_with_counts():
    few = k_sweep([1, 2, 3, 4, 5, 6, 7], SPARK, draft_cost=0.2, num_drafts=20)
    many = k_sweep([1, 2, 3, 4, 5, 6, 7], SPARK, draft_cost=0.2, num_drafts=100000)
    plain = k_sweep([1, 2, 3, 4, 5, 6, 7], SPARK, draft_cost=0.2)
    assert few["alpha_optimistic"] > many["alpha_optimistic"] > plain["alpha_optimistic"] - 1e-12
    assert many["alpha_optimistic"] == pytest.approx(0.84, abs=0.01)
    # fewer drafts -> wider bounds -> fewer candidates pruned
    assert set(plain["survivors"]) <= set(many["survivors"]) <= set(few["survivors"])
    assert len(few["survivors"]) > len(plain["survivors"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"candidates": []}, "candidates"),
        ({"candidates": [0, 1]}, "candidates"),
        ({"acceptance_rates": []}, "acceptance_rates"),
        ({"acceptance_rates": [0.5, 1.2]}, "acceptance_rates"),
        ({"acceptance_rates": [0.5, 0.6]}, "must not increase"),
        ({"draft_cost": -0.1}, "draft_cost"),
        ({"num_drafts": 0}, "num_drafts"),
    ],
)
def test_k_sweep_rejects_bad_input(kwargs, match):
    args = {"candidates": [1, 2], "acceptance_rates": [0.7, 0.5], "draft_cost": 0.1}
    args.update(kwargs)
    with pytest.raises(StatsError, match=match):
        k_sweep(**args)


def test_sweep_schedule_is_mirrored():
    order = [(s["arm"], s["num_speculative_tokens"]) for s in sweep_schedule([3, 2], 2)]
    base = ("baseline", None)
    assert order == [base, ("speculative", 2), ("speculative", 3), ("speculative", 3), ("speculative", 2), base]
    assert all(s["concurrency"] == 1 and s["n_requests"] == 8 for s in sweep_schedule([2], 1))


def sweep_blocks(gains, rounds=4, noise=0.004, seed=0):
    rng = random.Random(seed)
    out = []
    for i, step in enumerate(sweep_schedule(sorted(gains), rounds)):
        k = step["num_speculative_tokens"]
        thr = 30.0 * (1 + gains[k] if k else 1.0) * math.exp(rng.gauss(0, noise))
        block = {
            "arm": step["arm"],
            "concurrency": 1,
            "index": i,
            "output_throughput": thr,
            "median_tpot_ms": 1000.0 / thr,
            "completed": 8,
        }
        if k:
            block["num_speculative_tokens"] = k
        out.append(block)
    return out


def test_choose_k_picks_the_best_lower_bound():
    out = choose_k(sweep_blocks({2: 0.25, 3: 0.40, 4: 0.30}))
    assert out["k"] == 3
    rows = {r["k"]: r for r in out["candidates"]}
    assert rows[3]["ci"][0] <= rows[3]["estimate"] <= rows[3]["ci"][1]
    assert rows[3]["score"] == rows[3]["ci"][0]
    assert "k=3 has the best lower bound" in out["reason"]


def test_choose_k_ties_go_to_the_smaller_k():
    out = choose_k(sweep_blocks({2: 0.300, 3: 0.305, 4: 0.20}))
    rows = {r["k"]: r for r in out["candidates"]}
    assert rows[3]["score"] > rows[2]["score"]  # k=3 is nominally better ...
    assert out["k"] == 2  # ... but within 1 %, so the smaller k wins
    assert "within 1 %" in out["reason"]
    assert choose_k(sweep_blocks({2: 0.300, 3: 0.305, 4: 0.20}), tie_tolerance=0.0)["k"] == 3


def test_choose_k_rejects_sweeps_without_k_or_with_too_few_blocks():
    blocks = sweep_blocks({2: 0.3}, rounds=1)
    with pytest.raises(StatsError, match="at least 4 blocks"):
        choose_k(blocks)
    untagged = [{k: v for k, v in b.items() if k != "num_speculative_tokens"} for b in sweep_blocks({2: 0.3})]
    with pytest.raises(StatsError, match="num_speculative_tokens"):
        choose_k(untagged)
