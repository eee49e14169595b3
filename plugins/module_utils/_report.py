# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""Fleet summaries from the per-host results of the speculative_decoding role (controller side)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

COLUMNS = ("host", "family", "method", "k", "c1 tok/s B->S", "gain c1 [CI]", "c8 B->S", "outcome", "reason")


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def arm_means(blocks, concurrency):
    """Mean output throughput of each arm at one concurrency, from the recorded blocks."""
    out = {}
    for arm in ("baseline", "speculative"):
        out[arm] = _mean([b.get("output_throughput") for b in blocks or [] if b.get("arm") == arm and int(b.get("concurrency", 0)) == int(concurrency)])
    return out


def _fmt(value, spec="%.1f"):
    return "-" if value is None else spec % value


def _pct(value):
    return "-" if value is None else "%+.1f%%" % (100.0 * value)


def row(result):
    verdict = result.get("verdict") or {}
    gain = verdict.get("gain_c1") or {}
    ci = gain.get("ci")
    high = (verdict.get("thresholds") or {}).get("high_concurrency", 8) or 8
    c1 = arm_means(result.get("blocks"), 1)
    c8 = arm_means(result.get("blocks"), high)
    gain_text = "-"
    if gain.get("estimate") is not None:
        gain_text = _pct(gain["estimate"])
        if ci:
            gain_text += " [%s, %s]" % (_pct(ci[0]), _pct(ci[1]))
    outcome = result.get("label") or result.get("outcome") or "?"
    if result.get("reused"):
        outcome += " (decided earlier)"
    method = result.get("method") if result.get("outcome") != "skip" or result.get("fitted") else None
    return (
        str(result.get("host", "?")),
        "%s %s" % (result.get("family", "?"), result.get("variant", "")),
        method or "-",
        str(result.get("num_speculative_tokens") or "-") if method else "-",
        "%s -> %s" % (_fmt(c1["baseline"]), _fmt(c1["speculative"])),
        gain_text,
        "%s -> %s" % (_fmt(c8["baseline"]), _fmt(c8["speculative"])),
        outcome,
        " ".join(str(result.get("reason") or "").split())[:160],
    )


def table(results, missing=None):
    """Lines of a fixed-width table, one host a line, then hosts with no result."""
    rows = [COLUMNS] + [row(r) for r in sorted(results or [], key=lambda r: str(r.get("host")))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = []
    for r in rows:
        cells = [r[i].ljust(widths[i]) for i in range(len(COLUMNS) - 1)] + [r[-1]]
        lines.append("  ".join(cells).rstrip())
    counts = {}
    for r in results or []:
        counts[r.get("outcome", "?")] = counts.get(r.get("outcome", "?"), 0) + 1
    lines.append("hosts: %d; %s" % (len(results or []), ", ".join("%s %d" % (k, v) for k, v in sorted(counts.items())) or "none"))
    for host in sorted(missing or []):
        lines.append("%s: no result (unreachable, failed, or stopped by the rollout)" % host)
    return lines


def union_seconds(intervals):
    """Total length of the union of [start, end] intervals (overlaps counted once)."""
    spans = sorted((float(i[-2]), float(i[-1])) for i in intervals or [] if float(i[-1]) > float(i[-2]))
    total, cur_start, cur_end = 0.0, None, None
    for start, end in spans:
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def timing(results, started=None, now=None):
    """Wall time of the run and how much of it was spent waiting on vLLM restarts and benchmarks.

    Each host records the intervals it spent restarting vLLM (until ready) and benchmarking. Their union
    over all hosts is the time in which at least one device was doing real work the rollout had to wait
    for; the rest of the wall time is Ansible's own overhead (connections, task dispatch, templating).
    """
    now = time.time() if now is None else now
    wall = None if started in (None, "") else max(0.0, now - float(started))
    intervals = [i for r in results or [] for i in (r.get("intervals") or [])]
    waiting = union_seconds(intervals)
    restarts = union_seconds([i for i in intervals if i[0] == "restart"])
    benchmarks = union_seconds([i for i in intervals if i[0] == "benchmark"])
    share = waiting / wall if wall else None
    return {
        "wall_s": None if wall is None else round(wall, 1),
        "waiting_seconds": round(waiting, 1),
        "restart_seconds": round(restarts, 1),
        "benchmark_seconds": round(benchmarks, 1),
        "waiting_share": None if share is None else round(share, 3),
        "ansible_overhead_share": None if share is None else round(1.0 - share, 3),
        "text": (
            "wall time %s s: %.0f s waiting on vLLM restarts (%.0f s) and on-device benchmarks (%.0f s) on at least "
            "one host (%s), %s Ansible's own overhead"
            % (
                "?" if wall is None else "%.0f" % wall,
                waiting,
                restarts,
                benchmarks,
                "-" if share is None else "%.0f%%" % (100 * share),
                "-" if share is None else "%.0f%%" % (100 * (1 - share)),
            )
        ),
    }
