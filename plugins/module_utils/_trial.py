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
  "verdict": ...}``.

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
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import BASELINE, DEFAULTS, SPECULATIVE
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
}

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
    return trial, thresholds


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
    for obs in observations or []:
        kind = obs.get("type")
        if kind == "applied":
            state["restarts"] += 1
            if obs.get("ok", True):
                state["served"] = {
                    "arm": obs["arm"],
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
                state["proved"].add(int(obs.get("rung", 0)))
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
    arm = result["next_blocks"][0]["arm"]
    served = state["served"]
    proof = int(trial["output_proof"] or 0) > 0
    if proof and not state["reference"]:
        # the output proof's reference comes first: the baseline's answers
        if served is None or served["arm"] != BASELINE or state["stale"]:
            return {"action": "apply", "arm": BASELINE, "rung": 0, "reason": "the output proof's reference", "verdict": result, "counters": counters}
        return {"action": "probe", "arm": BASELINE, "rung": 0, "reference": True, "verdict": result, "counters": counters}
    if proof and served is not None and served["arm"] == SPECULATIVE and not state["stale"] and state["rung"] not in state["proved"]:
        return {"action": "probe", "arm": SPECULATIVE, "rung": state["rung"], "reference": False, "verdict": result, "counters": counters}
    if served is None or served["arm"] != arm or state["stale"]:
        reason = "re-apply after a block failed the arm proof" if state["stale"] and served is not None and served["arm"] == arm else "measure the %s arm" % arm
        return {"action": "apply", "arm": arm, "rung": state["rung"] if arm == SPECULATIVE else 0, "reason": reason, "verdict": result, "counters": counters}
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
    return {"action": "measure", "arm": arm, "blocks": segment, "verdict": result, "counters": counters}


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
            obs = dict(apply(action))
            obs.setdefault("type", "applied")
        elif action["action"] == "probe":
            if probe is None:
                raise TrialError("the trial asks for an output proof and no probe was given")
            obs = dict(probe(action))
            obs.setdefault("type", "probed")
            obs.update(arm=action["arm"], rung=action["rung"], reference=action["reference"])
        else:
            obs = dict(measure(action))
            obs.setdefault("type", "measured")
        observations.append(obs)
    raise TrialError("the trial did not end within %d steps" % limit)
