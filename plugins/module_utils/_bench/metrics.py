# SPDX-License-Identifier: Apache-2.0
# Copyright: contributors to the jetson_llm.speculative collection
"""What the on-device benchmark reports: aggregates of request records with ``vllm bench serve``
``--save-result`` names (and the Jetson wrapper's aliases), the checks that a run is complete,
and the Prometheus counters read around a run (vLLM's speculative-decoding counters, the vLLM
simulator's timing counters).

Runs on the managed device next to the server: Python standard library only, Python 3.8 syntax.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client as httplib
import math
import re

from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import BenchError, describe_exception

PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")
# Fields every measured run (and every block) must carry as finite numbers.
REQUIRED_METRICS = (
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
)
# Jetson benchmark wrapper name -> vLLM --save-result name.
WRAPPER_FIELDS = (
    ("throughput_tok_s", "output_throughput"),
    ("tpot_ms_p50", "median_tpot_ms"),
    ("ttft_ms_p50", "median_ttft_ms"),
    ("ttft_ms_p99", "p99_ttft_ms"),
    ("itl_ms_p50", "median_itl_ms"),
    ("itl_ms_p99", "p99_itl_ms"),
    ("e2e_latency_ms_p50", "median_e2el_ms"),
)

SPEC_COUNTERS = (
    ("vllm:spec_decode_num_drafts_total", "num_drafts"),
    ("vllm:spec_decode_num_draft_tokens_total", "num_draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens_total", "num_accepted_tokens"),
)
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SPEC_FIELDS = (
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
    "spec_decode_per_position_acceptance_rates",
)


# --------------------------------------------------------------------------- statistics


def percentile(values, p):
    """Percentile ``p`` (0-100) with linear interpolation between closest ranks (numpy's default)."""
    data = sorted(values)
    if not data:
        raise ValueError("percentile of an empty list")
    if not 0 <= p <= 100:
        raise ValueError("percentile must be in [0, 100], got %r" % (p,))
    pos = (len(data) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    frac = pos - lo
    return data[lo] + (data[hi] - data[lo]) * frac


def describe(values, scale=1.0):
    """``(mean, median, std, p99)`` of ``values`` times ``scale``; population standard deviation."""
    data = [v * scale for v in values]
    n = len(data)
    mean = math.fsum(data) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in data) / n)
    return mean, percentile(data, 50), std, percentile(data, 99)


def aggregate(records, duration, concurrency, num_prompts):
    """Aggregates of a list of request records, with ``vllm bench serve --save-result`` names."""
    ok = [r for r in records if r["ok"]]
    total_in = sum(r["prompt_tokens"] or 0 for r in ok)
    total_out = sum(r["output_tokens"] for r in ok)
    out = {
        "max_concurrency": int(concurrency),
        "num_prompts": int(num_prompts),
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
    }
    if duration and duration > 0:
        out["request_throughput"] = len(ok) / duration
        out["output_throughput"] = total_out / duration
        out["total_token_throughput"] = (total_in + total_out) / duration
    else:
        out["request_throughput"] = out["output_throughput"] = out["total_token_throughput"] = None
    series = {
        "ttft": [r["ttft"] for r in ok],
        "tpot": [r["tpot"] for r in ok if r["tpot"] is not None],
        "itl": [gap for r in ok for gap in r["itl"]],
        "e2el": [r["latency"] for r in ok],
    }
    for name in PERCENTILE_METRICS:
        values = series[name]
        if values:
            mean, median, std, p99 = describe(values, 1000.0)
        else:
            mean = median = std = p99 = None
        out["mean_%s_ms" % name] = mean
        out["median_%s_ms" % name] = median
        out["std_%s_ms" % name] = std
        out["p99_%s_ms" % name] = p99
    for alias, source in WRAPPER_FIELDS:
        out[alias] = out[source]
    return out


def samples(records):
    """Per-request lists of the completed requests, in dispatch order."""
    ok = [r for r in records if r["ok"]]
    return {
        "prompt_ids": [r.get("prompt_id") for r in ok],
        "ttft_ms": [r["ttft"] * 1000.0 for r in ok],
        "tpot_ms": [r["tpot"] * 1000.0 for r in ok if r["tpot"] is not None],
        "e2el_ms": [r["latency"] * 1000.0 for r in ok],
        "output_tokens": [r["output_tokens"] for r in ok],
        "text_sha256": [r["text_sha256"] for r in ok],
    }


