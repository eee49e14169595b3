# SPDX-License-Identifier: Apache-2.0
"""The trial reducer's k sweep: order, pruning, choice, isolation from the verdict, ladder, output proof,
arm proof, settings, determinism and the observations."""

import copy
import math
import random

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _trial
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats import ksweep

B, S = "baseline", "speculative"
ALPHA = 0.7


class KDev:
    """A fake device whose speculative gain at c=1 depends on the served k.

    ``gains``: k -> throughput gain at c=1 (``g8`` at higher concurrency); the per-position acceptance
    rates are ``alpha ** (i + 1)`` for ``i < k``; ``oom``: (rung, k) pairs that do not start; ``wrong_k``:
    the k whose answers differ from the baseline's; ``lie``: number of the measure call -> ``"metrics"``
    (speculation metrics absent on the speculative arm) or ``"error"`` (the benchmark fails);
    ``rates``: whether the per-position acceptance is reported.
    """

    def __init__(self, gains, g8=0.05, alpha=ALPHA, noise=0.005, seed=0, own_k=4, oom=(), wrong_k=(), lie=None, rates=True):
        self.gains, self.g8, self.alpha, self.noise = gains, g8, alpha, noise
        self.rng = random.Random(seed)
        self.own_k = own_k
        self.oom, self.wrong_k, self.lie, self.rates = set(oom), set(wrong_k), lie or {}, rates
        self.invocation = 0
        self.clock = 0
        self.k = None
        self.measures = 0
        self.applied = []  # (arm, rung, k as asked, started)
        self.probes = []  # (arm, rung, k, reference)

    def apply(self, action):
        arm, rung, k = action["arm"], action["rung"], action.get("k")
        self.clock += 1
        if arm == S and (rung, k) in self.oom:
            self.applied.append((arm, rung, k, False))
            return {"rung": rung, "ok": False, "cause": "oom"}
        self.applied.append((arm, rung, k, True))
        self.invocation += 1
        self.k = (self.own_k if k is None else k) if arm == S else None
        return {"rung": rung, "ok": True, "invocation": self.invocation, "config_written": self.clock, "server_started": self.clock + 0.5}

    def probe(self, action):
        self.probes.append((action["arm"], action["rung"], action.get("k"), action["reference"]))
        if action["reference"]:
            return {"agree": None, "summary": "the reference"}
        agree = self.k not in self.wrong_k
        return {"agree": agree, "summary": "k=%s answers %s" % (self.k, "the same" if agree else "otherwise")}

    def measure(self, action):
        self.measures += 1
        lie = self.lie.get(self.measures)
        if lie == "error":
            return {"arm": action["arm"], "error": "vLLM stopped answering"}
        out = []
        for step in action["blocks"]:
            spec = step["arm"] == S
            gain = (self.gains.get(self.k, 0.0) if step["concurrency"] == 1 else self.g8) if spec else 0.0
            e = self.rng.gauss(0.0, self.noise)
            block = dict(step)
            block.update(
                output_throughput=100.0 * (1 + gain) * math.exp(e),
                median_tpot_ms=30.0 / (1 + gain) * math.exp(-e),
                completed=step["n_requests"],
                failed=0,
                spec_metrics=spec,
                invocation_before=self.invocation,
                invocation_after=self.invocation,
            )
            if spec:
                block.update(num_speculative_tokens=self.k, spec_decode_num_drafts=500)
                if self.rates:
                    block["spec_decode_per_position_acceptance_rates"] = [self.alpha ** (i + 1) for i in range(self.k)]
            if lie == "metrics" and spec:
                block["spec_metrics"] = False
            out.append(block)
        return {"blocks": out}


def sweep(**kw):
    cfg = {"candidates": [3, 4, 5], "draft_cost": 0.05}
    cfg.update(kw)
    return cfg


GAINS = {3: 0.30, 4: 0.50, 5: 0.35}


