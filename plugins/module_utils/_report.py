# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""Fleet reports from the per-host results of the speculative_decoding role (controller side).

Four products, all pure functions of the per-host results recorded by the role:

- ``table``: a fixed-width console table, one host a line with its reason wrapped below;
- ``timing``: the wall time of the run and the part of it spent waiting on vLLM restarts and benchmarks;
- ``report``: the machine-readable document of one run (``fleet.json``), with a normalised per-host
  ``summary`` next to the raw results;
- ``html``: a self-contained HTML page (inline CSS and SVG, no script, no external asset) of a report,
  with the history of earlier runs from ``index.json`` (``load_index``, ``update_index``).

Every text that comes from inventories or devices is escaped before it reaches the HTML.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import html as _html
import json
import math
import re
import textwrap
import time

SCHEMA = 1
OUTCOMES = ("keep", "revert", "skip")
COLUMNS = ("host", "family", "method", "k", "c=1 tok/s B->S", "gain c=1 [CI]", "c=8 tok/s B->S", "gain c=8 [CI]", "req", "verdict")
_RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z(-[0-9]+)?$")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


# ---------------------------------------------------------------------------------------------------------------------
# numbers from the results


def _num(value):
    """A finite float from a number or a numeric string, else None (results pass through templating)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _int(value):
    out = _num(value)
    return None if out is None else round(out)


def _mean(values):
    values = [v for v in (_num(x) for x in values) if v is not None]
    return sum(values) / len(values) if values else None


def _text(value):
    """One line of text: whitespace folded, control characters dropped."""
    if value is None:
        return ""
    return " ".join(_CONTROL.sub(" ", str(value)).split())


def _blocks(result):
    return [b for b in (result.get("blocks") or []) if isinstance(b, dict)]


def _concurrency(block):
    return _int(block.get("concurrency"))


def arm_means(blocks, concurrency, metric="output_throughput"):
    """Mean of one block metric (output throughput by default) for each arm at one concurrency."""
    out = {}
    for arm in ("baseline", "speculative"):
        out[arm] = _mean([b.get(metric) for b in blocks or [] if isinstance(b, dict) and b.get("arm") == arm and _concurrency(b) == _int(concurrency)])
    return out


def acceptance(blocks, concurrency):
    """Mean acceptance length and rate (percent) of the speculative blocks at one concurrency, or None."""
    spec = [b for b in blocks or [] if isinstance(b, dict) and b.get("arm") == "speculative" and _concurrency(b) == _int(concurrency)]
    length = _mean([b.get("spec_decode_acceptance_length") for b in spec])
    if length is None:
        return None
    rates = [_num(b.get("spec_decode_acceptance_rate")) for b in spec]
    return {
        "length": round(length, 3),
        "rate_percent": None if _mean(rates) is None else round(_mean(rates), 2),
        "blocks": len([b for b in spec if _num(b.get("spec_decode_acceptance_length")) is not None]),
    }


def sim_lag(blocks):
    """The simulator's timing over a host's benchmark blocks (only against the project's vLLM simulator):
    ``{"max_share", "out_of_spec", "blocks"}``, or None when no block carries the simulator's lag."""
    shares = [_num(b.get("sim_lag_share")) for b in blocks or [] if isinstance(b, dict)]
    shares = [v for v in shares if v is not None]
    if not shares:
        return None
    return {
        "max_share": max(shares),
        "out_of_spec": len([b for b in blocks if isinstance(b, dict) and b.get("sim_out_of_spec")]),
        "blocks": len(shares),
    }


def sim_lag_line(lag):
    """One report line for a host's simulator lag, or None."""
    if not lag:
        return None
    text = "simulator lag: at most %.1f%% of modelled time over %d blocks" % (100.0 * lag["max_share"], lag["blocks"])
    if lag["out_of_spec"]:
        text += "; OUT OF SPEC in %d blocks (the host ran late, figures skewed)" % lag["out_of_spec"]
    return text


def _interval(entry):
    """The public part of a verdict metric entry (gain_c1, tpot_reduction_c1, gain_c8), or None without an estimate."""
    if not isinstance(entry, dict) or _num(entry.get("estimate")) is None:
        return None
    ci = entry.get("ci")
    lo_hi = None
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and _num(ci[0]) is not None and _num(ci[1]) is not None:
        lo_hi = [_num(ci[0]), _num(ci[1])]
    return {
        "estimate": _num(entry.get("estimate")),
        "ci": lo_hi,
        "confidence": _num(entry.get("confidence")),
        "status": entry.get("status"),
        "threshold": _num(entry.get("threshold")),
        "rounds": _int(entry.get("rounds")),
    }


def _high(result):
    thresholds = (result.get("verdict") or {}).get("thresholds") or {}
    if "high_concurrency" in thresholds and thresholds["high_concurrency"] is None:
        return None
    return _int(thresholds.get("high_concurrency")) or 8


def _strings(values):
    out = []
    for value in values or []:
        text = _text(value)
        if text and text not in out:
            out.append(text)
    return out


def _noise(noise):
    out = {}
    for level in ("c1", "c8"):
        entry = (noise or {}).get(level)
        if not isinstance(entry, dict):
            continue
        drift = entry.get("drift") or {}
        out[level] = {
            "residual_sd": _num(entry.get("residual_sd")),
            "baseline_cv": _num(entry.get("baseline_cv")),
            "speculative_cv": _num(entry.get("speculative_cv")),
            "drift": _num(drift.get("estimate")),
            "drift_significant": bool(drift.get("significant")),
        }
    return out


def host_summary(result):
    """The normalised per-host row of the reports: what the table, the JSON summary and the HTML show."""
    verdict = result.get("verdict") or {}
    thresholds = verdict.get("thresholds") or {}
    blocks = _blocks(result)
    high = _high(result)
    outcome = str(result.get("outcome") or "?")
    tried = outcome != "skip" or bool(result.get("fitted"))
    method = result.get("method") if tried else None
    fitted = result.get("fitted") or {}
    plan = result.get("plan") or {}
    gain_c1 = _interval(verdict.get("gain_c1"))
    min_gain = _num(thresholds.get("min_gain"))
    if min_gain is None and gain_c1 is not None:
        min_gain = gain_c1["threshold"]
    bench_warnings = []
    for block in blocks:
        bench_warnings.extend(block.get("warnings") or [])
    return {
        "host": _text(result.get("host")) or "?",
        "family": _text(result.get("family")) or "unknown",
        "variant": _text(result.get("variant")),
        "l4t": _text(result.get("l4t")),
        "model": _text(result.get("model")),
        "vllm_version": _text(result.get("vllm_version")),
        "outcome": outcome,
        "label": _text(result.get("label")) or outcome,
        "reason": _text(result.get("reason")),
        "reused": bool(result.get("reused")),
        "method": _text(method) or None,
        "speculator": (_text(result.get("speculator")) or None) if method else None,
        "k": _int(result.get("num_speculative_tokens")) if method else None,
        "k_source": (_text(result.get("k_source")) or None) if method else None,
        "group": _text(result.get("group")) or None,
        "tuning": _tuning(result),
        "gpu_memory_utilization": {
            "baseline": _num(result.get("baseline_gpu_memory_utilization")),
            "speculative": _num(result.get("gpu_memory_utilization")) if method else None,
        },
        "high_concurrency": high,
        "throughput": {"c1": arm_means(blocks, 1), "c8": arm_means(blocks, high) if high else {"baseline": None, "speculative": None}},
        "tpot_ms": {"c1": arm_means(blocks, 1, "median_tpot_ms")},
        "gain_c1": gain_c1,
        "tpot_reduction_c1": _interval(verdict.get("tpot_reduction_c1")),
        "gain_c8": _interval(verdict.get("gain_c8")),
        "min_gain": min_gain,
        "acceptance": {"c1": acceptance(blocks, 1), "c8": acceptance(blocks, high) if high else None},
        "rounds": _int(verdict.get("rounds")),
        "requests_spent": _int(verdict.get("requests_spent")),
        "arm_switches": _int(verdict.get("arm_switches")),
        "blocks": len(blocks),
        "sim_lag": sim_lag(blocks),
        "noise": _noise(verdict.get("noise")),
        "warnings": _strings(verdict.get("warnings")),
        "plan_warnings": _strings(fitted.get("warnings") if fitted else plan.get("warnings")),
        "benchmark_warnings": _strings(bench_warnings),
        "elapsed_s": _num(result.get("elapsed_s")),
        "started_at": _num(result.get("started_at")),
        "finished_at": _num(result.get("finished_at")),
    }


def _tuning(result):
    """The canary's sweep of ``num_speculative_tokens`` (None where this host did not sweep): the chosen ``k``,
    each measured candidate with its gain interval at c=1, the candidates pruned from the measured acceptance."""
    sweep = result.get("sweep")
    choice = sweep.get("choice") if isinstance(sweep, dict) else None
    if not isinstance(choice, dict) or _int(choice.get("k")) is None:
        return None
    candidates = []
    for c in choice.get("candidates") or []:
        if isinstance(c, dict) and _int(c.get("k")) is not None:
            ci = c.get("ci")
            ci = [_num(ci[0]), _num(ci[1])] if isinstance(ci, (list, tuple)) and len(ci) == 2 else None
            candidates.append({"k": _int(c["k"]), "estimate": _num(c.get("estimate")), "ci": ci})
    pruned = sorted(_int(p.get("k")) for p in sweep.get("predictions") or [] if isinstance(p, dict) and p.get("pruned") and _int(p.get("k")) is not None)
    return {
        "k": _int(choice["k"]),
        "candidates": sorted(candidates, key=lambda c: c["k"]),
        "pruned": pruned,
        "reason": _text(choice.get("reason")),
        "confidence": _num(choice.get("confidence")),
        "requests": _int(sweep.get("requests")),
    }


def groups(summaries):
    """``num_speculative_tokens`` per group of identical devices (family, variant, target model, speculator):
    the values the hosts of the group ran with, where they came from, and the canary's sweep when one ran."""
    out = {}
    for s in summaries:
        if not s["method"] or s["k"] is None:
            continue
        key = s.get("group") or "|".join([s["family"], s["variant"], s["model"], s["speculator"] or "none"])
        g = out.setdefault(
            key,
            {
                "group": key,
                "family": s["family"],
                "variant": s["variant"],
                "model": s["model"],
                "speculator": s["speculator"],
                "hosts": [],
                "k": [],
                "sources": [],
                "tuning": None,
                "canary": None,
            },
        )
        g["hosts"].append(s["host"])
        if s["k"] not in g["k"]:
            g["k"].append(s["k"])
        if s["k_source"] and s["k_source"] not in g["sources"]:
            g["sources"].append(s["k_source"])
        if s.get("tuning") and g["tuning"] is None:
            g["tuning"], g["canary"] = s["tuning"], s["host"]
    for g in out.values():
        g["hosts"].sort()
        g["k"].sort()
    return sorted(out.values(), key=lambda g: (g["family"], g["variant"], g["model"], g["speculator"] or ""))


def _tuning_text(tuning):
    parts = []
    for c in tuning["candidates"]:
        text = "k=%d %s" % (c["k"], _pct(c["estimate"]))
        if c["ci"] and None not in c["ci"]:
            text += " [%+.1f, %+.1f]" % (100.0 * c["ci"][0], 100.0 * c["ci"][1])
        parts.append(text)
    if tuning["pruned"]:
        parts.append("pruned k=%s" % ",".join(str(k) for k in tuning["pruned"]))
    return "; ".join(parts)


def group_lines(summaries, wrap=120):
    """Console lines: one per group of identical devices with the k it ran with and where k came from."""
    gs = groups(summaries)
    if not gs:
        return []
    lines = ["num_speculative_tokens per group (family variant, target model, speculator):"]
    for g in gs:
        ks = ",".join(str(k) for k in g["k"])
        what = ", ".join(x for x in (("%s %s" % (g["family"], g["variant"])).strip(), g["model"], g["speculator"]) if x)
        head = "  %s: k=%s (%s); %d host%s" % (what, ks, "; ".join(g["sources"]) or "source not recorded", len(g["hosts"]), "" if len(g["hosts"]) == 1 else "s")
        lines.append(head)
        if g["tuning"]:
            lines.extend(
                textwrap.wrap(
                    "sweep on %s at c=1: %s" % (g["canary"], _tuning_text(g["tuning"])),
                    width=wrap,
                    initial_indent="    ",
                    subsequent_indent="    ",
                )
            )
    return lines


def counts(results, missing=None):
    """Hosts per outcome (keep, revert, skip, and any other), plus ``missing``: hosts without a result."""
    out = dict((o, 0) for o in OUTCOMES)
    for result in results or []:
        outcome = str(result.get("outcome") or "?")
        out[outcome] = out.get(outcome, 0) + 1
    out["missing"] = len(list(missing or []))
    return out


# ---------------------------------------------------------------------------------------------------------------------
# console table


def _fmt(value, spec="%.1f"):
    return "-" if value is None else spec % value


def _pct(value, spec="%+.1f%%"):
    return "-" if value is None else spec % (100.0 * value)


def _gain_text(entry):
    """``+47.6% [+31.0, +66.0]`` (percent, interval bounds without the sign repeated)."""
    if not entry:
        return "-"
    out = _pct(entry["estimate"])
    if entry["ci"]:
        out += " [%+.1f, %+.1f]" % (100.0 * entry["ci"][0], 100.0 * entry["ci"][1])
    return out


def _arrow(pair, spec="%.1f"):
    if pair["baseline"] is None and pair["speculative"] is None:
        return "-"
    return "%s -> %s" % (_fmt(pair["baseline"], spec), _fmt(pair["speculative"], spec))


def row(result):
    """The cells of one host in the console table (``COLUMNS``), from a raw result."""
    return _row(host_summary(result))


def _row(s):
    label = s["label"] + (" (decided earlier)" if s["reused"] else "")
    return (
        s["host"],
        ("%s %s" % (s["family"], s["variant"])).strip(),
        s["method"] or "-",
        "-" if s["k"] is None else str(s["k"]),
        _arrow(s["throughput"]["c1"]),
        _gain_text(s["gain_c1"]),
        _arrow(s["throughput"]["c8"]),
        _gain_text(s["gain_c8"]),
        "-" if s["requests_spent"] is None else str(s["requests_spent"]),
        label,
    )


def _common_high(results):
    highs = [_high(r) for r in results or []]
    highs = [h for h in highs if h]
    return max(set(highs), key=highs.count) if highs else 8


def table(results, missing=None, width=None, reason_lines=3):
    """Lines of a fixed-width table sorted by host: one line per host, its reason (and the trial's warnings)
    wrapped below it, then the count per outcome, the hosts with no result and a legend."""
    results = sorted(results or [], key=lambda r: _text(r.get("host")))
    if not results:
        return ["no host produced a result"] + [
            "%s: no result (unreachable, failed, or stopped by the rollout)" % h for h in sorted(_text(h) for h in missing or [])
        ]
    high = _common_high(results)
    head = tuple(c.replace("c=8", "c=%d" % high) for c in COLUMNS)
    summaries = [host_summary(r) for r in results]
    rows = [head] + [_row(s) for s in summaries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    numeric = {3, 8}

    def line(cells):
        out = [cells[i].rjust(widths[i]) if i in numeric else cells[i].ljust(widths[i]) for i in range(len(cells))]
        return "  ".join(out).rstrip()

    table_width = len(line(head))
    wrap = int(width) if width else max(100, min(160, table_width))
    indent = "    "
    lines = [line(head)]
    for s, cells in zip(summaries, rows[1:]):
        lines.append(line(cells))
        if s["reason"] and reason_lines:
            lines.extend(
                textwrap.wrap(s["reason"], width=wrap, initial_indent=indent, subsequent_indent=indent, max_lines=int(reason_lines), placeholder=" ...")
            )
        for warning in s["warnings"] + s["benchmark_warnings"]:
            lines.extend(textwrap.wrap("warning: " + warning, width=wrap, initial_indent=indent, max_lines=1, placeholder=" ..."))
        lag_line = sim_lag_line(s.get("sim_lag"))
        if lag_line:
            lines.append(indent + lag_line)
    lines.extend(group_lines(summaries, wrap))
    n = counts(results)
    parts = ["%s %d" % (k, n[k]) for k in sorted(n) if k != "missing" and n[k]]
    lines.append("hosts: %d; %s" % (len(results), ", ".join(parts) or "none"))
    for host in sorted(_text(h) for h in missing or []):
        lines.append("%s: no result (unreachable, failed, or stopped by the rollout)" % host)
    lines.append(
        "gain: drift-corrected change of output throughput, speculative vs baseline, [confidence interval] in %; "
        "tok/s: mean of the benchmark blocks, baseline -> speculative; req: requests the trial spent"
    )
    return lines


# ---------------------------------------------------------------------------------------------------------------------
# timing


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


# ---------------------------------------------------------------------------------------------------------------------
# the machine-readable report and the index of runs


def _utc(seconds):
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)


def iso(seconds):
    """``2026-12-02T13:27:59Z`` for seconds since the epoch, None for None."""
    return None if seconds is None else _utc(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_id(seconds, taken=()):
    """``20261202T132759Z`` (UTC), with ``-2``, ``-3``, ... appended when the id is already taken."""
    base = _utc(seconds).strftime("%Y%m%dT%H%M%SZ")
    taken = set(taken or ())
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = "%s-%d" % (base, n)
    return candidate


def report(results, missing=None, started=None, now=None, history=None, target_group=None):
    """The document of one run (``fleet.json``).

    ``hosts`` keeps the raw per-host results (blocks included, for re-analysis), ``summary`` the normalised
    rows the table and the HTML show, ``run.id`` names the run directory (the UTC start of the run, made
    unique against the runs already in ``history``, an index as ``load_index`` accepts it).
    """
    now = time.time() if now is None else float(now)
    started = _num(started)
    results = sorted([r for r in results or [] if isinstance(r, dict)], key=lambda r: _text(r.get("host")))
    missing = sorted(_text(h) for h in missing or [])
    taken = [entry["id"] for entry in load_index(history)["runs"]]
    return {
        "schema": SCHEMA,
        "run": {
            "id": run_id(started if started is not None else now, taken),
            "started": started,
            "started_utc": iso(started),
            "finished": round(now, 3),
            "finished_utc": iso(now),
            "target_group": None if target_group is None else _text(target_group),
        },
        "counts": counts(results, missing),
        "summary": [host_summary(r) for r in results],
        "groups": groups([host_summary(r) for r in results]),
        "missing": missing,
        "timing": timing(results, started=started, now=now),
        "hosts": results,
    }


def index_entry(doc):
    """The line of one run in ``index.json``."""
    run = doc.get("run") or {}
    timing_ = doc.get("timing") or {}
    n = doc.get("counts") or counts(doc.get("hosts"), doc.get("missing"))
    return {
        "id": run.get("id"),
        "started_utc": run.get("started_utc"),
        "finished_utc": run.get("finished_utc"),
        "target_group": run.get("target_group"),
        "hosts": len(doc.get("hosts") or []),
        "counts": dict(n),
        "requests_spent": sum(s.get("requests_spent") or 0 for s in doc.get("summary") or []),
        "wall_s": timing_.get("wall_s"),
        "path": "runs/%s" % run.get("id"),
    }


def load_index(value):
    """An index of runs from what ``index.json`` held: None or "" (no file yet), its JSON text, or the parsed
    document. Entries that are not runs are dropped; ``error`` says why the text could not be read."""
    error = None
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        if not value.strip():
            value = None
        else:
            try:
                value = json.loads(value)
            except ValueError as exc:
                error = "index.json is not valid JSON (%s); earlier runs are not listed" % exc
                value = None
    runs = value.get("runs") if isinstance(value, dict) else value
    if value is not None and not isinstance(runs, list):
        error = error or "index.json has no list of runs; earlier runs are not listed"
        runs = []
    entries = {}
    for entry in runs or []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and _RUN_ID.match(entry["id"]):
            entries[entry["id"]] = dict(entry)
    out = {"schema": SCHEMA, "runs": [entries[k] for k in sorted(entries)]}
    if error:
        out["error"] = error
    return out


def update_index(index, doc):
    """The index with the run of ``doc`` added (or replaced, when its id is already listed), oldest first.
    When the previous index could not be read, ``error`` says so (once: the next update drops it)."""
    out = load_index(index)
    entry = index_entry(doc)
    runs = [r for r in out["runs"] if r["id"] != entry["id"]] + [entry]
    out["runs"] = sorted(runs, key=lambda r: r["id"])
    return out


# ---------------------------------------------------------------------------------------------------------------------
# HTML


def _e(value):
    """Text or attribute value, escaped for HTML (quotes included), control characters dropped."""
    return _html.escape(_CONTROL.sub(" ", "" if value is None else str(value)), quote=True)


_OUTCOME_CLASS = {"keep": "keep", "revert": "revert", "skip": "skip"}
_COLOURS = {"keep": "#1a7f37", "revert": "#cf222e", "skip": "#8c959f", "other": "#9a6700"}
_LIGHT = {"keep": "#aceebb", "revert": "#ffcecb", "skip": "#eaeef2", "other": "#fae17d"}

_CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--band:#f6f8fa;--keep:#1a7f37;--revert:#cf222e;--skip:#8c959f;--other:#9a6700}
*{box-sizing:border-box}
body{margin:0;padding:24px 32px 48px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:#fff}
main{max-width:1440px;margin:0 auto}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
p{margin:6px 0}
.meta,.note,small,.small{color:var(--muted)}
.note{font-size:13px;max-width:980px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--band);padding:1px 4px;border-radius:4px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0 4px}
.card{border:1px solid var(--line);border-radius:8px;padding:8px 14px;min-width:118px}
.card b{display:block;font-size:22px;line-height:1.2}
.card span{font-size:12px;color:var(--muted)}
.card.keep b{color:var(--keep)}.card.revert b{color:var(--revert)}.card.skip b{color:var(--skip)}.card.missing b{color:var(--other)}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;white-space:nowrap;color:#fff}
.badge.keep{background:var(--keep)}.badge.revert{background:var(--revert)}.badge.skip{background:var(--skip)}.badge.other{background:var(--other)}
.chart{overflow-x:auto}
.chart svg{display:block;max-width:100%;height:auto}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif}
table{border-collapse:collapse;width:100%;font-size:13px}
table.hosts th{white-space:normal;min-width:70px}
table.hosts td:nth-child(8){min-width:96px;max-width:130px}
th,td{padding:5px 7px;text-align:left;vertical-align:top;border-bottom:1px solid var(--line)}
th{background:var(--band);font-weight:600;white-space:nowrap;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.family td{background:var(--band);font-weight:600;border-top:2px solid var(--line)}
tr.host td{border-bottom:none}
tr.detail td{padding-top:0;color:var(--muted);font-size:12px}
tr.detail ul{margin:2px 0 0;padding-left:18px}
tr.detail li.warn{color:#9a6700}
td.host{min-width:170px;max-width:240px}
td.host b{font-size:14px;overflow-wrap:anywhere}
.nowrap{white-space:nowrap}
.wide{overflow-x:auto}
.ci{color:var(--muted);font-size:12px;white-space:nowrap;font-weight:400}
table.hosts td.method{min-width:150px;max-width:230px;overflow-wrap:anywhere}
table.hosts th small{font-weight:400;color:var(--muted);white-space:normal}
.up{color:var(--keep)}.down{color:var(--revert)}
.stack{display:flex;height:10px;width:160px;border-radius:3px;overflow:hidden;background:var(--band)}
.stack i{display:block;height:100%}
.stack .keep{background:var(--keep)}.stack .revert{background:var(--revert)}.stack .skip{background:var(--skip)}.stack .missing{background:#d4a72c}
tr.current td{background:#ddf4ff}
.legend{display:flex;flex-wrap:wrap;gap:16px;font-size:12px;color:var(--muted);margin:6px 0}
.legend i{display:inline-block;width:18px;height:10px;margin-right:5px;vertical-align:middle;border-radius:2px}
.empty{padding:16px;border:1px dashed var(--line);border-radius:8px;color:var(--muted)}
footer{margin-top:40px;font-size:12px;color:var(--muted)}
"""


def _cls(outcome):
    return _OUTCOME_CLASS.get(outcome, "other")


def _nice_step(span, target=6):
    raw = span / float(target)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * magnitude:
            return m * magnitude
    return 10 * magnitude


def _family_order(summaries):
    """Summaries grouped by family (families and hosts sorted by name): [(family, [summary, ...]), ...]."""
    groups = {}
    for s in summaries:
        groups.setdefault(s["family"], []).append(s)
    return [(f, sorted(groups[f], key=lambda s: s["host"])) for f in sorted(groups)]


def _short(text, n):
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _pct_html(value, digits=1):
    return "&ndash;" if value is None else ("%+.*f&#8239;%%" % (digits, 100.0 * value)).replace("-", "&minus;")


def _ci_html(entry, reduction=False):
    """``[+75.7, +122.4]`` (percent), the level in the title."""
    if not entry or not entry["ci"]:
        return ""
    lo, hi = entry["ci"]
    level = "" if entry["confidence"] is None else "%s %% confidence interval" % _trim(100.0 * entry["confidence"])
    spec = "%.1f" if reduction else "%+.1f"
    return '<span class="ci" title="%s">[%s, %s]</span>' % (level, (spec % (100.0 * lo)).replace("-", "&minus;"), (spec % (100.0 * hi)).replace("-", "&minus;"))


def _trim(value):
    return ("%.2f" % value).rstrip("0").rstrip(".")


def _family_counts(hosts):
    n = counts(hosts)
    return ", ".join("%s %d" % (k, n[k]) for k in sorted(n) if k != "missing" and n[k])


def _chart_label(s):
    return _short(s["label"] + (" *" if s["reused"] else ""), 40)


def _gain_chart(summaries):
    """Horizontal SVG chart: per host the c=1 gain (bar) with its interval (whisker), grouped by family, with
    the keep threshold dashed and zero solid."""
    groups = _family_order(summaries)
    with_gain = [s for s in summaries if s["gain_c1"]]
    values = [0.0] + [s["min_gain"] for s in summaries if s["min_gain"] is not None]
    for s in with_gain:
        values.append(s["gain_c1"]["estimate"])
        values.extend(s["gain_c1"]["ci"] or [])
    lo, hi = max(-1.0, min(values)), min(3.0, max(values))
    if hi - lo < 0.2:
        hi = lo + 0.2
    step = _nice_step(hi - lo)
    lo, hi = step * math.floor(lo / step - 0.15), step * math.ceil(hi / step + 0.15)
    lo = max(lo, -1.0)

    name_len = min(30, max([len(s["host"]) for s in summaries] + [8]))
    right_len = max([len(_gain_text(s["gain_c1"])) + len(_chart_label(s)) + 2 for s in summaries] + [24])
    left, plot, right = 24 + int(name_len * 7.4), 600, 24 + int(right_len * 7.0)
    width = left + plot + right
    row_h, head_h, top, bottom = 26, 28, 44, 36

    def x(v):
        return left + (min(max(v, lo), hi) - lo) / (hi - lo) * plot

    # rows: ("head", family, hosts) or ("host", summary)
    rows, y = [], top
    for family, hosts in groups:
        rows.append(("head", y, family, hosts))
        y += head_h
        for s in hosts:
            rows.append(("host", y, s))
            y += row_h
    height = y + bottom
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" '
        'aria-label="Throughput gain at concurrency 1 per host with confidence intervals">' % (width, height, width, height)
    ]
    # family bands
    for r in rows:
        if r[0] == "head":
            _kind, y0, family, hosts = r
            out.append('<rect x="0" y="%d" width="%d" height="%d" fill="#f6f8fa"/>' % (y0, width, head_h))
            out.append(
                '<text x="8" y="%d" font-size="13" font-weight="600" fill="#1f2328">%s <tspan font-weight="400" fill="#59636e">'
                "&#183; %d host%s &#183; %s</tspan></text>" % (y0 + 17, _e(family), len(hosts), "" if len(hosts) == 1 else "s", _e(_family_counts(hosts)))
            )
    # grid and axis labels
    tick = lo
    while tick <= hi + 1e-9:
        tx = x(tick)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e6e9ed" stroke-width="1"/>' % (tx, top - 6, tx, height - bottom))
        label = ("%+.0f%%" % (100 * tick)).replace("+0%", "0%").replace("-", "\u2212")
        out.append('<text x="%.1f" y="%d" font-size="11" fill="#59636e" text-anchor="middle">%s</text>' % (tx, top - 10, _e(label)))
        out.append('<text x="%.1f" y="%d" font-size="11" fill="#59636e" text-anchor="middle">%s</text>' % (tx, height - bottom + 14, _e(label)))
        tick += step
    out.append(
        '<text x="%.1f" y="%d" font-size="11" fill="#59636e" text-anchor="middle">throughput gain at c=1, speculative vs baseline</text>'
        % (left + plot / 2.0, height - 6)
    )
    out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#57606a" stroke-width="1.2"/>' % (x(0), top - 4, x(0), height - bottom))
    # keep threshold: one line when all hosts share it, else a segment on each host's row
    thresholds = sorted({round(s["min_gain"], 9) for s in summaries if s["min_gain"] is not None})
    if len(thresholds) == 1:
        tx = x(thresholds[0])
        out.append(
            '<line class="threshold" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#1a7f37" stroke-width="1.5" stroke-dasharray="5 3"/>'
            % (tx, top - 4, tx, height - bottom)
        )
        out.append(
            '<text x="%.1f" y="%d" font-size="11" fill="#1a7f37">keep threshold (min_gain) %s</text>'
            % (tx + 4, top - 24, _e(("%+.0f%%" % (100 * thresholds[0])).replace("-", "\u2212")))
        )
    elif thresholds:
        for r in rows:
            if r[0] == "host" and r[2]["min_gain"] is not None:
                tx = x(r[2]["min_gain"])
                out.append(
                    '<line class="threshold" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#1a7f37" stroke-width="1.5" stroke-dasharray="5 3">'
                    "<title>keep threshold %s</title></line>" % (tx, r[1] + 1, tx, r[1] + row_h - 1, _e(_pct(r[2]["min_gain"])))
                )
        out.append('<text x="%d" y="%d" font-size="11" fill="#1a7f37">keep thresholds (min_gain) differ per host: dashed on each row</text>' % (left, top - 24))
    # hosts
    for r in rows:
        if r[0] != "host":
            continue
        _kind, y0, s = r
        yc = y0 + row_h / 2.0
        cls = _cls(s["outcome"])
        g = s["gain_c1"]
        label = _short(s["host"], name_len)
        title = "%s (%s %s): %s" % (s["host"], s["family"], s["variant"], s["label"])
        if g:
            title += "; gain at c=1 %s" % _pct(g["estimate"])
            if g["ci"]:
                title += " (%s%% CI %s to %s)" % (_trim(100.0 * (g["confidence"] or 0)), _pct(g["ci"][0]), _pct(g["ci"][1]))
        out.append('<g class="host" data-host="%s" data-outcome="%s"><title>%s</title>' % (_e(s["host"]), cls, _e(title)))
        out.append('<text x="%d" y="%.1f" font-size="13" fill="#1f2328" text-anchor="end">%s</text>' % (left - 10, yc + 4, _e(label)))
        if g:
            x0, x1 = x(0), x(g["estimate"])
            out.append(
                '<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="12" rx="2" fill="%s" stroke="%s" stroke-width="0.8"/>'
                % (min(x0, x1), yc - 6, max(abs(x1 - x0), 1.0), _LIGHT[cls], _COLOURS[cls])
            )
            if g["ci"]:
                a, b = g["ci"]
                xa, xb = x(a), x(b)
                path = "M%.1f %.1fH%.1f" % (xa, yc, xb)
                path += ("M%.1f %.1fV%.1f" % (xa, yc - 5, yc + 5)) if a >= lo else ("M%.1f %.1fl5 -4M%.1f %.1fl5 4" % (xa, yc, xa, yc))
                path += ("M%.1f %.1fV%.1f" % (xb, yc - 5, yc + 5)) if b <= hi else ("M%.1f %.1fl-5 -4M%.1f %.1fl-5 4" % (xb, yc, xb, yc))
                out.append('<path class="ci" data-lo="%.4f" data-hi="%.4f" d="%s" stroke="%s" stroke-width="1.6" fill="none"/>' % (a, b, path, _COLOURS[cls]))
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (x1, yc, _COLOURS[cls]))
            numbers = _gain_text(g)
        else:
            why = "no trial (skipped)" if s["outcome"] == "skip" else "no interval"
            out.append('<text x="%.1f" y="%.1f" font-size="11" font-style="italic" fill="#8c959f">%s</text>' % (x(0) + 6, yc + 4, why))
            numbers = ""
        out.append(
            '<text x="%d" y="%.1f" font-size="12.5" fill="#1f2328">%s <tspan fill="%s" font-weight="600">%s</tspan></text>'
            % (left + plot + 12, yc + 4, _e(numbers), _COLOURS[cls], _e(_chart_label(s)))
        )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _clock(seconds):
    seconds = round(seconds)
    return "%d:%02d" % (seconds // 60, seconds % 60) if seconds < 3600 else "%d:%02d:%02d" % (seconds // 3600, seconds % 3600 // 60, seconds % 60)


def _timeline(doc, summaries):
    """SVG timeline: per host its span (thin line), vLLM restarts (amber) and benchmarks (blue)."""
    hosts = {_text(r.get("host")): r for r in doc.get("hosts") or []}
    spans = []
    for s in summaries:
        raw = hosts.get(s["host"]) or {}
        ivs = []
        for i in raw.get("intervals") or []:
            if isinstance(i, (list, tuple)) and len(i) >= 3 and _num(i[-2]) is not None and _num(i[-1]) is not None:
                ivs.append((str(i[0]), _num(i[-2]), _num(i[-1])))
        spans.append((s, ivs))
    starts = [v for s, ivs in spans for v in [s["started_at"]] + [i[1] for i in ivs] if v is not None]
    ends = [v for s, ivs in spans for v in [s["finished_at"]] + [i[2] for i in ivs] if v is not None]
    run = doc.get("run") or {}
    t0 = _num(run.get("started"))
    t0 = min(starts) if t0 is None and starts else t0
    t1 = max([*ends, _num(run.get("finished")) or 0]) if ends else _num(run.get("finished"))
    if t0 is None or t1 is None or t1 <= t0 or not starts:
        return ""
    name_len = min(30, max([len(s["host"]) for s in summaries] + [8]))
    left, plot, right = 24 + int(name_len * 7.2), 900, 40
    width, row_h, top = left + plot + right, 18, 26
    height = top + row_h * len(spans) + 8

    def x(t):
        return left + (min(max(t, t0), t1) - t0) / (t1 - t0) * plot

    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" '
        'aria-label="Timeline of vLLM restarts and benchmarks per host">' % (width, height, width, height)
    ]
    step = _nice_step(t1 - t0, 8)
    for m in (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200):
        if step <= m:
            step = m
            break
    tick = 0.0
    while t0 + tick <= t1 + 1e-6:
        tx = x(t0 + tick)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e6e9ed"/>' % (tx, top - 4, tx, height - 8))
        out.append('<text x="%.1f" y="%d" font-size="11" fill="#59636e" text-anchor="middle">%s</text>' % (tx, top - 8, _clock(tick)))
        tick += step
    for n, (s, ivs) in enumerate(spans):
        yc = top + n * row_h + row_h / 2.0
        out.append('<g data-host="%s">' % _e(s["host"]))
        out.append('<text x="%d" y="%.1f" font-size="12" fill="#1f2328" text-anchor="end">%s</text>' % (left - 10, yc + 4, _e(_short(s["host"], name_len))))
        if s["started_at"] is not None and s["finished_at"] is not None:
            out.append(
                '<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#afb8c1" stroke-width="2"><title>%s: %s on this host</title></line>'
                % (x(s["started_at"]), yc, x(s["finished_at"]), yc, _e(s["host"]), _clock(s["finished_at"] - s["started_at"]))
            )
        for kind, a, b in ivs:
            colour = "#bf8700" if kind == "restart" else "#0969da"
            out.append(
                '<rect x="%.1f" y="%.1f" width="%.1f" height="10" fill="%s"><title>%s %s: %.1f s</title></rect>'
                % (x(a), yc - 5, max(x(b) - x(a), 1.0), colour, _e(s["host"]), _e(kind), b - a)
            )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _arrow_html(pair, unit, spec="%.1f"):
    if pair is None or (pair["baseline"] is None and pair["speculative"] is None):
        return ""
    return '<span class="nowrap" title="%s, baseline &rarr; speculative">%s&nbsp;&rarr;&nbsp;<b>%s</b></span>' % (
        unit,
        _fmt(pair["baseline"], spec),
        _fmt(pair["speculative"], spec),
    )


def _effect_html(entry, reduction=False):
    """The estimate (green when shown above its threshold, red when shown below) and its interval."""
    if not entry:
        return ""
    cls = {"above": ' class="up"', "below": ' class="down"'}.get(entry["status"], "")
    if reduction:
        text = "%.1f&#8239;%% %s" % (abs(100.0 * entry["estimate"]), "lower" if entry["estimate"] >= 0 else "higher")
    else:
        text = _pct_html(entry["estimate"])
    return "<b%s>%s</b>&nbsp;%s" % (cls, text, _ci_html(entry, reduction))


def _measure_cell(pair, unit, entry, reduction=False):
    lines = [x for x in (_arrow_html(pair, unit), _effect_html(entry, reduction)) if x]
    return "<br>".join(lines) or "&ndash;"


def _noise_cell(s):
    parts = []
    for level, name in (("c1", "c=1"), ("c8", "c=%s" % (s["high_concurrency"] or 8))):
        n = s["noise"].get(level)
        if not n or n["residual_sd"] is None:
            continue
        text = '<span class="nowrap">%s %.1f&#8239;%%</span>' % (name, 100.0 * n["residual_sd"])
        if n["drift_significant"] and n["drift"] is not None:
            text += '<br><span class="down nowrap">drift %s</span>' % _pct_html(n["drift"])
        parts.append(text)
    return "<br>".join(parts) or "&ndash;"


def _acceptance_cell(s):
    parts = []
    for level, name in (("c1", "c=1"), ("c8", "c=%s" % (s["high_concurrency"] or 8))):
        a = s["acceptance"].get(level)
        if a:
            rate = "" if a["rate_percent"] is None else ' <span class="ci">%.0f&#8239;%%</span>' % a["rate_percent"]
            parts.append('<span class="nowrap">%s %.2f%s</span>' % (name, a["length"], rate))
    return "<br>".join(parts) or "&ndash;"


_LABEL = re.compile(r"^(keep|revert|skip)\s*\((.+)\)$")


def _verdict_cell(s):
    cls = _cls(s["outcome"])
    match = _LABEL.match(s["label"])
    badge, detail = (match.group(1), match.group(2)) if match else (s["label"], "")
    out = '<span class="badge %s">%s</span>' % (cls, _e(badge))
    if detail:
        out += '<br><span class="small">%s</span>' % _e(detail)
    if s["reused"]:
        out += '<br><span class="small">decided in an earlier run</span>'
    return out


def _method_cell(s):
    if not s["method"]:
        return "&ndash;"
    out = "<b>%s</b>%s" % (_e(s["method"]), "" if s["k"] is None else ", k=%d" % s["k"])
    if s.get("k_source"):
        out += ' <span class="small">(%s)</span>' % _e(s["k_source"])
    if s["speculator"]:
        out += '<br><span class="small">%s</span>' % _e(s["speculator"])
    gmu = s["gpu_memory_utilization"]
    if gmu["baseline"] is not None and gmu["speculative"] is not None:
        out += '<br><span class="small nowrap">GPU memory %.2f &rarr; %.2f</span>' % (gmu["baseline"], gmu["speculative"])
    return out


def _trial_cell(s):
    lines = []
    if s["rounds"] is not None:
        lines.append("%d round%s%s" % (s["rounds"], "" if s["rounds"] == 1 else "s", "" if s["arm_switches"] is None else ", %d restarts" % s["arm_switches"]))
    if s["requests_spent"] is not None:
        lines.append('<span class="nowrap">%d requests</span>' % s["requests_spent"])
    if s["elapsed_s"] is not None:
        lines.append('<span class="small nowrap">%s on the host</span>' % _clock(s["elapsed_s"]))
    return "<br>".join(lines) or "&ndash;"


def _host_rows(s, columns):
    details = ["<b>Reason:</b> %s" % (_e(s["reason"]) or "&ndash;")]
    items = ['<li class="warn">%s</li>' % _e(w) for w in s["warnings"]]
    items += ['<li class="warn">benchmark: %s</li>' % _e(w) for w in s["benchmark_warnings"]]
    items += ["<li>plan: %s</li>" % _e(w) for w in s["plan_warnings"]]
    if items:
        details.append("<ul>%s</ul>" % "".join(items))
    platform = ['<span class="small">%s</span>' % _e(("%s %s" % (s["family"], s["variant"])).strip())]
    versions = " &#183; ".join(_e(p) for p in ("L4T %s" % s["l4t"] if s["l4t"] else "", "vLLM %s" % s["vllm_version"] if s["vllm_version"] else "") if p)
    if versions:
        platform.append('<span class="small nowrap">%s</span>' % versions)
    if s["model"]:
        platform.append('<span class="small">%s</span>' % _e(s["model"]))
    cells = [
        '<td class="host"><b>%s</b><br>%s</td>' % (_e(s["host"]), "<br>".join(platform)),
        "<td>%s</td>" % _verdict_cell(s),
        '<td class="method">%s</td>' % _method_cell(s),
        '<td class="num">%s</td>' % _measure_cell(s["throughput"]["c1"], "tok/s", s["gain_c1"]),
        '<td class="num">%s</td>' % _measure_cell(s["tpot_ms"]["c1"], "ms", s["tpot_reduction_c1"], reduction=True),
        '<td class="num">%s</td>' % _measure_cell(s["throughput"]["c8"], "tok/s", s["gain_c8"]),
        '<td class="num">%s</td>' % _acceptance_cell(s),
        '<td class="num">%s</td>' % _trial_cell(s),
        '<td class="num">%s</td>' % _noise_cell(s),
    ]
    return '<tr class="host" id="host-%s">%s</tr>\n<tr class="detail"><td></td><td colspan="%d">%s</td></tr>\n' % (
        _e(re.sub(r"[^A-Za-z0-9_.-]", "_", s["host"])),
        "".join(cells),
        columns - 1,
        "".join(details),
    )


def _groups_table(group_rows):
    head = "<tr><th>Devices</th><th>Model and speculator</th><th>k</th><th>Where k comes from</th><th>Hosts</th><th>Canary sweep at c=1</th></tr>"
    rows = []
    for g in group_rows:
        sweep = "&ndash;"
        if g["tuning"]:
            cells = []
            for c in g["tuning"]["candidates"]:
                mark = "<b>%s</b>" if c["k"] == g["tuning"]["k"] else "%s"
                cells.append(
                    mark % ("k=%d %s" % (c["k"], _e(_pct(c["estimate"]))))
                    + (" " + _ci_html(dict(c, confidence=g["tuning"]["confidence"])) if c["ci"] and None not in c["ci"] else "")
                )
            if g["tuning"]["pruned"]:
                cells.append('<span class="small">pruned k=%s</span>' % _e(",".join(str(k) for k in g["tuning"]["pruned"])))
            sweep = "on <code>%s</code>: %s" % (_e(g["canary"]), "<br>".join(cells))
        rows.append(
            '<tr><td>%s %s</td><td>%s<br><span class="small">%s</span></td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>'
            % (
                _e(g["family"]),
                _e(g["variant"]),
                _e(g["model"]),
                _e(g["speculator"] or ""),
                _e(",".join(str(k) for k in g["k"])),
                _e("; ".join(g["sources"]) or "?"),
                ", ".join("<code>%s</code>" % _e(h) for h in g["hosts"]),
                sweep,
            )
        )
    return '<table class="hosts">%s%s</table>' % (head, "".join(rows))


def _host_table(summaries):
    high = _common_high([{"verdict": {"thresholds": {"high_concurrency": s["high_concurrency"]}}} for s in summaries])
    heads = (
        "Host",
        "Verdict",
        "Method",
        "Throughput c=1<br><small>tok/s baseline &rarr; speculative; gain [interval] %</small>",
        "Median TPOT c=1<br><small>ms baseline &rarr; speculative; reduction [interval] %</small>",
        "Throughput c=%d<br><small>tok/s baseline &rarr; speculative; gain [interval] %%</small>" % high,
        "Acceptance<br><small>length, rate</small>",
        "Trial",
        "Noise<br><small>residual SD</small>",
    )
    head = "<tr>%s</tr>" % "".join("<th>%s</th>" % h for h in heads)
    body = []
    for family, hosts in _family_order(summaries):
        body.append('<tr class="family"><td colspan="%d">%s &#183; %s</td></tr>\n' % (len(heads), _e(family), _e(_family_counts(hosts))))
        body.extend(_host_rows(s, len(heads)) for s in hosts)
    return '<div class="wide"><table class="hosts">\n<thead>%s</thead>\n<tbody>\n%s</tbody>\n</table></div>' % (head, "".join(body))


def _stack(n, total):
    if not total:
        return ""
    cells = "".join(
        '<i class="%s" style="width:%.1f%%" title="%s %d"></i>' % (k, 100.0 * n.get(k, 0) / total, k, n.get(k, 0))
        for k in ("keep", "revert", "skip", "missing")
        if n.get(k)
    )
    return '<div class="stack">%s</div>' % cells


def _history(index, current_id, location):
    error = index.get("error") if isinstance(index, dict) else None  # set by update_index for this run only
    index = load_index(index)
    error = index.get("error") or error
    runs = list(reversed(index["runs"]))
    if current_id and all(r["id"] != current_id for r in runs):
        runs.insert(0, {"id": current_id})
    out = []
    if error:
        out.append('<p class="note down">%s</p>' % _e(error))
    if not runs:
        out.append('<p class="empty">No runs recorded yet.</p>')
        return "\n".join(out)
    prefix = "../../" if location == "run" else ""
    out.append(
        '<div class="wide"><table>\n<thead><tr><th>Run (UTC)</th><th>Group</th><th>Hosts</th><th>keep</th><th>revert</th><th>skip</th>'
        "<th>no result</th><th>Outcomes</th><th>Requests</th><th>Wall time</th><th>Files</th></tr></thead>\n<tbody>"
    )
    for r in runs:
        n = r.get("counts") or {}
        n = dict((k, _int(v) or 0) for k, v in n.items() if isinstance(k, str))
        total = sum(n.get(k, 0) for k in ("keep", "revert", "skip", "missing"))
        rid = r["id"]
        current = rid == current_id
        links = "&ndash;"
        if _RUN_ID.match(rid):
            links = '<a href="%sruns/%s/report.html">report</a> &#183; <a href="%sruns/%s/fleet.json">json</a>' % (prefix, _e(rid), prefix, _e(rid))
        when = r.get("started_utc") or r.get("finished_utc") or rid
        out.append(
            '<tr%s><td>%s%s%s</td><td>%s</td><td class="num">%s</td><td class="num">%d</td><td class="num">%d</td><td class="num">%d</td>'
            '<td class="num">%d</td><td>%s</td><td class="num">%s</td><td class="num">%s</td><td>%s</td></tr>'
            % (
                ' class="current"' if current else "",
                _e(when),
                " <small>(this run)</small>" if current else "",
                (" <small>(%s)</small>" % _e(rid)) if "-" in rid else "",
                _e(r.get("target_group") or ""),
                _e(r.get("hosts", "")),
                n.get("keep", 0),
                n.get("revert", 0),
                n.get("skip", 0),
                n.get("missing", 0),
                _stack(n, total),
                _e(r.get("requests_spent", "")),
                "&ndash;" if _num(r.get("wall_s")) is None else _clock(_num(r.get("wall_s"))),
                links,
            )
        )
    out.append("</tbody>\n</table></div>")
    return "\n".join(out)


def _card(value, label, cls=""):
    return '<div class="card %s"><b>%s</b><span>%s</span></div>' % (cls, value, label)


def html(doc, index=None, location="latest"):
    """The self-contained HTML page of a run document (as ``report`` returns it; a document with only
    ``hosts`` and ``timing`` works too). ``index`` lists the runs for the history section; ``location`` is
    where the page is written: ``latest`` (the report directory) or ``run`` (``runs/<id>/``), for the links."""
    if location not in ("latest", "run"):
        raise ValueError("location must be 'latest' or 'run', got %r" % (location,))
    results = [r for r in doc.get("hosts") or [] if isinstance(r, dict)]
    summaries = [host_summary(r) for r in results]
    missing = sorted(_text(h) for h in doc.get("missing") or [])
    run = doc.get("run") or {}
    n = counts(results, missing)
    timing_ = doc.get("timing") or timing(results, started=run.get("started"), now=run.get("finished"))
    title = "Speculative decoding fleet report"
    when = run.get("started_utc") or run.get("finished_utc")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>%s%s</title>" % (title, (" &#8211; " + _e(when)) if when else ""),
        "<style>%s</style></head>" % _CSS,
        "<body><main>",
        "<h1>%s</h1>" % title,
    ]
    meta = []
    if run.get("id"):
        meta.append("run %s" % _e(run["id"]))
    if run.get("started_utc"):
        meta.append("started %s" % _e(run["started_utc"]))
    if run.get("finished_utc"):
        meta.append("report written %s" % _e(run["finished_utc"]))
    if run.get("target_group"):
        meta.append("group %s" % _e(run["target_group"]))
    if meta:
        parts.append('<p class="meta">%s</p>' % " &#183; ".join(meta))
    wall = _num(timing_.get("wall_s"))
    requests = sum(s["requests_spent"] or 0 for s in summaries)
    parts.append(
        '<div class="cards">%s%s%s%s%s%s</div>'
        % (
            _card(n["keep"], "kept speculation", "keep"),
            _card(n["revert"], "reverted", "revert"),
            _card(n["skip"], "skipped", "skip"),
            _card(n["missing"], "no result", "missing"),
            _card(requests, "benchmark requests"),
            _card("&ndash;" if wall is None else _clock(wall), "wall time"),
        )
    )
    others = sorted(k for k in n if k not in (*OUTCOMES, "missing"))
    if others:
        parts.append('<p class="note">Other outcomes: %s</p>' % _e(", ".join("%s %d" % (k, n[k]) for k in others)))

    parts.append('<h2 id="gain">Throughput gain at c=1</h2>')
    if summaries:
        confidences = sorted({_trim(100.0 * s["gain_c1"]["confidence"]) for s in summaries if s["gain_c1"] and s["gain_c1"]["confidence"]})
        parts.append(
            '<p class="note">Bar: the drift-corrected change of output throughput at concurrency 1 with speculation, '
            "from the interleaved benchmark blocks. Whisker: its confidence interval at the level of the look that decided "
            "(%s&#8239;%%, the overall 95&#8239;%% spent over the looks). A host keeps speculation when the whole interval lies "
            "right of the dashed keep threshold and its TPOT and c=8 checks pass too; an interval entirely left of it reverts. "
            "Colour: the outcome%s.</p>"
            % (" / ".join(confidences) or "&ndash;", "; * decided in an earlier run" if any(s["reused"] for s in summaries) else "")
        )
        parts.append('<div class="chart">%s</div>' % _gain_chart(summaries))
        parts.append(
            '<div class="legend"><span><i style="background:%s;border:1px solid %s"></i>keep</span>'
            '<span><i style="background:%s;border:1px solid %s"></i>revert</span><span><i style="background:%s"></i>skip</span>'
            '<span><svg width="22" height="10" aria-hidden="true"><line x1="2" y1="5" x2="20" y2="5" stroke="#1a7f37" '
            'stroke-width="1.5" stroke-dasharray="5 3"/></svg> keep threshold</span>'
            '<span><svg width="22" height="10" aria-hidden="true"><path d="M3 5H19M3 1V9M19 1V9" stroke="#57606a" stroke-width="1.5" '
            'fill="none"/></svg> confidence interval</span></div>' % (_LIGHT["keep"], _COLOURS["keep"], _LIGHT["revert"], _COLOURS["revert"], _COLOURS["skip"])
        )
    else:
        parts.append('<p class="empty">No host produced a result in this run.</p>')

    parts.append('<h2 id="hosts">Hosts</h2>')
    if summaries:
        parts.append(
            '<p class="note">Throughput: mean of the benchmark blocks of each arm. Gains and the TPOT reduction: drift-corrected '
            "estimates with their intervals (green: shown above the threshold, red: shown below it). Acceptance: tokens per "
            "target step in the speculative blocks (1 + accepted/drafts, at most k + 1) and the share of drafted tokens "
            "accepted. Noise: block-to-block variation left after removing the drift.</p>"
        )
        parts.append(_host_table(summaries))
    if missing:
        parts.append(
            '<p class="note"><b>No result</b> (unreachable, failed, or stopped by the rollout): %s</p>' % ", ".join("<code>%s</code>" % _e(h) for h in missing)
        )

    group_rows = groups(summaries)
    if group_rows:
        parts.append('<h2 id="groups">num_speculative_tokens per group</h2>')
        parts.append(
            '<p class="note">A group is the devices of one family and variant serving the same target model with the same '
            "speculator. A canary of the group sweeps the candidates at c=1 (gain over the baseline with its interval; "
            "candidates the measured per-position acceptance rules out are pruned before they are measured) and the rest "
            "of the group runs with its choice; a per-host override wins.</p>"
        )
        parts.append(_groups_table(group_rows))

    parts.append('<h2 id="timing">Where the time went</h2>')
    parts.append("<p>%s</p>" % _e(timing_.get("text", "")))
    share = _num(timing_.get("waiting_share"))
    parts.append(
        '<div class="cards">%s%s%s%s</div>'
        % (
            _card("&ndash;" if wall is None else _clock(wall), "wall time"),
            _card(
                "%s%s" % (_clock(_num(timing_.get("waiting_seconds")) or 0), "" if share is None else " <small>(%.0f&#8239;%%)</small>" % (100 * share)),
                "waiting on devices",
            ),
            _card(_clock(_num(timing_.get("restart_seconds")) or 0), "vLLM restarts"),
            _card(_clock(_num(timing_.get("benchmark_seconds")) or 0), "benchmarks"),
        )
    )
    timeline = _timeline(doc, sorted(summaries, key=lambda s: (s["started_at"] is None, s["started_at"] or 0, s["host"])))
    if timeline:
        parts.append(
            '<div class="legend"><span><i style="background:#afb8c1;height:3px"></i>host busy in the rollout</span>'
            '<span><i style="background:#bf8700"></i>vLLM restart (until ready)</span><span><i style="background:#0969da"></i>benchmark</span>'
            "<span>time since the start of the run (m:ss)</span></div>"
        )
        parts.append('<div class="chart">%s</div>' % timeline)

    parts.append('<h2 id="history">History</h2>')
    parts.append(_history(index, run.get("id"), location))
    parts.append(
        "<footer>Written by the jetson_llm.speculative collection. How to read this report: <code>docs/decisions.md</code>, "
        "section &#8220;Reading the fleet report&#8221;. The same data: <code>fleet.json</code> next to this page.</footer>"
    )
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"
