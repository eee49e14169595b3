# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
"""Statistics behind every keep/revert decision of speculative decoding.

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
    ``decision`` (keep | revert | continue), ``label``, ``reason``, ``gain_c1``,
    ``tpot_reduction_c1``, ``gain_c8`` (each ``estimate``, ``ci`` [lo, hi], ``confidence`` of this
    look, ``nominal_confidence``, ``status`` against ``threshold``, ``df``, ``rounds``, ``look``,
    ``looks``, ``method``, ``ratio_of_means``, ``bootstrap``), ``requests_spent``, ``rounds``,
    ``arm_switches``, ``budget_reached``, ``next_blocks`` (list of ``{arm, concurrency,
    n_requests}``), ``warnings``, ``noise`` (per concurrency: coefficient of variation of the
    blocks per arm, drift-corrected residual SD, baseline drift) and ``thresholds``.
``SequentialTrial(**thresholds)``
    ``next_block()``, ``record(block)``, ``run(measure)``, ``verdict()``, ``done``.
``compare(blocks, metric, concurrency, confidence)``
    one interval outside the sequential machinery.
``t_ppf``, ``t_cdf``, ``look_confidence``, ``trend_estimate``, ``paired_bootstrap``
    the building blocks.
``leviathan_speedup``, ``k_sweep``, ``choose_k``, ``sweep_schedule``
    choosing ``num_speculative_tokens`` on a canary: predict ``S(k) = E(k) / (k c + 1)`` from the
    per-position acceptance rates, prune ``k`` whose optimistic prediction is clearly worse than
    the best, measure the survivors and pick the best lower confidence bound, ties within
    ``tie_tolerance`` going to the smaller ``k``.

Blocks: dicts with ``arm`` (``baseline`` | ``speculative``), ``concurrency``, ``index`` (global
measurement order, unique), ``output_throughput`` (tok/s, > 0), ``median_tpot_ms`` (> 0),
``completed`` (>= 1), ``failed`` (>= 0) and optionally ``samples.output_tokens`` and, for the k
sweep, ``num_speculative_tokens``. Bad input raises ``StatsError`` (a ``ValueError``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import math
import random
from statistics import NormalDist

BASELINE = "baseline"
SPECULATIVE = "speculative"
ARMS = (BASELINE, SPECULATIVE)
SPENDING = ("bonferroni", "pocock", "obrien_fleming")

DEFAULTS = {
    "min_gain": 0.10,
    "strong_gain": 0.30,
    "strong_tpot_drop": 0.20,
    "c8_tolerance": 0.05,
    "confidence": 0.95,
    "spending": "bonferroni",
    "min_rounds": 3,
    "max_rounds": 10,
    "max_requests": None,
    "requests_c1": 4,
    "requests_c8": 8,
    "high_concurrency": 8,
    "max_failed": 0,
    "bootstrap_resamples": 2000,
    "seed": 0,
}

# Warn when the drift-corrected block-to-block variation exceeds this (vLLM's K tuner rejects
# cells whose relative MAD exceeds 10 %).
NOISY_CV = 0.10
# Warn when arm and time are this confounded (variance inflation of the arm effect).
CONFOUNDED_VIF = 2.0
# Warn when the arms generated mean lengths differing by more than this (vLLM issue #8531).
OUTPUT_TOKENS_TOLERANCE = 0.02

_NORMAL = NormalDist()


class StatsError(ValueError):
    """Invalid input to the statistics (the message names what and why)."""


# ---------------------------------------------------------------------------------------------
# Distributions


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < tiny:
        d = tiny
    d = 1.0 / d
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            return h
    raise StatsError("incomplete beta function did not converge (a=%r, b=%r, x=%r)" % (a, b, x))


def _betainc(a, b, x, y):
    """Regularised incomplete beta I_x(a, b); ``y`` is ``1 - x`` computed without cancellation."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, y) / b


