# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""Fleet reports from the per-host results of the speculative_decoding role (controller side).

The products, all pure functions of the per-host results recorded by the role:

- ``table``: a fixed-width console table, one host a line with its reason wrapped below;
- ``timing``: the wall time of the run and the part of it spent waiting on vLLM restarts and benchmarks;
- ``downtime``: every device's seconds not serving (its restart windows), in all and the longest;
- ``report``: the machine-readable document of one run (``fleet.json``), with a normalised per-host
  ``summary`` next to the raw results;
- the history of runs in ``index.json`` (``load_index``, ``update_index``).

The HTML page of a report is ``_report_html.html``: its view model is built from the same summaries and
rendered by a Jinja2 template with autoescaping.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import math
import re
import textwrap
import time

SCHEMA = 1
OUTCOMES = ("keep", "revert", "skip")
COLUMNS = ("host", "family", "method", "k", "c=1 tok/s B->S", "gain c=1 [CI]", "c=8 tok/s B->S", "gain c=8 [CI]", "req", "down s", "verdict")
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


def prompts_line(prompt_set):
    """Which prompts the trial's benchmark sent: the shipped set, or the user's file, its size and SHA-256."""
    if not isinstance(prompt_set, dict) or not prompt_set.get("name"):
        return None
    if prompt_set.get("source") == "file":
        return "prompts %s (%s, sha256 %s)" % (_text(prompt_set["name"]), _text(prompt_set.get("count")), _text(prompt_set.get("sha256"))[:12])
    return "shipped prompts"


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


def discarded_indices(verdict):
    """Indices of the blocks the verdict left out (``discarded``, each with its reason)."""
    out = set()
    for entry in (verdict or {}).get("discarded") or []:
        if isinstance(entry, dict) and _int(entry.get("index")) is not None:
            out.add(_int(entry.get("index")))
    return out


def sim_lag(blocks, discarded=()):
    """The simulator's timing over a host's benchmark blocks (only against the project's vLLM simulator):
    ``{"max_share", "out_of_spec", "discarded", "blocks"}``, or None when no block carries the
    simulator's lag. ``out_of_spec`` counts the blocks measured late that entered the verdict (skewed
    figures), ``discarded`` those measured late that the verdict left out and measured again."""
    shares = [_num(b.get("sim_lag_share")) for b in blocks or [] if isinstance(b, dict)]
    shares = [v for v in shares if v is not None]
    if not shares:
        return None
    late = [b for b in blocks if isinstance(b, dict) and b.get("sim_out_of_spec")]
    dropped = [b for b in late if _int(b.get("index")) in set(discarded)]
    return {
        "max_share": max(shares),
        "out_of_spec": len(late) - len(dropped),
        "discarded": len(dropped),
        "blocks": len(shares),
    }


def sim_lag_line(lag):
    """One report line for a host's simulator lag, or None."""
    if not lag:
        return None
    text = "simulator lag: at most %.1f%% of modelled time over %d blocks" % (100.0 * lag["max_share"], lag["blocks"])
    if lag.get("discarded"):
        text += "; %d blocks measured late were discarded and measured again" % lag["discarded"]
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


def _cause(result):
    """Why the decision is what it is, as recorded (``{"code", "text"}``), or None for an outcome
    without one (skip, failed, busy) and for records written before causes were recorded."""
    cause = result.get("cause")
    if not isinstance(cause, dict) or not _text(cause.get("code")):
        return None
    return {"code": _text(cause.get("code")), "text": _text(cause.get("text")) or _text(cause.get("code"))}


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
    every_block = _blocks(result)
    dropped = discarded_indices(verdict)
    # the figures come from the blocks the verdict used; the simulator's lag from every block measured
    blocks = [b for b in every_block if _int(b.get("index")) not in dropped]
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
    windows = _restart_windows(result)
    bench_warnings = []
    for block in every_block:
        bench_warnings.extend(block.get("warnings") or [])
    return {
        "host": _text(result.get("host")) or "?",
        "family": _text(result.get("family")) or "unknown",
        "variant": _text(result.get("variant")),
        "l4t": _text(result.get("l4t")),
        "model": _text(result.get("model")),
        "vllm_version": _text(result.get("vllm_version")),
        "prompts": prompts_line(result.get("prompt_set")),
        "outcome": outcome,
        "label": _text(result.get("label")) or outcome,
        "cause": _cause(result),
        "reason": _text(result.get("reason")),
        "reused": bool(result.get("reused")),
        "reconciled": _strings(result.get("reconciled")),
        # the out-of-memory ladder: each speculative configuration that did not start, and why
        "ladder": _strings(result.get("ladder")),
        # the output proof: the last comparison of a speculative server's answers with the baseline's
        "output_proof": _output_proof(result.get("output_proof")),
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
        "discarded_blocks": len(every_block) - len(blocks),
        "sim_lag": sim_lag(every_block, dropped),
        "noise": _noise(verdict.get("noise")),
        "warnings": _strings(verdict.get("warnings")),
        "plan_warnings": _strings(fitted.get("warnings") if fitted else plan.get("warnings")),
        "benchmark_warnings": _strings(bench_warnings),
        "elapsed_s": _num(result.get("elapsed_s")),
        # seconds the device did not serve in this run: its restart windows (stop or start until ready), overlaps once
        "restarts": len(windows),
        "downtime_s": round(union_seconds(windows), 1),
        "started_at": _num(result.get("started_at")),
        "finished_at": _num(result.get("finished_at")),
    }


