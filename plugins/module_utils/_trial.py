# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
"""The control flow of one speculative-decoding trial as a deterministic reducer.

Pure Python standard library, Python 3.8 syntax, no I/O: it runs on the controller (a filter), on a
device, or in the offline benchmark (``tests/bench/bench_decisions.py``), so what the benchmark
measures is what the role runs.

``next_action(settings, observations)`` replays the observations made so far and returns the one
thing to do next:

* ``{"action": "apply", "arm": ..., "rung": n, "reason": ...}``: (re)start the server on the arm's
  configuration (``rung`` is the step of the out-of-memory ladder of the speculative arm, 0 = as
  planned).
* ``{"action": "measure", "arm": ..., "blocks": [{"arm", "concurrency", "n_requests", "index",
  "seed", "prompt_offset", "warmups"}], ...}``: benchmark these blocks of the served arm in one
  call. The same pair of blocks (block ``j`` of each arm at one concurrency) gets the same seed and
  the same prompt offset, so both arms answer the same prompts.
* ``{"action": "probe", "arm": ..., "rung": n, "reference": bool}``: with the setting
  ``output_proof`` (the number of probe prompts, 0 = off), ask the served server for its answers at
  temperature 0: on the baseline once, as the reference (``reference`` true); on the speculative arm at
  the first start of each rung, compared with the reference.
* ``{"action": "done", "outcome": "keep" | "revert", "cause": {"kind", "detail", ...},
  "verdict": ..., "k": ..., "sweep": ...}``.

Every ``apply``, ``measure`` and ``probe`` of the speculative arm carries ``k``: the
``num_speculative_tokens`` to serve, or None for the rung's own (the plan's) value.

The k sweep (setting ``k_sweep``, a canary's tuning of ``num_speculative_tokens``, before the verdict):
the baseline and the largest candidate are measured at c=1, the candidates that cannot win are pruned
from the per-position acceptance of that speculative block (``_stats.ksweep.k_sweep``), the survivors are
measured with the baseline in a mirrored order (``sweep_schedule``) and ``choose_k`` picks the k. Sweep
blocks (``"phase": "sweep"``) pass the same arm proof and the output proof (once per rung and k), climb the
same out-of-memory ladder, and never enter the verdict, which then runs on the chosen k (on the rung's own
k when nothing was chosen, with the reason). The sweep's record (prediction, choice, blocks, requests)
comes with every action once the sweep ended, as ``sweep``.

Observations (dicts, in the order they happened):

* ``{"type": "applied", "arm", "rung", "ok": bool, "cause": "oom" | str, "invocation",
  "config_written", "server_started", "restarted": bool}``: the result of an ``apply``
  (``restarted`` false: the arm was serving already, and warm; default true).
* ``{"type": "measured", "blocks": [...]}``: the blocks of a ``measure`` as planned plus the metric
  fields (``output_throughput``, ``median_tpot_ms``, ``completed``, ``failed``) and the arm proof:
  ``spec_metrics`` (the server exposes ``vllm:spec_decode_*`` counters), ``invocation_before`` and
  ``invocation_after`` (the server's invocation id or start time when the block began and ended).
  A block may carry ``late`` (the reason, for example a simulator that ran late): it is discarded
  without re-applying the arm; after ``max_late`` such blocks the trial ends with a revert (cause ``late``).
* ``{"type": "measured", "arm", "error": "..."}``: the benchmark of a ``measure`` failed (the server
  stopped answering, requests failed). On the speculative arm the trial ends with a revert (cause
  ``measure_failed``, the configuration does not serve under load); on the baseline too, and the caller
  treats it as a fault of the device, not of speculation.
* ``{"type": "probed", "arm", "rung", "reference": bool, "agree": bool, "summary"}``: the result of a
  ``probe``. Answers that differ end the trial with a revert (verdict cause ``outputs_differ``).

A kept verdict whose speculative blocks accepted less than the setting ``min_acceptance`` (accepted over
drafted tokens) turns into a revert (verdict cause ``not_accepted``).

Arm proof: a block counts only when speculation metrics are present if and only if its arm is the
speculative one, the server's invocation did not change during the block and is the one the last
``apply`` started, and that server started no earlier than the arm's configuration was written. A
block failing the proof is discarded (never enters the verdict), counted, and the arm is applied
again; after ``max_discards`` discards the trial ends with a revert (cause ``arm_proof``).

The verdict (``_stats.predicted.decide``: the sequential verdict, the prediction from acceptance with
the group's calibration (setting ``calibration``), or a canary's calibration (setting ``canary``)) is
evaluated after each measured segment, the cadence of the role;
its ``next_blocks`` give the arm order (mirrored rounds: one restart per round, linear drift cancels).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.jetson_llm.speculative.plugins.module_utils._dayafter import acceptance_of
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import BASELINE, DEFAULTS, SPECULATIVE, StatsError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.ksweep import choose_k, draft_cost, k_sweep, sweep_schedule
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.predicted import decide
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.sequential import overrule

TRIAL_DEFAULTS = {
    "warmups": 2,
    "max_discards": 3,
    "ladder_rungs": 0,
    "require_proof": True,
    "seed": 0,
    # the group's calibration (a device predicted from acceptance), or this device calibrates it (canary)
    "calibration": None,
    "canary": False,
    "prediction": None,
    # number of probe prompts of the output proof (0: no output proof)
    "output_proof": 0,
    # acceptance floor of a kept verdict (accepted over drafted tokens; None: no floor)
    "min_acceptance": None,
    # blocks discarded as late (the measuring instrument ran late) before the trial gives up
    "max_late": 6,
    # a canary's k sweep before the verdict (None: no sweep); see SWEEP_DEFAULTS
    "k_sweep": None,
}

SWEEP_DEFAULTS = {
    # the num_speculative_tokens values to consider
    "candidates": None,
    # one draft forward over one target forward: a number, or one number per rung of the ladder
    # (None: the action plugin gives each rung's, _stats.ksweep.draft_cost of its budget)
    "draft_cost": None,
    "rounds": 2,
    "n_requests": 8,
    "confidence": 0.95,
    "tie_tolerance": 0.01,
}
# seeds of the sweep's blocks are apart from the verdict's
_SWEEP_SEED = 7919

METRICS = (
    "output_throughput",
    "median_tpot_ms",
    "completed",
    "failed",
    "spec_decode_num_drafts",
    "spec_decode_accepted_tokens",
    "spec_decode_draft_tokens",
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
)
# what a sweep block keeps beyond METRICS: the per-position acceptance the pruning reads
SWEEP_METRICS = ("spec_decode_per_position_acceptance_rates",)


class TrialError(ValueError):
    """An observation that does not fit the trial (the message names it)."""


def split_settings(settings):
    """(trial settings, verdict thresholds) from one dict."""
    settings = dict(settings or {})
    trial = dict(TRIAL_DEFAULTS)
    thresholds = {}
    for key, value in settings.items():
        if key in TRIAL_DEFAULTS:
            trial[key] = value
        elif key in DEFAULTS:
            thresholds[key] = value
        else:
            raise TrialError("unknown trial setting %r" % (key,))
    if trial["k_sweep"] is not None:
        trial["k_sweep"] = sweep_settings(trial["k_sweep"])
    return trial, thresholds


def sweep_settings(value):
    """The k sweep's settings with their defaults; TrialError names what is wrong."""
    if not isinstance(value, dict):
        raise TrialError("k_sweep must be a dict of %s" % ", ".join(sorted(SWEEP_DEFAULTS)))
    unknown = sorted(set(value) - set(SWEEP_DEFAULTS))
    if unknown:
        raise TrialError("unknown k_sweep setting %r" % (unknown[0],))
    out = dict(SWEEP_DEFAULTS)
    out.update(value)

    def convert(key, kind, what):
        try:
            if key == "candidates":
                if not isinstance(out[key], (list, tuple)):
                    raise TypeError("not a list")
                return sorted({kind(k) for k in out[key]})
            if key == "draft_cost":
                cost = out[key]
                if cost is None:
                    return None
                return [kind(c) for c in cost] if isinstance(cost, (list, tuple)) else [kind(cost)]
            return kind(out[key])
        except (TypeError, ValueError) as exc:
            raise TrialError("k_sweep.%s must be %s, got %r" % (key, what, out[key])) from exc

    out["candidates"] = convert("candidates", int, "a non-empty list of integers >= 1")
    out["rounds"] = convert("rounds", int, "an integer >= 2")
    out["n_requests"] = convert("n_requests", int, "an integer >= 1")
    out["confidence"] = convert("confidence", float, "a number in (0, 1)")
    out["tie_tolerance"] = convert("tie_tolerance", float, "a number in [0, 1)")
    out["draft_cost"] = convert("draft_cost", float, "a number >= 0 or one per rung")
    if not out["candidates"] or out["candidates"][0] < 1:
        raise TrialError("k_sweep.candidates must be a non-empty list of integers >= 1, got %r" % (value.get("candidates"),))
    # two mirrored rounds give each survivor the 4 blocks with the baseline that choose_k needs
    if out["rounds"] < 2:
        raise TrialError("k_sweep.rounds must be an integer >= 2, got %r" % (out["rounds"],))
    if out["n_requests"] < 1:
        raise TrialError("k_sweep.n_requests must be an integer >= 1, got %r" % (out["n_requests"],))
    if out["draft_cost"] is not None and (not out["draft_cost"] or any(c < 0 for c in out["draft_cost"])):
        raise TrialError("k_sweep.draft_cost must be a number >= 0 or one per rung, got %r" % (value.get("draft_cost"),))
    if not 0.0 < out["confidence"] < 1.0:
        raise TrialError("k_sweep.confidence must be a number in (0, 1), got %r" % (out["confidence"],))
    if not 0.0 <= out["tie_tolerance"] < 1.0:
        raise TrialError("k_sweep.tie_tolerance must be a number in [0, 1), got %r" % (out["tie_tolerance"],))
    return out


