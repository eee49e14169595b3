# SPDX-License-Identifier: Apache-2.0
"""Aggregate statistics of the benchmark client against the statistics module, and the failure rules."""

import math
import statistics

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import BenchError, new_record
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.metrics import aggregate, check_run, describe, missing_metrics, percentile, samples
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.runner import _errors, block_sizes
from hypothesis import given
from hypothesis import strategies as st

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(st.lists(finite, min_size=2, max_size=60), st.integers(min_value=1, max_value=99))
def test_percentile_matches_statistics_inclusive_quantiles(values, p):
    # numpy.percentile's default (linear) equals statistics.quantiles(method="inclusive")
    reference = statistics.quantiles(values, n=100, method="inclusive")[p - 1]
    assert percentile(values, p) == pytest.approx(reference, rel=1e-9, abs=1e-6)


@given(st.lists(finite, min_size=1, max_size=60))
def test_describe_matches_statistics(values):
    mean, median, std, p99 = describe(values)
    assert mean == pytest.approx(statistics.fmean(values), rel=1e-9, abs=1e-6)
    assert median == pytest.approx(statistics.median(values), rel=1e-9, abs=1e-6)
    assert std == pytest.approx(statistics.pstdev(values), rel=1e-7, abs=1e-6)
    assert min(values) <= p99 <= max(values)


def test_percentile_edges():
    assert percentile([5.0], 99) == 5.0
    assert percentile([3, 1, 2], 0) == 1
    assert percentile([3, 1, 2], 100) == 3
    assert percentile([1, 2, 3, 4], 50) == 2.5
    # 99th of 1..100: position 98.01 -> 99.01
    assert percentile(list(range(1, 101)), 99) == pytest.approx(99.01)
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1], 101)


def test_describe_scales_to_milliseconds():
    mean, median, std, _unused = describe([0.1, 0.2, 0.3], 1000.0)
    assert (mean, median) == pytest.approx((200.0, 200.0))
    assert std == pytest.approx(statistics.pstdev([100.0, 200.0, 300.0]))


def rec(ttft, latency, tokens, itl, *, prompt_tokens=20, ok=True, error="", prompt_id="p"):
    r = new_record()
    r.update(
        ok=ok,
        error=error,
        ttft=ttft if ok else None,
        latency=latency if ok else None,
        output_tokens=tokens if ok else 0,
        itl=itl,
        prompt_tokens=prompt_tokens,
        tokens_from_usage=True,
        text_sha256="h%s" % prompt_id,
        prompt_id=prompt_id,
        start=0.0,
        end=latency or 0.0,
    )
    if ok and tokens > 1:
        r["tpot"] = (latency - ttft) / (tokens - 1)
    return r


RECORDS = [
    rec(0.10, 1.37, 128, [0.01] * 127, prompt_tokens=30, prompt_id="a"),
    rec(0.20, 2.74, 128, [0.02] * 127, prompt_tokens=40, prompt_id="b"),
    rec(0.30, 1.57, 128, [0.03, 0.05] * 10, prompt_tokens=50, prompt_id="c"),
]


def test_aggregate_matches_vllm_definitions():
    out = aggregate(RECORDS, 4.0, 2, 3)
    assert out["completed"] == 3 and out["failed"] == 0
    assert out["max_concurrency"] == 2 and out["num_prompts"] == 3
    assert out["total_input_tokens"] == 120
    assert out["total_output_tokens"] == 384
    assert out["request_throughput"] == pytest.approx(3 / 4.0)
    assert out["output_throughput"] == pytest.approx(384 / 4.0)
    assert out["total_token_throughput"] == pytest.approx(504 / 4.0)
    tpots = [(1.37 - 0.10) / 127 * 1000, (2.74 - 0.20) / 127 * 1000, (1.57 - 0.30) / 127 * 1000]
    assert out["mean_tpot_ms"] == pytest.approx(statistics.fmean(tpots))
    assert out["median_tpot_ms"] == pytest.approx(statistics.median(tpots))
    assert out["std_tpot_ms"] == pytest.approx(statistics.pstdev(tpots))
    assert out["median_ttft_ms"] == pytest.approx(200.0)
    itls = [x * 1000 for r in RECORDS for x in r["itl"]]
    assert out["mean_itl_ms"] == pytest.approx(statistics.fmean(itls))
    assert out["p99_itl_ms"] == pytest.approx(statistics.quantiles(itls, n=100, method="inclusive")[98])
    assert out["median_e2el_ms"] == pytest.approx(1570.0)
    # Jetson wrapper names are the same numbers
    assert out["throughput_tok_s"] == out["output_throughput"]
    assert out["tpot_ms_p50"] == out["median_tpot_ms"]
    assert out["ttft_ms_p99"] == out["p99_ttft_ms"]
    assert out["itl_ms_p50"] == out["median_itl_ms"]
    assert out["e2e_latency_ms_p50"] == out["median_e2el_ms"] > 0
    assert missing_metrics(out) == []