def _restart_windows(result):
    """The host's restart windows ``[start, end]`` (numbers), from the ``restart`` entries of its intervals."""
    out = []
    for entry in result.get("intervals") or []:
        if isinstance(entry, (list, tuple)) and len(entry) == 3 and entry[0] == "restart":
            start, end = _num(entry[1]), _num(entry[2])
            if start is not None and end is not None and end >= start:
                out.append([start, end])
    return out


def _output_proof(proof):
    """``{"agree", "summary"}`` of the recorded output proof, or None (no probe was made, or an older record)."""
    if not isinstance(proof, dict) or not _text(proof.get("summary")):
        return None
    agree = proof.get("agree")
    if isinstance(agree, str):
        agree = agree.strip().lower() == "true"
    return {"agree": bool(agree), "summary": _text(proof.get("summary"))}


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
    label = s["label"] + (" (decided earlier)" if s["reused"] else "") + (" (reconciled)" if s["reconciled"] else "")
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
        "%.0f" % s["downtime_s"],
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
    numeric = {3, 8, 9}

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
        if s["reconciled"]:
            lines.extend(
                textwrap.wrap(
                    "reconciled: " + "; ".join(s["reconciled"]), width=wrap, initial_indent=indent, subsequent_indent=indent, max_lines=2, placeholder=" ..."
                )
            )
        if s["ladder"]:
            lines.extend(
                textwrap.wrap(
                    "did not start (stepped down): " + "; ".join(s["ladder"]),
                    width=wrap,
                    initial_indent=indent,
                    subsequent_indent=indent,
                    max_lines=2,
                    placeholder=" ...",
                )
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
    lines.append(downtime(summaries)["text"])
    for host in sorted(_text(h) for h in missing or []):
        lines.append("%s: no result (unreachable, failed, or stopped by the rollout)" % host)
    lines.append(
        "gain: drift-corrected change of output throughput, speculative vs baseline, [confidence interval] in %; "
        "tok/s: mean of the benchmark blocks, baseline -> speculative; req: requests the trial spent; "
        "down s: seconds the device did not serve (its vLLM restarts, each until ready)"
    )
    return lines


def downtime(summaries):
    """What the run cost in serving time: every device's seconds not serving (its restart windows), and the longest."""
    down = [s for s in summaries if s["restarts"]]
    out = {
        "total_s": round(sum(s["downtime_s"] for s in down), 1),
        "hosts": len(down),
        "restarts": sum(s["restarts"] for s in down),
        "longest": None,
        "text": "downtime: none (no device restarted vLLM)",
    }
    if down:
        worst = max(down, key=lambda s: (s["downtime_s"], s["host"]))
        out["longest"] = {"host": worst["host"], "downtime_s": worst["downtime_s"], "restarts": worst["restarts"]}
        out["text"] = "downtime: %.0f s in all, on %d of %d hosts (%d restarts); longest: %s, %.0f s in %d restart%s" % (
            out["total_s"],
            len(down),
            len(summaries),
            out["restarts"],
            worst["host"],
            worst["downtime_s"],
            worst["restarts"],
            "" if worst["restarts"] == 1 else "s",
        )
    return out


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
    summaries = [host_summary(r) for r in results]
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
        "summary": summaries,
        "groups": groups(summaries),
        "missing": missing,
        "timing": timing(results, started=started, now=now),
        "downtime": downtime(summaries),
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


def _short(text, n):
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _trim(value):
    return ("%.2f" % value).rstrip("0").rstrip(".")


def _clock(seconds):
    seconds = round(seconds)
    return "%d:%02d" % (seconds // 60, seconds % 60) if seconds < 3600 else "%d:%02d:%02d" % (seconds // 3600, seconds % 3600 // 60, seconds % 60)
