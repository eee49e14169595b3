# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""The HTML page of a fleet report (controller side).

This module turns a run document (``_report.report``) into the view model of the page: texts, numbers
already formatted, and the geometry of the two SVG charts. The markup, the style sheet and the colours live
in the Jinja2 template ``templates/fleet_report.html.j2`` next to this file, rendered with autoescaping on:
every value reaches the page escaped (quotes included) and without control characters.
"""

import math
import os
import re

from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._report import (
    _CONTROL,
    _RUN_ID,
    OUTCOMES,
    _clock,
    _common_high,
    _gain_text,
    _int,
    _num,
    _pct,
    _short,
    _text,
    _trim,
    counts,
    downtime,
    groups,
    host_summary,
    load_index,
    sim_lag_line,
    timing,
)
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
TEMPLATE = "fleet_report.html.j2"

DASH = "\u2013"  # en dash: no value
MINUS = "\u2212"
NNBSP = "\u202f"  # narrow no-break space before a percent sign


def _clean(value):
    """Every expression of the template passes here before it is escaped: ``None`` is empty and control
    characters become spaces (markup built by the template itself is left alone)."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return _CONTROL.sub(" ", value if isinstance(value, str) else str(value))


_ENV = {}


def environment():
    """The Jinja2 environment of the page (autoescape on, ``_clean`` on every expression), made once."""
    if "env" not in _ENV:
        _ENV["env"] = Environment(
            loader=FileSystemLoader(TEMPLATES),
            autoescape=True,
            finalize=_clean,
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
    return _ENV["env"]


def _cls(outcome):
    return outcome if outcome in OUTCOMES else "other"


def _signed(text):
    return text.replace("-", MINUS)


def _pct_text(value, digits=1):
    return DASH if value is None else _signed("%+.*f%s%%" % (digits, 100.0 * value, NNBSP))


def _nice_step(span, target=6):
    raw = span / float(target)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * magnitude:
            return m * magnitude
    return 10 * magnitude


def _family_order(summaries):
    """Summaries grouped by family (families and hosts sorted by name): [(family, [summary, ...]), ...]."""
    by_family = {}
    for s in summaries:
        by_family.setdefault(s["family"], []).append(s)
    return [(f, sorted(by_family[f], key=lambda s: s["host"])) for f in sorted(by_family)]


def _family_counts(hosts):
    n = counts(hosts)
    return ", ".join("%s %d" % (k, n[k]) for k in sorted(n) if k != "missing" and n[k])


def _chart_label(s):
    return _short(s["label"] + (" *" if s["reused"] else ""), 40)


def _f1(value):
    return "%.1f" % value


# ---------------------------------------------------------------------------------------------------------------------
# charts


def gain_chart(summaries):
    """Horizontal chart: per host the c=1 gain (bar) with its interval (whisker), grouped by family, with
    the keep threshold dashed and zero solid."""
    families = _family_order(summaries)
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

    heads, host_rows, y = [], [], top
    for family, hosts in families:
        heads.append({"y": y, "text_y": y + 17, "family": family, "hosts": len(hosts), "counts": _family_counts(hosts)})
        y += head_h
        for s in hosts:
            host_rows.append((y, s))
            y += row_h
    height = y + bottom
    chart = {"width": width, "height": height, "row_h": row_h, "head_h": head_h, "families": heads}
    chart["grid"] = {"y1": top - 6, "y2": height - bottom, "label_top": top - 10, "label_bottom": height - bottom + 14}
    ticks, tick = [], lo
    while tick <= hi + 1e-9:
        ticks.append({"x": _f1(x(tick)), "label": ("%+.0f%%" % (100 * tick)).replace("+0%", "0%").replace("-", MINUS)})
        tick += step
    chart["ticks"] = ticks
    chart["axis"] = {"x": _f1(left + plot / 2.0), "y": height - 6}
    chart["zero"] = {"x": _f1(x(0)), "y1": top - 4, "y2": height - bottom}
    # keep threshold: one line when all hosts share it, else a segment on each host's row
    thresholds = sorted({round(s["min_gain"], 9) for s in summaries if s["min_gain"] is not None})
    chart["threshold"] = None
    if len(thresholds) == 1:
        tx = x(thresholds[0])
        chart["threshold"] = {
            "x": _f1(tx),
            "y1": top - 4,
            "y2": height - bottom,
            "text_x": _f1(tx + 4),
            "text_y": top - 24,
            "label": _signed("%+.0f%%" % (100 * thresholds[0])),
        }
    chart["thresholds_differ"] = {"x": left, "y": top - 24} if len(thresholds) > 1 else None
    rows = []
    for y0, s in host_rows:
        yc = y0 + row_h / 2.0
        g = s["gain_c1"]
        title = "%s (%s %s): %s" % (s["host"], s["family"], s["variant"], s["label"])
        if g:
            title += "; gain at c=1 %s" % _pct(g["estimate"])
            if g["ci"]:
                title += " (%s%% CI %s to %s)" % (_trim(100.0 * (g["confidence"] or 0)), _pct(g["ci"][0]), _pct(g["ci"][1]))
        host = {
            "host": s["host"],
            "cls": _cls(s["outcome"]),
            "title": title,
            "name": _short(s["host"], name_len),
            "name_x": left - 10,
            "text_y": _f1(yc + 4),
            "numbers_x": left + plot + 12,
            "numbers": _gain_text(g) if g else "",
            "label": _chart_label(s),
            "threshold": None,
            "bar": None,
            "why": None,
        }
        if len(thresholds) > 1 and s["min_gain"] is not None:
            tx = _f1(x(s["min_gain"]))
            host["threshold"] = {"x": tx, "y1": y0 + 1, "y2": y0 + row_h - 1, "label": _pct(s["min_gain"])}
        if g:
            x0, x1 = x(0), x(g["estimate"])
            host["bar"] = {"x": _f1(min(x0, x1)), "y": _f1(yc - 6), "width": _f1(max(abs(x1 - x0), 1.0)), "cx": _f1(x1), "cy": _f1(yc)}
            host["ci"] = None
            if g["ci"]:
                a, b = g["ci"]
                xa, xb = x(a), x(b)
                path = "M%.1f %.1fH%.1f" % (xa, yc, xb)
                path += ("M%.1f %.1fV%.1f" % (xa, yc - 5, yc + 5)) if a >= lo else ("M%.1f %.1fl5 -4M%.1f %.1fl5 4" % (xa, yc, xa, yc))
                path += ("M%.1f %.1fV%.1f" % (xb, yc - 5, yc + 5)) if b <= hi else ("M%.1f %.1fl-5 -4M%.1f %.1fl-5 4" % (xb, yc, xb, yc))
                host["ci"] = {"lo": "%.4f" % a, "hi": "%.4f" % b, "d": path}
        else:
            host["why"] = {"x": _f1(x(0) + 6), "text": "no trial (skipped)" if s["outcome"] == "skip" else "no interval"}
        rows.append(host)
    chart["hosts"] = rows
    return chart


def timeline(doc, summaries):
    """Timeline: per host its span (thin line), vLLM restarts and benchmarks; ``None`` without times."""
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
        return None
    name_len = min(30, max([len(s["host"]) for s in summaries] + [8]))
    left, plot, right = 24 + int(name_len * 7.2), 900, 40
    width, row_h, top = left + plot + right, 18, 26
    height = top + row_h * len(spans) + 8

    def x(t):
        return left + (min(max(t, t0), t1) - t0) / (t1 - t0) * plot

    step = _nice_step(t1 - t0, 8)
    for m in (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200):
        if step <= m:
            step = m
            break
    ticks, tick = [], 0.0
    while t0 + tick <= t1 + 1e-6:
        ticks.append({"x": _f1(x(t0 + tick)), "label": _clock(tick)})
        tick += step
    rows = []
    for n, (s, ivs) in enumerate(spans):
        yc = top + n * row_h + row_h / 2.0
        row = {"host": s["host"], "name": _short(s["host"], name_len), "name_x": left - 10, "text_y": _f1(yc + 4), "y": _f1(yc), "span": None}
        if s["started_at"] is not None and s["finished_at"] is not None:
            row["span"] = {"x1": _f1(x(s["started_at"])), "x2": _f1(x(s["finished_at"])), "time": _clock(s["finished_at"] - s["started_at"])}
        row["intervals"] = [
            {"kind": kind, "x": _f1(x(a)), "y": _f1(yc - 5), "width": _f1(max(x(b) - x(a), 1.0)), "seconds": "%.1f" % (b - a)} for kind, a, b in ivs
        ]
        rows.append(row)
    return {"width": width, "height": height, "grid_y1": top - 4, "grid_y2": height - 8, "label_y": top - 8, "ticks": ticks, "hosts": rows}


# ---------------------------------------------------------------------------------------------------------------------
# tables


def _pair(pair, spec="%.1f"):
    if pair is None or (pair["baseline"] is None and pair["speculative"] is None):
        return None
    return dict((arm, "-" if pair[arm] is None else spec % pair[arm]) for arm in ("baseline", "speculative"))


def _interval(entry, reduction=False):
    """``[+75.7, +122.4]`` (percent) and its level, or ``None``."""
    if not entry or not entry["ci"]:
        return None
    lo, hi = entry["ci"]
    spec = "%.1f" if reduction else "%+.1f"
    return {
        "level": "" if entry["confidence"] is None else "%s %% confidence interval" % _trim(100.0 * entry["confidence"]),
        "lo": _signed(spec % (100.0 * lo)),
        "hi": _signed(spec % (100.0 * hi)),
    }


def _effect(entry, reduction=False):
    """The estimate (``up`` when shown above its threshold, ``down`` when shown below) and its interval."""
    if not entry:
        return None
    if reduction:
        text = "%.1f%s%% %s" % (abs(100.0 * entry["estimate"]), NNBSP, "lower" if entry["estimate"] >= 0 else "higher")
    else:
        text = _pct_text(entry["estimate"])
    return {"cls": {"above": "up", "below": "down"}.get(entry["status"]), "text": text, "ci": _interval(entry, reduction)}


def _measure(pair, unit, entry, reduction=False):
    return {"unit": unit, "pair": _pair(pair), "effect": _effect(entry, reduction)}


def _per_level(s, key):
    out = []
    for level, name in (("c1", "c=1"), ("c8", "c=%s" % (s["high_concurrency"] or 8))):
        value = s[key].get(level)
        if value:
            out.append((name, value))
    return out


def _noise(s):
    out = []
    for name, n in _per_level(s, "noise"):
        if n["residual_sd"] is None:
            continue
        drift = _pct_text(n["drift"]) if n["drift_significant"] and n["drift"] is not None else None
        out.append({"name": name, "sd": "%.1f%s%%" % (100.0 * n["residual_sd"], NNBSP), "drift": drift})
    return out


def _acceptance(s):
    return [
        {"name": name, "length": "%.2f" % a["length"], "rate": None if a["rate_percent"] is None else "%.0f%s%%" % (a["rate_percent"], NNBSP)}
        for name, a in _per_level(s, "acceptance")
    ]


def _verdict(s):
    cause = s.get("cause")
    badge, detail = (s["outcome"], cause["text"]) if cause else (s["label"], "")
    return {
        "cls": _cls(s["outcome"]),
        "badge": badge,
        "detail": detail,
        "reused": s["reused"],
        "reconciled": s["reconciled"],
        "ladder": s.get("ladder") or [],
        "output_proof": s.get("output_proof"),
    }


def _method(s):
    if not s["method"]:
        return None
    gmu = s["gpu_memory_utilization"]
    memory = None
    if gmu["baseline"] is not None and gmu["speculative"] is not None:
        memory = {"baseline": "%.2f" % gmu["baseline"], "speculative": "%.2f" % gmu["speculative"]}
    return {"method": s["method"], "k": s["k"], "k_source": s.get("k_source"), "speculator": s["speculator"], "memory": memory}


def _trial(s):
    out = {"rounds": None, "requests": s["requests_spent"], "elapsed": None if s["elapsed_s"] is None else _clock(s["elapsed_s"])}
    # the seconds the device did not serve: its restarts in this run, each until ready
    out["downtime"] = "%.0f s in %d restart%s" % (s["downtime_s"], s["restarts"], "" if s["restarts"] == 1 else "s") if s["restarts"] else "0 s"
    if s["rounds"] is not None:
        restarts = "" if s["arm_switches"] is None else ", %d restarts" % s["arm_switches"]
        out["rounds"] = "%d round%s%s" % (s["rounds"], "" if s["rounds"] == 1 else "s", restarts)
    return out


def _host(s):
    versions = [p for p in ("L4T %s" % s["l4t"] if s["l4t"] else "", "vLLM %s" % s["vllm_version"] if s["vllm_version"] else "", s.get("prompts") or "") if p]
    return {
        "host": s["host"],
        "anchor": re.sub(r"[^A-Za-z0-9_.-]", "_", s["host"]),
        "platform": ("%s %s" % (s["family"], s["variant"])).strip(),
        "versions": versions,
        "model": s["model"],
        "verdict": _verdict(s),
        "method": _method(s),
        "throughput_c1": _measure(s["throughput"]["c1"], "tok/s", s["gain_c1"]),
        "tpot_c1": _measure(s["tpot_ms"]["c1"], "ms", s["tpot_reduction_c1"], reduction=True),
        "throughput_c8": _measure(s["throughput"]["c8"], "tok/s", s["gain_c8"]),
        "acceptance": _acceptance(s),
        "trial": _trial(s),
        "noise": _noise(s),
        "reason": s["reason"],
        "warnings": s["warnings"],
        "benchmark_warnings": s["benchmark_warnings"],
        "plan_warnings": s["plan_warnings"],
        "sim_lag": sim_lag_line(s.get("sim_lag")),
        "sim_out_of_spec": bool((s.get("sim_lag") or {}).get("out_of_spec")),
    }


def host_table(summaries):
    high = _common_high([{"verdict": {"thresholds": {"high_concurrency": s["high_concurrency"]}}} for s in summaries])
    families = [{"family": family, "counts": _family_counts(hosts), "hosts": [_host(s) for s in hosts]} for family, hosts in _family_order(summaries)]
    return {"high": high, "families": families}


def _sweep(g):
    if not g["tuning"]:
        return None
    cells = []
    for c in g["tuning"]["candidates"]:
        ci = _interval(dict(c, confidence=g["tuning"]["confidence"])) if c["ci"] and None not in c["ci"] else None
        cells.append({"k": c["k"], "estimate": _pct(c["estimate"]), "chosen": c["k"] == g["tuning"]["k"], "ci": ci})
    pruned = ",".join(str(k) for k in g["tuning"]["pruned"]) if g["tuning"]["pruned"] else None
    return {"canary": g["canary"], "candidates": cells, "pruned": pruned}


def group_table(group_rows):
    return [
        {
            "devices": "%s %s" % (g["family"], g["variant"]),
            "model": g["model"],
            "speculator": g["speculator"] or "",
            "k": ",".join(str(k) for k in g["k"]),
            "sources": "; ".join(g["sources"]) or "?",
            "hosts": g["hosts"],
            "sweep": _sweep(g),
        }
        for g in group_rows
    ]


# the columns of the history and the segments of its bars: every host of a run is in exactly one
_HISTORY_COLUMNS = ("keep", "revert", "skip", "other", "missing")


def _history_counts(n):
    """Hosts per column of the history: ``other`` adds up every outcome besides keep, revert and skip (refused,
    failed, busy, ...), so that the columns add up to the run's hosts."""
    out = dict((k, n.get(k, 0)) for k in ("keep", "revert", "skip", "missing"))
    out["other"] = sum(v for k, v in n.items() if k not in out)
    return out


def _stack(n, total):
    if not total:
        return []
    return [{"cls": k, "width": "%.1f" % (100.0 * n.get(k, 0) / total), "count": n.get(k, 0)} for k in _HISTORY_COLUMNS if n.get(k)]


def history(index, current_id, location):
    error = index.get("error") if isinstance(index, dict) else None  # set by update_index for this run only
    index = load_index(index)
    error = index.get("error") or error
    runs = list(reversed(index["runs"]))
    if current_id and all(r["id"] != current_id for r in runs):
        runs.insert(0, {"id": current_id})
    prefix = "../../" if location == "run" else ""
    rows = []
    for r in runs:
        n = r.get("counts") or {}
        n = _history_counts(dict((k, _int(v) or 0) for k, v in n.items() if isinstance(k, str)))
        total = sum(n.values())
        rid = r["id"]
        wall = _num(r.get("wall_s"))
        rows.append(
            {
                "id": rid,
                "current": rid == current_id,
                "when": r.get("started_utc") or r.get("finished_utc") or rid,
                "suffix": "-" in rid,
                "group": r.get("target_group") or "",
                "hosts": r.get("hosts", ""),
                "counts": [n[k] for k in _HISTORY_COLUMNS],
                "stack": _stack(n, total),
                "requests": r.get("requests_spent", ""),
                "wall": DASH if wall is None else _clock(wall),
                "link": (prefix + "runs/" + rid + "/") if _RUN_ID.match(rid) else None,
            }
        )
    return {"error": error, "runs": rows}


# ---------------------------------------------------------------------------------------------------------------------
# the page


def page(doc, index=None, location="latest"):
    """The view model of the page (what the template shows), from a run document."""
    if location not in ("latest", "run"):
        raise ValueError("location must be 'latest' or 'run', got %r" % (location,))
    results = [r for r in doc.get("hosts") or [] if isinstance(r, dict)]
    summaries = [host_summary(r) for r in results]
    missing = sorted(_text(h) for h in doc.get("missing") or [])
    run = doc.get("run") or {}
    n = counts(results, missing)
    timing_ = doc.get("timing") or timing(results, started=run.get("started"), now=run.get("finished"))
    wall = _num(timing_.get("wall_s"))
    share = _num(timing_.get("waiting_share"))
    meta = [
        "%s %s" % (label, run[key])
        for key, label in (("id", "run"), ("started_utc", "started"), ("finished_utc", "report written"), ("target_group", "group"))
        if run.get(key)
    ]
    others = sorted(k for k in n if k not in (*OUTCOMES, "missing"))
    confidences = sorted({_trim(100.0 * s["gain_c1"]["confidence"]) for s in summaries if s["gain_c1"] and s["gain_c1"]["confidence"]})
    by_start = sorted(summaries, key=lambda s: (s["started_at"] is None, s["started_at"] or 0, s["host"]))
    return {
        "when": run.get("started_utc") or run.get("finished_utc"),
        "meta": meta,
        "counts": dict(_history_counts(n)),
        "others": ", ".join("%s %d" % (k, n[k]) for k in others),
        "requests": sum(s["requests_spent"] or 0 for s in summaries),
        "wall": DASH if wall is None else _clock(wall),
        "confidences": " / ".join(confidences) or DASH,
        "reused": any(s["reused"] for s in summaries),
        "gain_chart": gain_chart(summaries) if summaries else None,
        "hosts": host_table(summaries) if summaries else None,
        "missing": missing,
        "groups": group_table(groups(summaries)),
        "timing": {
            "text": timing_.get("text", ""),
            "waiting": _clock(_num(timing_.get("waiting_seconds")) or 0),
            "share": None if share is None else "%.0f%s%%" % (100 * share, NNBSP),
            "restarts": _clock(_num(timing_.get("restart_seconds")) or 0),
            "benchmarks": _clock(_num(timing_.get("benchmark_seconds")) or 0),
            # computed from the hosts, so that a report written before the downtime was counted shows it too
            "downtime": downtime(summaries)["text"],
        },
        "timeline": timeline(doc, by_start),
        "history": history(index, run.get("id"), location),
    }


def html(doc, index=None, location="latest"):
    """The self-contained HTML page of a run document (as ``_report.report`` returns it; a document with only
    ``hosts`` and ``timing`` works too). ``index`` lists the runs for the history section; ``location`` is
    where the page is written: ``latest`` (the report directory) or ``run`` (``runs/<id>/``), for the links."""
    return environment().get_template(TEMPLATE).render(page(doc, index=index, location=location))
