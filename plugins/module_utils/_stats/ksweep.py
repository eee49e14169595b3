# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
"""Choosing ``num_speculative_tokens`` (k) on a canary: predict ``S(k) = E(k) / (k c + 1)`` from the
per-position acceptance rates (``k_sweep``, ``leviathan_speedup``), prune the ``k`` whose optimistic
prediction is clearly worse than the best, measure the survivors in a mirrored order
(``sweep_schedule``) and pick the best lower confidence bound (``choose_k``), ties within
``tie_tolerance`` going to the smaller ``k``.

Pure Python standard library, Python 3.8 syntax; runs on the controller and on devices.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import (
    BASELINE,
    SPECULATIVE,
    StatsError,
    _arm_blocks,
    _number,
    normalise_blocks,
)
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.distributions import normal_ppf
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.estimation import _interval, _pct


def draft_cost(budget):
    """One draft forward over one target forward, from a plan's memory budget (``speculator_weights_gb``,
    ``target_weights_gb``): decode is memory-bandwidth bound on Jetson, so a draft forward costs about the
    speculator's share of the weights read. At least 0.01; 0.01 without a budget."""
    budget = budget if isinstance(budget, dict) else {}
    try:
        speculator = float(budget.get("speculator_weights_gb") or 0.0)
        target = float(budget.get("target_weights_gb") or 0.0)
    except (TypeError, ValueError):
        return 0.01
    return max(speculator / max(target, 0.01), 0.01)


def expected_tokens(k, rates):
    """Expected tokens per target step with ``k`` drafts: 1 + sum of P(position i accepted)."""
    return 1.0 + math.fsum(rates[:k])


