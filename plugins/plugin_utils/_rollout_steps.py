# SPDX-License-Identifier: Apache-2.0
"""The trial's internal steps that need Python beside the trial controller (``plugins/module_utils/_trial.py``,
which owns the verdict, the proofs beside the statistics and the k sweep): the blocks of one benchmark
measurement with their arm proof (called by the trial's action plugin) and the out-of-memory ladder (reached
from the role through the one internal filter ``jetson_llm.speculative.trial_internal``). Not an API (names and
arguments may change in any release). Errors are ``RolloutStepError`` with a message that names what was wrong.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.jetson_llm.speculative.plugins.module_utils._trial import prove_block
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._catalog import CatalogError, drafts_for, eagle3_heads, merged_catalog
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.planner import plan
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._values import plain

UTIL_FLOOR = 0.05


class RolloutStepError(ValueError):
    pass


# ------------------------------------------------------------------ blocks of a measurement, arm proof


def arm_proof(arm, served, after):
    """None when a block of ``arm`` proves its arm, else the reason (the rule itself is _trial.prove_block,
    shared with the trial controller).

    ``served``: the live server read when the arm was applied (vllm_server_info, plus ``arm``).
    ``after``: the evidence of the measurement, either the benchmark's ``unit`` (``invocation_before``,
    ``invocation_after``, ``main_pid_*``, ``speculative``) or a vllm_server_info read after it.
    """
    served = plain(served or {})
    after = plain(after or {})
    if served.get("config_current") is False:
        differences = "; ".join(str(d) for d in served.get("differences") or []) or "files changed after the start"
        return "the server was not started from the arm's configuration (%s)" % differences
    if after.get("invocation_before") or after.get("invocation_after"):
        started, before, end = served.get("invocation_id"), after.get("invocation_before"), after.get("invocation_after")
    elif "main_pid_before" in after:  # no invocation ids: compare like with like, the main process ids
        started, before, end = served.get("main_pid"), after.get("main_pid_before"), after.get("main_pid_after")
    else:
        started = served.get("invocation_id") or served.get("main_pid")
        before, end = started, after.get("invocation_id") or after.get("main_pid")
    block = {"arm": arm, "spec_metrics": after.get("speculative"), "invocation_before": before, "invocation_after": end}
    return prove_block(block, {"arm": served.get("arm"), "invocation": started, "server_started": served.get("started_at")})


def trial_blocks(runs, segment, start, result_file=None, served=None, after=None):
    """The benchmark's runs of one measurement as trial blocks: tagged with arm, concurrency and index, and
    marked ``discard`` (with ``arm_proof``) when they did not measure their arm or the simulator ran late."""
    if not isinstance(runs, list) or not isinstance(segment, list):
        raise RolloutStepError("runs and segment must be lists")
    if len(runs) != len(segment):
        raise RolloutStepError("the benchmark returned {} runs for {} blocks".format(len(runs), len(segment)))
    out = []
    for i, (run, block) in enumerate(zip(runs, segment)):
        if int(run.get("concurrency", -1)) != int(block["concurrency"]):
            raise RolloutStepError("run {} is at concurrency {}, the block at {}".format(i, run.get("concurrency"), block["concurrency"]))
        tagged = dict(run)
        tagged.update(arm=block["arm"], concurrency=int(block["concurrency"]), index=int(start) + i, result_file=result_file)
        if run.get("sim_out_of_spec"):
            tagged["discard"] = "measured while the vLLM simulator ran late (%.1f %% of modelled time lost, over its limit)" % (
                100.0 * float(run.get("sim_lag_share") or 0.0)
            )
        if served is not None:
            reason = arm_proof(block["arm"], served, after)
            if reason:
                tagged["arm_proof"] = reason
                tagged["discard"] = "it did not measure the %s arm: %s" % (block["arm"], reason)
        if block.get("num_speculative_tokens") not in (None, "", "None"):
            tagged["num_speculative_tokens"] = int(block["num_speculative_tokens"])
        out.append(tagged)
    return out


# ------------------------------------------------------------------ out-of-memory ladder


def ladder(base, facts, target_model, serve, concurrency=1, catalog=None, overrides=None, step=0.05, steps=1, host=""):
    """The rungs to try after an out-of-memory start: the plan, then lower utilizations, then smaller
    speculators of the same family that fit."""
    if not isinstance(base, dict) or base.get("decision") != "enabled":
        raise RolloutStepError("the input must be an enabled plan")
    try:
        step = float(step)
        steps = int(steps)
    except (TypeError, ValueError) as exc:
        raise RolloutStepError("step and steps must be numbers ({})".format(exc)) from exc
    if not (0 < step < 1 and 0 <= steps <= 20):
        raise RolloutStepError("step must be in (0, 1) and steps in 0..20")
    rungs = [dict(base, rung="plan")]
    util = float(base["gpu_memory_utilization"])
    for i in range(1, steps + 1):
        lowered = round(util - i * step, 2)
        if lowered < UTIL_FLOOR:
            break
        rungs.append(
            dict(
                base,
                gpu_memory_utilization=lowered,
                rung="utilization",
                reason="{}; utilization lowered to {:.2f} after an out-of-memory start".format(base["reason"], lowered),
            )
        )
    try:
        cat = merged_catalog(dict(catalog) if catalog else None, host=str(host or ""))
    except CatalogError as exc:
        raise RolloutStepError(str(exc)) from exc
    target = cat.get(target_model)
    current = cat.get(base.get("model"))
    if target is None:
        return rungs
    limit = current["weights_gb"] if current else float("inf")
    seen = set([base.get("model")])
    for alt in eagle3_heads(cat, target["family"]) + drafts_for(cat, target["family"]):
        if alt in seen or cat[alt]["weights_gb"] >= limit:
            continue
        seen.add(alt)
        ov = dict(overrides or {})
        ov["model"] = alt
        ov.pop("method", None)
        ov.pop("num_speculative_tokens", None)
        try:
            alt_plan = plan(facts, target_model, dict(serve, running=True), int(concurrency), catalog=catalog or None, overrides=ov, host=str(host or ""))
        except SpecdecError:
            continue  # an incompatible pair (for example a vocabulary mismatch) is not a rung
        if alt_plan.get("decision") == "enabled":
            alt_plan["rung"] = "smaller speculator"
            rungs.append(alt_plan)
    return rungs


# The operations of the trial_internal filter (the roles build the ladder; the trial's action plugin calls
# trial_blocks itself).
OPERATIONS = {"ladder": ladder}
