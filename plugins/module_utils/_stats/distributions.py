# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
"""Student t and standard normal distributions, and the spending of the error over the looks of a
sequential trial (``bonferroni``, ``pocock``, ``obrien_fleming``; see ``_stats.sequential``).

Pure Python standard library, Python 3.8 syntax; runs on the controller and on devices.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import math
from statistics import NormalDist

from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import SPENDING, StatsError

_NORMAL = NormalDist()


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
