# SPDX-License-Identifier: Apache-2.0
"""Drift-corrected log-ratio intervals, the paired bootstrap and their properties."""

import math
from fractions import Fraction

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import StatsError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.distributions import t_ppf
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.estimation import _percentile, compare, cv, paired_bootstrap, trend_estimate
from hypothesis import given, settings
from hypothesis import strategies as st

ORDER = ["baseline", "speculative", "speculative", "baseline"]  # one mirrored pair of rounds


def blocks_from(base, spec, concurrency=1, order=None, start=0):
    """Blocks with the given throughputs (TPOT = 1000 / throughput), in ``order`` (mirrored rounds)."""
    out = []
    b, s = list(base), list(spec)
    index = start
    order = order or ORDER
    while b or s:
        for arm in order:
            source = b if arm == "baseline" else s
            if source:
                value = source.pop(0)
                out.append(
                    {
                        "arm": arm,
                        "concurrency": concurrency,
                        "index": index,
                        "output_throughput": value,
                        "median_tpot_ms": 1000.0 / value,
                        "completed": 8,
                        "failed": 0,
                    }
                )
                index += 1
    return out


def exact_ols(points):
    """Independent reference: normal equations of log(y) ~ 1 + index + arm in exact rationals."""
    rows = [(Fraction(1), Fraction(t), Fraction(1 if arm else 0)) for t, arm, _value in points]
    ys = [Fraction(math.log(v)) for _index, _arm, v in points]
    xtx = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    xty = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(3)]
    # Gauss-Jordan inverse of X'X
    aug = [xtx[i] + [Fraction(int(i == j)) for j in range(3)] for i in range(3)]
    for col in range(3):
        pivot = next(r for r in range(col, 3) if aug[r][col] != 0)
        aug[col], aug[pivot] = aug[pivot], aug[col]
        p = aug[col][col]
        aug[col] = [v / p for v in aug[col]]
        for r in range(3):
            if r != col:
                f = aug[r][col]
                aug[r] = [a - f * c for a, c in zip(aug[r], aug[col])]
    inv = [row[3:] for row in aug]
    beta = [sum(inv[i][j] * xty[j] for j in range(3)) for i in range(3)]
    rss = sum((y - sum(b * x for b, x in zip(beta, r))) ** 2 for r, y in zip(rows, ys))
    df = len(points) - 3
    return float(beta[2]), math.sqrt(float(rss / df * inv[2][2])), float(beta[1]), df


def test_trend_estimate_matches_reference_regression():
    # Reference: numpy.linalg.lstsq on [1, index, arm] and scipy.stats.t.ppf(0.975, 5).
    values = [30.1, 36.2, 36.9, 29.4, 29.0, 35.1, 35.8, 28.6]
    arms = [0, 1, 1, 0, 0, 1, 1, 0]
    points = [(i, bool(a), v) for i, (a, v) in enumerate(zip(arms, values))]
    est = trend_estimate(points)
    assert est["trend"] is True
    assert est["df"] == 5
    assert est["delta"] == pytest.approx(0.20679932496123418, rel=1e-12)
    assert est["se"] == pytest.approx(0.008680105922508254, rel=1e-10)
    assert est["slope"] == pytest.approx(-0.006870421556079606, rel=1e-10)
    half = t_ppf(0.975, 5) * est["se"]
    assert est["delta"] - half == pytest.approx(0.18448640234543526, rel=1e-9)
    assert est["delta"] + half == pytest.approx(0.2291122475770331, rel=1e-9)
    # the measured order B S S B is orthogonal to the arm: no variance inflation
    assert est["vif"] == pytest.approx(1.0)


def test_no_trend_model_equals_the_pooled_two_sample_t_interval():
    # Reference: scipy.stats.ttest_ind(log(spec), log(base), equal_var=True).confidence_interval(0.95)
    base, spec = [10, 11, 9.5], [12, 13.5, 12.8]
    points = [(i, False, v) for i, v in enumerate(base)] + [(i + 3, True, v) for i, v in enumerate(spec)]
    est = trend_estimate(points, trend=False)
    assert est["df"] == 4
    half = t_ppf(0.975, 4) * est["se"]
    assert est["delta"] == pytest.approx(0.22842311391968062, rel=1e-12)
    assert est["delta"] - half == pytest.approx(0.07623742855893681, rel=1e-9)
    assert est["delta"] + half == pytest.approx(0.38060879928042446, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=-0.2, max_value=0.2), min_size=6, max_size=16),
    st.floats(min_value=-0.5, max_value=1.0),
    st.floats(min_value=-0.01, max_value=0.01),
)
def test_trend_estimate_agrees_with_exact_normal_equations(noise, effect, drift):
    points = []
    for i, e in enumerate(noise):
        arm = ORDER[i % 4] == "speculative"
        points.append((i, arm, 50.0 * math.exp(effect * arm + drift * i + e)))
    est = trend_estimate(points)
    delta, se, slope, df = exact_ols(points)
    assert est["df"] == df
    assert est["delta"] == pytest.approx(delta, abs=1e-9)
    assert est["slope"] == pytest.approx(slope, abs=1e-9)
    assert est["se"] == pytest.approx(se, rel=1e-6, abs=1e-12)