def _check_df(df):
    if isinstance(df, bool) or not isinstance(df, (int, float)) or not df > 0 or math.isinf(df):
        raise StatsError("degrees of freedom must be a positive finite number, got %r" % (df,))


def t_sf(x, df):
    """Upper tail P(T > x) of Student's t with ``df`` degrees of freedom."""
    _check_df(df)
    if x == 0:
        return 0.5
    x2 = float(x) * float(x)
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + x2), x2 / (df + x2))
    return tail if x > 0 else 1.0 - tail


def t_cdf(x, df):
    """P(T <= x) of Student's t with ``df`` degrees of freedom."""
    return 1.0 - t_sf(x, df) if x > 0 else t_sf(-x, df)


def _t_pdf(x, df):
    log_norm = math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1.0) / 2.0 * math.log1p(x * x / df))


def t_isf(q, df):
    """The ``x`` with P(T > x) = ``q`` (inverse survival function), for 0 < q < 1."""
    _check_df(df)
    return _t_isf(float(q), float(df))


@functools.lru_cache(maxsize=1024)
def _t_isf(q, df):
    if not 0.0 < q < 1.0:
        raise StatsError("tail probability must be strictly between 0 and 1, got %r" % (q,))
    if q == 0.5:
        return 0.0
    if q > 0.5:
        return -_t_isf(1.0 - q, df)
    # Bracket the root of log(sf(x)) = log(q) on [0, hi], then safeguarded Newton steps.
    lo, hi = 0.0, max(1.0, -_NORMAL.inv_cdf(q))
    while t_sf(hi, df) > q:
        lo, hi = hi, hi * 2.0
        if hi > 1e300:
            raise StatsError("t quantile out of range (q=%r, df=%r)" % (q, df))
    x = 0.5 * (lo + hi)
    target = math.log(q)
    for _iteration in range(200):
        sf = t_sf(x, df)
        if sf > q:
            lo = x
        else:
            hi = x
        step = (math.log(sf) - target) * sf / _t_pdf(x, df)  # Newton on log(sf)
        candidate = x + step
        if not lo < candidate < hi:
            candidate = 0.5 * (lo + hi)
        if abs(candidate - x) <= 1e-14 * max(1.0, abs(x)):
            return candidate
        x = candidate
    return x


