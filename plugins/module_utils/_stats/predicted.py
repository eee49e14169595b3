# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
"""The gain predicted from acceptance, with the step-cost ratio a canary measured for its group.

Throughput of a speculative server is the plain throughput times ``tau / r``: ``tau`` is the mean
number of tokens a step emits (``1 + accepted / drafts``, read from the ``vllm:spec_decode_*``
counters, nearly free of timing noise) and ``r`` is the cost of a speculative step relative to a
plain one (draft passes plus the verification of k + 1 tokens). ``r`` depends on the device, the
target, the speculator and k, not on the prompts; ``tau`` depends on the prompts, not on the
device's speed. So:

* a canary measures ``log r`` once with care (``calibrate``): paired, interleaved blocks of both
  arms, each speculative block's throughput divided by its own ``tau`` (which removes the
  acceptance part of its variation), fitted with a linear drift term like the verdict's estimate;
* a device of the same group then needs only its own ``tau`` (a few speculative blocks, one
  restart) to predict its gain: ``log(1 + gain) = log tau - log r`` (``predicted_verdict``), with an
  interval that adds the spread of its ``tau`` and the canary's standard error of ``log r``.

A guard compares each device's own throughput ratio (one baseline block per level, measured while
the baseline still serves) with the prediction; a device that does not behave like its canary
(another power mode, a broken build) is decided from its own measurements by the full sequential
verdict instead (``guard`` in the result says why).

Pure standard library, Python 3.8 syntax, no I/O.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import (
    BASELINE,
    SPECULATIVE,
    StatsError,
    _check_thresholds,
    _mean,
    _number,
    normalise_blocks,
)
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.distributions import t_ppf
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.estimation import _pct
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.sequential import _ci_text, verdict, verdict_cause

# How a device is measured against its group's calibration, and how a canary calibrates.
PREDICTION_DEFAULTS = {
    # speculative blocks that measure acceptance (at the high concurrency) before the first look, per
    # further look, and the most a device measures
    "min_spec_blocks": 4,
    "spec_blocks_step": 4,
    "max_spec_blocks": 8,
    # a device whose own throughput ratio lies further than this many standard deviations from the
    # prediction is decided from its own measurements (the full verdict)
    "guard_z": 3.29,
    # a canary measures until the standard error of log r is small next to the distance of its own
    # predicted gain from the threshold (margin_sigmas of it), never below min_se (or max_pairs)
    "margin_sigmas": 6.0,
    "min_se_c1": 0.008,
    "min_se_c8": 0.015,
    "min_pairs": 6,
    "max_pairs": 320,
    "max_pairs_c8": 64,
    # c=1 blocks per arm visit of the calibration (one restart per visit), c=8 blocks with them, and
    # c=8 blocks per visit once c=1 is calibrated
    "segment": 24,
    "segment_c8": 4,
    "segment_c8_only": 16,
    # requests per calibration block (c=8 blocks of several waves: one wave ends in a tail of
    # shrinking batches that understates a speculative server's steady throughput)
    "requests_c1": 1,
    "requests_c8": 32,
}

CALIBRATION_KEYS = ("c1", "c8")


def acceptance_length(block):
    """``1 + accepted / drafts`` of a speculative block, or None when its counters are missing."""
    drafts = block.get("spec_decode_num_drafts")
    accepted = block.get("spec_decode_accepted_tokens")
    if drafts is None or accepted is None:
        return None
    drafts = _number(drafts, "spec_decode_num_drafts")
    accepted = _number(accepted, "spec_decode_accepted_tokens")
    if drafts <= 0 or accepted < 0:
        return None
    return 1.0 + accepted / drafts


def _tagged(blocks):
    """Normalised blocks with ``tau`` (speculative blocks with counters only)."""
    norm = normalise_blocks(blocks)
    raw = [b for b in blocks if isinstance(b, dict) and not b.get("discard")]
    kept = [n for n, b in zip(norm, blocks) if not (isinstance(b, dict) and b.get("discard"))]
    for n, b in zip(kept, raw):
        n["tau"] = acceptance_length(b) if n["arm"] == SPECULATIVE else None
        n["drafts"] = float(b["spec_decode_num_drafts"]) if n["tau"] is not None else 0.0
    return kept


def _weighted_log_mean(pairs):
    """Mean of log values weighted by their drafts, and its variance (ratio estimator, between blocks)."""
    total = math.fsum(w for _x, w in pairs)
    mean = math.fsum(x * w for x, w in pairs) / total
    n = len(pairs)
    var = n / (n - 1.0) * math.fsum((w * (x - mean)) ** 2 for x, w in pairs) / (total * total)
    return mean, max(var, 1e-10)


def _ols(rows, degree=1):
    """Fit y = d * spec + polynomial(index, degree); return (d, se(d), residual sd, df) or None.

    A polynomial trend of degree 3 follows a device that heats up and settles (an exponential drift), which
    a straight line cannot: over a canary's long calibration the straight line leaves the early, faster
    visits' speed in the arm effect."""
    n = len(rows)
    k = degree + 2
    if n < k + 2:
        return None
    lo = min(i for i, _s, _y in rows)
    hi = max(i for i, _s, _y in rows)
    span = float(hi - lo) or 1.0
    xs = []
    for i, spec, _y in rows:
        t = 2.0 * (i - lo) / span - 1.0
        xs.append([float(spec)] + [t**p for p in range(degree + 1)])
    ys = [y for _i, _s, y in rows]
    xtx = [[math.fsum(x[p] * x[q] for x in xs) for q in range(k)] for p in range(k)]
    xty = [math.fsum(x[p] * y for x, y in zip(xs, ys)) for p in range(k)]
    inv = _inverse(xtx)
    if inv is None:
        return None
    beta = [math.fsum(inv[p][q] * xty[q] for q in range(k)) for p in range(k)]
    resid = [y - math.fsum(beta[p] * x[p] for p in range(k)) for x, y in zip(xs, ys)]
    df = n - k
    sd = math.sqrt(math.fsum(r * r for r in resid) / df)
    if inv[0][0] <= 0:
        return None
    return beta[0], sd * math.sqrt(inv[0][0]), sd, df