def drive(settings, dev, tamper=None):
    """``_trial.run``, or the same loop letting ``tamper(position, observation)`` change an observation."""
    if tamper is None:
        return _trial.run(settings, dev.apply, dev.measure, probe=dev.probe)
    observations = []
    for _step in range(500):
        action = _trial.next_action(settings, observations)
        if action["action"] == "done":
            return action, observations
        handler = {"apply": dev.apply, "measure": dev.measure, "probe": dev.probe}[action["action"]]
        obs = _trial.observed(action, handler(action))
        tamper(len(observations), obs)
        observations.append(obs)
    raise AssertionError("the trial did not end")


def blocks_of(observations, phase):
    return [b for o in observations if o["type"] == "measured" for b in o.get("blocks", []) if (b.get("phase") == "sweep") == (phase == "sweep")]


def is_sweep(obs):
    return obs["type"] == "measured" and bool(obs.get("blocks")) and obs["blocks"][0].get("phase") == "sweep"


def verdict_phase(observations):
    """The observations after the last sweep block."""
    last = max(i for i, o in enumerate(observations) if is_sweep(o))
    return observations[last + 1 :]


def speculative(observations):
    """The applies, probes and measurements of the speculative arm, with their k."""
    out = []
    for obs in observations:
        if obs["type"] == "measured" and obs.get("blocks") and obs["blocks"][0]["arm"] == S:
            out.extend(("measured", b["k"]) for b in obs["blocks"])
        elif obs["type"] != "measured" and obs["arm"] == S:
            out.append((obs["type"], obs["k"]))
    return out


def spec_applies(dev, started=True):
    return [(rung, k) for arm, rung, k, ok in dev.applied if arm == S and ok == started]


# 1. order


def test_sweep_measures_baseline_and_largest_then_the_mirrored_schedule_then_the_verdict_on_the_chosen_k():
    dev = KDev(GAINS)
    final, observations = drive({"k_sweep": sweep(rounds=2, n_requests=6)}, dev)
    assert final["outcome"] == "keep"
    survivors = final["sweep"]["survivors"]
    assert survivors == [3, 4, 5]
    expected = [(B, None), (S, 5)] + [(s["arm"], s["num_speculative_tokens"]) for s in ksweep.sweep_schedule(survivors, 2)]
    swept = blocks_of(observations, "sweep")
    assert [(b["arm"], b["k"]) for b in swept] == expected
    assert all(b["concurrency"] == 1 and b["n_requests"] == 6 for b in swept)
    # the sweep comes first, all of it: no verdict block before the last sweep block
    kinds = [b.get("phase") for o in observations if o["type"] == "measured" for b in o["blocks"]]
    assert kinds[: len(swept)] == ["sweep"] * len(swept) and "sweep" not in kinds[len(swept) :]
    # the speculative server is started on the k of the block it measures next
    served = None
    for obs in observations:
        if obs["type"] == "applied":
            served = obs["k"]
        elif obs["type"] == "measured" and obs["blocks"][0]["arm"] == S and obs["blocks"][0].get("phase") == "sweep":
            assert obs["blocks"][0]["k"] == served
    # the verdict phase runs on the chosen k
    assert final["k"] == final["sweep"]["choice"]["k"] == 4
    spec = speculative(verdict_phase(observations))
    assert ("applied", final["k"]) in spec and ("measured", final["k"]) in spec
    assert all(k == final["k"] for _kind, k in spec)


# 2. pruning


def test_pruned_candidates_are_never_applied_and_the_record_holds_the_prediction():
    dev = KDev({1: 0.20, 2: 0.30, 3: 0.25, 6: 0.0, 8: -0.2}, alpha=0.6)
    candidates = [1, 2, 3, 6, 8]
    final, _observations = drive({"k_sweep": sweep(candidates=candidates, draft_cost=0.3)}, dev)
    expected = ksweep.k_sweep(candidates, [0.6 ** (i + 1) for i in range(8)], 0.3, num_drafts=500)
    record = final["sweep"]
    assert record["survivors"] == expected["survivors"] == [1, 2, 3]
    assert [p["k"] for p in record["predictions"]] == candidates
    assert {p["k"] for p in record["predictions"] if p["pruned"]} == {6, 8}
    assert all(p["reason"] for p in record["predictions"] if p["pruned"])
    assert record["choice"]["k"] == 2 and record["reason"] == record["choice"]["reason"]
    assert final["k"] == record["choice"]["k"]
    applied_k = [k for _rung, k in spec_applies(dev)]
    assert 6 not in applied_k
    assert applied_k.count(8) == 1  # the largest only for the opening block that predicts
    assert set(applied_k) <= {1, 2, 3, 8}