def t_ppf(p, df):
    """Quantile of Student's t: the ``x`` with P(T <= x) = ``p``, for 0 < p < 1."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p < 1.0:
        raise StatsError("probability must be strictly between 0 and 1, got %r" % (p,))
    if p >= 0.5:
        return t_isf(1.0 - p, df)
    return -t_isf(p, df)


def normal_ppf(p):
    """Quantile of the standard normal distribution."""
    return _NORMAL.inv_cdf(p)


# ---------------------------------------------------------------------------------------------
# Error spending over looks


def spent_alpha(fraction, alpha, spending):
    """Cumulative two-sided error spent by information fraction ``fraction`` (0..1)."""
    t = min(max(float(fraction), 0.0), 1.0)
    if t == 0.0:
        return 0.0
    if spending == "bonferroni":
        return alpha * t
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    if spending == "obrien_fleming":
        return 2.0 - 2.0 * _NORMAL.cdf(_NORMAL.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(t))
    raise StatsError("spending must be one of %s, got %r" % (", ".join(SPENDING), spending))


def look_confidence(rounds, confidence=0.95, min_rounds=3, max_rounds=10, spending="bonferroni"):
    """Two-sided confidence level of the interval at the look made with ``rounds`` complete pairs.

    Looks happen at ``min_rounds .. max_rounds`` pairs. The increments over all looks add up to
    ``1 - confidence``. ``bonferroni`` gives every look the same share, ``(1 - confidence) / K``;
    the spending-function variants give the first look everything spent up to it.
    """
    if not min_rounds <= rounds <= max_rounds:
        raise StatsError("rounds must be within [%d, %d], got %r" % (min_rounds, max_rounds, rounds))
    alpha = 1.0 - confidence
    if spending == "bonferroni":
        return 1.0 - alpha / (max_rounds - min_rounds + 1)
    previous = 0.0 if rounds == min_rounds else spent_alpha((rounds - 1.0) / max_rounds, alpha, spending)
    return 1.0 - (spent_alpha(float(rounds) / max_rounds, alpha, spending) - previous)


# ---------------------------------------------------------------------------------------------
# Estimation


def _mean(values):
    return math.fsum(values) / len(values)


def cv(values):
    """Coefficient of variation (sample SD / mean); None with fewer than two values."""
    if len(values) < 2:
        return None
    m = _mean(values)
    var = math.fsum((v - m) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var) / m if m else None


def trend_estimate(points, trend=True):
    """OLS of ``log(value)`` on arm and measurement order.

    ``points`` are ``(index, is_treatment, value)`` with ``value > 0``. Returns ``delta`` (the
    treatment effect on the log scale), ``se``, ``df``, ``slope`` and ``slope_se`` (per unit of
    index; None without trend), ``vif`` (variance inflation of ``delta`` caused by the trend term),
    ``trend`` (whether a trend was fitted) and ``residual_sd``. Without a usable trend (too few
    points, or arm order identical to time order) the model drops the trend term. ``se`` is
    None when ``df < 1``.
    """
    n = len(points)
    nt = sum(1 for p in points if p[1])
    if nt in (0, n):
        raise StatsError("both arms need at least one block")
    ts = [float(p[0]) for p in points]
    arms = [1.0 if p[1] else 0.0 for p in points]
    ys = [math.log(float(p[2])) for p in points]
    mt, ma, my = _mean(ts), _mean(arms), _mean(ys)
    tc = [t - mt for t in ts]
    ac = [a - ma for a in arms]
    yc = [y - my for y in ys]
    stt = math.fsum(t * t for t in tc)
    saa = math.fsum(a * a for a in ac)
    sta = math.fsum(t * a for t, a in zip(tc, ac))
    sty = math.fsum(t * y for t, y in zip(tc, yc))
    say = math.fsum(a * y for a, y in zip(ac, yc))
    det = stt * saa - sta * sta
    use_trend = trend and n >= 4 and stt > 0 and det > 1e-9 * stt * saa
    if use_trend:
        slope = (saa * sty - sta * say) / det
        delta = (stt * say - sta * sty) / det
        resid = [y - slope * t - delta * a for y, t, a in zip(yc, tc, ac)]
        df = n - 3
        var_factor = stt / det
        vif = stt * saa / det
    else:
        slope = None
        delta = say / saa
        resid = [y - delta * a for y, a in zip(yc, ac)]
        df = n - 2
        var_factor = 1.0 / saa
        vif = 1.0
    rss = math.fsum(r * r for r in resid)
    if df < 1:
        return {
            "delta": delta,
            "se": None,
            "df": df,
            "slope": slope,
            "slope_se": None,
            "vif": vif,
            "trend": use_trend,
            "residual_sd": None,
        }
    sigma2 = rss / df
    return {
        "delta": delta,
        "se": math.sqrt(sigma2 * var_factor),
        "df": df,
        "slope": slope,
        "slope_se": math.sqrt(sigma2 * saa / det) if use_trend else None,
        "vif": vif,
        "trend": use_trend,
        "residual_sd": math.sqrt(sigma2),
    }


def _percentile(sorted_values, q):
    """Linear interpolation between order statistics (Hyndman-Fan type 7)."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def paired_bootstrap(diffs, confidence, resamples=2000, seed=0):
    """Percentile bootstrap interval of the mean of ``diffs`` (seeded, deterministic).

    ``seed`` may be any int or str. With few pairs the percentile interval is too narrow (it never
    leaves the range of the data); it serves as a cross-check of the t interval, not on its own.
    """
    if len(diffs) < 2:
        raise StatsError("the bootstrap needs at least two pairs, got %d" % len(diffs))
    if resamples < 10:
        raise StatsError("bootstrap_resamples must be at least 10, got %r" % (resamples,))
    return list(_bootstrap(tuple(float(d) for d in diffs), float(confidence), int(resamples), str(seed)))


