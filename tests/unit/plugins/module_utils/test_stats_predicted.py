# SPDX-License-Identifier: Apache-2.0
"""Gains predicted from acceptance with a canary's step-cost calibration (_stats/predicted.py)."""

import math
import random

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _trial
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats import predicted
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import StatsError

B, S = "baseline", "speculative"


class Device:
    """Throughput = plain * tau / r per level, block noise and a linear drift; counters give tau."""

    def __init__(self, tau=1.6, r1=1.2, r8=1.5, noise=0.03, drift=0.0, seed=0, tau_sd=0.02):
        self.tau, self.r = tau, {1: r1, 8: r8}
        self.noise, self.drift, self.tau_sd = noise, drift, tau_sd
        self.rng = random.Random(seed)
        self.invocation = 0
        self.index = 0
        self.restarts = 0

    def apply(self, action):
        self.invocation += 1
        self.restarts += 1
        return {"arm": action["arm"], "rung": 0, "ok": True, "invocation": self.invocation}

    def block(self, arm, concurrency, n, index=None):
        index = self.index if index is None else index
        self.index += 1
        level = 100.0 * (1.0 - self.drift * index) * math.exp(self.rng.gauss(0.0, self.noise))
        out = {"arm": arm, "concurrency": concurrency, "index": index, "completed": n, "failed": 0, "n_requests": n}
        if arm == S:
            tau = self.tau * math.exp(self.rng.gauss(0.0, self.tau_sd))
            drafts = 1000 * n
            out.update(spec_decode_num_drafts=drafts, spec_decode_accepted_tokens=round((tau - 1.0) * drafts))
            tau = 1.0 + out["spec_decode_accepted_tokens"] / drafts
            level *= tau / self.r[concurrency]
        out.update(output_throughput=level, median_tpot_ms=1000.0 / level)
        return out

    def measure(self, action):
        blocks = []
        for step in action["blocks"]:
            block = self.block(step["arm"], step["concurrency"], step["n_requests"], index=None)
            block.update(step, spec_metrics=step["arm"] == S, invocation_before=self.invocation, invocation_after=self.invocation)
            blocks.append(block)
        return {"blocks": blocks}


def canary_blocks(dev, pairs=60):
    blocks = []
    for j in range(pairs):
        order = (B, S) if j % 2 == 0 else (S, B)
        for arm in order:
            blocks.append(dev.block(arm, 1, 1))
            blocks.append(dev.block(arm, 8, 8))
    return blocks


def test_calibration_recovers_the_step_cost_ratio_despite_drift_and_acceptance():
    dev = Device(tau=1.8, r1=1.25, r8=1.6, noise=0.03, drift=0.001, seed=3)
    cal = predicted.calibrate(canary_blocks(dev))
    for key, true_r in (("c1", 1.25), ("c8", 1.6)):
        level = cal[key]
        assert level["pairs"] == 60
        assert abs(level["log_r"] - math.log(true_r)) < 4 * level["se"]
        assert 0.0 < level["se"] < 0.01
    assert abs(cal["tau"] - 1.8) < 0.02


def test_calibration_refuses_blocks_of_two_k_values():
    dev = Device()
    blocks = canary_blocks(dev, pairs=4)
    blocks[2]["num_speculative_tokens"] = 3
    blocks[3]["num_speculative_tokens"] = 5
    with pytest.raises(StatsError, match="mix num_speculative_tokens"):
        predicted.calibrate(blocks)


def test_check_calibration_names_what_is_wrong():
    with pytest.raises(StatsError, match="must be a dict"):
        predicted.check_calibration("r=1.2")
    with pytest.raises(StatsError, match="c1: missing se"):
        predicted.check_calibration({"c1": {"log_r": 0.1}})
    with pytest.raises(StatsError, match="no c=1"):
        predicted.check_calibration({"c1": None, "c8": None})


def calibration_for(r1=1.2, r8=1.5, se=0.005):
    level = {"se": se, "residual_sd": 0.03, "df": 100, "pairs": 50}
    return {"k": 3, "tau": 1.6, "c1": dict(level, log_r=math.log(r1), concurrency=1), "c8": dict(level, log_r=math.log(r8), concurrency=8)}


def drive(calibration, **device):
    dev = Device(**device)
    final, observations = _trial.run({"calibration": calibration}, dev.apply, dev.measure)
    return final, observations, dev


def test_member_measures_the_serving_baseline_once_then_the_speculative_arm():
    final, observations, dev = drive(calibration_for(), tau=1.9, r1=1.2, r8=1.5)
    measured = [o for o in observations if o["type"] == "measured"]
    # the guard's baseline block, then speculative blocks (acceptance in waves at c=8): one switch
    assert [(b["arm"], b["concurrency"]) for b in measured[0]["blocks"]] == [(B, 1)]
    assert {b["arm"] for o in measured[1:] for b in o["blocks"]} == {S}
    assert final["outcome"] == "keep"
    assert final["verdict"]["method"] == "predicted"
    assert dev.restarts == 2  # the baseline apply of the reducer and the one switch


@pytest.mark.parametrize(
    "tau, r1, r8, outcome, code",
    [
        (1.9, 1.2, 1.5, "keep", "strong"),
        (1.5, 1.2, 1.3, "keep", "marginal"),
        (1.25, 1.2, 1.3, "revert", "no_gain"),
        (1.6, 1.2, 2.4, "revert", "regression"),
    ],
)
def test_member_decides_from_acceptance(tau, r1, r8, outcome, code):
    final, _observations, _dev = drive(calibration_for(r1=r1, r8=r8), tau=tau, r1=r1, r8=r8, noise=0.02)
    assert final["outcome"] == outcome
    assert final["cause"]["code"] == code
    gain = final["verdict"]["gain_c1"]
    assert gain["ci"][0] <= tau / r1 - 1.0 <= gain["ci"][1]


