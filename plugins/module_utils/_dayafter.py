# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""Day-two helpers: re-check a kept speculative decision against a short live benchmark, and
format each device's decision and last acceptance in the Prometheus text exposition format
(version 0.0.4) for node_exporter's textfile collector. Standard library only."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

PREFIX = "jetson_llm_speculative_"
DECISIONS = ("keep", "revert", "skip", "failed")
_SPEC_LINE = re.compile(r"^(vllm:spec_decode_num_(?:drafts|draft_tokens|accepted_tokens))_total(?:\{[^}]*\})?\s+(\S+)")


class DayTwoError(ValueError):
    pass


def _median(values):
    values = sorted(values)
    n = len(values)
    if n == 0:
        return None
    mid = n // 2
    return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2.0


def _half_range(values):
    """Largest relative distance of a value from the median (0 for fewer than two values)."""
    med = _median(values)
    if not med or len(values) < 2:
        return 0.0
    return max(abs(v / med - 1.0) for v in values)


def parse_spec_counters(text):
    """Lifetime ``vllm:spec_decode_*_total`` counters from a ``GET /metrics`` body, summed over
    label sets (engines); None when the server exposes none (speculation off or stats disabled)."""
    found = {}
    for line in (text or "").splitlines():
        match = _SPEC_LINE.match(line)
        if match:
            key = match.group(1)[len("vllm:spec_decode_") :]
            try:
                found[key] = found.get(key, 0.0) + float(match.group(2))
            except ValueError:
                continue
    if not found:
        return None
    return found


def acceptance_of(runs):
    """Token-weighted acceptance rate (fraction) and length of benchmark runs or blocks."""
    drafted = accepted = drafts = 0.0
    for run in runs:
        if run.get("spec_decode_draft_tokens") and run.get("spec_decode_num_drafts"):
            drafted += float(run["spec_decode_draft_tokens"])
            accepted += float(run.get("spec_decode_accepted_tokens") or 0)
            drafts += float(run["spec_decode_num_drafts"])
    if drafted <= 0 or drafts <= 0:
        rates = [float(r["spec_decode_acceptance_rate"]) / 100.0 for r in runs if r.get("spec_decode_acceptance_rate") is not None]
        lengths = [float(r["spec_decode_acceptance_length"]) for r in runs if r.get("spec_decode_acceptance_length") is not None]
        if not rates:
            return None, None
        return sum(rates) / len(rates), (sum(lengths) / len(lengths) if lengths else None)
    return accepted / drafted, 1.0 + accepted / drafts


def recorded_acceptance(state):
    """Acceptance of the speculative arm at concurrency 1 in the recorded trial blocks."""
    blocks = [b for b in (state.get("blocks") or []) if b.get("arm") == "speculative" and int(b.get("concurrency", 0)) == 1]
    return acceptance_of(blocks)


def recheck(state, runs, min_acceptance=0.30, min_gain=0.0, noise_floor=0.03, metrics=None):
    """Compare a short live benchmark of a kept device with its recorded decision.

    ``runs``: the live benchmark runs at concurrency 1 (one per block). Returns a dict with
    ``action`` (``keep``, ``revert`` or ``leave``), ``reason`` and the figures it used.
    """
    state = state or {}
    decision = state.get("decision")
    out = {
        "action": "leave",
        "recorded_decision": decision or "none",
        "acceptance_rate": None,
        "acceptance_length": None,
        "lifetime_acceptance_rate": None,
        "recorded_acceptance_rate": None,
        "gain": None,
        "noise": None,
        "baseline_tok_s": None,
        "live_tok_s": None,
        "min_acceptance": float(min_acceptance),
        "min_gain": float(min_gain),
    }
    if not decision:
        out["reason"] = "no recorded decision on the device: nothing to verify"
        return out
    if decision != "keep":
        out["reason"] = "recorded decision is %s (%s): speculation is not serving, nothing to verify" % (decision, state.get("label") or decision)
        return out
    if not isinstance(runs, list) or not runs:
        raise DayTwoError("the live benchmark returned no runs")
    counters = parse_spec_counters(metrics) if metrics is not None else None
    if counters and counters.get("num_draft_tokens"):
        out["lifetime_acceptance_rate"] = counters.get("num_accepted_tokens", 0.0) / counters["num_draft_tokens"]
    rate, length = acceptance_of(runs)
    out["acceptance_rate"], out["acceptance_length"] = rate, length
    out["recorded_acceptance_rate"] = recorded_acceptance(state)[0]

    baseline = [
        float(b["output_throughput"])
        for b in (state.get("blocks") or [])
        if b.get("arm") == "baseline" and int(b.get("concurrency", 0)) == 1 and b.get("output_throughput")
    ]
    live = [float(r["output_throughput"]) for r in runs if r.get("output_throughput")]
    reasons = []
    if rate is None:
        if metrics is not None and counters is None:
            reasons.append("the live server exposes no vllm:spec_decode counters: it does not speculate")
        else:
            reasons.append("the short benchmark measured no speculative-decoding acceptance")
    elif rate < float(min_acceptance):
        reasons.append(
            "acceptance %.1f %% is under the floor %.1f %% (recorded %s)"
            % (
                rate * 100,
                float(min_acceptance) * 100,
                "%.1f %%" % (out["recorded_acceptance_rate"] * 100) if out["recorded_acceptance_rate"] is not None else "n/a",
            )
        )
    if baseline and live:
        base_med, live_med = _median(baseline), _median(live)
        gain = live_med / base_med - 1.0
        noise = max(float(noise_floor), _half_range(baseline) + _half_range(live))
        out.update(gain=gain, noise=noise, baseline_tok_s=base_med, live_tok_s=live_med)
        if gain + noise < float(min_gain):
            reasons.append(
                "gain %+.1f %% over the recorded baseline (%.1f vs %.1f tok/s) is below %+.1f %% even allowing %.1f %% noise"
                % (gain * 100, live_med, base_med, float(min_gain) * 100, noise * 100)
            )
    elif not baseline:
        out["reason_gain"] = "no recorded baseline blocks at concurrency 1: the gain was not compared"
    if reasons:
        out["action"] = "revert"
        out["reason"] = "; ".join(reasons)
    else:
        out["action"] = "keep"
        out["reason"] = "acceptance %s, gain %s over the recorded baseline: still worth keeping" % (
            "%.1f %%" % (rate * 100) if rate is not None else "n/a",
            "%+.1f %%" % (out["gain"] * 100) if out["gain"] is not None else "n/a",
        )
    return out