@functools.lru_cache(maxsize=256)
def _bootstrap(values, confidence, resamples, seed):
    n = len(values)
    draws = random.Random(seed).choices(values, k=n * resamples)
    means = sorted(sum(draws[i : i + n]) / n for i in range(0, n * resamples, n))
    alpha = 1.0 - confidence
    return _percentile(means, alpha / 2.0), _percentile(means, 1.0 - alpha / 2.0)


def _pairs(base, spec, limit=None):
    """First ``p`` blocks of each arm in measurement order, ``p`` = complete pairs."""
    base = sorted(base, key=lambda b: b["index"])
    spec = sorted(spec, key=lambda b: b["index"])
    p = min(len(base), len(spec))
    if limit is not None:
        p = min(p, limit)
    return base[:p], spec[:p]


def _interval(base, spec, metric, confidence):
    """Drift-corrected log ratio of ``spec`` over ``base`` for ``metric`` with a t interval."""
    points = [(b["index"], False, b[metric]) for b in base] + [(s["index"], True, s[metric]) for s in spec]
    est = trend_estimate(points)
    out = dict(est)
    out["ci"] = None
    if est["se"] is not None:
        half = t_ppf(1.0 - (1.0 - confidence) / 2.0, est["df"]) * est["se"]
        out["ci"] = [est["delta"] - half, est["delta"] + half]
    return out


def _log_diffs(base, spec, metric):
    return [math.log(s[metric]) - math.log(b[metric]) for b, s in zip(base, spec)]


def compare(blocks, metric="output_throughput", concurrency=1, confidence=0.95, treatment=SPECULATIVE):
    """One interval, no sequential adjustment: relative change of ``metric`` (treatment / baseline - 1).

    Returns ``estimate``, ``ci`` (None with too few blocks), ``confidence``, ``df``, ``rounds``,
    ``method`` and ``ratio_of_means``.
    """
    norm = normalise_blocks(blocks)
    base, spec = _arm_blocks(norm, concurrency, treatment)
    base, spec = _pairs(base, spec)
    if not base:
        raise StatsError("no complete baseline/%s pair at concurrency %s" % (treatment, concurrency))
    iv = _interval(base, spec, metric, confidence)
    return {
        "estimate": math.expm1(iv["delta"]),
        "ci": None if iv["ci"] is None else [math.expm1(iv["ci"][0]), math.expm1(iv["ci"][1])],
        "confidence": confidence,
        "df": iv["df"],
        "rounds": len(base),
        "method": _method_name(iv["trend"]),
        "ratio_of_means": _mean([s[metric] for s in spec]) / _mean([b[metric] for b in base]) - 1.0,
    }


def _method_name(trend):
    if trend:
        return "log-linear regression on arm and measurement order, Student t"
    return "log ratio of arm means without trend term, Student t"


# ---------------------------------------------------------------------------------------------
# Input validation


def _number(value, what, integer=False):
    if isinstance(value, bool):
        raise StatsError("%s must be a number, got %r" % (what, value))
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise StatsError("%s must be a number, got %r" % (what, value)) from None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise StatsError("%s must be a finite number, got %r" % (what, value))
    if integer:
        if value != int(value):
            raise StatsError("%s must be an integer, got %r" % (what, value))
        return int(value)
    return float(value)


