# SPDX-License-Identifier: Apache-2.0
"""The trial reducer: actions, pairing, arm proof, the out-of-memory ladder and the outcome."""

import math
import random

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _trial

B, S = "baseline", "speculative"


class Device:
    """A fake device: a served arm with an invocation counter and multiplicative noise."""

    def __init__(self, g1=0.5, g8=0.05, noise=0.01, seed=0, oom_rungs=0, spec_fails=None, lie=None):
        self.g1, self.g8, self.noise = g1, g8, noise
        self.rng = random.Random(seed)
        self.invocation = 0
        self.clock = 0
        self.oom_rungs = oom_rungs
        self.spec_fails = spec_fails
        self.lie = lie or {}  # number of the measure call -> kind of broken evidence
        self.measures = 0
        self.applied = []

    def apply(self, action):
        self.applied.append((action["arm"], action["rung"]))
        self.clock += 1
        if action["arm"] == S and self.spec_fails:
            return {"arm": S, "rung": action["rung"], "ok": False, "cause": self.spec_fails}
        if action["arm"] == S and action["rung"] < self.oom_rungs:
            return {"arm": S, "rung": action["rung"], "ok": False, "cause": "oom"}
        self.invocation += 1
        self.arm = action["arm"]
        return {
            "arm": action["arm"],
            "rung": action["rung"],
            "ok": True,
            "invocation": self.invocation,
            "config_written": self.clock,
            "server_started": self.clock + 0.5,
        }

    def measure(self, action):
        self.measures += 1
        lie = self.lie.get(self.measures)
        out = []
        for step in action["blocks"]:
            spec = step["arm"] == S
            gain = (self.g1 if step["concurrency"] == 1 else self.g8) if spec else 0.0
            e = self.rng.gauss(0.0, self.noise)
            block = dict(step)
            block.update(
                output_throughput=100.0 * (1 + gain) * math.exp(e),
                median_tpot_ms=30.0 / (1 + gain) * math.exp(-e) if step["concurrency"] == 1 else 50.0 * math.exp(e),
                completed=step["n_requests"],
                failed=0,
                spec_metrics=spec,
                invocation_before=self.invocation,
                invocation_after=self.invocation,
            )
            if lie == "metrics":
                block["spec_metrics"] = not spec
            elif lie == "restart":
                block["invocation_after"] = self.invocation + 100
            out.append(block)
        return {"blocks": out}


def drive(settings=None, **device):
    dev = Device(**device)
    final, observations = _trial.run(settings or {}, dev.apply, dev.measure)
    return final, observations, dev


def test_first_action_applies_the_baseline():
    action = _trial.next_action({}, [])
    assert action["action"] == "apply"
    assert action["arm"] == B


def test_clear_gain_is_kept_and_clear_loss_reverted():
    final, _obs, _dev = drive(g1=0.5)
    assert final["outcome"] == "keep" and final["cause"]["kind"] == "verdict"
    final, _obs, _dev = drive(g1=-0.1)
    assert final["outcome"] == "revert" and final["cause"]["kind"] == "verdict"


def test_one_restart_per_arm_switch_and_measures_only_the_served_arm():
    final, observations, dev = drive(g1=0.5)
    served = None
    for obs in observations:
        if obs["type"] == "applied":
            assert obs["arm"] != served  # never re-applies the arm already serving
            served = obs["arm"]
        else:
            assert {b["arm"] for b in obs["blocks"]} == {served}
    assert final["counters"]["restarts"] == len(dev.applied)


def test_pairs_share_seed_and_prompts_across_arms_and_warm_up_once_per_level_after_a_restart():
    _final, observations, _dev = drive(g1=0.5)
    seen = {}
    warm = set()
    for obs in observations:
        if obs["type"] == "applied":
            warm = set()  # restarted: warm-ups again, once per level
        for b in obs.get("blocks", []):
            seen.setdefault((b["concurrency"], b["seed"], b["prompt_offset"]), set()).add(b["arm"])
            assert b["warmups"] == (0 if b["concurrency"] in warm else 2)
            warm.add(b["concurrency"])
    complete = [arms for arms in seen.values() if arms == {B, S}]
    assert len(complete) >= len(seen) - 2  # all but a trailing unpaired block
    assert len({key[1] for key in seen}) > 1  # pairs differ from each other


