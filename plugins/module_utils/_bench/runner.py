# SPDX-License-Identifier: Apache-2.0
# Copyright: contributors to the jetson_llm.speculative collection
"""On-device benchmark client for a vLLM server's OpenAI-compatible streaming API.

Runs on the managed device next to the server: Python standard library only, Python 3.8 syntax.

The client mirrors ``vllm bench serve`` closely enough that its numbers and field names can be read
side by side with a ``--save-result`` file:

* streaming requests with ``stream_options.include_usage``, ``ignore_eos``, a fixed ``max_tokens``,
  a pinned ``temperature`` and ``seed``;
* TTFT, ITL (gaps between streamed chunks), TPOT = (E2E - TTFT) / (tokens - 1) and E2E latency per
  request; output tokens from ``usage.completion_tokens``;
* aggregates ``completed``, ``failed``, ``duration``, ``output_throughput``, ``mean_/median_/std_/p99_``
  of ``ttft``, ``tpot``, ``itl`` and ``e2el`` in milliseconds (numpy's definitions: population standard
  deviation, linearly interpolated percentiles);
* speculative-decoding acceptance from the ``vllm:spec_decode_*_total`` Prometheus counters read
  before and after the measured requests.

Differences from ``vllm bench serve``, on purpose: TTFT is taken at the first chunk that carries
text (vLLM's client also counts the role-only first chat chunk), input tokens come from the
server's ``usage.prompt_tokens`` (no local tokenizer on the device), and a run that is empty, has
failed requests beyond the allowed fraction or lacks a metric raises ``BenchError`` instead of
reporting zeros.

The package is split by concern: ``_bench.client`` (HTTP connection, streamed-response parsing and
timing, readiness, the ``Watchdog``, ``BenchError``), ``_bench.metrics`` (aggregates with ``vllm bench
serve`` names, run checks, Prometheus counters of speculative decoding and of the simulator),
``_bench.prompts`` (the prompt set) and this module (``run_level`` and ``run_benchmark``: warm-ups,
blocks, the result document).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import threading
from datetime import datetime, timezone

from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import prompts as _bench_prompts
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import (
    DEFAULT_URL,
    ENDPOINT_BACKENDS,
    ENDPOINT_PATHS,
    BenchError,
    Server,
    Watchdog,
    build_payload,
    clock,
    new_record,
    server_version,
    stream_request,
    wait_ready,
)
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.metrics import (
    aggregate,
    check_run,
    missing_metrics,
    read_sim_lag,
    read_spec_counters,
    samples,
    sim_lag_fields,
    spec_decode_fields,
)

MAX_ERRORS_KEPT = 5


# --------------------------------------------------------------------------- runner


def run_requests(server, path, jobs, concurrency, *, timeout, deadline, watchdog=None):
    """Run ``jobs`` (list of ``(prompt_id, payload)``) with ``concurrency`` worker threads.

    Each worker takes the next job in order; a job that cannot start before ``deadline`` fails
    without being sent. Returns ``(records in job order, wall duration in seconds)``.
    """
    records = [None] * len(jobs)
    lock = threading.Lock()
    cursor = [0]

    def worker():
        for _attempt in range(len(jobs)):  # bounded: at most every job once
            with lock:
                index = cursor[0]
                cursor[0] += 1
            if index >= len(jobs):
                return
            prompt_id, payload = jobs[index]
            if watchdog is not None and watchdog.hung:
                rec = new_record()
                rec["start"] = rec["end"] = clock()
                rec["error"] = "not sent: " + watchdog.reason()
            else:
                rec = stream_request(server, path, payload, timeout, deadline, watchdog)
                if watchdog is not None and watchdog.hung and not rec["ok"]:
                    rec["error"] = watchdog.reason()
            rec["prompt_id"] = prompt_id
            records[index] = rec

    threads = [threading.Thread(target=worker, name="bench-%d" % i) for i in range(min(concurrency, len(jobs)))]
    for thread in threads:
        thread.daemon = True
    start = clock()
    for thread in threads:
        thread.start()
    join_until = max(deadline, clock()) + 5.0
    for thread in threads:
        # stream_request is bounded by ``deadline``; the grace covers the last read and cleanup.
        while thread.is_alive() and clock() < join_until:
            thread.join(min(0.2, max(0.0, join_until - clock())) if watchdog is not None else max(0.0, join_until - clock()))
            if watchdog is not None:
                watchdog.check()
    end = clock()
    for index, found in enumerate(records):
        if found is None:
            rec = new_record()
            rec["start"] = rec["end"] = end
            rec["error"] = "not finished before the run deadline"
            rec["prompt_id"] = jobs[index][0]
            records[index] = rec
    ends = [r["end"] for r in records if r["end"] is not None]
    duration = (max(ends) - start) if ends else end - start
    return records, duration


def block_sizes(num_prompts, blocks):
    """Split ``num_prompts`` into ``blocks`` consecutive blocks as evenly as possible."""
    num_prompts, blocks = int(num_prompts), int(blocks)
    if blocks < 1 or blocks > num_prompts:
        raise BenchError("blocks must be between 1 and num_prompts (%d), got %d" % (num_prompts, blocks))
    base, extra = divmod(num_prompts, blocks)
    return [base + (1 if i < extra else 0) for i in range(blocks)]


def _errors(records):
    seen = []
    for rec in records:
        if rec["error"] and rec["error"] not in seen:
            seen.append(rec["error"])
            if len(seen) >= MAX_ERRORS_KEPT:
                break
    return seen


def _round(value, digits=4):
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, list):
        return [_round(v, digits) for v in value]
    if isinstance(value, dict):
        return dict((k, _round(v, digits)) for k, v in value.items())
    return value


def _raise_if_hung(watchdog, url, where):
    if watchdog is not None and watchdog.hung:
        raise BenchError("%s (%s, %s)" % (watchdog.reason(), url, where), cause="hung")


def run_level(
    server,
    model,
    concurrency,
    num_prompts,
    *,
    num_warmups=10,
    output_len=128,
    endpoint="chat",
    seed=0,
    temperature=0.0,
    blocks=1,
    timeout=300.0,
    deadline=None,
    max_failed_fraction=0.0,
    metrics=True,
    watchdog=None,
    prompts=None,
):
    """Benchmark one concurrency level: warm-ups (not counted), then ``blocks`` measured blocks.

    Blocks run one after the other (each drains before the next starts) and get their own
    aggregates and acceptance, so a consumer can see drift. Raises ``BenchError`` when the run is
    empty or incomplete (see ``check_run``).
    """
    if deadline is None:
        deadline = clock() + 3600.0
    path = ENDPOINT_PATHS.get(endpoint)
    if path is None:
        raise BenchError("endpoint must be one of chat, completions; got %r" % (endpoint,))
    if int(output_len) < 2:
        raise BenchError("output_len must be >= 2 so that TPOT and ITL are defined, got %s" % output_len)
    sizes = block_sizes(num_prompts, blocks)
    warnings = []

    def jobs_for(prompts):
        return [
            (
                p["id"],
                build_payload(endpoint, model, p, output_len, temperature=temperature, seed=seed, ignore_eos=True),
            )
            for p in prompts
        ]

    if num_warmups > 0:
        warm = _bench_prompts.select(num_warmups, seed, offset=num_prompts, prompts=prompts)
        warm_records = run_requests(server, path, jobs_for(warm), concurrency, timeout=timeout, deadline=deadline, watchdog=watchdog)[0]
        _raise_if_hung(watchdog, server.url + path, "warm-up at concurrency %d" % int(concurrency))
        warm_failed = [r for r in warm_records if not r["ok"]]
        if len(warm_failed) == len(warm_records):
            raise BenchError(
                "every warm-up request against %s%s failed (%d); first failure: %s" % (server.url, path, len(warm_failed), warm_failed[0]["error"])
            )
        if warm_failed:
            warnings.append("%d of %d warm-up requests failed: %s" % (len(warm_failed), len(warm_records), warm_failed[0]["error"]))

    measured = _bench_prompts.select(num_prompts, seed, offset=0, prompts=prompts)
    counters = None
    if metrics:
        counters, warning = read_spec_counters(server, model)
        if warning:
            warnings.append(warning)
    records = []
    block_results = []
    first_counters = counters
    lag_before = read_sim_lag(server) if metrics else None
    offset = 0
    for index, size in enumerate(sizes):
        block_records, duration = run_requests(
            server, path, jobs_for(measured[offset : offset + size]), concurrency, timeout=timeout, deadline=deadline, watchdog=watchdog
        )
        _raise_if_hung(watchdog, server.url + path, "concurrency %d, block %d" % (int(concurrency), index))
        offset += size
        block = aggregate(block_records, duration, concurrency, size)
        block["block"] = index
        block["errors"] = _errors(block_records)
        if metrics:
            after, warning = read_spec_counters(server, model)
            if warning and warning not in warnings:
                warnings.append(warning)
            fields, spec_warnings = spec_decode_fields(counters, after)
            block.update(fields)
            counters = after
            if len(sizes) > 1:
                warnings.extend(w for w in spec_warnings if w not in warnings)
            lag_after = read_sim_lag(server) if lag_before is not None else None
            block.update(sim_lag_fields(lag_before, lag_after))
            lag_before = lag_after
            if block.get("sim_out_of_spec"):
                warnings.append(
                    "part %d of %d of this run was measured on a simulator running late (%.1f %% of modelled time lost, "
                    "over its limit): its figures are skewed" % (index + 1, len(sizes), 100.0 * block["sim_lag_share"])
                )
        records.extend(block_records)
        block_results.append(block)

    total_duration = sum(b["duration"] for b in block_results)
    run = aggregate(records, total_duration, concurrency, num_prompts)
    run["concurrency"] = int(concurrency)
    run["errors"] = _errors(records)
    if metrics:
        fields, spec_warnings = spec_decode_fields(first_counters, counters)
        run.update(fields)
        warnings.extend(w for w in spec_warnings if w not in warnings)
    run["samples"] = samples(records)
    run["blocks"] = block_results
    if any("sim_out_of_spec" in b for b in block_results):
        run["sim_out_of_spec"] = any(b.get("sim_out_of_spec") for b in block_results)
        run["sim_lag_share"] = max(b.get("sim_lag_share", 0.0) for b in block_results)

    ok = [r for r in records if r["ok"]]
    no_usage = [r for r in ok if not r["tokens_from_usage"]]
    if no_usage:
        warnings.append(
            "%d responses had no usage.completion_tokens; their output tokens are counted as streamed "
            "chunks, which undercounts with speculative decoding" % len(no_usage)
        )
    short = [r for r in ok if r["output_tokens"] != int(output_len)]
    if short:
        warnings.append("%d requests returned a token count other than output_len %d (e.g. %d)" % (len(short), int(output_len), short[0]["output_tokens"]))
    if any(r["prompt_tokens"] is None for r in ok):
        warnings.append("some responses had no usage.prompt_tokens; total_input_tokens undercounts")
    run["warnings"] = warnings

    what = "benchmark at concurrency %d" % int(concurrency)
    check_run(run, server.url + path, max_failed_fraction, what)
    for block in block_results:
        if block["completed"] == 0 or missing_metrics(block) or block["output_throughput"] <= 0:
            check_run(block, server.url + path, 1.0, "%s, block %d" % (what, block["block"]))
    return _round(run)


def prompt_set_info():
    digest = hashlib.sha256(
        json.dumps([[p["id"], p["kind"], p["messages"], p["prompt"]] for p in _bench_prompts.PROMPTS], sort_keys=True).encode("utf-8")
    ).hexdigest()
    return {"name": "jetson_llm.speculative", "count": len(_bench_prompts.PROMPTS), "sha256": digest}


def run_benchmark(
    url=DEFAULT_URL,
    *,
    model=None,
    api_key=None,
    concurrency=(1, 8),
    num_prompts=50,
    num_warmups=10,
    output_len=128,
    endpoint="chat",
    seed=0,
    temperature=0.0,
    blocks=1,
    timeout=300.0,
    deadline=3600.0,
    ready_timeout=60.0,
    label=None,
    max_failed_fraction=0.0,
    on_run=None,
    stall_timeout=10.0,
    stall_factor=20.0,
    prompts=None,
    prompt_set=None,
):
    """Readiness check, then one ``run_level`` per concurrency; returns the result document.

    ``num_prompts`` is one count for every concurrency level, or a list with one count per level.

    ``deadline`` (seconds) bounds the whole call. ``on_run(run)`` is called after each level (the
    module uses it to keep partial results for its failure report).

    ``stall_timeout`` and ``stall_factor`` set the ``Watchdog`` shared by every level: a server that
    sends nothing for ``max(stall_timeout, stall_factor x slowest inter-token gap)`` seconds while
    requests are in flight ends the run with a ``BenchError`` whose ``cause`` is ``"hung"``.
    """
    if isinstance(num_prompts, (list, tuple)):
        counts = [int(n) for n in num_prompts]
        if len(counts) != len(concurrency):
            raise BenchError("num_prompts lists %d counts for %d concurrency levels" % (len(counts), len(concurrency)))
    else:
        counts = [int(num_prompts)] * len(concurrency)
    end = clock() + float(deadline)
    server = Server(url, api_key=api_key, timeout=min(float(timeout), 30.0))
    ready = wait_ready(server, model, timeout=min(float(ready_timeout), float(deadline)))
    served = ready["model"]
    version = server_version(server)
    watchdog = Watchdog(stall_timeout, stall_factor) if float(stall_timeout) > 0 else None
    started = datetime.now(timezone.utc)
    result = {
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "label": label,
        "runtime": "vllm",
        "backend": ENDPOINT_BACKENDS[endpoint],
        "endpoint": ENDPOINT_PATHS[endpoint],
        "url": server.url,
        "model": served,
        "model_id": served,
        "server": {"model": served, "max_model_len": ready["max_model_len"], "root": ready["root"]},
        "vllm_version": version,
        "config": {
            "input_len": None,
            "output_len": int(output_len),
            "num_prompts": counts[0] if len(set(counts)) == 1 else counts,
            "num_warmups": int(num_warmups),
            "concurrency": [int(c) for c in concurrency],
            "endpoint": endpoint,
            "seed": int(seed),
            "temperature": float(temperature),
            "ignore_eos": True,
            "blocks": int(blocks),
            "timeout": float(timeout),
            "deadline": float(deadline),
            "max_failed_fraction": float(max_failed_fraction),
            "stall_timeout": float(stall_timeout),
            "stall_factor": float(stall_factor),
            "prompt_set": prompt_set if prompt_set is not None else prompt_set_info(),
        },
        "runs": [],
        "warnings": [],
    }
    for level, count in zip(concurrency, counts):
        if clock() >= end:
            raise BenchError("run deadline of %.0f s reached before concurrency %d started" % (deadline, level))
        run = run_level(
            server,
            served,
            int(level),
            count,
            num_warmups=int(num_warmups),
            output_len=int(output_len),
            endpoint=endpoint,
            seed=int(seed),
            temperature=float(temperature),
            blocks=int(blocks),
            timeout=float(timeout),
            deadline=end,
            max_failed_fraction=float(max_failed_fraction),
            watchdog=watchdog,
            prompts=prompts,
        )
        result["runs"].append(run)
        result["warnings"].extend("concurrency %d: %s" % (int(level), w) for w in run["warnings"])
        if on_run is not None:
            on_run(run)
    inputs = [r["total_input_tokens"] / r["completed"] for r in result["runs"] if r["completed"]]
    if inputs:
        result["config"]["input_len"] = round(sum(inputs) / len(inputs))
    return result
