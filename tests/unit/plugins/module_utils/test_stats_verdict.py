# SPDX-License-Identifier: Apache-2.0
"""The verdict: every decision branch, the schedule, warnings, validation and SequentialTrial."""

import copy
import math
import random

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import StatsError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.sequential import SequentialTrial, verdict
from hypothesis import given, settings
from hypothesis import strategies as st

B, S = "baseline", "speculative"
ODD = [(B, 1), (B, 8), (S, 8), (S, 1)]
EVEN = [(S, 1), (S, 8), (B, 8), (B, 1)]


def block(arm, c, index, thr, tpot, n=None, failed=0):
    return {
        "arm": arm,
        "concurrency": c,
        "index": index,
        "output_throughput": thr,
        "median_tpot_ms": tpot,
        "completed": n or (8 if c == 1 else 16),
        "failed": failed,
    }


def measured(rounds, g1=0.5, q1=0.35, g8=0.05, noise=0.01, seed=0, drift=0.0, levels=(1, 8), order=None):
    """Blocks of ``rounds`` mirrored rounds with true effects and lognormal block noise."""
    rng = random.Random(seed)
    out = []
    index = 0
    for r in range(1, rounds + 1):
        seq = order[r - 1] if order else (ODD if r % 2 else EVEN)
        for arm, c in seq:
            if c not in levels:
                continue
            spec = arm == S
            d = math.exp(drift * index)
            if c == 1:
                thr = 30.0 * ((1 + g1) if spec else 1.0) * d * math.exp(rng.gauss(0, noise))
                tpot = 33.0 * ((1 - q1) if spec else 1.0) / d * math.exp(rng.gauss(0, noise))
            else:
                thr = 140.0 * ((1 + g8) if spec else 1.0) * d * math.exp(rng.gauss(0, noise))
                tpot = 50.0 / d * math.exp(rng.gauss(0, noise))
            out.append(block(arm, c, index, thr, tpot))
            index += 1
    return out


# ------------------------------------------------------------------------ decisions


def test_no_blocks_asks_for_the_first_round():
    v = verdict([])
    assert v["decision"] == "continue" and v["label"] == "continue"
    assert v["requests_spent"] == 0 and v["rounds"] == 0 and v["arm_switches"] == 0
    assert [(b["arm"], b["concurrency"], b["n_requests"]) for b in v["next_blocks"]] == [
        (B, 1, 4),
        (B, 8, 8),
        (S, 8, 8),
        (S, 1, 4),
    ]
    assert v["gain_c1"]["status"] == "not measured"
    assert v["noise"] == {"c1": None, "c8": None}


def test_too_few_rounds_continue_with_an_estimate_but_no_interval():
    v = verdict(measured(2, g1=0.6))
    assert v["decision"] == "continue"
    g = v["gain_c1"]
    assert g["status"] == "insufficient" and g["ci"] is None and g["look"] == 0
    assert g["estimate"] == pytest.approx(0.6, abs=0.05)
    assert g["rounds"] == 2
    assert "no interval yet" in v["reason"] or "measure" in v["reason"]
    # round 3 is an odd round: baseline first
    assert [(b["arm"], b["concurrency"]) for b in v["next_blocks"]] == ODD


def test_keep_strong():
    v = verdict(measured(3, g1=0.6, q1=0.4, g8=0.1))
    assert v["decision"] == "keep" and v["label"] == "keep (strong)"
    assert v["gain_c1"]["ci"][0] >= 0.30
    assert v["tpot_reduction_c1"]["ci"][0] >= 0.20
    assert v["gain_c8"]["ci"][0] >= -0.05
    assert "meet the published accept rule" in v["reason"]
    assert v["next_blocks"] == [] and v["budget_reached"] is False
    assert v["requests_spent"] == 3 * (2 * 8 + 2 * 16)
    assert v["rounds"] == 3
    # one arm switch per round (B..S, then S..B, then B..S)
    assert v["arm_switches"] == 3
    for key in ("gain_c1", "tpot_reduction_c1", "gain_c8"):
        entry = v[key]
        assert entry["confidence"] == pytest.approx(1 - 0.05 / 8)
        assert entry["bootstrap"]["ci"][0] <= entry["estimate"] <= entry["bootstrap"]["ci"][1]
        assert entry["look"] == 1 and entry["looks"] == 8 and entry["df"] == 3 and entry["trend"] is True