def test_a_pruned_largest_candidate_is_never_chosen():
    # the prediction prunes k=8 (alpha 0.5, draft cost 0.2); its one measured block looks best
    dev = KDev({1: 0.10, 2: 0.15, 3: 0.12, 8: 0.90}, alpha=0.5)
    final, _observations = drive({"k_sweep": sweep(candidates=[1, 2, 3, 8], draft_cost=0.2)}, dev)
    assert final["sweep"]["survivors"] == [1, 2, 3]
    assert final["k"] in final["sweep"]["survivors"]


# 3. the choice


def test_the_k_with_the_clearly_best_gain_is_chosen():
    for gains, best in (({3: 0.60, 4: 0.30, 5: 0.20}, 3), ({3: 0.20, 4: 0.25, 5: 0.60}, 5)):
        final, _obs = drive({"k_sweep": sweep()}, KDev(gains))
        assert final["k"] == best
        assert final["sweep"]["choice"]["reason"].startswith("k=%d has the best lower bound" % best)


def test_a_tie_within_the_tolerance_goes_to_the_smaller_k():
    gains = {3: 0.450, 4: 0.458, 5: 0.20}  # k=4 is 0.55 % better than k=3
    final, _obs = drive({"k_sweep": sweep(tie_tolerance=0.01)}, KDev(gains, noise=0.0002))
    assert final["k"] == 3
    assert "k=4 has the best lower bound" in final["sweep"]["reason"] and "k=3 is within" in final["sweep"]["reason"]
    final, _obs = drive({"k_sweep": sweep(tie_tolerance=0.001)}, KDev(gains, noise=0.0002))
    assert final["k"] == 4


# 4. the sweep never enters the verdict


def test_sweep_blocks_never_enter_the_verdict():
    dev = KDev(GAINS)
    final, observations = drive({"k_sweep": sweep()}, dev)
    swept, verdict = blocks_of(observations, "sweep"), blocks_of(observations, "verdict")
    assert swept and verdict
    counters = final["counters"]
    assert counters["sweep_blocks"] == len(swept) == final["sweep"]["blocks"]
    assert counters["blocks"] == len(verdict)
    assert final["verdict"]["requests_spent"] == sum(b["n_requests"] for b in verdict)
    assert final["sweep"]["requests"] == sum(b["n_requests"] for b in swept)
    assert counters["requests"] == final["verdict"]["requests_spent"] + final["sweep"]["requests"]
    # the verdict's blocks are numbered from 0 on their own
    assert sorted(b["index"] for b in verdict) == list(range(len(verdict)))


def test_without_k_sweep_there_is_no_sweep_record():
    final, observations = drive({}, KDev(GAINS))
    assert final["k"] is None and "sweep" not in final and "sweep_blocks" not in final["counters"]
    assert not blocks_of(observations, "sweep")


# 5. the out-of-memory ladder


def test_oom_at_the_largest_k_climbs_the_ladder_and_the_sweep_goes_on_at_rung_1():
    dev = KDev(GAINS, oom={(0, 5)})
    final, observations = drive({"k_sweep": sweep(), "ladder_rungs": 1}, dev)
    assert final["outcome"] == "keep"
    assert spec_applies(dev, started=False) == [(0, 5)]
    started = spec_applies(dev)
    assert started[0] == (1, 5)  # the same k, one rung up
    assert all(rung == 1 for rung, _k in started)
    assert final["counters"]["rung"] == 1
    assert final["sweep"]["choice"] is not None and final["k"] == final["sweep"]["choice"]["k"]
    assert len(blocks_of(observations, "sweep")) == 2 + len(ksweep.sweep_schedule([3, 4, 5], 2))
    assert started[-1] == (1, final["k"])