def prove_block(block, served):
    """None when the block proves its arm against the served server, else the reason it does not."""
    arm = block.get("arm")
    if served is None or served.get("arm") != arm:
        return "the server was not started on the %s arm" % arm
    spec = block.get("spec_metrics")
    if spec is None:
        return "no speculation metrics evidence"
    if bool(spec) != (arm == SPECULATIVE):
        return "speculation metrics %s on the %s arm" % ("present" if spec else "absent", arm)
    before, after = block.get("invocation_before"), block.get("invocation_after")
    if before is None or after is None:
        return "no server invocation evidence"
    if before != after:
        return "the server restarted during the block (%s -> %s)" % (before, after)
    if arm == SPECULATIVE and "k" in block and served.get("k") != block["k"]:
        return "the server serves k=%s, the block is for k=%s" % (served.get("k"), block["k"])
    if served.get("invocation") is not None and before != served["invocation"]:
        return "the server measured (%s) is not the one started for the arm (%s)" % (before, served["invocation"])
    written, started = served.get("config_written"), served.get("server_started")
    if written is not None and started is not None and started < written:
        return "the server started before the arm's configuration was written"
    return None


def replay(settings, observations):
    """The trial state after the observations: blocks, discards, restarts, served arm, ladder."""
    trial, thresholds = split_settings(settings)
    state = {
        "trial": trial,
        "thresholds": thresholds,
        "blocks": [],
        # the k sweep's blocks, apart from the verdict's
        "sweep_blocks": [],
        "discarded": [],
        "restarts": 0,
        "served": None,
        "rung": 0,
        "start_failure": None,
        "stale": False,
        # levels the served server has answered since it started: they need no warm-up
        "warm": set(),
        "requests": 0,
        "warmup_requests": 0,
        "late": [],
        # the output proof: the reference was taken; the speculative rungs proved; the first disagreement
        "reference": False,
        "proved": set(),
        "outputs_differ": None,
        "measure_failure": None,
    }
    index = 0
    sweep_index = 0
    for obs in observations or []:
        kind = obs.get("type")
        if kind == "applied":
            state["restarts"] += 1
            if obs.get("ok", True):
                state["served"] = {
                    "arm": obs["arm"],
                    "k": obs.get("k") if obs["arm"] == SPECULATIVE else None,
                    "invocation": obs.get("invocation"),
                    "config_written": obs.get("config_written"),
                    "server_started": obs.get("server_started"),
                }
                state["stale"] = False
                # a server that was already serving (no restart) has answered traffic: it is warm
                state["warm"] = set() if obs.get("restarted", True) else {"all"}
                if obs["arm"] == SPECULATIVE:
                    state["rung"] = int(obs.get("rung", 0))
            else:
                state["served"] = None
                if obs.get("arm") == SPECULATIVE and obs.get("cause") == "oom" and int(obs.get("rung", 0)) < trial["ladder_rungs"]:
                    state["rung"] = int(obs.get("rung", 0)) + 1
                else:
                    state["start_failure"] = {"arm": obs.get("arm"), "cause": obs.get("cause"), "rung": obs.get("rung", 0)}
        elif kind == "measured" and obs.get("error"):
            state["measure_failure"] = {"arm": obs.get("arm"), "detail": str(obs["error"])}
        elif kind == "measured":
            state["warm"].update(int(b.get("concurrency", 0)) for b in obs.get("blocks", []))
            for block in obs.get("blocks", []):
                state["requests"] += int(block.get("n_requests", block.get("completed", 0)))
                state["warmup_requests"] += int(block.get("warmups", 0))
                reason = prove_block(block, state["served"]) if trial["require_proof"] else None
                if reason is None and block.get("late"):
                    state["late"].append({"arm": block.get("arm"), "concurrency": block.get("concurrency"), "reason": str(block["late"])})
                elif reason is None and block.get("phase") == "sweep":
                    kept = {key: block[key] for key in METRICS + SWEEP_METRICS if key in block}
                    kept.update(
                        arm=block["arm"],
                        concurrency=int(block["concurrency"]),
                        index=sweep_index,
                        k=block.get("k"),
                        num_speculative_tokens=block["k"] if block.get("k") is not None else block.get("num_speculative_tokens"),
                        n_requests=int(block.get("n_requests", block.get("completed", 0))),
                        rung=state["rung"],
                    )
                    state["sweep_blocks"].append(kept)
                    sweep_index += 1
                elif reason is None:
                    kept = {key: block[key] for key in METRICS if key in block}
                    for key in ("samples", "num_speculative_tokens"):
                        if key in block:
                            kept[key] = block[key]
                    kept.update(arm=block["arm"], concurrency=int(block["concurrency"]), index=index)
                    state["blocks"].append(kept)
                    index += 1
                else:
                    state["discarded"].append({"arm": block.get("arm"), "concurrency": block.get("concurrency"), "reason": reason})
                    state["stale"] = True
        elif kind == "probed":
            if obs.get("reference"):
                state["reference"] = True
            else:
                state["proved"].add((int(obs.get("rung", 0)), obs.get("k")))
                if obs.get("agree") is False and state["outputs_differ"] is None:
                    state["outputs_differ"] = str(obs.get("summary") or "the answers at temperature 0 are not the baseline's")
        else:
            raise TrialError("unknown observation type %r" % (kind,))
    return state


