# SPDX-License-Identifier: Apache-2.0
"""Arm proof of the role's benchmark blocks (trial_internal's blocks with served/after) and how the verdict treats them."""

from ansible_collections.jetson_llm.speculative.plugins.filter.speculative_verdict import MAX_DISCARDED, speculative_verdict_filter
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _trial
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _rollout_steps
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rollout_steps import arm_proof


def trial_blocks(runs, **kwargs):
    return _rollout_steps.trial_blocks(runs, **kwargs)


def live(invocation="inv-1", speculative=False, config_current=True, differences=()):
    return {
        "invocation_id": invocation,
        "main_pid": 42,
        "speculative": speculative,
        "config_current": config_current,
        "differences": list(differences),
        "started_at": 1000.0,
        "running": True,
    }


def runs(*levels):
    return [{"concurrency": c, "output_throughput": 100.0 + c, "median_tpot_ms": 10.0, "completed": 4, "failed": 0} for c in levels]


SEG_BASE = [{"arm": "baseline", "concurrency": 1, "n_requests": 4}, {"arm": "baseline", "concurrency": 8, "n_requests": 4}]
SEG_SPEC = [{"arm": "speculative", "concurrency": 1, "n_requests": 4}]


def test_a_block_on_its_own_server_proves_its_arm():
    served = dict(live(), arm="baseline")
    got = trial_blocks(runs(1, 8), segment=SEG_BASE, start=0, served=served, after=live())
    assert [b.get("discard") for b in got] == [None, None]
    assert "arm_proof" not in got[0]
    served = dict(live(speculative=True), arm="speculative")
    assert arm_proof("speculative", served, live(speculative=True)) is None


def test_speculation_on_the_baseline_arm_is_caught():
    # the early-kill case: the baseline was rendered but the speculative server still runs
    served = dict(live(speculative=True), arm="baseline")
    got = trial_blocks(runs(1, 8), segment=SEG_BASE, start=0, served=served, after=live(speculative=True))
    assert all("speculation metrics present on the baseline arm" in b["arm_proof"] for b in got)
    assert all(b["discard"].startswith("it did not measure the baseline arm") for b in got)


def test_no_speculation_on_the_speculative_arm_is_caught():
    served = dict(live(speculative=False), arm="speculative")
    reason = arm_proof("speculative", served, live(speculative=False))
    assert reason == "speculation metrics absent on the speculative arm"


def test_a_restart_during_the_block_is_caught():
    served = dict(live(invocation="inv-1"), arm="baseline")
    reason = arm_proof("baseline", served, live(invocation="inv-2"))
    assert "restarted during the block" in reason and "inv-1" in reason and "inv-2" in reason


def test_a_server_started_before_its_files_were_written_is_caught():
    served = dict(live(config_current=False, differences=["serve.yaml changed since the server started"]), arm="baseline")
    reason = arm_proof("baseline", served, live())
    assert reason.startswith("the server was not started from the arm's configuration")
    assert "serve.yaml changed" in reason


def test_a_block_of_another_arm_than_the_served_one_is_caught():
    served = dict(live(speculative=True), arm="speculative")
    assert arm_proof("baseline", served, live(speculative=True)) == "the server was not started on the baseline arm"


def test_no_proof_without_served():
    got = trial_blocks(runs(1), segment=SEG_SPEC, start=3)
    assert "arm_proof" not in got[0] and "discard" not in got[0]


def _blocks(n_rounds, bad_arm_proof_rounds=()):
    blocks, index = [], 0
    for r in range(n_rounds):
        for arm, tput in (("baseline", 100.0), ("speculative", 150.0)):
            for c in (1, 8):
                b = {"arm": arm, "concurrency": c, "index": index, "output_throughput": tput + r, "median_tpot_ms": 1000.0 / tput,
                     "completed": 8, "failed": 0}  # fmt: skip
                if r in bad_arm_proof_rounds and arm == "baseline":
                    b["arm_proof"] = "speculation metrics present on the baseline arm"
                    b["discard"] = "it did not measure the baseline arm: " + b["arm_proof"]
                    b["output_throughput"] = 150.0  # it measured the speculative server
                blocks.append(b)
                index += 1
    return blocks