def test_the_draft_cost_of_the_rung_measured_predicts():
    # rung 0 does not start at k=5: rung 1's draft cost (hopeless) prunes every candidate
    dev = KDev(GAINS, oom={(0, 5)})
    final, _obs = drive({"k_sweep": sweep(draft_cost=[0.05, 5.0]), "ladder_rungs": 1}, dev)
    assert final["sweep"]["survivors"] == [] and final["sweep"]["choice"] is None
    dev = KDev(GAINS)
    final, _obs = drive({"k_sweep": sweep(draft_cost=[0.05, 5.0]), "ladder_rungs": 1}, dev)
    assert final["sweep"]["survivors"] == [3, 4, 5]


def test_oom_with_no_rung_left_reverts_start_failed():
    dev = KDev(GAINS, oom={(0, 5), (1, 5)})
    final, observations = drive({"k_sweep": sweep(), "ladder_rungs": 1}, dev)
    assert final["outcome"] == "revert" and final["cause"]["kind"] == "start_failed" and final["cause"]["arm"] == S
    assert spec_applies(dev, started=False) == [(0, 5), (1, 5)]
    assert not blocks_of(observations, "verdict")
    dev = KDev(GAINS, oom={(0, 5)})
    final, _obs = drive({"k_sweep": sweep()}, dev)
    assert final["cause"]["kind"] == "start_failed"


# 6. the output proof


def test_output_proof_takes_the_reference_first_then_proves_each_rung_and_k_once():
    dev = KDev(GAINS)
    final, observations = drive({"k_sweep": sweep(), "output_proof": 3}, dev)
    assert final["outcome"] == "keep"
    # the mirrored order measures k=5 twice in a row (end of round 1, start of round 2): one probe
    assert dev.probes == [(B, 0, None, True), (S, 0, 5, False), (S, 0, 3, False), (S, 0, 4, False)]
    assert observations[0]["type"] == "applied" and observations[0]["arm"] == B
    assert observations[1]["type"] == "probed" and observations[1]["reference"]
    # each speculative start is probed before its first block is measured
    proved = set()
    for obs in observations:
        if obs["type"] == "probed" and not obs["reference"]:
            proved.add((obs["rung"], obs["k"]))
        elif obs["type"] == "measured" and obs["blocks"][0]["arm"] == S:
            assert (0, obs["blocks"][0]["k"]) in proved


def test_output_proof_probes_again_on_a_new_rung():
    dev = KDev(GAINS, oom={(0, 5)})
    final, _obs = drive({"k_sweep": sweep(), "output_proof": 3, "ladder_rungs": 1}, dev)
    assert final["outcome"] == "keep"
    spec_probes = [(rung, k) for arm, rung, k, ref in dev.probes if not ref]
    assert spec_probes == [(1, 5), (1, 3), (1, 4)]
    assert len(set(spec_probes)) == len(spec_probes)


def test_answers_that_differ_at_one_k_revert_before_the_verdict():
    dev = KDev(GAINS, wrong_k={4})
    final, observations = drive({"k_sweep": sweep(), "output_proof": 3}, dev)
    assert final["outcome"] == "revert"
    assert final["cause"]["kind"] == "verdict" and final["cause"]["code"] == "outputs_differ"
    assert "k=4 answers otherwise" in final["cause"]["detail"]
    assert not blocks_of(observations, "verdict")
    assert not [b for b in blocks_of(observations, "sweep") if b["k"] == 4]  # probed before measured
    assert observations[-1]["type"] == "probed" and observations[-1]["k"] == 4


# 7. no choice: the rung's own k


def test_no_per_position_acceptance_runs_the_verdict_on_the_rungs_own_k():
    dev = KDev(GAINS, rates=False)
    final, observations = drive({"k_sweep": sweep()}, dev)
    record = final["sweep"]
    assert record["choice"] is None and "no per-position acceptance" in record["reason"] and "k=5" in record["reason"]
    assert final["k"] is None
    assert len(blocks_of(observations, "sweep")) == 2
    spec = speculative(verdict_phase(observations))
    assert ("applied", None) in spec and ("measured", None) in spec
    assert all(k is None for _kind, k in spec)
    assert spec_applies(dev)[-1] == (0, None)


