# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
"""Input of the statistics: the arms, the thresholds and their defaults, the validation of benchmark
blocks and thresholds, and ``StatsError``.

Pure Python standard library, Python 3.8 syntax; runs on the controller and on devices.

Blocks: dicts with ``arm`` (``baseline`` | ``speculative``), ``concurrency``, ``index`` (global
measurement order, unique), ``output_throughput`` (tok/s, > 0), ``median_tpot_ms`` (> 0),
``completed`` (>= 1), ``failed`` (>= 0) and optionally ``samples.output_tokens`` and, for the k
sweep, ``num_speculative_tokens``. Bad input raises ``StatsError`` (a ``ValueError``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

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


class StatsError(ValueError):
    """Invalid input to the statistics (the message names what and why)."""


def _mean(values):
    return math.fsum(values) / len(values)


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