def test_linear_drift_is_removed_exactly():
    # 10 % gain, 1 % drift per block, no noise: the trend model recovers the gain exactly,
    # while the plain ratio of means is biased when the order is not balanced.
    order = ["baseline", "speculative"]
    blocks = []
    for i in range(8):
        arm = order[i % 2]
        value = 100.0 * (1.1 if arm == "speculative" else 1.0) * math.exp(-0.01 * i)
        blocks.append({"arm": arm, "concurrency": 1, "index": i, "output_throughput": value,
                       "median_tpot_ms": 1000 / value, "completed": 8})  # fmt: skip
    out = compare(blocks)
    assert out["estimate"] == pytest.approx(0.1, abs=1e-12)
    assert out["ratio_of_means"] == pytest.approx(1.1 * math.exp(-0.01) - 1, rel=1e-3)
    assert out["ratio_of_means"] < 0.095
    tpot = compare(blocks, metric="median_tpot_ms")
    assert tpot["estimate"] == pytest.approx(1 / 1.1 - 1, abs=1e-12)


def test_trend_is_dropped_when_order_confounds_arm_and_time():
    # Three points: no degree of freedom for a trend; too few for any interval.
    est = trend_estimate([(0, False, 10.0), (1, True, 12.0), (2, False, 10.5)])
    assert est["trend"] is False
    assert est["df"] == 1
    assert est["se"] is not None
    est = trend_estimate([(0, False, 10.0), (1, True, 12.0)])
    assert est["se"] is None and est["residual_sd"] is None and est["df"] == 0
    with pytest.raises(StatsError, match="both arms"):
        trend_estimate([(0, False, 10.0), (1, False, 12.0)])


def test_unbalanced_order_inflates_the_variance():
    # B B B S S S: time and arm are strongly correlated, the trend term inflates the variance
    points = [(i, i >= 3, v) for i, v in enumerate([10.0, 10.2, 9.9, 12.0, 12.3, 11.8])]
    est = trend_estimate(points)
    assert est["trend"] is True
    assert est["vif"] > 4


def test_compare_needs_a_complete_pair_and_reports_missing_intervals():
    blocks = blocks_from([10.0], [12.0])
    out = compare(blocks)
    assert out["ci"] is None and out["rounds"] == 1
    assert out["estimate"] == pytest.approx(0.2)
    with pytest.raises(StatsError, match="no complete"):
        compare(blocks_from([10.0], [12.0], concurrency=8))


# ------------------------------------------------------------------------ bootstrap


def test_paired_bootstrap_is_seeded_and_brackets_the_mean():
    diffs = [0.10, 0.12, 0.08, 0.15, 0.11, 0.09]
    a = paired_bootstrap(diffs, 0.95, 2000, seed=1)
    b = paired_bootstrap(diffs, 0.95, 2000, seed=1)
    c = paired_bootstrap(diffs, 0.95, 2000, seed=2)
    assert a == b
    assert a != c
    mean = sum(diffs) / len(diffs)
    assert min(diffs) <= a[0] < mean < a[1] <= max(diffs)
    wide = paired_bootstrap(diffs, 0.999, 2000, seed=1)
    assert wide[0] <= a[0] and wide[1] >= a[1]


def test_paired_bootstrap_rejects_degenerate_input():
    with pytest.raises(StatsError, match="two pairs"):
        paired_bootstrap([0.1], 0.95)
    with pytest.raises(StatsError, match="at least 10"):
        paired_bootstrap([0.1, 0.2], 0.95, resamples=5)


def test_percentile_interpolates_between_order_statistics():
    assert _percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert _percentile([1.0, 2.0, 3.0, 4.0], 0.0) == 1.0
    assert _percentile([1.0, 2.0, 3.0, 4.0], 1.0) == 4.0