def test_no_survivor_runs_the_verdict_on_the_rungs_own_k():
    dev = KDev(GAINS)
    final, observations = drive({"k_sweep": sweep(draft_cost=5.0)}, dev)
    record = final["sweep"]
    assert record["survivors"] == [] and record["choice"] is None
    assert "no candidate survived" in record["reason"]
    assert all(p["pruned"] for p in record["predictions"])
    assert final["k"] is None
    assert len(blocks_of(observations, "sweep")) == 2
    started = spec_applies(dev)
    assert started[0] == (0, 5) and set(started[1:]) == {(0, None)}
    assert all(b["k"] is None for b in blocks_of(observations, "verdict") if b["arm"] == S)


# 8. the arm proof and failed benchmarks in the sweep


def test_a_sweep_block_without_speculation_metrics_is_discarded_and_measured_again():
    clean_dev = KDev(GAINS)
    clean, clean_obs = drive({"k_sweep": sweep()}, clean_dev)
    dev = KDev(GAINS, lie={2: "metrics"})  # the 2nd measure: the speculative opening block at k=5
    final, observations = drive({"k_sweep": sweep()}, dev)
    assert final["counters"]["discarded"] == 1
    bad = [i for i, o in enumerate(observations) if o["type"] == "measured"][1]
    assert observations[bad]["blocks"][0]["k"] == 5
    assert observations[bad + 1]["type"] == "applied" and (observations[bad + 1]["arm"], observations[bad + 1]["k"]) == (S, 5)
    again = observations[bad + 2]
    assert again["type"] == "measured" and (again["blocks"][0]["arm"], again["blocks"][0]["k"]) == (S, 5)
    # the discarded block is not a sweep block: the same sweep as without it
    assert final["counters"]["sweep_blocks"] == clean["counters"]["sweep_blocks"]
    kept = [(b["arm"], b["k"]) for b in blocks_of(observations, "sweep")]
    del kept[1]  # the discarded opening block at k=5
    assert kept == [(b["arm"], b["k"]) for b in blocks_of(clean_obs, "sweep")]
    assert final["sweep"]["survivors"] == clean["sweep"]["survivors"]


def test_a_sweep_block_for_another_k_than_the_served_one_is_discarded_and_measured_again():
    def tamper(position, obs):
        # the first block measured at k=3 says it is for k=2: the server started with k=3
        if is_sweep(obs) and obs["blocks"][0]["k"] == 3 and not tamper.done:
            obs["blocks"][0]["k"] = 2
            tamper.done = True

    tamper.done = False
    final, observations = drive({"k_sweep": sweep()}, KDev(GAINS), tamper=tamper)
    assert tamper.done and final["counters"]["discarded"] == 1
    bad = next(i for i, o in enumerate(observations) if is_sweep(o) and o["blocks"][0]["k"] == 2)
    assert "k=3" in _trial.prove_block(observations[bad]["blocks"][0], {"arm": S, "k": 3})
    assert observations[bad + 1]["type"] == "applied" and (observations[bad + 1]["arm"], observations[bad + 1]["k"]) == (S, 3)
    assert is_sweep(observations[bad + 2]) and observations[bad + 2]["blocks"][0]["k"] == 3
    assert final["counters"]["sweep_blocks"] == 2 + len(ksweep.sweep_schedule([3, 4, 5], 2))
    assert 2 not in [row["k"] for row in final["sweep"]["choice"]["candidates"]]


def test_a_server_started_on_another_k_is_applied_again_before_measuring():
    def tamper(position, obs):
        # the first start asked for k=3 reports k=2
        if obs["type"] == "applied" and obs["k"] == 3 and not tamper.done:
            obs["k"] = 2
            tamper.done = True

    tamper.done = False
    final, observations = drive({"k_sweep": sweep()}, KDev(GAINS), tamper=tamper)
    assert tamper.done
    wrong = next(i for i, o in enumerate(observations) if o["type"] == "applied" and o["k"] == 2)
    assert observations[wrong + 1]["type"] == "applied" and observations[wrong + 1]["k"] == 3
    assert all(b["k"] != 2 for b in blocks_of(observations, "sweep"))
    assert final["counters"]["sweep_blocks"] == 2 + len(ksweep.sweep_schedule([3, 4, 5], 2))