def test_block_failing_the_proof_is_discarded_and_the_arm_reapplied():
    clean, _o, clean_dev = drive(g1=0.5, seed=3)
    final, observations, dev = drive(g1=0.5, seed=3, lie={2: "metrics"})
    assert final["outcome"] == "keep"
    assert final["counters"]["discarded"] >= 1
    # the discarded blocks never reach the verdict: the same number of blocks decided
    assert final["verdict"]["requests_spent"] >= clean["verdict"]["requests_spent"]
    # after the bad measurement the same arm is applied again
    bad = [i for i, o in enumerate(observations) if o["type"] == "measured"][1]
    assert observations[bad + 1]["type"] == "applied"
    assert observations[bad + 1]["arm"] == observations[bad]["blocks"][0]["arm"]
    assert len(dev.applied) == len(clean_dev.applied) + 1


def test_restart_during_block_is_discarded():
    final, _obs, _dev = drive(g1=0.5, lie={1: "restart"})
    assert final["counters"]["discarded"] >= 1


def test_too_many_discards_revert_with_arm_proof_cause():
    final, _obs, _dev = drive(g1=0.5, lie={i: "metrics" for i in range(1, 40)})
    assert final["outcome"] == "revert"
    assert final["cause"]["kind"] == "arm_proof"


def test_stale_server_started_before_config_fails_proof():
    served = {"arm": B, "invocation": 1, "config_written": 10, "server_started": 5}
    block = {"arm": B, "spec_metrics": False, "invocation_before": 1, "invocation_after": 1}
    assert "before" in _trial.prove_block(block, served)
    served["server_started"] = 11
    assert _trial.prove_block(block, served) is None
    assert "no speculation" in _trial.prove_block({"arm": B, "invocation_before": 1, "invocation_after": 1}, served)


def test_oom_climbs_the_ladder_then_gives_up():
    final, _obs, dev = drive({"ladder_rungs": 2}, g1=0.5, oom_rungs=2)
    assert final["outcome"] == "keep"
    assert [r for a, r in dev.applied if a == S][:3] == [0, 1, 2]
    final, _obs, dev = drive({"ladder_rungs": 1}, g1=0.5, oom_rungs=2)
    assert final["outcome"] == "revert" and final["cause"]["kind"] == "start_failed"


def test_start_failure_other_than_oom_ends_at_once():
    final, _obs, dev = drive({"ladder_rungs": 3}, g1=0.5, spec_fails="image")
    assert final["cause"]["kind"] == "start_failed"
    assert [a for a, _r in dev.applied].count(S) == 1


def test_deterministic():
    a = drive(g1=0.2, noise=0.05, seed=7)
    b = drive(g1=0.2, noise=0.05, seed=7)
    assert a[0]["outcome"] == b[0]["outcome"] and a[1] == b[1]


def test_settings_split_and_unknown_rejected():
    trial, thresholds = _trial.split_settings({"warmups": 0, "min_gain": 0.2})
    assert trial["warmups"] == 0 and thresholds == {"min_gain": 0.2}
    with pytest.raises(_trial.TrialError):
        _trial.split_settings({"nonsense": 1})
    with pytest.raises(_trial.TrialError):
        _trial.next_action({}, [{"type": "what"}])


def test_an_arm_that_was_serving_already_is_not_warmed_up():
    dev = Device(g1=0.5)

    def apply(action):
        obs = dev.apply(action)
        obs["restarted"] = False
        return obs

    _final, observations = _trial.run({}, apply, dev.measure)
    assert all(b["warmups"] == 0 for o in observations for b in o.get("blocks", []))


def _probe(agree_on=lambda action: True):
    calls = []

    def probe(action):
        calls.append((action["arm"], action["rung"], action["reference"]))
        return {"agree": None if action["reference"] else agree_on(action), "summary": "probe %s" % len(calls)}

    return probe, calls