def missing_metrics(run):
    """Names of required metrics that are absent, not numbers or not finite."""
    missing = []
    for key in REQUIRED_METRICS:
        value = run.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            missing.append(key)
    return missing


def check_run(run, url, max_failed_fraction=0.0, what="run"):
    """Raise ``BenchError`` unless ``run`` is a complete, non-empty measurement."""
    first = (run.get("errors") or ["(no error text)"])[0]
    total = run["completed"] + run["failed"]
    if run["completed"] == 0:
        raise BenchError("%s against %s completed no request (%d failed); first failure: %s" % (what, url, run["failed"], first))
    if total and run["failed"] / total > max_failed_fraction:
        raise BenchError(
            "%s against %s: %d of %d requests failed (max_failed_fraction %g); first failure: %s"
            % (what, url, run["failed"], total, max_failed_fraction, first)
        )
    missing = missing_metrics(run)
    if missing:
        raise BenchError(
            "%s against %s is missing metrics %s (completed %d, failed %d); first failure: %s"
            % (what, url, ", ".join(missing), run["completed"], run["failed"], first if run["failed"] else "none")
        )
    if run["output_throughput"] <= 0:
        raise BenchError("%s against %s measured an output throughput of 0 tok/s" % (what, url))


# --------------------------------------------------------------------------- Prometheus

_SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_ESCAPES = {"n": "\n", "\\": "\\", '"': '"'}


def _parse_labels(text):
    labels = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " ,":
            i += 1
        if i >= n:
            break
        eq = text.find("=", i)
        if eq < 0:
            raise ValueError("label without value: %r" % text[i:])
        name = text[i:eq].strip()
        i = eq + 1
        if i >= n or text[i] != '"':
            raise ValueError("label value not quoted: %r" % text[eq:])
        i += 1
        value = []
        while True:
            if i >= n:
                raise ValueError("unterminated label value: %r" % text)
            ch = text[i]
            if ch == "\\" and i + 1 < n:
                value.append(_ESCAPES.get(text[i + 1], "\\" + text[i + 1]))
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            value.append(ch)
            i += 1
        labels[name] = "".join(value)
    return labels