def test_a_failed_speculative_benchmark_in_the_sweep_ends_measure_failed():
    dev = KDev(GAINS, lie={2: "error"})
    final, observations = drive({"k_sweep": sweep()}, dev)
    assert final["outcome"] == "revert" and final["cause"]["kind"] == "measure_failed"
    assert final["cause"]["arm"] == S and "stopped answering" in final["cause"]["detail"]
    assert final["counters"]["sweep_blocks"] == 1 and not blocks_of(observations, "verdict")


# 9. settings


@pytest.mark.parametrize(
    "value, key",
    [
        ({"candidates": [3], "draft_cost": 0.1, "bogus": 1}, "bogus"),
        ({"candidates": [], "draft_cost": 0.1}, "candidates"),
        ({"candidates": [0, 2], "draft_cost": 0.1}, "candidates"),
        ({"candidates": [-1], "draft_cost": 0.1}, "candidates"),
        ({"candidates": [3], "draft_cost": -0.1}, "draft_cost"),
        ({"candidates": [3], "draft_cost": [0.1, -0.2]}, "draft_cost"),
        ({"candidates": [3], "draft_cost": 0.1, "confidence": 1.0}, "confidence"),
        ({"candidates": [3], "draft_cost": 0.1, "confidence": 0.0}, "confidence"),
        ({"candidates": [3], "draft_cost": 0.1, "confidence": 1.5}, "confidence"),
        ({"candidates": [3], "draft_cost": 0.1, "rounds": 0}, "rounds"),
        ({"candidates": [3], "draft_cost": 0.1, "tie_tolerance": 1.0}, "tie_tolerance"),
        ({"candidates": [3], "draft_cost": 0.1, "n_requests": 0}, "n_requests"),
        ([3, 4], "k_sweep"),
    ],
)
def test_bad_k_sweep_settings_are_refused_naming_the_key(value, key):
    with pytest.raises(_trial.TrialError, match=key):
        _trial.sweep_settings(value)
    with pytest.raises(_trial.TrialError, match=key):
        _trial.split_settings({"k_sweep": value})
    with pytest.raises(_trial.TrialError, match=key):
        _trial.next_action({"k_sweep": value}, [])


def test_good_k_sweep_settings_get_their_defaults():
    out = _trial.sweep_settings({"candidates": [5, 3, 3], "draft_cost": 0.1})
    assert out["candidates"] == [3, 5] and out["draft_cost"] == [0.1]
    assert out["rounds"] == 2 and out["n_requests"] == 8 and out["confidence"] == 0.95 and out["tie_tolerance"] == 0.01
    trial, _thresholds = _trial.split_settings({"k_sweep": {"candidates": [4], "draft_cost": [0.1, 0.2]}})
    assert trial["k_sweep"]["draft_cost"] == [0.1, 0.2]


def test_a_negative_tie_tolerance_is_refused():
    with pytest.raises(_trial.TrialError, match="tie_tolerance"):
        _trial.sweep_settings(sweep(tie_tolerance=-0.01))


def test_one_round_is_refused():
    # one round leaves every survivor but the largest with fewer than the 4 blocks choose_k needs
    with pytest.raises(_trial.TrialError, match="rounds must be an integer >= 2"):
        _trial.sweep_settings(sweep(rounds=1))
    final, _obs = drive({"k_sweep": sweep(rounds=2)}, KDev(GAINS))
    assert final["sweep"]["choice"] is not None, final["sweep"]["reason"]