def normalise_blocks(blocks):
    """Validate blocks and return normalised copies (see the module docstring for the fields)."""
    if not isinstance(blocks, (list, tuple)):
        raise StatsError("blocks must be a list of dicts, got %s" % type(blocks).__name__)
    out = []
    seen = {}
    for pos, block in enumerate(blocks):
        where = "block %d" % pos
        if not isinstance(block, dict):
            raise StatsError("%s must be a dict, got %s" % (where, type(block).__name__))
        arm = block.get("arm")
        if arm not in ARMS:
            raise StatsError("%s: arm must be one of %s, got %r" % (where, ", ".join(ARMS), arm))
        for key in ("concurrency", "index", "output_throughput", "median_tpot_ms", "completed"):
            if key not in block or block[key] is None:
                raise StatsError("%s: missing %s" % (where, key))
        norm = {
            "arm": arm,
            "concurrency": _number(block["concurrency"], where + ": concurrency", integer=True),
            "index": _number(block["index"], where + ": index", integer=True),
            "output_throughput": _number(block["output_throughput"], where + ": output_throughput"),
            "median_tpot_ms": _number(block["median_tpot_ms"], where + ": median_tpot_ms"),
            "completed": _number(block["completed"], where + ": completed", integer=True),
            "failed": _number(block.get("failed", 0) or 0, where + ": failed", integer=True),
            "k": None,
            "mean_output_tokens": None,
        }
        for key in ("output_throughput", "median_tpot_ms", "concurrency"):
            if norm[key] <= 0:
                raise StatsError("%s: %s must be > 0, got %r" % (where, key, block[key]))
        if norm["completed"] < 1:
            raise StatsError("%s: completed must be >= 1 (a block without a completed request is an error)" % where)
        if norm["failed"] < 0:
            raise StatsError("%s: failed must be >= 0, got %r" % (where, block.get("failed")))
        if norm["index"] in seen:
            raise StatsError("%s: index %d already used by block %d" % (where, norm["index"], seen[norm["index"]]))
        seen[norm["index"]] = pos
        if block.get("num_speculative_tokens") is not None:
            norm["k"] = _number(block["num_speculative_tokens"], where + ": num_speculative_tokens", integer=True)
        samples = block.get("samples")
        if isinstance(samples, dict) and samples.get("output_tokens"):
            tokens = [_number(v, where + ": samples.output_tokens") for v in samples["output_tokens"]]
            norm["mean_output_tokens"] = _mean(tokens)
        out.append(norm)
    return out


def _arm_blocks(norm, concurrency, treatment=SPECULATIVE, k=None):
    base = [b for b in norm if b["arm"] == BASELINE and b["concurrency"] == concurrency]
    spec = [b for b in norm if b["arm"] == treatment and b["concurrency"] == concurrency]
    if k is not None:
        spec = [b for b in spec if b["k"] == k]
    return base, spec