def _inverse(m):
    """Inverse of a small symmetric matrix by Gauss-Jordan elimination with partial pivoting, or None."""
    n = len(m)
    a = [list(row) + [1.0 if i == j else 0.0 for j in range(n)] for i, row in enumerate(m)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-12:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        div = a[col][col]
        a[col] = [v / div for v in a[col]]
        for r in range(n):
            if r != col and a[r][col] != 0.0:
                f = a[r][col]
                a[r] = [v - f * w for v, w in zip(a[r], a[col])]
    return [row[n:] for row in a]


def _level_rows(tagged, concurrency):
    rows = []
    for b in tagged:
        if b["concurrency"] != concurrency:
            continue
        if b["arm"] == BASELINE:
            rows.append((b["index"], 0, math.log(b["output_throughput"])))
        elif b["tau"] is not None:
            rows.append((b["index"], 1, math.log(b["output_throughput"]) - math.log(b["tau"])))
    return rows


def calibrate(blocks, high_concurrency=8, trend_degree=3):
    """The step-cost ratio per level from a canary's blocks: ``{"c1": {"log_r", "se", "residual_sd",
    "df", "pairs"}, "c8": {...} or None, "k", "tau"}`` (a level is None when it cannot be fitted)."""
    tagged = _tagged(blocks)
    out = {"k": None, "tau": None}
    ks = sorted({b["k"] for b in tagged if b["arm"] == SPECULATIVE and b["k"] is not None})
    if len(ks) > 1:
        raise StatsError("calibration blocks mix num_speculative_tokens %s" % ks)
    out["k"] = ks[0] if ks else None
    taus = [b["tau"] for b in tagged if b["tau"] is not None]
    out["tau"] = _mean(taus) if taus else None
    for key, c in (("c1", 1), ("c8", high_concurrency)):
        out[key] = None
        if c is None:
            continue
        rows = _level_rows(tagged, c)
        fit = _ols(rows, degree=trend_degree)
        if fit is None:
            continue
        d, se, sd, df = fit
        pairs = min(sum(1 for r in rows if r[1] == 0), sum(1 for r in rows if r[1] == 1))
        out[key] = {"concurrency": c, "log_r": -d, "r": math.exp(-d), "se": se, "residual_sd": sd, "df": df, "pairs": pairs}
    return out


def check_calibration(calibration, where="calibration"):
    """Validate a calibration (as ``calibrate`` returns it, possibly read back from JSON)."""
    if not isinstance(calibration, dict):
        raise StatsError("%s must be a dict, got %s" % (where, type(calibration).__name__))
    out = {"k": calibration.get("k"), "tau": calibration.get("tau")}
    for key in CALIBRATION_KEYS:
        level = calibration.get(key)
        if level is None:
            out[key] = None
            continue
        if not isinstance(level, dict):
            raise StatsError("%s.%s must be a dict or null" % (where, key))
        entry = {}
        for name in ("log_r", "se", "residual_sd", "df", "pairs", "concurrency"):
            if name not in level:
                raise StatsError("%s.%s: missing %s" % (where, key, name))
            entry[name] = _number(level[name], "%s.%s.%s" % (where, key, name))
        if entry["se"] <= 0 or entry["residual_sd"] <= 0 or entry["df"] < 1:
            raise StatsError("%s.%s: se, residual_sd and df must be > 0" % (where, key))
        entry["r"] = math.exp(entry["log_r"])
        out[key] = entry
    if out["c1"] is None:
        raise StatsError("%s has no c=1 step-cost ratio" % where)
    return out


def _settings(options):
    st = dict(PREDICTION_DEFAULTS)
    for key, value in (options or {}).items():
        if key not in PREDICTION_DEFAULTS:
            raise StatsError("unknown prediction setting %r; known: %s" % (key, ", ".join(sorted(PREDICTION_DEFAULTS))))
        if value is not None:
            st[key] = value
    return st


def _needed_se(calibration, key, st, thresholds):
    """The standard error of log r that a device like the canary needs at this level."""
    level = calibration.get(key)
    floor = st["min_se_" + key]
    if level is None or not calibration.get("tau"):
        return floor
    if key == "c1":
        line = math.log(1.0 + thresholds["min_gain"])
    else:
        line = math.log(1.0 - thresholds["c8_tolerance"])
    margin = abs(math.log(calibration["tau"]) - level["log_r"] - line)
    return max(floor, margin / st["margin_sigmas"])


def calibration_done(calibration, options=None, **thresholds):
    """Per level, whether the calibration is precise enough to share (or its budget is spent)."""
    st = _settings(options)
    th = _check_thresholds(thresholds)
    done = {}
    for key in CALIBRATION_KEYS:
        level = calibration.get(key) if calibration else None
        if key == "c8" and th["high_concurrency"] is None:
            done[key] = True
        elif level is None:
            done[key] = False
        else:
            most = st["max_pairs"] if key == "c1" else st["max_pairs_c8"]
            done[key] = level["pairs"] >= most or (level["pairs"] >= st["min_pairs"] and level["se"] <= _needed_se(calibration, key, st, th))
    return done


def calibrated(calibration, options=None, **thresholds):
    """True when a calibration is precise enough to share (or its budget is spent)."""
    return all(calibration_done(calibration, options, **thresholds).values())


def calibration_blocks(blocks, options=None, **thresholds):
    """The next blocks of a canary's calibration: visits of ``segment`` blocks of one arm in a mirrored
    order (B, S S, B B, ...), one restart per visit; [] when the calibration is done."""
    st = _settings(options)
    th = _check_thresholds(thresholds)
    high = th["high_concurrency"]
    tagged = _tagged(blocks)
    cal = calibrate(blocks, high)
    done = calibration_done(cal, st, **thresholds)
    if all(done.values()):
        return []
    last = max(tagged, key=lambda b: b["index"])["arm"] if tagged else BASELINE
    other = SPECULATIVE if last == BASELINE else BASELINE
    # stay on the served arm until it is a full visit ahead of the other one at the level still being
    # calibrated, then switch: B, S S, B B, ... (linear drift cancels, one restart per visit)
    level, per_visit = (1, st["segment"]) if not done["c1"] else (high, st["segment_c8_only"])
    counts = {arm: sum(1 for b in tagged if b["arm"] == arm and b["concurrency"] == level) for arm in (BASELINE, SPECULATIVE)}
    arm = last if counts[last] - counts[other] < per_visit else other
    out = []
    if not done["c1"]:
        out += [{"arm": arm, "concurrency": 1, "n_requests": st["requests_c1"]} for _j in range(st["segment"])]
    if not done["c8"]:
        count = st["segment_c8"] if not done["c1"] else st["segment_c8_only"]
        out += [{"arm": arm, "concurrency": high, "n_requests": st["requests_c8"]} for _j in range(count)]
    return out


def _interval(estimate, se, df, level):
    t = t_ppf(1.0 - (1.0 - level) / 2.0, max(1.0, float(df)))
    return estimate - t * se, estimate + t * se


def _welch_df(parts):
    num = sum(v for v, _df in parts) ** 2
    den = sum(v * v / df for v, df in parts if df > 0)
    return num / den if den > 0 else 1.0


def _entry(concurrency, metric, threshold, log_est, log_ci, level, status, method="predicted"):
    if metric == "median_tpot_ms":
        estimate = 1.0 - math.exp(-log_est)
        ci = None if log_ci is None else [1.0 - math.exp(-log_ci[0]), 1.0 - math.exp(-log_ci[1])]
    else:
        estimate = math.exp(log_est) - 1.0
        ci = None if log_ci is None else [math.exp(log_ci[0]) - 1.0, math.exp(log_ci[1]) - 1.0]
    return {
        "concurrency": concurrency,
        "metric": metric,
        "threshold": threshold,
        "estimate": estimate,
        "ci": ci,
        "confidence": level,
        "status": status,
        "method": method,
    }


def _look_level(confidence, spec_blocks, st):
    """Bonferroni over the looks a device can take (one per ``spec_blocks_step`` speculative blocks from min to max)."""
    step = max(1, int(st["spec_blocks_step"]))
    looks = max(0, st["max_spec_blocks"] - st["min_spec_blocks"]) // step + 1
    look = min(looks, max(1, (spec_blocks - st["min_spec_blocks"]) // step + 1))
    return 1.0 - (1.0 - confidence) / looks, look, looks


def _drift_free(blocks, spec):
    """log throughput, divided by the block's own tau for speculative blocks."""
    return [math.log(b["output_throughput"]) - (math.log(b["tau"]) if spec else 0.0) for b in blocks]


def _guard(rows_base, rows_spec, level_cal, z_limit):
    """The device's own drift-free log ratio against the canary's: None when they agree, else why not."""
    if not rows_base or not rows_spec or level_cal is None:
        return None
    own = _mean(rows_spec) - _mean(rows_base)
    sd = math.sqrt(level_cal["residual_sd"] ** 2 * (1.0 / len(rows_base) + 1.0 / len(rows_spec)) + level_cal["se"] ** 2)
    z = (own + level_cal["log_r"]) / sd
    if abs(z) <= z_limit:
        return None
    return "its step-cost ratio %.3f differs from its group's %.3f by %.1f standard deviations (limit %.2f)" % (
        math.exp(-own),
        level_cal["r"],
        abs(z),
        z_limit,
    )


def predicted_verdict(blocks, calibration, prediction=None, **thresholds):
    """keep / revert / continue for a device from its acceptance and its group's calibration.

    The result has the shape of ``sequential.verdict``'s, plus ``method`` ("predicted"),
    ``calibration`` and ``guard`` (None, or why the device does not match its group: the caller then
    decides with the full verdict, as ``decide`` does).
    """
    th = _check_thresholds(thresholds)
    st = _settings(prediction)
    cal = check_calibration(calibration)
    tagged = _tagged(blocks)
    high = th["high_concurrency"]
    size = {1: th["requests_c1"], high: th["requests_c8"]}
    base1 = [b for b in tagged if b["arm"] == BASELINE and b["concurrency"] == 1]
    spec1 = [b for b in tagged if b["arm"] == SPECULATIVE and b["concurrency"] == 1]
    spec_all = [b for b in tagged if b["arm"] == SPECULATIVE]
    warnings = []
    requests_spent = sum(b["completed"] + b["failed"] for b in normalise_blocks(blocks))
    spec_failed = sum(b["failed"] for b in spec_all)
    if spec_all and any(b["tau"] is None for b in spec_all):
        raise StatsError("a speculative block has no spec_decode_num_drafts / spec_decode_accepted_tokens counters")

    # acceptance is measured where tokens are cheapest: in waves at the high concurrency (it does not
    # depend on the batch: the target verifies the same drafts), at c=1 when that level is off
    tau_level = high if high else 1
    tau_blocks = [b for b in spec_all if b["concurrency"] == tau_level]
    level, look, looks = _look_level(th["confidence"], len(tau_blocks), st)
    floor1 = math.log(1.0 + th["min_gain"])
    floor8 = math.log(1.0 - th["c8_tolerance"])
    est = {"gain_c1": None, "tpot_reduction_c1": None, "gain_c8": None}
    status1 = status8 = "insufficient"
    guard = None
    tau = None
    if len(spec_all) >= 2 and spec1:
        m, var_tau = _weighted_log_mean([(math.log(b["tau"]), float(b["drafts"])) for b in spec_all])
        tau = {"mean": math.exp(m), "se_log": math.sqrt(var_tau), "blocks": len(spec_all), "drafts": sum(b["drafts"] for b in spec_all)}
        for key, c, floor, entry_key in (("c1", 1, floor1, "gain_c1"), ("c8", high, floor8, "gain_c8")):
            lc = cal.get(key)
            if c is None or lc is None:
                continue
            g = m - lc["log_r"]
            var = var_tau + lc["se"] ** 2
            df = _welch_df([(var_tau, len(spec_all) - 1), (lc["se"] ** 2, lc["df"])])
            lo, hi = _interval(g, math.sqrt(var), df, level)
            status = "above" if lo >= floor else ("below" if hi < floor else "open")
            est[entry_key] = _entry(c, "output_throughput", th["min_gain"] if key == "c1" else -th["c8_tolerance"], g, (lo, hi), level, status)
            if key == "c1":
                status1 = status
                # the step time is r times the plain one and a request emits tau tokens a step
                est["tpot_reduction_c1"] = _entry(1, "median_tpot_ms", 0.0, g, (lo, hi), level, "above" if lo > 0 else ("below" if hi < 0 else "open"))
            else:
                status8 = status
        # at c=1 only: a wave of requests at c=8 ends in a tail of shrinking batches that depends on
        # the block's size, so the canary's c=8 blocks and a device's would not compare
        guard = _guard(_drift_free(base1, False), _drift_free(spec1, True), cal["c1"], st["guard_z"])
        if guard is not None:
            guard = "at c=1 %s" % guard
    if high and cal.get("c8") is None:
        guard = "its group's calibration has no c=%d step-cost ratio" % high
    for key, found in list(est.items()):
        entry = found
        if entry is None:
            metric = "median_tpot_ms" if key.startswith("tpot") else "output_throughput"
            entry = est[key] = _entry(high if key == "gain_c8" else 1, metric, None, 0.0, None, level, "insufficient")
            entry["estimate"] = None
        entry.update(look=look, looks=looks, nominal_confidence=th["confidence"], rounds=len(tau_blocks))

    decision, cause, reason, plan = None, None, None, []
    if spec_failed > th["max_failed"]:
        decision, cause = "revert", verdict_cause("failed_requests")
        reason = "the speculative arm failed %d request(s) (max_failed %d)" % (spec_failed, th["max_failed"])
    elif not base1:
        # one baseline block while the baseline still serves: the guard's reference
        plan = [(BASELINE, 1)]
    elif len(tau_blocks) < st["min_spec_blocks"] or tau is None:
        # one block at c=1 for the guard, the acceptance blocks
        plan = ([(SPECULATIVE, 1)] if not spec1 else []) + [(SPECULATIVE, tau_level)] * max(1, st["min_spec_blocks"] - len(tau_blocks))
    elif guard is not None:
        decision = "guard"
    elif status1 == "below":
        decision, cause = "revert", verdict_cause("no_gain")
        reason = "throughput at c=1 predicted from acceptance %s lies entirely below the minimum gain %s" % (_ci_text(est["gain_c1"]), _pct(th["min_gain"]))
    elif status8 == "below":
        decision, cause = "revert", verdict_cause("regression", concurrency=high)
        reason = "throughput at c=%d predicted from acceptance %s lies entirely below the tolerance %s" % (
            high,
            _ci_text(est["gain_c8"]),
            _pct(-th["c8_tolerance"]),
        )
    elif status1 == "above" and (not high or status8 == "above"):
        decision = "keep"
        lo1 = est["gain_c1"]["ci"][0]
        strong = lo1 >= th["strong_gain"] and est["tpot_reduction_c1"]["ci"][0] >= th["strong_tpot_drop"]
        cause = verdict_cause("strong" if strong else "marginal")
        reason = "throughput at c=1 predicted from acceptance %s is at least %s (median TPOT %s)" % (
            _ci_text(est["gain_c1"]),
            _pct(th["min_gain"]),
            _ci_text(est["tpot_reduction_c1"]),
        )
        if high:
            reason += "; throughput at c=%d %s does not regress beyond %s" % (high, _ci_text(est["gain_c8"]), _pct(-th["c8_tolerance"]))
    elif len(tau_blocks) >= st["max_spec_blocks"]:
        decision, cause = "revert", verdict_cause("inconclusive")
        reason = "no conclusion from acceptance within %d speculative blocks: throughput at c=1 %s vs the minimum gain %s%s; reverting" % (
            len(tau_blocks),
            _ci_text(est["gain_c1"]),
            _pct(th["min_gain"]),
            ("; at c=%d %s vs the tolerance %s" % (high, _ci_text(est["gain_c8"]), _pct(-th["c8_tolerance"]))) if high else "",
        )
    else:
        plan = [(SPECULATIVE, tau_level)] * max(1, int(st["spec_blocks_step"]))
    if decision is None:
        decision, cause = "continue", verdict_cause("continue")
        reason = "not conclusive yet: measure %s" % ", ".join("%s at c=%d" % (a, c) for a, c in plan)
    if decision != "continue":
        plan = []
    result = {
        "decision": decision,
        "label": None if cause is None else (cause["text"] if decision == "continue" else "%s (%s)" % (decision, cause["text"])),
        "cause": cause,
        "reason": reason,
        "gain_c1": est["gain_c1"],
        "tpot_reduction_c1": est["tpot_reduction_c1"],
        "gain_c8": est["gain_c8"],
        "requests_spent": requests_spent,
        "rounds": len(tau_blocks),
        "arm_switches": sum(1 for a, b in zip(tagged, tagged[1:]) if a["arm"] != b["arm"]),
        "budget_reached": cause is not None and cause["code"] == "inconclusive",
        "next_blocks": [{"arm": a, "concurrency": c, "n_requests": size[c]} for a, c in plan],
        "warnings": warnings,
        "noise": {},
        "thresholds": dict(th),
        "method": "predicted",
        "calibration": cal,
        "acceptance_length": tau,
        "guard": guard,
    }
    return result


def decide(blocks, calibration=None, canary=False, prediction=None, **thresholds):
    """The verdict a device acts on.

    * ``canary``: the group's canary. It measures until its calibration is precise (``calibrated``),
      in visits of one arm (``calibration_blocks``), then decides from its own calibration; the
      result's ``calibration`` is what its group uses.
    * ``calibration`` (from the group's canary): ``predicted_verdict``; a device that fails the guard
      is decided by the full sequential verdict on its own measurements.
    * neither: the full sequential verdict (``sequential.verdict``).
    """
    if canary:
        full = verdict(blocks, **thresholds)
        if full["cause"]["code"] == "failed_requests":
            full["method"] = "measured"
            return full
        st = _settings(prediction)
        high = _check_thresholds(thresholds)["high_concurrency"]
        cal = calibrate(blocks, high)
        if not calibrated(cal, st, **thresholds):
            plan = calibration_blocks(blocks, st, **thresholds)
            full.update(
                decision="continue",
                cause=verdict_cause("continue"),
                label=verdict_cause("continue")["text"],
                reason="calibrating the group's step cost: %s"
                % "; ".join(
                    "c=%s not fitted yet" % key[1:]
                    if cal[key] is None
                    else "c=%s %d pairs, r %.3f, standard error of log r %.4f (needed %.4f)"
                    % (key[1:], cal[key]["pairs"], cal[key]["r"], cal[key]["se"], _needed_se(cal, key, st, _check_thresholds(thresholds)))
                    for key in CALIBRATION_KEYS
                    if key == "c1" or high
                ),
                next_blocks=plan,
                budget_reached=False,
                method="calibrating",
                calibration=cal,
            )
            return full
        result = predicted_verdict(blocks, cal, prediction=dict(st, max_spec_blocks=st["min_spec_blocks"]), **thresholds)
        if result["decision"] in ("continue", "guard"):
            result.update(decision="revert", cause=verdict_cause("inconclusive"), label="revert (inconclusive)", next_blocks=[], budget_reached=True)
        result["method"] = "canary"
        return result
    if calibration is not None:
        result = predicted_verdict(blocks, calibration, prediction=prediction, **thresholds)
        if result["decision"] != "guard":
            return result
        full = verdict(blocks, **thresholds)
        full["warnings"].append("decided from its own measurements: %s" % result["guard"])
        full.update(method="measured", guard=result["guard"], calibration=result["calibration"])
        return full
    full = verdict(blocks, **thresholds)
    full["method"] = "measured"
    return full