# --- Prometheus text exposition format ---------------------------------------------------------


def escape_label_value(value):
    """Label value escaping of the text format: backslash, double quote and line feed."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text):
    """HELP text escaping of the text format: backslash and line feed."""
    return str(text).replace("\\", "\\\\").replace("\n", "\\n")


_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def format_value(value):
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def format_metric_family(name, mtype, help_text, samples):
    """Lines of one metric family: HELP, TYPE, then one line per (labels dict, value)."""
    if not _NAME.match(name):
        raise DayTwoError("invalid metric name %r" % name)
    lines = ["# HELP %s %s" % (name, escape_help(help_text)), "# TYPE %s %s" % (name, mtype)]
    for labels, value in samples:
        for key in labels:
            if not _LABEL.match(key) or key.startswith("__"):
                raise DayTwoError("invalid label name %r" % key)
        body = ",".join('%s="%s"' % (k, escape_label_value(v)) for k, v in sorted(labels.items()))
        lines.append("%s%s %s" % (name, "{%s}" % body if body else "", format_value(value)))
    return lines


def _num(value):
    try:
        if value is None or value == "":
            return None
        return float(value)
    except (TypeError, ValueError):
        return None


def textfile(state, host):
    """Exposition text of one device's decision and last acceptance (state.json, with its
    ``verify`` entry when verify ran)."""
    state = state or {}
    host = str(host)
    decision = state.get("decision") or "none"
    base = {"host": host}
    verify = state.get("verify") or {}
    families = []
    families.append(
        format_metric_family(
            PREFIX + "decision",
            "gauge",
            "Recorded speculative-decoding decision of the device: 1 for the current one (keep, revert, skip, failed; none when nothing is recorded).",
            [(dict(base, decision=d), 1 if decision == d else 0) for d in (*DECISIONS, "none")],
        )
    )
    families.append(
        format_metric_family(
            PREFIX + "info",
            "gauge",
            "Configuration of the recorded decision; the value is always 1.",
            [
                (
                    dict(
                        base,
                        label=state.get("label") or decision,
                        model=state.get("model") or "",
                        method=state.get("method") or "",
                        speculator=state.get("speculator") or "",
                        vllm_version=state.get("vllm_version") or "",
                    ),
                    1,
                )
            ],
        )
    )
    k = _num(state.get("num_speculative_tokens"))
    if k is not None and decision == "keep":
        families.append(format_metric_family(PREFIX + "num_speculative_tokens", "gauge", "num_speculative_tokens of the kept configuration.", [(base, k)]))
    decided = _num(state.get("decided_at"))
    if decided:
        families.append(
            format_metric_family(PREFIX + "decided_timestamp_seconds", "gauge", "When the decision was taken, in seconds since the epoch.", [(base, decided)])
        )
    if verify.get("acceptance_rate") is not None:
        rate, length, source, at = verify.get("acceptance_rate"), verify.get("acceptance_length"), "verify", _num(verify.get("checked_at"))
    else:
        rate, length = recorded_acceptance(state)
        source, at = "trial", decided
    if rate is not None:
        families.append(
            format_metric_family(
                PREFIX + "acceptance_rate",
                "gauge",
                "Last measured draft acceptance rate (accepted / drafted tokens, 0-1); source trial or verify.",
                [(dict(base, source=source), rate)],
            )
        )
        if length is not None:
            families.append(
                format_metric_family(
                    PREFIX + "acceptance_length",
                    "gauge",
                    "Last measured mean acceptance length (1 + accepted / drafts).",
                    [(dict(base, source=source), length)],
                )
            )
        if at:
            families.append(
                format_metric_family(
                    PREFIX + "acceptance_timestamp_seconds", "gauge", "When the last acceptance was measured, in seconds since the epoch.", [(base, at)]
                )
            )
    gain = _num(((state.get("verdict") or {}).get("gain_c1") or {}).get("estimate"))
    samples = []
    if gain is not None:
        samples.append((dict(base, source="trial"), gain))
    if _num(verify.get("gain")) is not None:
        samples.append((dict(base, source="verify"), _num(verify.get("gain"))))
    if samples:
        families.append(
            format_metric_family(PREFIX + "gain_ratio", "gauge", "Throughput gain at concurrency 1 over the baseline (speculative / baseline - 1).", samples)
        )
    if verify.get("checked_at") is not None:
        families.append(
            format_metric_family(
                PREFIX + "verify_timestamp_seconds",
                "gauge",
                "When verify_speculation last checked the device, in seconds since the epoch.",
                [(dict(base, action=verify.get("action") or ""), _num(verify.get("checked_at")) or 0)],
            )
        )
    return "\n".join(line for family in families for line in family) + "\n"
