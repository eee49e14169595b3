# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
"""Estimation of the effect of speculation from benchmark blocks: the drift-corrected log-linear
regression with its Student t interval (``trend_estimate``), the seeded paired bootstrap that
cross-checks it (``paired_bootstrap``), ``cv``, and ``compare``: one interval without sequential
adjustment.

Pure Python standard library, Python 3.8 syntax; runs on the controller and on devices.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import math
import random

from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import SPECULATIVE, StatsError, _arm_blocks, _mean, normalise_blocks
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.distributions import t_ppf


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


def _pct(x):
    return "%+.1f %%" % (100.0 * x)