@pytest.mark.parametrize(
    "value, key",
    [
        ({"candidates": ["x"]}, "candidates"),
        ({"candidates": "57"}, "candidates"),
        ({"candidates": [3], "draft_cost": "cheap"}, "draft_cost"),
        ({"candidates": [3], "rounds": "two"}, "rounds"),
    ],
)
def test_a_value_that_does_not_convert_is_refused_naming_its_key(value, key):
    with pytest.raises(_trial.TrialError, match=r"k_sweep\.%s must be" % key):
        _trial.sweep_settings(value)


def test_without_a_draft_cost_the_cheapest_draft_is_assumed():
    # the action plugin gives each rung's draft cost; the reducer alone prunes the least
    assert _trial.sweep_settings({"candidates": [3]})["draft_cost"] is None
    final, _obs = drive({"k_sweep": {"candidates": [3, 4, 5]}}, KDev(GAINS))
    assert final["sweep"]["choice"] is not None and final["sweep"]["survivors"], final["sweep"]


# 10. determinism


def test_next_action_is_deterministic_mid_sweep():
    dev = KDev(GAINS)
    settings = {"k_sweep": sweep(), "output_proof": 2}
    _final, observations = drive(settings, dev)
    first_verdict = len(observations) - len(verdict_phase(observations))
    for cut in (3, 7, 12, first_verdict - 1):
        prefix = observations[:cut]
        frozen = copy.deepcopy(prefix)
        one = _trial.next_action(settings, prefix)
        two = _trial.next_action(settings, copy.deepcopy(prefix))
        assert one == two
        assert prefix == frozen  # the observations are not changed
        # and it is what the run did next
        assert {"apply": "applied", "measure": "measured", "probe": "probed"}[one["action"]] == observations[cut]["type"]
        assert one.get("k") == observations[cut].get("k", (observations[cut].get("blocks") or [{}])[0].get("k"))
        if one["action"] == "measure":
            assert one["blocks"][0]["seed"] == observations[cut]["blocks"][0]["seed"]
    again, _obs = drive(settings, KDev(GAINS))
    assert again["k"] == _final["k"] and again["sweep"] == _final["sweep"]


# 11. observed()


def test_observed_takes_the_actions_arm_rung_k_and_reference():
    apply = {"action": "apply", "arm": S, "rung": 1, "k": 5, "reason": "x"}
    obs = _trial.observed(apply, {"ok": True, "arm": B, "k": 9, "invocation": 3})
    assert (obs["type"], obs["arm"], obs["rung"], obs["k"], obs["invocation"]) == ("applied", S, 1, 5, 3)
    probe = {"action": "probe", "arm": S, "rung": 1, "k": 5, "reference": False}
    obs = _trial.observed(probe, {"agree": True, "arm": B, "rung": 0, "k": 2, "reference": True})
    assert (obs["type"], obs["arm"], obs["rung"], obs["k"], obs["reference"]) == ("probed", S, 1, 5, False)
    action = _trial.next_action({"k_sweep": sweep()}, [_trial.observed({"action": "apply", "arm": B, "rung": 0, "k": None}, {"invocation": 1})])
    assert action["action"] == "measure" and action["blocks"][0]["phase"] == "sweep"
    measured = _trial.observed(action, {"blocks": [{"arm": S, "k": 7, "phase": None, "output_throughput": 1.0}]})
    block = measured["blocks"][0]
    assert measured["type"] == "measured"
    assert (block["arm"], block["k"], block["phase"], block["concurrency"], block["output_throughput"]) == (B, None, "sweep", 1, 1.0)
    failed = _trial.observed(action, {"error": "down"})
    assert failed["type"] == "measured" and failed["arm"] == B


def test_observed_refuses_a_measurement_with_another_number_of_blocks():
    action = _trial.next_action({"k_sweep": sweep()}, [_trial.observed({"action": "apply", "arm": B, "rung": 0, "k": None}, {"invocation": 1})])
    assert len(action["blocks"]) == 1
    with pytest.raises(_trial.TrialError, match="2 blocks for 1"):
        _trial.observed(action, {"blocks": [{}, {}]})
    with pytest.raises(_trial.TrialError, match="0 blocks for 1"):
        _trial.observed(action, {"blocks": []})
    with pytest.raises(_trial.TrialError):
        _trial.observed({"action": "done"}, {})