def test_member_near_the_threshold_measures_more_then_reverts_as_inconclusive():
    # true gain exactly at the threshold: the interval never leaves it
    final, observations, _dev = drive(calibration_for(r8=1.2, se=0.02), tau=1.32, r1=1.2, r8=1.2)
    spec = [b for o in observations if o["type"] == "measured" for b in o["blocks"] if b["arm"] == S]
    assert final["outcome"] == "revert"
    assert final["cause"]["code"] == "inconclusive"
    # one block at c=1 for the guard, the acceptance measured in waves at c=8 up to the budget
    assert [b["concurrency"] for b in spec].count(1) == 1
    assert [b["concurrency"] for b in spec].count(8) == predicted.PREDICTION_DEFAULTS["max_spec_blocks"]


def test_a_device_unlike_its_group_is_decided_from_its_own_measurements():
    # the group's canary measured r = 1.2; this device's speculative steps cost 2.0
    final, _observations, _dev = drive(calibration_for(r1=1.2, r8=1.5), tau=1.9, r1=2.0, r8=2.5, noise=0.01)
    verdict = final["verdict"]
    assert verdict["method"] == "measured"
    assert "differs from its group's" in verdict["guard"]
    assert any("decided from its own measurements" in w for w in verdict["warnings"])
    assert final["outcome"] == "revert"  # 1.9 / 2.0: a loss, measured


def test_speculative_block_without_counters_is_an_error():
    dev = Device()
    blocks = [dev.block(B, 1, 4), dev.block(B, 8, 8)] + [dev.block(S, 1, 4) for _block in range(3)] + [dev.block(S, 8, 8)]
    del blocks[3]["spec_decode_num_drafts"]
    with pytest.raises(StatsError, match="counters"):
        predicted.predicted_verdict(blocks, calibration_for())


def test_canary_calibrates_in_visits_then_shares_a_calibration_its_group_can_use():
    dev = Device(tau=1.7, r1=1.25, r8=1.45, noise=0.04, drift=0.0005, seed=7)
    final, observations = _trial.run({"canary": True}, dev.apply, dev.measure, limit=2000)
    verdict = final["verdict"]
    assert verdict["method"] == "canary"
    cal = verdict["calibration"]
    assert predicted.calibrated(cal)
    assert abs(cal["c1"]["log_r"] - math.log(1.25)) < 4 * cal["c1"]["se"]
    assert final["outcome"] == "keep"  # 1.7 / 1.25 = +36 %
    # visits of one arm: far fewer restarts than blocks
    applies = [o for o in observations if o["type"] == "applied"]
    blocks = [b for o in observations if o["type"] == "measured" for b in o["blocks"]]
    assert len(applies) * 10 < len(blocks)
    # warm-ups once per level after each restart
    warm = set()
    for o in observations:
        if o["type"] == "applied":
            warm = set()
        for b in o.get("blocks", []):
            assert b["warmups"] == (0 if b["concurrency"] in warm else 2)
            warm.add(b["concurrency"])
    member, _obs, _dev = drive(cal, tau=1.7, r1=1.25, r8=1.45, noise=0.04, seed=8)
    assert member["outcome"] == "keep"
    assert member["verdict"]["method"] == "predicted"


def test_canary_with_failed_speculative_requests_reverts_at_once():
    class Failing(Device):
        def block(self, arm, concurrency, n, index=None):
            out = super().block(arm, concurrency, n, index)
            if arm == S:
                out["failed"] = 1
            return out

    dev = Failing()
    final, _obs = _trial.run({"canary": True}, dev.apply, dev.measure, limit=2000)
    assert final["outcome"] == "revert"
    assert final["cause"]["code"] == "failed_requests"


def test_unknown_prediction_setting_is_refused():
    with pytest.raises(StatsError, match="unknown prediction setting"):
        predicted.decide([], calibration=calibration_for(), prediction={"guard": 1})


def test_calibration_follows_a_device_that_heats_up_and_settles():
    """An exponential slow-down (fast at first, flat later): the default cubic trend recovers r, a straight
    line leaves the first, faster baseline visit in it."""

    class Warming(Device):
        def block(self, arm, concurrency, n, index=None):
            out = super().block(arm, concurrency, n, index)
            slow = 1.0 - 0.08 * (1.0 - math.exp(-out["index"] / 60.0))
            out["output_throughput"] *= slow
            return out

    dev = Warming(tau=1.5, r1=1.2, r8=1.4, noise=0.002, seed=5)
    blocks = []
    for arm in [B, S, S, B, B, S, S, B, B, S]:
        blocks += [dev.block(arm, 1, 1) for _block in range(24)]
    cubic = predicted.calibrate(blocks, high_concurrency=None)["c1"]
    line = predicted.calibrate(blocks, high_concurrency=None, trend_degree=1)["c1"]
    assert abs(cubic["log_r"] - math.log(1.2)) < max(4 * cubic["se"], 0.003)
    line_error, cubic_error = abs(line["log_r"] - math.log(1.2)), abs(cubic["log_r"] - math.log(1.2))
    assert line_error > 0.001
    assert line_error > 10 * cubic_error