def test_keep_marginal_in_the_published_undefined_band():
    # +20 % throughput and -15 % TPOT: undefined in the published rule, a marginal keep here
    v = verdict(measured(3, g1=0.2, q1=0.15, g8=0.05, noise=0.005))
    assert v["decision"] == "keep" and v["label"] == "keep (marginal)"
    assert 0.10 <= v["gain_c1"]["ci"][0] < 0.30
    assert "short of the published accept rule" in v["reason"]


def test_strong_needs_the_tpot_drop_too():
    # +60 % throughput with only 10 % lower TPOT: marginal
    v = verdict(measured(3, g1=0.6, q1=0.10, g8=0.05, noise=0.005))
    assert v["label"] == "keep (marginal)"
    assert v["gain_c1"]["ci"][0] >= 0.30 and v["tpot_reduction_c1"]["ci"][0] < 0.20
    # with a lower strong_tpot_drop it is strong
    assert verdict(measured(3, g1=0.6, q1=0.10, g8=0.05, noise=0.005), strong_tpot_drop=0.05)["label"] == ("keep (strong)")


def test_revert_no_gain():
    v = verdict(measured(3, g1=0.0, q1=0.0))
    assert v["decision"] == "revert" and v["label"] == "revert (no gain)"
    assert v["gain_c1"]["ci"][1] < 0.10
    assert "entirely below the minimum gain +10.0 %" in v["reason"]
    assert v["gain_c1"]["bootstrap"] is not None
    assert v["next_blocks"] == []


def test_revert_when_tpot_rises():
    v = verdict(measured(3, g1=0.3, q1=-0.2))
    assert v["label"] == "revert (TPOT not reduced)"
    assert v["tpot_reduction_c1"]["ci"][1] < 0
    assert "higher" in v["reason"]


def test_revert_on_regression_at_c8():
    v = verdict(measured(3, g1=0.6, q1=0.4, g8=-0.4))
    assert v["label"] == "revert (regression at c=8)"
    assert v["gain_c8"]["ci"][1] < -0.05
    assert "below the tolerance -5.0 %" in v["reason"]


def test_c8_revert_does_not_wait_for_c1():
    # c=1 is undecided, c=8 clearly regresses: revert at the first look
    v = verdict(measured(3, g1=0.12, q1=0.1, g8=-0.5, noise=0.03))
    assert v["gain_c1"]["status"] == "inconclusive"
    assert v["label"] == "revert (regression at c=8)"


def test_revert_on_failed_speculative_requests():
    blocks = measured(1, g1=0.6)
    blocks[2]["failed"] = 2  # S@8
    v = verdict(blocks)
    assert v["label"] == "revert (failed requests)"
    assert "failed 2 request(s)" in v["reason"]
    assert v["requests_spent"] == 2 * 8 + 2 * 16 + 2
    assert verdict(blocks, max_failed=2)["decision"] == "continue"


def test_baseline_failures_only_warn():
    blocks = measured(3, g1=0.6, q1=0.4)
    blocks[0]["failed"] = 1
    v = verdict(blocks)
    assert v["decision"] == "keep"
    assert any("baseline arm failed 1" in w for w in v["warnings"])


def test_inconclusive_at_max_rounds_reverts_with_the_open_questions():
    blocks = measured(4, g1=0.10, q1=0.08, g8=0.0, noise=0.05, seed=3)
    v = verdict(blocks, max_rounds=4)
    assert v["decision"] == "revert" and v["label"] == "revert (inconclusive)"
    assert v["budget_reached"] is True
    assert "max_rounds 4" in v["reason"]
    assert "throughput at c=1" in v["reason"] and "minimum gain" in v["reason"]
    assert v["gain_c1"]["status"] == "inconclusive"
    # the last look gets the last share of alpha
    assert v["gain_c1"]["look"] == 2 and v["gain_c1"]["looks"] == 2
    # the same data before the budget is spent: measure on
    assert verdict(blocks, max_rounds=6)["decision"] == "continue"


def test_inconclusive_at_max_requests():
    blocks = measured(3, g1=0.10, q1=0.08, g8=0.0, noise=0.05, seed=3)
    v = verdict(blocks, max_requests=150)
    assert v["label"] == "revert (inconclusive)"
    assert "144 requests" in v["reason"]
    assert verdict(blocks, max_requests=192)["decision"] == "continue"