def _pair_number(blocks, arm, concurrency):
    return sum(1 for b in blocks if b["arm"] == arm and b["concurrency"] == concurrency)


def next_action(settings, observations):
    """The next action of the trial (see the module documentation)."""
    state = replay(settings, observations)
    trial = state["trial"]
    progress = sweep_progress(trial, state) if trial["k_sweep"] is not None else None
    action = _next(state, progress)
    if progress is not None:
        action["counters"]["sweep_blocks"] = len(state["sweep_blocks"])
        action["sweep"] = progress["record"]
    if action["action"] == "done":
        action["k"] = chosen_k(progress)
    return action


def chosen_k(progress):
    """The k the sweep chose (None: no sweep, or it chose none: the rung's own k)."""
    record = (progress or {}).get("record") or {}
    return int(record["choice"]["k"]) if record.get("choice") else None


def sweep_progress(trial, state):
    """Where the k sweep stands: ``next`` (the arm and k to measure next, None once it ended) and ``record``
    (None while it runs; then the prediction, the choice or why there is none, blocks and requests)."""
    cfg = trial["k_sweep"]
    blocks = state["sweep_blocks"]
    largest = cfg["candidates"][-1]
    record = {
        "candidates": list(cfg["candidates"]),
        "choice": None,
        "blocks": len(blocks),
        "requests": sum(int(b.get("n_requests") or b.get("completed") or 0) for b in blocks),
    }
    opening = ((BASELINE, None), (SPECULATIVE, largest))
    if len(blocks) < len(opening):
        arm, k = opening[len(blocks)]
        return {"next": {"arm": arm, "k": k}, "record": None}
    measured = blocks[1]
    rates = measured.get("spec_decode_per_position_acceptance_rates")
    if not rates:
        record["reason"] = "no per-position acceptance was measured at k=%d" % largest
        return {"next": None, "record": record}
    # without a draft cost (the action plugin gives each rung's), the cheapest draft: prune the least
    costs = cfg["draft_cost"] or [draft_cost(None)]
    try:
        prediction = k_sweep(
            cfg["candidates"],
            [float(r) for r in rates],
            costs[min(int(measured.get("rung") or 0), len(costs) - 1)],
            num_drafts=int(measured.get("spec_decode_num_drafts") or 0) or None,
            confidence=cfg["confidence"],
        )
    except (StatsError, TypeError, ValueError) as exc:
        record["reason"] = "the per-position acceptance does not predict k: %s" % exc
        return {"next": None, "record": record}
    record.update(prediction)
    if not prediction["survivors"]:
        record["reason"] = "no candidate survived the prediction from the per-position acceptance"
        return {"next": None, "record": record}
    schedule = sweep_schedule(prediction["survivors"], cfg["rounds"], n_requests=cfg["n_requests"])
    record["schedule"] = schedule
    done = len(blocks) - len(opening)
    if done < len(schedule):
        return {"next": {"arm": schedule[done]["arm"], "k": schedule[done]["num_speculative_tokens"]}, "record": None}
    # a pruned k (the opening block at the largest k, say) is never chosen
    survivors = set(prediction["survivors"])
    measured = [b for b in blocks if b["arm"] == BASELINE or b.get("k") in survivors]
    try:
        choice = choose_k(measured, confidence=cfg["confidence"], tie_tolerance=cfg["tie_tolerance"])
    except StatsError as exc:
        record["reason"] = "no k could be chosen: %s" % exc
        return {"next": None, "record": record}
    record.update(choice=choice, reason=choice["reason"])
    return {"next": None, "record": record}