def test_output_proof_takes_the_baseline_reference_first_then_proves_each_rung_once():
    dev = Device(g1=0.5, oom_rungs=1)
    probe, calls = _probe()
    final, observations = _trial.run({"output_proof": 3, "ladder_rungs": 2}, dev.apply, dev.measure, probe=probe)
    assert final["outcome"] == "keep"
    # the reference on the baseline before anything else is probed, then rung 1 (rung 0 did not start) once
    assert calls[0] == (B, 0, True)
    assert [c for c in calls if not c[2]] == [(S, 1, False)]
    kinds = [o["type"] for o in observations]
    assert kinds[:2] == ["applied", "probed"] and observations[0]["arm"] == B
    # the speculative rung is proved before its first block is measured
    first_spec_measure = next(i for i, o in enumerate(observations) if o["type"] == "measured" and o["blocks"][0]["arm"] == S)
    assert any(o["type"] == "probed" and not o["reference"] for o in observations[:first_spec_measure])


def test_answers_that_differ_revert_at_once_with_outputs_differ():
    dev = Device(g1=0.5)
    probe, _calls = _probe(agree_on=lambda action: False)
    final, observations = _trial.run({"output_proof": 3}, dev.apply, dev.measure, probe=probe)
    assert final["outcome"] == "revert"
    assert final["cause"]["code"] == "outputs_differ"
    assert "probe 2" in final["cause"]["detail"]
    # nothing is measured on a speculative server whose answers differ
    assert not [o for o in observations if o["type"] == "measured" and o["blocks"][0]["arm"] == S]


def test_a_trial_that_asks_for_a_probe_without_one_fails():
    with pytest.raises(_trial.TrialError):
        _trial.run({"output_proof": 3}, Device().apply, Device().measure)


def test_a_kept_gain_under_the_acceptance_floor_is_reverted():
    dev = Device(g1=0.5)

    def measure(action):
        obs = dev.measure(action)
        for b in obs["blocks"]:
            if b["arm"] == S:
                b.update(spec_decode_num_drafts=100, spec_decode_draft_tokens=300, spec_decode_accepted_tokens=15)
        return obs

    final, _obs = _trial.run({"min_acceptance": 0.1}, dev.apply, measure)
    assert final["outcome"] == "revert" and final["cause"]["code"] == "not_accepted"
    assert "5.0 %" in final["cause"]["detail"]
    dev = Device(g1=0.5)
    final, _obs = _trial.run({"min_acceptance": 0.01}, dev.apply, measure)
    assert final["outcome"] == "keep"


def test_late_blocks_are_discarded_without_a_restart_and_bounded():
    dev = Device(g1=0.5)
    late_calls = {2}

    def measure(action):
        obs = dev.measure(action)
        if dev.measures in late_calls:
            for b in obs["blocks"]:
                b["late"] = "the simulator ran late"
        return obs

    final, observations = _trial.run({}, dev.apply, measure)
    assert final["outcome"] == "keep"
    assert final["counters"]["late"] == 2 and final["counters"]["discarded"] == 0
    late = [i for i, o in enumerate(observations) if o["type"] == "measured"][1]
    assert observations[late + 1]["type"] == "measured"  # the same server measures again, no restart
    late_calls.update(range(1, 100))
    dev = Device(g1=0.5)
    final, _obs = _trial.run({"max_late": 3}, dev.apply, measure)
    assert final["outcome"] == "revert" and final["cause"]["kind"] == "late"


def test_a_failed_benchmark_ends_the_trial_naming_its_arm():
    dev = Device(g1=0.5)

    def measure(action):
        if action["arm"] == S:
            return {"arm": S, "error": "vLLM stopped answering"}
        return dev.measure(action)

    final, _obs = _trial.run({}, dev.apply, measure)
    assert final["outcome"] == "revert" and final["cause"]["kind"] == "measure_failed"
    assert final["cause"]["arm"] == S and "stopped answering" in final["cause"]["detail"]