def _check_thresholds(user):
    unknown = sorted(set(user) - set(DEFAULTS))
    if unknown:
        raise StatsError("unknown threshold(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(DEFAULTS))))
    th = dict(DEFAULTS)
    th.update({k: v for k, v in user.items() if v is not None or k in ("max_requests", "high_concurrency")})

    def fraction(name, lo, hi, lo_open=False, hi_open=True):
        value = _number(th[name], name)
        if value < lo or value > hi or (lo_open and value == lo) or (hi_open and value == hi):
            raise StatsError("%s must be in %s%g, %g%s, got %r" % (name, "(" if lo_open else "[", lo, hi, ")" if hi_open else "]", th[name]))
        th[name] = value

    fraction("confidence", 0.5, 1.0, lo_open=True)
    fraction("min_gain", -0.99, 10.0)
    fraction("strong_gain", -0.99, 10.0)
    fraction("strong_tpot_drop", 0.0, 1.0)
    fraction("c8_tolerance", 0.0, 1.0)
    if th["strong_gain"] < th["min_gain"]:
        raise StatsError("strong_gain (%g) must be >= min_gain (%g)" % (th["strong_gain"], th["min_gain"]))
    if th["spending"] not in SPENDING:
        raise StatsError("spending must be one of %s, got %r" % (", ".join(SPENDING), th["spending"]))
    for name, low in (
        ("min_rounds", 2),
        ("max_rounds", 2),
        ("requests_c1", 1),
        ("requests_c8", 1),
        ("max_failed", 0),
        ("bootstrap_resamples", 0),
    ):
        th[name] = _number(th[name], name, integer=True)
        if th[name] < low:
            raise StatsError("%s must be >= %d, got %r" % (name, low, th[name]))
    if 0 < th["bootstrap_resamples"] < 10:
        raise StatsError("bootstrap_resamples must be 0 (off) or >= 10, got %r" % th["bootstrap_resamples"])
    if th["max_rounds"] < th["min_rounds"]:
        raise StatsError("max_rounds (%d) must be >= min_rounds (%d)" % (th["max_rounds"], th["min_rounds"]))
    if th["high_concurrency"] is not None:
        th["high_concurrency"] = _number(th["high_concurrency"], "high_concurrency", integer=True)
        if th["high_concurrency"] <= 1:
            raise StatsError("high_concurrency must be > 1 or null, got %r" % th["high_concurrency"])
    round_cost = 2 * th["requests_c1"] + (2 * th["requests_c8"] if th["high_concurrency"] else 0)
    if th["max_requests"] is not None:
        th["max_requests"] = _number(th["max_requests"], "max_requests", integer=True)
        if th["max_requests"] < th["min_rounds"] * round_cost:
            raise StatsError(
                "max_requests (%s) must allow min_rounds (%d) full rounds of %d requests (%d)"
                % (th["max_requests"], th["min_rounds"], round_cost, th["min_rounds"] * round_cost)
            )
    if not isinstance(th["seed"], (int, str)) or isinstance(th["seed"], bool):
        raise StatsError("seed must be an int or a string, got %r" % (th["seed"],))
    return th


# ---------------------------------------------------------------------------------------------
# Verdict


def _pct(x):
    return "%+.1f %%" % (100.0 * x)


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

    decision, label, reason = None, None, None
    c1_settled = False
    if gain1["status"] == "above" and tpot1["status"] == "above":
        # both must agree with the cross-check before c=1 stops being measured
        c1_settled = _confirm(gain1, th, warnings) & _confirm(tpot1, th, warnings)
    if spec_failed > th["max_failed"]:
        decision, label = "revert", "revert (failed requests)"
        reason = "the speculative arm failed %d request(s) (max_failed %d)" % (spec_failed, th["max_failed"])
    elif gain1["status"] == "below" and _confirm(gain1, th, warnings):
        decision, label = "revert", "revert (no gain)"
        reason = "throughput at c=1 %s lies entirely below the minimum gain %s" % (
            _ci_text(gain1),
            _pct(th["min_gain"]),
        )
    elif tpot1["status"] == "below" and _confirm(tpot1, th, warnings):
        decision, label = "revert", "revert (TPOT not reduced)"
        reason = "median TPOT at c=1 is higher with speculation: %s" % _ci_text(tpot1)
    elif gain8["status"] == "below" and _confirm(gain8, th, warnings):
        decision, label = "revert", "revert (regression at c=%d)" % high
        reason = "throughput at c=%d %s lies entirely below the tolerance %s" % (
            high,
            _ci_text(gain8),
            _pct(-th["c8_tolerance"]),
        )
    elif c1_settled and (gain8["status"] == "disabled" or (gain8["status"] == "above" and _confirm(gain8, th, warnings))):
        decision = "keep"
        strong = gain1["ci"][0] >= th["strong_gain"] and tpot1["ci"][0] >= th["strong_tpot_drop"]
        label = "keep (strong)" if strong else "keep (marginal)"
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
            decision, label = "revert", "revert (inconclusive)"
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
            decision, label = "continue", "continue"
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
        "label": label,
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


# ---------------------------------------------------------------------------------------------
# Choosing num_speculative_tokens (k)


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