def _next(state, progress):
    trial = state["trial"]
    counters = {
        "blocks": len(state["blocks"]),
        "discarded": len(state["discarded"]),
        "restarts": state["restarts"],
        "requests": state["requests"],
        "warmup_requests": state["warmup_requests"],
        "rung": state["rung"],
        "late": len(state["late"]),
    }
    if state["start_failure"] is not None:
        failure = state["start_failure"]
        return {
            "action": "done",
            "outcome": "revert",
            "cause": {
                "kind": "start_failed",
                "detail": "the %s arm did not start (%s) at ladder rung %s" % (failure["arm"], failure["cause"], failure["rung"]),
                "arm": failure["arm"],
            },
            "verdict": None,
            "counters": counters,
        }
    if state["measure_failure"] is not None:
        failure = state["measure_failure"]
        return {
            "action": "done",
            "outcome": "revert",
            "cause": {
                "kind": "measure_failed",
                "detail": "the benchmark of the %s arm failed: %s" % (failure["arm"], failure["detail"]),
                "arm": failure["arm"],
            },
            "verdict": None,
            "counters": counters,
        }
    if len(state["discarded"]) > trial["max_discards"]:
        return {
            "action": "done",
            "outcome": "revert",
            "cause": {"kind": "arm_proof", "detail": "%d blocks failed the arm proof: %s" % (len(state["discarded"]), state["discarded"][-1]["reason"])},
            "verdict": None,
            "counters": counters,
        }
    if len(state["late"]) > trial["max_late"]:
        return {
            "action": "done",
            "outcome": "revert",
            "cause": {"kind": "late", "detail": "%d blocks were measured late: %s" % (len(state["late"]), state["late"][-1]["reason"])},
            "verdict": None,
            "counters": counters,
        }
    result = decide(state["blocks"], calibration=trial["calibration"], canary=trial["canary"], prediction=trial["prediction"], **state["thresholds"])
    if state["outputs_differ"] is not None:
        result = overrule(result, "outputs_differ", state["outputs_differ"])
    elif result["decision"] == "keep" and trial["min_acceptance"] is not None:
        rate, _length = acceptance_of([b for b in state["blocks"] if b["arm"] == SPECULATIVE])
        floor = float(trial["min_acceptance"])
        if rate is not None and rate < floor:
            result = overrule(
                result,
                "not_accepted",
                "acceptance %.1f %% of the drafted tokens over %d speculative blocks is under the floor %.1f %%"
                % (100.0 * rate, sum(1 for b in state["blocks"] if b["arm"] == SPECULATIVE), 100.0 * floor),
            )
    if result["decision"] != "continue":
        return {
            "action": "done",
            "outcome": result["decision"],
            "cause": {"kind": "verdict", "code": result["cause"]["code"], "detail": result["reason"], "label": result["label"]},
            "verdict": result,
            "counters": counters,
        }
    sweeping = progress is not None and progress["next"] is not None
    if sweeping:
        arm, k = progress["next"]["arm"], progress["next"]["k"]
    else:
        arm, k = result["next_blocks"][0]["arm"], chosen_k(progress)
    if arm != SPECULATIVE:
        k = None
    served = state["served"]
    proof = int(trial["output_proof"] or 0) > 0
    if proof and not state["reference"]:
        # the output proof's reference comes first: the baseline's answers
        if served is None or served["arm"] != BASELINE or state["stale"]:
            return {"action": "apply", "arm": BASELINE, "rung": 0, "k": None, "reason": "the output proof's reference", "verdict": result, "counters": counters}
        return {"action": "probe", "arm": BASELINE, "rung": 0, "k": None, "reference": True, "verdict": result, "counters": counters}
    if proof and served is not None and served["arm"] == SPECULATIVE and not state["stale"] and (state["rung"], served["k"]) not in state["proved"]:
        # at the first start of each speculative configuration (rung of the ladder, k)
        return {"action": "probe", "arm": SPECULATIVE, "rung": state["rung"], "k": served["k"], "reference": False, "verdict": result, "counters": counters}
    if served is None or served["arm"] != arm or (arm == SPECULATIVE and served["k"] != k) or state["stale"]:
        if state["stale"] and served is not None and served["arm"] == arm:
            reason = "re-apply after a block failed the arm proof"
        elif sweeping:
            reason = "k sweep: measure the %s arm%s at c=1" % (arm, " with k=%s" % k if k is not None else "")
        else:
            reason = "measure the %s arm%s" % (arm, " with the chosen k=%s" % k if k is not None else "")
        rung = state["rung"] if arm == SPECULATIVE else 0
        return {"action": "apply", "arm": arm, "rung": rung, "k": k, "reason": reason, "verdict": result, "counters": counters}
    if sweeping:
        c = 1
        n = int(trial["k_sweep"]["n_requests"])
        pair = sum(1 for b in state["sweep_blocks"] if b["arm"] == arm and b.get("k") == k)
        block = {
            "arm": arm,
            "k": k,
            "phase": "sweep",
            "concurrency": c,
            "n_requests": n,
            "index": len(state["sweep_blocks"]),
            "seed": int(trial["seed"]) * 1000003 + _SWEEP_SEED + c * 1009 + pair,
            "prompt_offset": pair * n,
            "warmups": 0 if {c, "all"} & state["warm"] else int(trial["warmups"]),
        }
        return {"action": "measure", "arm": arm, "k": k, "blocks": [block], "verdict": result, "counters": counters}
    segment = []
    planned = {}
    for entry in result["next_blocks"]:
        if entry["arm"] != arm:
            break
        c = int(entry["concurrency"])
        pair = _pair_number(state["blocks"], arm, c) + planned.get(c, 0)
        planned[c] = planned.get(c, 0) + 1
        n = int(entry["n_requests"])
        segment.append(
            {
                "arm": arm,
                "concurrency": c,
                "n_requests": n,
                "index": len(state["blocks"]) + len(segment),
                "seed": int(trial["seed"]) * 1000003 + c * 1009 + pair,
                "prompt_offset": pair * n,
                # a server warms up once per level after it started, not before every block
                "warmups": int(trial["warmups"]) if planned[c] == 1 and not ({c, "all"} & state["warm"]) else 0,
            }
        )
        if arm == SPECULATIVE:
            segment[-1]["k"] = k
    return {"action": "measure", "arm": arm, "k": k, "blocks": segment, "verdict": result, "counters": counters}


