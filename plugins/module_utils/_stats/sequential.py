# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
"""Statistics behind every keep/revert decision of speculative decoding: the sequential verdict.

Pure Python standard library, Python 3.8 syntax, deterministic for a given ``seed``. Runs on the
controller (the ``speculative_verdict`` filter) and on devices or in offline benchmarks.

Model
-----
A benchmark *block* is a short measurement (a few requests) of one *arm* (``baseline`` or
``speculative``) at one concurrency. Blocks of both arms are measured in an interleaved, mirrored
order, one *round* at a time::

    round 1: B@1 B@8 S@8 S@1      round 2: S@1 S@8 B@8 B@1      round 3: like round 1 ...

so each arm switch (a vLLM restart) happens once per round and a linear drift cancels out. For one
concurrency and one metric (``output_throughput`` or ``median_tpot_ms``) the effect of speculation
is estimated by ordinary least squares on the log of the block values::

    log(value) = a + b * index + d * [arm is speculative] + error

``index`` is the global measurement order, so ``b`` absorbs slow drift (thermal state, page cache,
background load). ``exp(d)`` is the drift-corrected ratio of the arms' geometric means; with
multiplicative noise it estimates the ratio of means. Its Student t interval has ``n - 3``
degrees of freedom (``n - 2`` when the order makes the trend unidentifiable, with a warning).
A seeded paired percentile bootstrap of the per-round log ratios (block ``j`` of one arm with
block ``j`` of the other) cross-checks every conclusive interval: a conclusion stands only when
both methods agree.

Sequential rule
---------------
A *look* happens when a concurrency has ``min_rounds``, ``min_rounds + 1``, ... ``max_rounds``
complete pairs: ``K = max_rounds - min_rounds + 1`` looks at most. The two-sided error
``alpha = 1 - confidence`` is spent over the looks, so the chance of any wrong conclusion over
the whole trial stays at most ``alpha`` (union bound, valid whatever the correlation between
looks). ``spending`` picks the split:

* ``bonferroni`` (default): ``alpha / K`` at every look.
* ``pocock``: Lan-DeMets Pocock-type spending ``alpha * ln(1 + (e - 1) t)``; more early.
* ``obrien_fleming``: Lan-DeMets O'Brien-Fleming-type spending
  ``2 - 2 Phi(z(1 - alpha/2) / sqrt(t))``; almost nothing early, most at the end.

with information fraction ``t = rounds / max_rounds``; look ``k`` gets the increment
``f(t_k) - f(t_(k-1))`` (``t_0 = 0``).

Verdict (thresholds are keyword arguments, defaults in ``DEFAULTS``)
--------------------------------------------------------------------
* ``revert (failed requests)``: the speculative arm failed more than ``max_failed`` requests.
* ``revert (no gain)``: the c=1 throughput gain interval lies entirely below ``min_gain``.
* ``revert (TPOT not reduced)``: the c=1 median TPOT reduction interval lies entirely below 0.
* ``revert (regression at c=8)``: the high-concurrency throughput change interval lies entirely
  below ``-c8_tolerance``.
* ``keep``: the c=1 gain's lower bound is at least ``min_gain``, the TPOT reduction's lower bound is
  above 0 and the c=8 change's lower bound is at least ``-c8_tolerance`` (non-regression shown).
  Labelled ``keep (strong)`` when the gain's lower bound is at least ``strong_gain`` and the TPOT
  reduction's lower bound at least ``strong_tpot_drop`` (NVIDIA's published accept rule, shown
  with confidence), else ``keep (marginal)``.
* ``continue``: nothing conclusive and the budget (``max_rounds`` pairs per concurrency,
  ``max_requests`` in total) allows another round; ``next_blocks`` says what to measure.
* ``revert (inconclusive)``: the budget is spent without a conclusion. Reverting restores the
  known baseline; the reason names what stayed open.

API
---
``verdict(blocks, **thresholds)`` -> dict
    ``decision`` (keep | revert | continue), ``label``, ``cause`` (``code`` from VERDICT_CAUSES,
    ``text``, and ``concurrency`` for a regression), ``reason``, ``gain_c1``,
    ``tpot_reduction_c1``, ``gain_c8`` (each ``estimate``, ``ci`` [lo, hi], ``confidence`` of this
    look, ``nominal_confidence``, ``status`` against ``threshold``, ``df``, ``rounds``, ``look``,
    ``looks``, ``method``, ``ratio_of_means``, ``bootstrap``), ``requests_spent``, ``rounds``,
    ``arm_switches``, ``budget_reached``, ``next_blocks`` (list of ``{arm, concurrency,
    n_requests}``), ``warnings``, ``noise`` (per concurrency: coefficient of variation of the
    blocks per arm, drift-corrected residual SD, baseline drift) and ``thresholds``.
``SequentialTrial(**thresholds)``
    ``next_block()``, ``record(block)``, ``run(measure)``, ``verdict()``, ``done``.

The other modules of this package hold the building blocks:

* ``_stats.base``: arms, ``DEFAULTS``, ``SPENDING``, ``StatsError``, validation of blocks and
  thresholds (``normalise_blocks``);
* ``_stats.distributions``: ``t_ppf``, ``t_cdf``, ``t_sf``, ``t_isf``, ``normal_ppf`` and the error
  spending over looks (``spent_alpha``, ``look_confidence``);
* ``_stats.estimation``: ``trend_estimate``, ``paired_bootstrap``, ``cv`` and ``compare`` (one
  interval outside the sequential machinery);
* ``_stats.ksweep``: ``leviathan_speedup``, ``k_sweep``, ``choose_k``, ``sweep_schedule``
  (choosing ``num_speculative_tokens``).

Blocks: dicts with ``arm`` (``baseline`` | ``speculative``), ``concurrency``, ``index`` (global
measurement order, unique), ``output_throughput`` (tok/s, > 0), ``median_tpot_ms`` (> 0),
``completed`` (>= 1), ``failed`` (>= 0) and optionally ``samples.output_tokens`` and, for the k
sweep, ``num_speculative_tokens``. Bad input raises ``StatsError`` (a ``ValueError``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import (
    ARMS,
    BASELINE,
    SPECULATIVE,
    StatsError,
    _arm_blocks,
    _check_thresholds,
    _mean,
    normalise_blocks,
)
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.distributions import look_confidence, t_ppf
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.estimation import (
    _interval,
    _log_diffs,
    _method_name,
    _pairs,
    _pct,
    cv,
    paired_bootstrap,
)

# Warn when the drift-corrected block-to-block variation exceeds this (vLLM's K tuner rejects
# cells whose relative MAD exceeds 10 %).
NOISY_CV = 0.10
# Warn when arm and time are this confounded (variance inflation of the arm effect).
CONFOUNDED_VIF = 2.0
# Warn when the arms generated mean lengths differing by more than this (vLLM issue #8531).
OUTPUT_TOKENS_TOLERANCE = 0.02


# Why a verdict is what it is, as data: the report and the records read ``cause`` (code, text and, for a
# regression, the concurrency) and never parse the label back. The label is "<decision> (<text>)".
VERDICT_CAUSES = {
    "strong": "strong",
    "marginal": "marginal",
    "no_gain": "no gain",
    "tpot_not_reduced": "TPOT not reduced",
    "regression": "regression at c=%(concurrency)d",
    "failed_requests": "failed requests",
    "inconclusive": "inconclusive",
    "continue": "continue",
    # The proofs beside the statistics (``overrule``): the answers at temperature 0 are not the baseline's, or
    # the speculator's drafts are almost never accepted (a collapsed speculator).
    "outputs_differ": "outputs differ",
    "not_accepted": "speculator not accepted",
}


def verdict_cause(code, **detail):
    """The structured cause of a verdict: ``{"code", "text", ...detail}`` from VERDICT_CAUSES."""
    cause = {"code": code, "text": VERDICT_CAUSES[code] % detail}
    cause.update(detail)
    return cause


def _ci_text(entry):
    """``+12.3 % (99.4 % CI +5.0 % to +20.1 %)``; reductions read ``12.3 % lower (...)``."""
    if entry["estimate"] is None:
        return "not measured"
    fmt = _pct
    if entry.get("metric") == "median_tpot_ms":

        def fmt(x):
            return "%.1f %% %s" % (100.0 * abs(x), "lower" if x >= 0 else "higher")

    if entry["ci"] is None:
        return "%s (no interval yet)" % fmt(entry["estimate"])
    return "%s (%.4g %% CI %s to %s)" % (
        fmt(entry["estimate"]),
        100.0 * entry["confidence"],
        fmt(entry["ci"][0]),
        fmt(entry["ci"][1]),
    )


def _empty_entry(concurrency, metric, threshold, th):
    return {
        "concurrency": concurrency,
        "metric": metric,
        "threshold": threshold,
        "estimate": None,
        "ci": None,
        "confidence": None,
        "nominal_confidence": th["confidence"],
        "df": None,
        "rounds": 0,
        "look": 0,
        "looks": th["max_rounds"] - th["min_rounds"] + 1,
        "method": None,
        "ratio_of_means": None,
        "bootstrap": None,
        "status": "insufficient",
        "trend": None,
    }


def _metric_entry(norm, concurrency, metric, reduction, threshold, strict_above, th, warnings):
    """Interval, status and cross-check for one metric at one concurrency."""
    base, spec = _arm_blocks(norm, concurrency)
    p_all = min(len(base), len(spec))
    base, spec = _pairs(base, spec, limit=th["max_rounds"])
    entry = _empty_entry(concurrency, metric, threshold, th)
    entry["rounds"] = len(base)
    if p_all > th["max_rounds"]:
        warnings.append("%d pairs at c=%d exceed max_rounds (%d); the later ones are ignored" % (p_all, concurrency, th["max_rounds"]))
    if not base:
        entry["status"] = "not measured"
        return entry

    def transform(x):  # log ratio -> relative change (gain) or reduction
        return -math.expm1(x) if reduction else math.expm1(x)

    look_ok = len(base) >= th["min_rounds"]
    conf = look_confidence(len(base), th["confidence"], th["min_rounds"], th["max_rounds"], th["spending"]) if look_ok else None
    iv = _interval(base, spec, metric, conf if conf is not None else th["confidence"])
    entry["estimate"] = transform(iv["delta"])
    entry["df"] = iv["df"]
    entry["method"] = _method_name(iv["trend"])
    entry["trend"] = iv["trend"]
    ratio = _mean([s[metric] for s in spec]) / _mean([b[metric] for b in base])
    entry["ratio_of_means"] = (1.0 - ratio) if reduction else (ratio - 1.0)
    entry["_iv"] = iv
    if not look_ok or iv["ci"] is None:
        return entry
    lo, hi = sorted(transform(x) for x in iv["ci"])
    entry.update({"ci": [lo, hi], "confidence": conf, "look": len(base) - th["min_rounds"] + 1})
    above = lo > threshold if strict_above else lo >= threshold
    below = hi < threshold
    entry["status"] = "above" if above else "below" if below else "inconclusive"
    entry["_cross"] = (base, spec, transform, strict_above)
    return entry


def _confirm(entry, th, warnings):
    """Cross-check a conclusive t interval with the paired bootstrap; downgrade on disagreement.

    Only the intervals that decide the trial or close a concurrency level are cross-checked.
    Called for entries whose status is ``above`` or ``below``; returns whether the status stands.
    """
    if not th["bootstrap_resamples"]:
        return True
    if entry["bootstrap"] is not None:  # already cross-checked (and possibly downgraded)
        return entry["status"] in ("above", "below")
    base, spec, transform, strict_above = entry["_cross"]
    threshold, conf, metric = entry["threshold"], entry["confidence"], entry["metric"]
    diffs = _log_diffs(base, spec, metric)
    seed = "%s:%s:%d:%d" % (th["seed"], metric, entry["concurrency"], len(base))
    blo, bhi = sorted(transform(x) for x in paired_bootstrap(diffs, conf, th["bootstrap_resamples"], seed))
    entry["bootstrap"] = {
        "ci": [blo, bhi],
        "confidence": conf,
        "resamples": th["bootstrap_resamples"],
        "method": "paired percentile bootstrap of per-round log ratios",
    }
    if entry["status"] == "above":
        agrees = blo > threshold if strict_above else blo >= threshold
    else:
        agrees = bhi < threshold
    if not agrees:
        warnings.append(
            "c=%d %s: the t interval %s is conclusive but the paired bootstrap interval [%s, %s] is not; "
            "measuring on" % (entry["concurrency"], metric, _ci_text(entry), _pct(blo), _pct(bhi))
        )
        entry["status"] = "inconclusive"
    return agrees


def _noise(norm, concurrency, entry, th, warnings):
    base, spec = _arm_blocks(norm, concurrency)
    base, spec = _pairs(base, spec, limit=th["max_rounds"])
    if not base:
        return None
    out = {
        "baseline_cv": cv([b["output_throughput"] for b in base]),
        "speculative_cv": cv([s["output_throughput"] for s in spec]),
        "residual_sd": None,
        "drift": None,
    }
    iv = entry.get("_iv")
    if iv is not None and iv["residual_sd"] is not None:
        out["residual_sd"] = iv["residual_sd"]
        if iv["residual_sd"] > NOISY_CV and len(base) >= th["min_rounds"]:
            warnings.append(
                "c=%d: block-to-block throughput variation is %.1f %% (over %d %%); check power mode, thermal "
                "state and background load" % (concurrency, 100.0 * iv["residual_sd"], 100 * NOISY_CV)
            )
        if iv["vif"] > CONFOUNDED_VIF:
            warnings.append("c=%d: arm order is confounded with measurement order (variance inflation %.1f); interleave the arms" % (concurrency, iv["vif"]))
    if len(base) >= 3:
        first, last = base[0]["index"], base[-1]["index"]
        points = [(b["index"], b["output_throughput"]) for b in base]
        ts = [float(p[0]) for p in points]
        ys = [math.log(p[1]) for p in points]
        mt, my = _mean(ts), _mean(ys)
        stt = math.fsum((t - mt) ** 2 for t in ts)
        slope = math.fsum((t - mt) * (y - my) for t, y in zip(ts, ys)) / stt
        rss = math.fsum((y - my - slope * (t - mt)) ** 2 for t, y in zip(ts, ys))
        df = len(ts) - 2
        se = math.sqrt(rss / df / stt)
        half = t_ppf(1.0 - (1.0 - th["confidence"]) / 2.0, df) * se
        span = float(last - first)
        drift = {
            "estimate": math.expm1(slope * span),
            "ci": [math.expm1((slope - half) * span), math.expm1((slope + half) * span)],
            "confidence": th["confidence"],
            "significant": (slope - half > 0) or (slope + half < 0),
        }
        out["drift"] = drift
        if drift["significant"]:
            warnings.append(
                "c=%d: baseline throughput drifted by %s between the first and the last baseline block "
                "(%.4g %% CI %s to %s); the verdict corrects for a linear trend, but check thermal state "
                "and background load"
                % (
                    concurrency,
                    _pct(drift["estimate"]),
                    100.0 * th["confidence"],
                    _pct(drift["ci"][0]),
                    _pct(drift["ci"][1]),
                )
            )
    return out


def _count_switches(norm):
    arms = [b["arm"] for b in sorted(norm, key=lambda b: b["index"])]
    return sum(1 for a, b in zip(arms, arms[1:]) if a != b)


def _first_arm(round_number):
    return BASELINE if round_number % 2 == 1 else SPECULATIVE


def _other(arm):
    return SPECULATIVE if arm == BASELINE else BASELINE


def _plan(counts, open_levels):
    """Next blocks to finish the current round, from per-level ``{arm: count}``.

    Round ``r`` measures the first arm (baseline in odd rounds, speculative in even rounds) at
    every open level in ascending order, then the other arm in descending order.
    """
    counts = {c: dict(counts[c]) for c in open_levels}
    if not open_levels:
        return []
    start_round = min(min(counts[c].values()) for c in open_levels) + 1
    planned = []
    while True:
        needs = []
        for c in open_levels:
            nb, ns = counts[c][BASELINE], counts[c][SPECULATIVE]
            rnd = min(nb, ns) + 1
            first = _first_arm(rnd)
            if nb == ns:
                needs.append((rnd, 0, c, first))
            elif (nb > ns) == (first == BASELINE):
                needs.append((rnd, 1, -c, _other(first)))
            else:  # measured out of the planned order: complete the pair with the missing arm
                needs.append((rnd, 0, c, first))
        rnd, _half, key, arm = min(needs)
        if rnd > start_round:
            return planned
        level = abs(key)
        planned.append((arm, level))
        counts[level][arm] += 1


def verdict(blocks, **thresholds):
    """Decide keep / revert / continue from benchmark blocks (see the module docstring)."""
    th = _check_thresholds(thresholds)
    norm = normalise_blocks(blocks)
    warnings = []
    high = th["high_concurrency"]
    levels = [1] + ([high] if high else [])
    others = sorted({b["concurrency"] for b in norm} - set(levels))
    if others:
        warnings.append("blocks at concurrency %s are not used" % ", ".join(str(c) for c in others))

    gain1 = _metric_entry(norm, 1, "output_throughput", False, th["min_gain"], False, th, warnings)
    tpot1 = _metric_entry(norm, 1, "median_tpot_ms", True, 0.0, True, th, warnings)
    if high:
        gain8 = _metric_entry(norm, high, "output_throughput", False, -th["c8_tolerance"], False, th, warnings)
    else:
        gain8 = _empty_entry(None, "output_throughput", None, th)
        gain8["status"] = "disabled"

    noise = {"c1": _noise(norm, 1, gain1, th, warnings)}
    if high:
        noise["c8"] = _noise(norm, high, gain8, th, warnings)

    used = [b for b in norm if b["concurrency"] in levels]
    for arm in ARMS:
        tokens = [b["mean_output_tokens"] for b in used if b["arm"] == arm and b["mean_output_tokens"] is not None]
        if arm == BASELINE:
            base_tokens = _mean(tokens) if tokens else None
        elif tokens and base_tokens:
            rel = _mean(tokens) / base_tokens - 1.0
            if abs(rel) > OUTPUT_TOKENS_TOLERANCE:
                warnings.append(
                    "the speculative arm generated %s tokens per request compared with the baseline; "
                    "benchmark with --ignore-eos so both arms do the same work" % _pct(rel)
                )
    base_failed = sum(b["failed"] for b in used if b["arm"] == BASELINE)
    spec_failed = sum(b["failed"] for b in used if b["arm"] == SPECULATIVE)
    if base_failed:
        warnings.append("the baseline arm failed %d request(s)" % base_failed)

    requests_spent = sum(b["completed"] + b["failed"] for b in norm)
    counts = {}
    for c in levels:
        counts[c] = {arm: min(len([b for b in used if b["arm"] == arm and b["concurrency"] == c]), th["max_rounds"]) for arm in ARMS}

    decision, cause, reason = None, None, None
    c1_settled = False
    if gain1["status"] == "above" and tpot1["status"] == "above":
        # both must agree with the cross-check before c=1 stops being measured
        c1_settled = _confirm(gain1, th, warnings) & _confirm(tpot1, th, warnings)
    if spec_failed > th["max_failed"]:
        decision, cause = "revert", verdict_cause("failed_requests")
        reason = "the speculative arm failed %d request(s) (max_failed %d)" % (spec_failed, th["max_failed"])
    elif gain1["status"] == "below" and _confirm(gain1, th, warnings):
        decision, cause = "revert", verdict_cause("no_gain")
        reason = "throughput at c=1 %s lies entirely below the minimum gain %s" % (
            _ci_text(gain1),
            _pct(th["min_gain"]),
        )
    elif tpot1["status"] == "below" and _confirm(tpot1, th, warnings):
        decision, cause = "revert", verdict_cause("tpot_not_reduced")
        reason = "median TPOT at c=1 is higher with speculation: %s" % _ci_text(tpot1)
    elif gain8["status"] == "below" and _confirm(gain8, th, warnings):
        decision, cause = "revert", verdict_cause("regression", concurrency=high)
        reason = "throughput at c=%d %s lies entirely below the tolerance %s" % (
            high,
            _ci_text(gain8),
            _pct(-th["c8_tolerance"]),
        )
    elif c1_settled and (gain8["status"] == "disabled" or (gain8["status"] == "above" and _confirm(gain8, th, warnings))):
        decision = "keep"
        strong = gain1["ci"][0] >= th["strong_gain"] and tpot1["ci"][0] >= th["strong_tpot_drop"]
        cause = verdict_cause("strong" if strong else "marginal")
        reason = "throughput at c=1 %s is at least %s and median TPOT at c=1 is %s" % (
            _ci_text(gain1),
            _pct(th["min_gain"]),
            _ci_text(tpot1),
        )
        if strong:
            reason += "; the lower bounds meet the published accept rule (%s throughput, %.0f %% lower TPOT)" % (
                _pct(th["strong_gain"]),
                100.0 * th["strong_tpot_drop"],
            )
        else:
            reason += "; short of the published accept rule (lower bounds of %s throughput and %.0f %% lower TPOT)" % (
                _pct(th["strong_gain"]),
                100.0 * th["strong_tpot_drop"],
            )
        if high:
            reason += "; throughput at c=%d %s does not regress beyond %s" % (
                high,
                _ci_text(gain8),
                _pct(-th["c8_tolerance"]),
            )
        else:
            reason += "; the high-concurrency check is disabled"

    open_levels = []
    if decision is None:
        if not c1_settled:
            open_levels.append(1)
        if high and not (gain8["status"] == "above" and _confirm(gain8, th, warnings)):
            open_levels.append(high)
    plan = _plan(counts, open_levels)
    budget_reached = False
    if decision is None:
        # a level that is still open after max_rounds pairs can no longer be settled: keep is out of reach
        exhausted = any(min(counts[c].values()) >= th["max_rounds"] for c in open_levels)
        at_boundary = all(counts[c][BASELINE] == counts[c][SPECULATIVE] for c in open_levels)
        size = {1: th["requests_c1"], high: th["requests_c8"]}
        cost = sum(size[c] for _arm, c in plan)
        over = th["max_requests"] is not None and at_boundary and requests_spent + cost > th["max_requests"]
        budget_reached = exhausted or over
        if budget_reached:
            decision, cause = "revert", verdict_cause("inconclusive")
            open_text = []
            if 1 in open_levels:
                if gain1["status"] != "above":
                    open_text.append("throughput at c=1 %s vs the minimum gain %s" % (_ci_text(gain1), _pct(th["min_gain"])))
                if tpot1["status"] != "above":
                    open_text.append("median TPOT at c=1 %s vs no change" % _ci_text(tpot1))
            if high in open_levels:
                open_text.append("throughput at c=%d %s vs the tolerance %s" % (high, _ci_text(gain8), _pct(-th["c8_tolerance"])))
            reason = (
                "no conclusion within the budget (%s): %s; reverting to the measured baseline because a gain "
                "that cannot be shown is not worth the draft's memory (raise max_rounds/max_requests or reduce "
                "noise to decide)"
                % (
                    "%d requests" % requests_spent if over else "max_rounds %d" % th["max_rounds"],
                    "; ".join(open_text),
                )
            )
        else:
            decision, cause = "continue", verdict_cause("continue")
            reason = "not conclusive yet: measure %s" % ", ".join("%s at c=%d" % (a, c) for a, c in plan)
    if decision != "continue":
        plan = []
    size = {1: th["requests_c1"]}
    if high:
        size[high] = th["requests_c8"]
    for entry in (gain1, tpot1, gain8):
        entry.pop("_iv", None)
        entry.pop("_cross", None)
    public = dict(th)
    return {
        "decision": decision,
        "label": cause["text"] if decision == "continue" else "%s (%s)" % (decision, cause["text"]),
        "cause": cause,
        "reason": reason,
        "gain_c1": gain1,
        "tpot_reduction_c1": tpot1,
        "gain_c8": gain8,
        "requests_spent": requests_spent,
        "rounds": max(min(counts[c].values()) for c in levels),
        "arm_switches": _count_switches(norm),
        "budget_reached": budget_reached,
        "next_blocks": [{"arm": a, "concurrency": c, "n_requests": size[c]} for a, c in plan],
        "warnings": warnings,
        "noise": noise,
        "thresholds": public,
    }


def overrule(result, code, reason):
    """The verdict ``result`` turned into a revert for a proof that failed (``outputs_differ``, ``not_accepted``).

    The measured estimates stay as they were; the decision, cause, label and reason say why the gain does
    not count, and no block is measured any more.
    """
    if code not in ("outputs_differ", "not_accepted"):
        raise StatsError("overrule: unknown proof %r (outputs_differ, not_accepted)" % (code,))
    out = dict(result or {})
    cause = verdict_cause(code)
    out.update(decision="revert", cause=cause, label="revert (%s)" % cause["text"], reason="%s: %s" % (cause["text"], reason), next_blocks=[])
    return out


class SequentialTrial:
    """Drive a trial block by block: ask ``next_block()``, measure it, ``record()`` it.

    ``run(measure)`` does the loop with a callable ``measure(step) -> block`` and returns the
    final verdict. ``step`` is ``{arm, concurrency, n_requests, index}``; the block returned by
    ``measure`` needs the metric fields (arm, concurrency and index are filled in when absent).
    """

    def __init__(self, blocks=None, **thresholds):
        self.thresholds = thresholds
        _check_thresholds(thresholds)
        self.blocks = []
        self._indexes = set()
        self._cache = None
        for block in blocks or []:
            self.record(block)

    def verdict(self):
        if self._cache is None:
            self._cache = verdict(self.blocks, **self.thresholds)
        return self._cache

    @property
    def done(self):
        return self.verdict()["decision"] != "continue"

    def next_block(self):
        """The next block to measure, or None when the trial has decided."""
        result = self.verdict()
        if result["decision"] != "continue":
            return None
        step = dict(result["next_blocks"][0])
        step["index"] = self._next_index()
        return step

    def _next_index(self):
        return max(self._indexes) + 1 if self._indexes else 0

    def record(self, block):
        """Add a measured block and return the updated verdict."""
        if not isinstance(block, dict):
            raise StatsError("a block must be a dict, got %s" % type(block).__name__)
        block = dict(block)
        step = None
        if "arm" not in block or "concurrency" not in block:
            step = self.next_block()
            if step is None:
                raise StatsError("the trial has decided; no further block is planned")
        for key in ("arm", "concurrency"):
            if key not in block:
                block[key] = step[key]
        if "index" not in block:
            block["index"] = self._next_index()
        index = normalise_blocks([block])[0]["index"]
        if index in self._indexes:
            raise StatsError("index %d is already recorded" % index)
        self._indexes.add(index)
        self.blocks.append(block)
        self._cache = None
        return self.verdict()

    def run(self, measure):
        while True:
            step = self.next_block()
            if step is None:
                return self.verdict()
            self.record(measure(step))