def test_cv():
    assert cv([1.0]) is None
    assert cv([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)


# ------------------------------------------------------------------------ properties

noise_lists = st.lists(st.floats(min_value=-0.15, max_value=0.15), min_size=8, max_size=16)


def synthetic(noise, gain, drift=0.0):
    """Interleaved blocks with log-noise ``noise`` and a drift linear in the measurement index."""
    n = len(noise) // 2
    base = [100.0 * math.exp(noise[i]) for i in range(n)]
    spec = [100.0 * (1 + gain) * math.exp(noise[i + n]) for i in range(n)]
    blocks = blocks_from(base, spec)
    for b in blocks:
        b["output_throughput"] *= math.exp(drift * b["index"])
    return blocks


@settings(max_examples=80, deadline=None)
@given(noise_lists, st.floats(min_value=-0.5, max_value=1.5), st.floats(min_value=0.5, max_value=0.999))
def test_interval_contains_the_estimate(noise, gain, confidence):
    out = compare(synthetic(noise, gain), confidence=confidence)
    assert out["ci"][0] <= out["estimate"] <= out["ci"][1]


@settings(max_examples=80, deadline=None)
@given(noise_lists, st.floats(min_value=-0.5, max_value=1.5), st.floats(min_value=0.5, max_value=0.99))
def test_interval_is_wider_at_higher_confidence(noise, gain, confidence):
    blocks = synthetic(noise, gain)
    low = compare(blocks, confidence=confidence)
    high = compare(blocks, confidence=min(0.9999, confidence + 0.005))
    assert high["ci"][0] <= low["ci"][0] and high["ci"][1] >= low["ci"][1]
    if low["ci"][1] - low["ci"][0] > 1e-9:  # not a noiseless sample
        assert high["ci"][1] - high["ci"][0] > low["ci"][1] - low["ci"][0]


@settings(max_examples=80, deadline=None)
@given(noise_lists, st.floats(min_value=-0.5, max_value=1.5))
def test_swapping_arms_inverts_the_gain(noise, gain):
    blocks = synthetic(noise, gain)
    swapped = [dict(b, arm="speculative" if b["arm"] == "baseline" else "baseline") for b in blocks]
    a = compare(blocks)
    b = compare(swapped)
    assert (1 + a["estimate"]) * (1 + b["estimate"]) == pytest.approx(1.0, rel=1e-9)
    assert (1 + a["ci"][0]) * (1 + b["ci"][1]) == pytest.approx(1.0, rel=1e-9)
    assert (1 + a["ci"][1]) * (1 + b["ci"][0]) == pytest.approx(1.0, rel=1e-9)


@settings(max_examples=80, deadline=None)
@given(noise_lists, st.floats(min_value=-0.5, max_value=1.5), st.floats(min_value=1.001, max_value=2.0))
def test_interval_is_monotone_in_a_shift_of_the_speculative_arm(noise, gain, factor):
    blocks = synthetic(noise, gain)
    shifted = [dict(b, output_throughput=b["output_throughput"] * factor) if b["arm"] == "speculative" else b
               for b in blocks]  # fmt: skip
    a = compare(blocks)
    b = compare(shifted)
    assert b["estimate"] > a["estimate"]
    assert b["ci"][0] > a["ci"][0] and b["ci"][1] > a["ci"][1]
    # a multiplicative shift moves the log interval rigidly
    assert (1 + b["ci"][0]) / (1 + a["ci"][0]) == pytest.approx(factor, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(noise_lists, st.floats(min_value=-0.5, max_value=1.5), st.floats(min_value=-0.02, max_value=0.02))
def test_a_linear_drift_does_not_move_the_estimate(noise, gain, drift):
    # with the trend term, adding any linear drift in the measurement index changes nothing
    a = compare(synthetic(noise, gain))
    b = compare(synthetic(noise, gain, drift))
    assert b["estimate"] == pytest.approx(a["estimate"], rel=1e-9, abs=1e-12)
    assert b["ci"][0] == pytest.approx(a["ci"][0], rel=1e-9, abs=1e-12)


def test_interval_coverage_under_drift():
    """Seeded Monte Carlo: the 95 % interval covers the true gain about 95 % of the time with drift."""
    import random

    rng = random.Random(20240611)
    covered = 0
    trials = 1000
    for _trial in range(trials):
        noise = [rng.gauss(0, 0.05) for _block in range(12)]
        blocks = synthetic(noise, 0.2, drift=-0.01)
        lo, hi = compare(blocks, confidence=0.95)["ci"]
        covered += lo <= 0.2 <= hi
    # binomial SD at 95 %: 0.7 points over 1000 trials
    assert 0.93 <= covered / trials <= 0.97