def run(settings, apply, measure, limit=1000, probe=None):
    """Drive a trial with callables ``apply(action) -> observation``, ``measure(action) -> observation`` and,
    with the setting ``output_proof``, ``probe(action) -> observation``.

    Returns ``(final action, observations)``. Used by the benchmark and the tests.
    """
    observations = []
    for _step in range(limit):
        action = next_action(settings, observations)
        if action["action"] == "done":
            return action, observations
        if action["action"] == "apply":
            result = apply(action)
        elif action["action"] == "probe":
            if probe is None:
                raise TrialError("the trial asks for an output proof and no probe was given")
            result = probe(action)
        else:
            result = measure(action)
        observations.append(observed(action, result))
    raise TrialError("the trial did not end within %d steps" % limit)


# what a measured block takes from the block as planned
_PLANNED = ("arm", "concurrency", "n_requests", "index", "seed", "prompt_offset", "warmups", "phase", "k")


def observed(action, result):
    """The observation of ``action`` from what carrying it out returned: the one place that builds them (``run``
    and the action plugin). The action's arm, rung, k and, for a probe, ``reference`` are the observation's."""
    obs = dict(result or {})
    kind = action["action"]
    if kind == "apply":
        obs.update(type="applied", arm=action["arm"], rung=action["rung"], k=action.get("k"))
    elif kind == "probe":
        obs.update(type="probed", arm=action["arm"], rung=action["rung"], k=action.get("k"), reference=action["reference"])
    elif kind == "measure":
        obs["type"] = "measured"
        if obs.get("error"):
            obs.setdefault("arm", action["arm"])
        else:
            blocks = list(obs.get("blocks") or [])
            if len(blocks) != len(action["blocks"]):
                raise TrialError("the measurement returned %d blocks for %d planned" % (len(blocks), len(action["blocks"])))
            merged = []
            for planned, block in zip(action["blocks"], blocks):
                merged.append(dict(block, **{key: planned[key] for key in _PLANNED if key in planned}))
            obs["blocks"] = merged
    else:
        raise TrialError("no observation for the action %r" % (kind,))
    return obs