def test_failed_requests_are_not_in_the_aggregates():
    failed = rec(None, None, 0, [], ok=False, error="HTTP 500 Internal Server Error: boom", prompt_id="d")
    out = aggregate([*RECORDS, failed], 4.0, 2, 4)
    assert out["completed"] == 3 and out["failed"] == 1
    assert out["total_output_tokens"] == 384


def test_samples_are_per_completed_request_in_order():
    failed = rec(None, None, 0, [], ok=False, error="x", prompt_id="d")
    s = samples([RECORDS[0], failed, RECORDS[1]])
    assert s["prompt_ids"] == ["a", "b"]
    assert s["ttft_ms"] == pytest.approx([100.0, 200.0])
    assert s["e2el_ms"] == pytest.approx([1370.0, 2740.0])
    assert s["output_tokens"] == [128, 128]
    assert s["tpot_ms"] == pytest.approx([1270 / 127, 2540 / 127])
    assert s["text_sha256"] == ["ha", "hb"]


def test_block_sizes():
    assert block_sizes(50, 1) == [50]
    assert block_sizes(50, 3) == [17, 17, 16]
    assert block_sizes(5, 5) == [1, 1, 1, 1, 1]
    for bad in (0, 6):
        with pytest.raises(BenchError, match="blocks"):
            block_sizes(5, bad)


# ---------------------------------------------------------------------------- failure rules

URL = "http://127.0.0.1:8000/v1/chat/completions"


def run_of(records, duration=4.0):
    run = aggregate(records, duration, 1, len(records))
    run["errors"] = _errors(records)
    return run


def test_check_run_accepts_a_complete_run():
    check_run(run_of(RECORDS), URL)


def test_empty_run_is_an_error_naming_endpoint_and_first_failure():
    failures = [rec(None, None, 0, [], ok=False, error="connection refused") for _unused in range(3)]
    with pytest.raises(BenchError) as err:
        check_run(run_of(failures), URL)
    assert URL in str(err.value)
    assert "completed no request (3 failed)" in str(err.value)
    assert "connection refused" in str(err.value)


def test_failed_fraction():
    failed = rec(None, None, 0, [], ok=False, error="timed out after 300.0 s (request timeout, 3 chunks received)")
    run = run_of([*RECORDS, failed])
    with pytest.raises(BenchError, match=r"1 of 4 requests failed .*timed out"):
        check_run(run, URL)
    check_run(run, URL, max_failed_fraction=0.25)
    with pytest.raises(BenchError):
        check_run(run, URL, max_failed_fraction=0.2)


def test_missing_metric_is_an_error_not_zero():
    # every request streamed one chunk: ITL cannot be measured
    one_chunk = [rec(0.1, 0.5, 128, []) for _unused in range(3)]
    run = run_of(one_chunk)
    assert run["median_itl_ms"] is None
    with pytest.raises(BenchError, match=r"missing metrics .*median_itl_ms"):
        check_run(run, URL)


def test_zero_throughput_is_an_error():
    run = run_of(RECORDS)
    run["output_throughput"] = 0.0
    with pytest.raises(BenchError, match="0 tok/s"):
        check_run(run, URL)


def test_missing_metrics_rejects_nan_and_bool():
    run = run_of(RECORDS)
    run["p99_e2el_ms"] = math.nan
    run["duration"] = True
    assert missing_metrics(run) == ["duration", "p99_e2el_ms"]