def test_inconclusive_reason_names_only_the_open_questions():
    # the gain is clearly above 10 % but the TPOT reduction is not shown (TPOT unchanged)
    blocks = measured(3, g1=0.5, q1=0.0, g8=0.2, noise=0.02, seed=2)
    v = verdict(blocks, max_rounds=3)
    assert v["gain_c1"]["status"] == "above" and v["tpot_reduction_c1"]["status"] == "inconclusive"
    assert v["label"] == "revert (inconclusive)"
    open_part = v["reason"].split(": ", 1)[1].split("; reverting")[0]
    assert "median TPOT at c=1" in open_part and "vs no change" in open_part
    assert "throughput at c=1" not in open_part
    # c=1 still open after max_rounds pairs: keep is out of reach, so the trial ends without
    # measuring c=8 any further, and the reason says what c=8 showed
    only_c1 = measured(10, g1=0.10, q1=0.08, noise=0.05, levels=(1,), seed=3)
    v = verdict(only_c1)
    assert v["label"] == "revert (inconclusive)" and v["next_blocks"] == []
    assert "throughput at c=8 not measured" in v["reason"]
    with_one_c8_pair = [*only_c1, block(B, 8, 100, 140.0, 50.0), block(S, 8, 101, 150.0, 50.0)]
    v = verdict(with_one_c8_pair)
    assert "throughput at c=8 +7.1 % (no interval yet)" in v["reason"]
    assert verdict(only_c1[:-4])["decision"] == "continue"


def test_c1_settled_measures_only_c8_and_reverts_when_c8_stays_open():
    blocks = measured(3, g1=0.6, q1=0.4, g8=-0.05, noise=0.03, seed=1)
    v = verdict(blocks)
    assert v["gain_c1"]["status"] == "above" and v["tpot_reduction_c1"]["status"] == "above"
    assert v["gain_c8"]["status"] == "inconclusive"
    assert v["decision"] == "continue"
    # round 4 is even: speculative first, c=8 only
    assert [(b["arm"], b["concurrency"]) for b in v["next_blocks"]] == [(S, 8), (B, 8)]
    v = verdict(blocks, max_rounds=3)
    assert v["label"] == "revert (inconclusive)"
    assert "throughput at c=8" in v["reason"] and "tolerance -5.0 %" in v["reason"]
    assert "c=1" not in v["reason"].split(":", 1)[1].split(";")[0]


def test_high_concurrency_check_can_be_disabled():
    blocks = measured(3, g1=0.6, q1=0.4, levels=(1,))
    v = verdict(blocks)
    assert v["decision"] == "continue"  # waits for c=8 blocks
    assert [(b["arm"], b["concurrency"]) for b in v["next_blocks"]] == [(B, 8), (S, 8)]
    v = verdict(blocks, high_concurrency=None)
    assert v["decision"] == "keep"
    assert v["gain_c8"]["status"] == "disabled"
    assert "high-concurrency check is disabled" in v["reason"]
    assert "c8" not in v["noise"]
    assert verdict([], high_concurrency=None)["next_blocks"] == [
        {"arm": B, "concurrency": 1, "n_requests": 4},
        {"arm": S, "concurrency": 1, "n_requests": 4},
    ]


def test_other_high_concurrency_level():
    blocks = [dict(b, concurrency=4) if b["concurrency"] == 8 else b for b in measured(3, g1=0.6, q1=0.4)]
    v = verdict(blocks, high_concurrency=4)
    assert v["decision"] == "keep" and v["gain_c8"]["concurrency"] == 4
    v = verdict(blocks)
    assert any("concurrency 4 are not used" in w for w in v["warnings"])


def test_bootstrap_disagreement_holds_the_decision():
    # B S B S order (not mirrored) with a strong drift: the regression removes the drift and
    # finds the gain, the per-pair ratios carry the drift; the cross-check refuses to conclude.
    order = [[(B, 1), (S, 1)]] * 6
    blocks = measured(6, g1=0.35, q1=0.3, levels=(1,), drift=-0.25, noise=0.002, order=order)
    v = verdict(blocks, high_concurrency=None)
    g = v["gain_c1"]
    assert g["ci"][0] >= 0.10  # the t interval alone would keep
    assert g["bootstrap"]["ci"][0] < 0.10
    assert g["status"] == "inconclusive"
    assert v["decision"] == "continue"
    assert any("paired bootstrap interval" in w for w in v["warnings"])
    # without the cross-check the regression decides
    assert verdict(blocks, high_concurrency=None, bootstrap_resamples=0)["decision"] == "keep"