def test_blocks_failing_the_arm_proof_never_count_however_many():
    bad_rounds = tuple(range(MAX_DISCARDED + 2))  # more failing blocks than the limit for late-simulator blocks
    blocks = _blocks(6, bad_arm_proof_rounds=bad_rounds)
    result = speculative_verdict_filter(blocks)
    dropped = {d["index"] for d in result["discarded"]}
    bad = {b["index"] for b in blocks if b.get("arm_proof")}
    assert len(bad) > MAX_DISCARDED
    assert dropped == bad
    assert not any("counts although" in w for w in result["warnings"])
    clean = speculative_verdict_filter([b for b in blocks if not b.get("arm_proof")])
    assert result["gain_c1"] == clean["gain_c1"]


def test_the_k_sweep_never_chooses_from_blocks_failing_the_arm_proof():
    """Fast blocks of k=4 that measured another server (restarted during the block) are discarded by the trial
    controller: they never reach the sweep's blocks, and k=2 is chosen as without them."""
    observations, invocation = [], 0

    def apply(arm, k):
        nonlocal invocation
        invocation += 1
        observations.append({"type": "applied", "arm": arm, "rung": 0, "k": k, "ok": True, "invocation": invocation})

    def measure(arm, k, tput, restarted=False):
        block = {"arm": arm, "k": k, "phase": "sweep", "concurrency": 1, "n_requests": 8, "output_throughput": tput, "median_tpot_ms": 1000.0 / tput,
                 "completed": 8, "failed": 0, "spec_metrics": arm == "speculative", "invocation_before": invocation,
                 "invocation_after": invocation + (100 if restarted else 0), "num_speculative_tokens": k}  # fmt: skip
        if arm == "speculative":
            block["spec_decode_per_position_acceptance_rates"] = [0.8, 0.6, 0.45, 0.3]
        observations.append({"type": "measured", "blocks": [block]})

    settings = {"k_sweep": {"candidates": [2, 4], "draft_cost": 0.2, "rounds": 2}}
    for r in range(3):
        apply("baseline", None)
        measure("baseline", None, 100.0 + r)
        for k, tput in ((4, 120.0), (2, 140.0)):
            apply("speculative", k)
            measure("speculative", k, tput + r)
            if k == 4:
                measure("speculative", 4, 400.0, restarted=True)  # poisoned: another server answered
                apply("speculative", 4)
    state = _trial.replay(settings, observations)
    assert len(state["discarded"]) == 3 and all("restarted" in d["reason"] for d in state["discarded"])
    assert max(b["output_throughput"] for b in state["sweep_blocks"]) < 400.0
    assert not state["blocks"]  # sweep blocks never enter the verdict
    progress = _trial.sweep_progress(state["trial"], state)
    assert progress["record"]["survivors"] == [2, 4], progress
    assert progress["record"]["choice"]["k"] == 2, progress


def unit(before="inv-1", after="inv-1", speculative=False):
    """The evidence vllm_benchmark returns with its service option."""
    return {"service": "vllm.service", "invocation_before": before, "invocation_after": after, "main_pid_before": 7, "main_pid_after": 7,
            "speculative": speculative}  # fmt: skip


def test_the_benchmark_unit_evidence_proves_or_fails_the_arm():
    served = dict(live(invocation="inv-1"), arm="baseline")
    assert arm_proof("baseline", served, unit()) is None
    assert "restarted during the block (inv-1 -> inv-2)" in arm_proof("baseline", served, unit(after="inv-2"))
    # the benchmark began on another server than the one the arm started (it restarted between the two)
    assert "is not the one started for the arm" in arm_proof("baseline", served, unit(before="inv-9", after="inv-9"))
    assert arm_proof("baseline", served, unit(speculative=True)) == "speculation metrics present on the baseline arm"
    # without invocation ids the main process ids are compared
    assert arm_proof("baseline", served, unit(before=None, after=None)) == "the server measured (7) is not the one started for the arm (42)"
    assert arm_proof("baseline", dict(served, main_pid=7), unit(before=None, after=None)) is None
    no_evidence = {"invocation_before": None, "invocation_after": None, "speculative": False}
    assert arm_proof("baseline", served, no_evidence) == "no server invocation evidence"
    got = trial_blocks(runs(1, 8), segment=SEG_BASE, start=4, served=served, after=unit(after="inv-3"))
    assert all(b["arm_proof"] and b["discard"] for b in got)