def leviathan_speedup(alpha, k, draft_cost):
    """Leviathan et al. speedup S = (1 - alpha^(k+1)) / ((1 - alpha)(k c + 1))."""
    if not 0.0 <= alpha <= 1.0:
        raise StatsError("alpha must be in [0, 1], got %r" % (alpha,))
    tokens = float(k + 1) if alpha == 1.0 else (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
    return tokens / (k * draft_cost + 1.0)


def _wilson_upper(rate, n, confidence):
    z = normal_ppf(1.0 - (1.0 - confidence) / 2.0)
    denom = 1.0 + z * z / n
    centre = rate + z * z / (2.0 * n)
    half = z * math.sqrt(rate * (1.0 - rate) / n + z * z / (4.0 * n * n))
    return min(1.0, (centre + half) / denom)


def k_sweep(candidates, acceptance_rates, draft_cost, num_drafts=None, confidence=0.95, margin=0.05, reference=None):
    """Predict the speedup of each candidate ``k`` and prune the hopeless ones.

    ``acceptance_rates`` are vLLM's per-position acceptance rates measured with some ``k``:
    position ``i`` estimates ``alpha^(i+1)``, i.e. P(positions 0..i accepted), so the expected
    tokens per target step with ``k`` drafts are ``E(k) = 1 + rate_0 + ... + rate_(k-1)`` and the
    speedup is ``E(k) / (k * draft_cost + 1)`` (Leviathan et al.; with ``rate_i = alpha^(i+1)``
    this is ``(1 - alpha^(k+1)) / ((1 - alpha)(k c + 1))``). ``draft_cost`` is the time of one
    draft forward over one target forward.

    The central prediction uses the measured rates and continues beyond the last measured
    position with the last conditional acceptance (``rate_(m-1) / rate_(m-2)``). The optimistic
    prediction uses upper bounds of the measured rates (Wilson score bounds at ``confidence``
    when ``num_drafts``, the number of draft rounds behind the rates, is given) and continues
    with ``alpha_optimistic``, the largest conditional acceptance among them. A ``k`` is pruned
    when even its optimistic speedup is at most 1, or below ``(1 - margin)`` times the best
    central prediction (or ``reference``, e.g. the measured speedup of the current ``k``).
    An empty ``survivors`` list means no candidate is worth measuring.
    """
    ks = sorted({_number(k, "candidate k", integer=True) for k in candidates})
    if not ks or ks[0] < 1:
        raise StatsError("candidates must be a non-empty list of integers >= 1, got %r" % (candidates,))
    rates = [_number(r, "acceptance rate") for r in acceptance_rates]
    if not rates or any(not 0.0 <= r <= 1.0 for r in rates):
        raise StatsError("acceptance_rates must be a non-empty list of values in [0, 1], got %r" % (acceptance_rates,))
    if any(b > a + 1e-9 for a, b in zip(rates, rates[1:])):
        raise StatsError("acceptance_rates must not increase with the position, got %r" % (acceptance_rates,))
    c = _number(draft_cost, "draft_cost")
    if c < 0:
        raise StatsError("draft_cost must be >= 0, got %r" % (draft_cost,))
    if num_drafts is not None:
        num_drafts = _number(num_drafts, "num_drafts", integer=True)
        if num_drafts < 1:
            raise StatsError("num_drafts must be >= 1, got %r" % (num_drafts,))
    uppers = [_wilson_upper(r, num_drafts, confidence) if num_drafts else r for r in rates]
    for i in range(1, len(uppers)):  # P(0..i accepted) cannot exceed P(0..i-1 accepted)
        uppers[i] = min(uppers[i], uppers[i - 1])

    def conditional(values, i):
        previous = values[i - 1] if i else 1.0
        return values[i] / previous if previous > 0 else 0.0

    alpha_opt = max(conditional(uppers, i) for i in range(len(uppers)))
    ratio = min(conditional(rates, len(rates) - 1), alpha_opt)
    longest = max(ks)
    central, optimistic = list(rates), list(uppers)
    while len(central) < longest:
        central.append(central[-1] * ratio)
        optimistic.append(optimistic[-1] * alpha_opt)
    predictions = []
    for k in ks:
        predictions.append(
            {
                "k": k,
                "speedup": expected_tokens(k, central) / (k * c + 1.0),
                "speedup_optimistic": expected_tokens(k, optimistic) / (k * c + 1.0),
                "extrapolated": k > len(rates),
            }
        )
    best = max(predictions, key=lambda p: (p["speedup"], -p["k"]))
    best_speedup = reference if reference is not None else best["speedup"]
    for p in predictions:
        if p["speedup_optimistic"] <= 1.0:
            p["pruned"], p["reason"] = (
                True,
                "even the optimistic prediction %.3fx is no speedup" % p["speedup_optimistic"],
            )
        elif p["speedup_optimistic"] < (1.0 - margin) * best_speedup:
            p["pruned"] = True
            p["reason"] = "optimistic prediction %.3fx is more than %g %% below the best %.3fx" % (
                p["speedup_optimistic"],
                100.0 * margin,
                best_speedup,
            )
        else:
            p["pruned"], p["reason"] = False, ""
    return {
        "alpha": rates[0],
        "alpha_optimistic": alpha_opt,
        "best_predicted": best["k"],
        "predictions": predictions,
        "survivors": [p["k"] for p in predictions if not p["pruned"]],
    }


def sweep_schedule(ks, rounds, n_requests=8):
    """Mirrored measurement order for a k sweep at c=1: B k1 k2 ... then ... k2 k1 B, repeated."""
    arms = [(BASELINE, None)] + [(SPECULATIVE, int(k)) for k in sorted(ks)]
    order = []
    for r in range(int(rounds)):
        order.extend(arms if r % 2 == 0 else list(reversed(arms)))
    return [{"arm": a, "num_speculative_tokens": k, "concurrency": 1, "n_requests": n_requests} for a, k in order]


def choose_k(blocks, confidence=0.95, tie_tolerance=0.01):
    """Pick ``num_speculative_tokens`` from a sweep measured at c=1.

    Speculative blocks carry ``num_speculative_tokens``. Each ``k`` is compared with all baseline
    blocks by the same drift-corrected interval as ``verdict`` (no sequential adjustment); the
    score is the lower confidence bound of the throughput gain. Candidates whose ``1 + score`` is
    within ``tie_tolerance`` (relative) of the best are tied and the smallest ``k`` wins, as in
    vLLM's K tuner.
    """
    norm = normalise_blocks(blocks)
    ks = sorted({b["k"] for b in norm if b["arm"] == SPECULATIVE and b["concurrency"] == 1 and b["k"] is not None})
    if not ks:
        raise StatsError("no speculative block at c=1 carries num_speculative_tokens")
    rows = []
    for k in ks:
        base, spec = _arm_blocks(norm, 1, k=k)
        base = sorted(base, key=lambda b: b["index"])
        spec = sorted(spec, key=lambda b: b["index"])
        if len(base) < 1 or len(base) + len(spec) < 4:
            raise StatsError("k=%d needs at least 4 blocks with the baseline (has %d)" % (k, len(base) + len(spec)))
        iv = _interval(base, spec, "output_throughput", confidence)  # >= 4 blocks: df >= 1
        rows.append(
            {
                "k": k,
                "estimate": math.expm1(iv["delta"]),
                "ci": [math.expm1(iv["ci"][0]), math.expm1(iv["ci"][1])],
                "score": math.expm1(iv["ci"][0]),
                "blocks": len(spec),
            }
        )
    best = max(rows, key=lambda r: r["score"])
    tied = [r for r in rows if 1.0 + r["score"] >= (1.0 - tie_tolerance) * (1.0 + best["score"])]
    chosen = min(tied, key=lambda r: r["k"])
    reason = "k=%d has the best lower bound %s" % (best["k"], _pct(best["score"]))
    if chosen is not best:
        reason += "; k=%d is within %g %% of it and smaller" % (chosen["k"], 100.0 * tie_tolerance)
    return {"k": chosen["k"], "candidates": rows, "confidence": confidence, "reason": reason}