def test_extra_pairs_beyond_max_rounds_are_ignored():
    blocks = measured(5, g1=0.10, q1=0.08, noise=0.05, seed=3)
    v = verdict(blocks, max_rounds=4)
    assert v["gain_c1"]["rounds"] == 4
    assert any("exceed max_rounds" in w for w in v["warnings"])


# ------------------------------------------------------------------------ warnings and noise


def test_drift_is_detected_and_reported():
    v = verdict(measured(6, g1=0.2, q1=0.15, noise=0.003, drift=-0.004, seed=2))
    drift = v["noise"]["c1"]["drift"]
    assert drift["significant"] is True
    assert drift["estimate"] < -0.03
    assert any("drifted by" in w for w in v["warnings"])
    quiet = verdict(measured(6, g1=0.2, q1=0.15, noise=0.003, drift=0.0, seed=2))
    assert quiet["noise"]["c1"]["drift"]["significant"] is False
    assert not any("drifted" in w for w in quiet["warnings"])


def test_noise_level_is_reported_per_arm():
    v = verdict(measured(4, g1=0.2, q1=0.15, noise=0.2, seed=4))
    n1 = v["noise"]["c1"]
    assert n1["baseline_cv"] > 0.05 and n1["speculative_cv"] > 0.05
    assert n1["residual_sd"] > 0.10
    assert any("variation is" in w for w in v["warnings"])
    calm = verdict(measured(4, g1=0.2, q1=0.15, noise=0.01, seed=4))
    assert calm["noise"]["c1"]["residual_sd"] < 0.03
    assert not any("variation is" in w for w in calm["warnings"])


def test_confounded_order_warns():
    order = [[(B, 1)], [(B, 1)], [(B, 1)], [(S, 1)], [(S, 1)], [(S, 1)]]
    blocks = measured(6, g1=0.4, q1=0.3, levels=(1,), order=order)
    v = verdict(blocks, high_concurrency=None)
    assert any("confounded" in w for w in v["warnings"])
    assert v["gain_c1"]["trend"] is True
    mirrored = verdict(measured(6, g1=0.4, q1=0.3, levels=(1,)), high_concurrency=None)
    assert not any("confounded" in w for w in mirrored["warnings"])


def test_different_output_lengths_warn():
    blocks = measured(3, g1=0.6, q1=0.4)
    for b in blocks:
        b["samples"] = {"output_tokens": [128] * 8 if b["arm"] == B else [100] * 8}
    v = verdict(blocks)
    assert any("--ignore-eos" in w for w in v["warnings"])
    for b in blocks:
        b["samples"] = {"output_tokens": [128] * 8, "tpot_ms": [30.0] * 8}
    assert not any("--ignore-eos" in w for w in verdict(blocks)["warnings"])


# ------------------------------------------------------------------------ schedule


def replay(rounds_to_run, **th):
    """Blocks produced by following next_blocks; returns the (arm, concurrency) sequence."""
    blocks = []
    seq = []
    for _step in range(rounds_to_run * 4):
        v = verdict(blocks, **th)
        if v["decision"] != "continue":
            break
        step = v["next_blocks"][0]
        seq.append((step["arm"], step["concurrency"]))
        value = 30.0 if step["concurrency"] == 1 else 140.0
        blocks.append(block(step["arm"], step["concurrency"], len(blocks), value * (1 + 0.01 * len(blocks)), 30.0))
    return seq


def test_schedule_is_mirrored_round_by_round():
    assert replay(2, min_rounds=3) == ODD + EVEN


def test_schedule_completes_a_pair_measured_out_of_order():
    blocks = [block(S, 1, 0, 40.0, 25.0)]
    v = verdict(blocks)
    assert (v["next_blocks"][0]["arm"], v["next_blocks"][0]["concurrency"]) == (B, 1)