def parse_prometheus(text):
    """Parse Prometheus text exposition into a list of ``(name, labels dict, float value)``.

    Comment (``# HELP``/``# TYPE``) and blank lines are skipped; malformed lines are skipped too,
    so one odd line does not hide the counters the benchmark needs.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE_RE.match(line)
        if not match:
            continue
        name, labels, value = match.groups()
        try:
            out.append((name, _parse_labels(labels) if labels else {}, float(value)))
        except ValueError:
            continue
    return out


def spec_decode_counters(text, model_name=None):
    """Sum of the speculative-decoding counters over ``engine`` label values.

    Returns ``None`` when the server exposes none of them (speculation off or stats logging
    disabled), else ``{num_drafts, num_draft_tokens, num_accepted_tokens, per_pos: {position: n}}``.
    Samples whose ``model_name`` label differs from ``model_name`` (when given) are ignored.
    """
    names = dict(SPEC_COUNTERS)
    found = False
    totals = {"num_drafts": 0.0, "num_draft_tokens": 0.0, "num_accepted_tokens": 0.0, "per_pos": {}}
    for name, labels, value in parse_prometheus(text):
        if name not in names and name != SPEC_PER_POS:
            continue
        if model_name is not None and "model_name" in labels and labels["model_name"] != model_name:
            continue
        if not math.isfinite(value):
            continue
        found = True
        if name == SPEC_PER_POS:
            try:
                pos = int(labels.get("position", ""))
            except ValueError:
                continue
            totals["per_pos"][pos] = totals["per_pos"].get(pos, 0.0) + value
        else:
            totals[names[name]] += value
    return totals if found else None


def _count(value):
    return round(value) if abs(value - round(value)) < 1e-9 else value


def spec_decode_fields(before, after):
    """Derived speculative-decoding fields from two ``spec_decode_counters`` readings.

    Returns ``(fields, warnings)``. ``fields`` is empty when the server exposes no counters, or
    when it drafted nothing during the run (with a warning). Raises ``BenchError`` when a counter
    went down (the server restarted during the run).
    """
    if before is None and after is None:
        return {}, []
    if before is None or after is None:
        return {}, ["speculative-decoding counters were readable only %s the run" % ("after" if before is None else "before")]
    delta = {}
    for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        delta[key] = after[key] - before[key]
        if delta[key] < 0:
            raise BenchError("vllm:spec_decode counter %s went down during the run (%g -> %g): the server restarted" % (key, before[key], after[key]))
    positions = sorted(set(before["per_pos"]) | set(after["per_pos"]))
    per_pos = []
    for pos in positions:
        d = after["per_pos"].get(pos, 0.0) - before["per_pos"].get(pos, 0.0)
        if d < 0:
            raise BenchError("per-position acceptance counter went down during the run: the server restarted")
        per_pos.append(d)
    if delta["num_drafts"] <= 0 or delta["num_draft_tokens"] <= 0:
        return {}, ["the server exposes speculative-decoding counters but drafted nothing during the run"]
    drafts = delta["num_drafts"]
    fields = {
        "spec_decode_acceptance_rate": delta["num_accepted_tokens"] / delta["num_draft_tokens"] * 100.0,
        "spec_decode_acceptance_length": 1.0 + delta["num_accepted_tokens"] / drafts,
        "spec_decode_num_drafts": _count(drafts),
        "spec_decode_draft_tokens": _count(delta["num_draft_tokens"]),
        "spec_decode_accepted_tokens": _count(delta["num_accepted_tokens"]),
        "spec_decode_per_position_acceptance_rates": [d / drafts for d in per_pos],
    }
    return fields, []


def read_spec_counters(server, model_name=None, timeout=10.0):
    """``(counters or None, warning or None)`` from ``GET /metrics``."""
    try:
        status, body = server.get("/metrics", timeout=timeout)
    except (OSError, httplib.HTTPException) as exc:
        return None, "GET %s/metrics failed: %s" % (server.url, describe_exception(exc))
    if status != 200:
        return None, "GET %s/metrics returned HTTP %d" % (server.url, status)
    return spec_decode_counters(body, model_name), None


SIM_LAG_COUNTERS = {
    "vllm_sim:busy_seconds_total": "busy",
    "vllm_sim:lost_seconds_total": "lost",
    "vllm_sim:steps_total": "steps",
    "vllm_sim:late_steps_total": "late_steps",
    "vllm_sim:lag_limit": "limit",
}


def read_sim_lag(server, timeout=10.0):
    """The vLLM simulator's own timing counters from ``GET /metrics`` (``vllm_sim:`` names), or
    ``None`` when the server has none (a real vLLM) or the read fails."""
    try:
        status, body = server.get("/metrics", timeout=timeout)
    except (OSError, httplib.HTTPException):
        return None
    if status != 200:
        return None
    found = {}
    for name, _labels, value in parse_prometheus(body):
        if name in SIM_LAG_COUNTERS and math.isfinite(value):
            found[SIM_LAG_COUNTERS[name]] = value
    return found if "busy" in found and "lost" in found else None


def sim_lag_fields(before, after):
    """Fields of a block measured on the simulator, from two ``read_sim_lag`` readings.

    ``sim_lag_share``: modelled time the simulator lost to running late over its modelled busy time
    during the block; ``sim_out_of_spec``: that share exceeded the simulator's ``lag_limit`` (the host
    was too busy to keep the simulated device's timing, so the block's figures are skewed). Empty
    when either reading is missing.
    """
    if not before or not after:
        return {}
    busy = after["busy"] - before["busy"]
    lost = after["lost"] - before["lost"]
    share = lost / busy if busy > 0 else 0.0
    fields = {"sim_lag_share": round(share, 4), "sim_out_of_spec": bool(share > after.get("limit", 0.02))}
    if "late_steps" in after and "late_steps" in before:
        fields["sim_late_steps"] = _count(after["late_steps"] - before["late_steps"])
    return fields