def test_plan_covers_the_rest_of_the_round():
    blocks = measured(1)[:2]  # B@1 B@8 measured
    v = verdict(blocks)
    assert [(b["arm"], b["concurrency"]) for b in v["next_blocks"]] == [(S, 8), (S, 1)]


# ------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("thresholds", "match"),
    [
        ({"min_gian": 0.1}, "unknown threshold"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0.4}, "confidence"),
        ({"confidence": "high"}, "confidence must be a number"),
        ({"strong_gain": 0.05}, "strong_gain"),
        ({"strong_tpot_drop": 1.0}, "strong_tpot_drop"),
        ({"c8_tolerance": -0.01}, "c8_tolerance"),
        ({"spending": "haybittle"}, "spending"),
        ({"min_rounds": 1}, "min_rounds"),
        ({"min_rounds": 5, "max_rounds": 4}, "max_rounds"),
        ({"requests_c1": 0}, "requests_c1"),
        ({"max_requests": 50}, "max_requests"),
        ({"max_requests": 2.5}, "integer"),
        ({"high_concurrency": 1}, "high_concurrency"),
        ({"bootstrap_resamples": 5}, "bootstrap_resamples"),
        ({"seed": 1.5}, "seed"),
        ({"max_failed": -1}, "max_failed"),
    ],
)
def test_bad_thresholds(thresholds, match):
    with pytest.raises(StatsError, match=match):
        verdict([], **thresholds)


def test_none_means_default_except_where_null_is_meaningful():
    v = verdict([], min_gain=None, max_requests=None)
    assert v["thresholds"]["min_gain"] == 0.10 and v["thresholds"]["max_requests"] is None


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda b: "not a list", "must be a list"),
        (lambda b: [*b, "x"], "block 12 must be a dict"),
        (lambda b: [dict(b[0], arm="control"), *b[1:]], "arm must be one of"),
        (lambda b: [{k: v for k, v in b[0].items() if k != "index"}, *b[1:]], "missing index"),
        (lambda b: [dict(b[0], output_throughput=None), *b[1:]], "missing output_throughput"),
        (lambda b: [dict(b[0], output_throughput="fast"), *b[1:]], "must be a number"),
        (lambda b: [dict(b[0], output_throughput=0), *b[1:]], "must be > 0"),
        (lambda b: [dict(b[0], median_tpot_ms=float("nan")), *b[1:]], "finite"),
        (lambda b: [dict(b[0], completed=0), *b[1:]], "completed must be >= 1"),
        (lambda b: [dict(b[0], failed=-1), *b[1:]], "failed must be >= 0"),
        (lambda b: [dict(b[0], concurrency=1.5), *b[1:]], "integer"),
        (lambda b: [dict(b[0], completed=True), *b[1:]], "must be a number"),
        (lambda b: [*b[:-1], dict(b[-1], index=0)], "index 0 already used by block 0"),
        (lambda b: [dict(b[0], samples={"output_tokens": ["x"]}), *b[1:]], "samples.output_tokens"),
    ],
)
def test_bad_blocks(mutate, match):
    with pytest.raises(StatsError, match=match):
        verdict(mutate(measured(3)))


def test_numeric_strings_are_accepted():
    blocks = measured(3, g1=0.6, q1=0.4)
    as_text = [dict(b, concurrency=str(b["concurrency"]), output_throughput=str(b["output_throughput"])) for b in blocks]
    assert verdict(as_text)["gain_c1"]["estimate"] == pytest.approx(verdict(blocks)["gain_c1"]["estimate"])


def test_verdict_does_not_modify_its_input_and_is_deterministic():
    blocks = measured(4, g1=0.3, q1=0.25, noise=0.03)
    before = copy.deepcopy(blocks)
    assert verdict(blocks) == verdict(blocks)
    assert blocks == before


# ------------------------------------------------------------------------ SequentialTrial


def synthetic_measure(g1, q1, g8, noise, seed):
    rng = random.Random(seed)

    def measure(step):
        spec = step["arm"] == S
        if step["concurrency"] == 1:
            thr = 30.0 * ((1 + g1) if spec else 1.0) * math.exp(rng.gauss(0, noise))
            tpot = 33.0 * ((1 - q1) if spec else 1.0) * math.exp(rng.gauss(0, noise))
        else:
            thr = 140.0 * ((1 + g8) if spec else 1.0) * math.exp(rng.gauss(0, noise))
            tpot = 50.0 * math.exp(rng.gauss(0, noise))
        return {"output_throughput": thr, "median_tpot_ms": tpot, "completed": step["n_requests"], "failed": 0}

    return measure


def test_trial_runs_to_a_decision():
    steps = []
    measure = synthetic_measure(0.6, 0.4, 0.05, 0.01, 0)

    def recorder(step):
        steps.append(step)
        return measure(step)

    trial = SequentialTrial()
    v = trial.run(recorder)
    assert v["decision"] == "keep" and trial.done
    assert trial.next_block() is None
    assert [s["index"] for s in steps] == list(range(len(steps)))
    assert [(s["arm"], s["concurrency"]) for s in steps[:8]] == ODD + EVEN
    assert v == verdict(trial.blocks)


def test_trial_record_fills_in_the_planned_block_and_checks_indexes():
    trial = SequentialTrial(min_rounds=3)
    step = trial.next_block()
    assert step == {"arm": B, "concurrency": 1, "n_requests": 4, "index": 0}
    v = trial.record({"output_throughput": 30.0, "median_tpot_ms": 33.0, "completed": 8})
    assert trial.blocks[0]["arm"] == B and trial.blocks[0]["index"] == 0
    assert v["next_blocks"][0]["concurrency"] == 8
    with pytest.raises(StatsError, match="already recorded"):
        trial.record(block(B, 8, 0, 140.0, 50.0))
    with pytest.raises(StatsError, match="must be a dict"):
        trial.record([])
    with pytest.raises(StatsError, match="missing completed"):
        trial.record({"output_throughput": 1.0, "median_tpot_ms": 1.0})
    assert len(trial.blocks) == 1


def test_trial_resumes_from_blocks_and_refuses_unplanned_blocks_after_the_decision():
    trial = SequentialTrial(measured(3, g1=0.0, q1=0.0))
    assert trial.done and trial.verdict()["label"] == "revert (no gain)"
    with pytest.raises(StatsError, match="has decided"):
        trial.record({"output_throughput": 1.0, "median_tpot_ms": 1.0, "completed": 1})
    with pytest.raises(StatsError, match="unknown threshold"):
        SequentialTrial(confidense=0.9)


# ------------------------------------------------------------------------ properties

RANK = {"revert": 0, "continue": 1, "keep": 2}


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=3, max_value=6),
    st.floats(min_value=-0.2, max_value=0.8),
    st.floats(min_value=1.0, max_value=1.5),
    st.integers(min_value=0, max_value=10_000),
)
def test_decision_is_monotone_in_the_speculative_gain_at_c1(rounds, g1, factor, seed):
    blocks = measured(rounds, g1=g1, q1=g1 / (1 + g1), g8=0.1, noise=0.04, seed=seed)
    better = [
        dict(b, output_throughput=b["output_throughput"] * factor, median_tpot_ms=b["median_tpot_ms"] / factor)
        if b["arm"] == S and b["concurrency"] == 1
        else b
        for b in blocks
    ]
    a, b = verdict(blocks), verdict(better)
    assert b["gain_c1"]["estimate"] >= a["gain_c1"]["estimate"] - 1e-12
    if a["label"] != "revert (inconclusive)":
        assert RANK[b["decision"]] >= RANK[a["decision"]]


@pytest.mark.parametrize(
    "blocks, code, text",
    [
        (lambda: measured(3, g1=0.6, q1=0.4, g8=0.1), "strong", "strong"),
        (lambda: measured(3, g1=0.2, q1=0.15, g8=0.05, noise=0.005), "marginal", "marginal"),
        (lambda: [], "continue", "continue"),
    ],
)
def test_the_cause_is_data_and_the_label_is_made_from_it(blocks, code, text):
    v = verdict(blocks())
    assert v["cause"]["code"] == code and v["cause"]["text"] == text
    assert v["label"] == (text if v["decision"] == "continue" else "%s (%s)" % (v["decision"], text))


def test_a_regression_cause_carries_its_concurrency():
    v = verdict(measured(3, g1=0.6, q1=0.4, g8=-0.4))
    assert v["cause"] == {"code": "regression", "text": "regression at c=8", "concurrency": 8}
    assert v["label"] == "revert (regression at c=8)"
