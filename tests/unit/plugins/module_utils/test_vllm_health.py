# SPDX-License-Identifier: Apache-2.0
"""Cause classification of vLLM startup logs, on vLLM's own message texts."""

import socket

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _vllm_health as h

ENGINE = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"

CASES = [
    (
        "ValueError: Free memory on device (5.1/7.4 GiB) on startup is less than desired GPU memory utilization "
        "(0.85, 6.3 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "oom_free_memory",
    ),
    (
        "Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free memory for "
        "weights, increasing --tensor-parallel-size, or using --quantization.\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB.",
        "oom_weights",
    ),
    (
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        "oom_kv_cache",
    ),
    (
        "ValueError: To serve at least one request with the model's max seq len (8192), (1.00 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (0.50 GiB).",
        "oom_kv_cache",
    ),
    (
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests. Please try "
        "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
        "oom_sampler",
    ),
    (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
        "disable_by_batch_size\n  Unexpected keyword argument [type=unexpected_keyword_argument]",
        "rejected_config",
    ),
    ("vllm serve: error: unrecognized arguments: --bogus", "rejected_config"),
    (
        "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files.",
        "model_not_found",
    ),
]


@pytest.mark.parametrize(("text", "cause"), CASES)
def test_classify_names_vllm_cause(text, cause):
    got, description, evidence = h.classify_log("INFO starting\n" + text + "\n" + ENGINE)
    assert got == cause
    assert description
    assert evidence and evidence in text


def test_oom_causes_are_the_memory_ones():
    for text, cause in CASES:
        assert (cause in h.OOM_CAUSES) == cause.startswith("oom_"), text


def test_engine_failure_without_known_root_cause():
    assert h.classify_log("something odd\n" + ENGINE)[0] == "engine_failed"


def test_clean_log_has_no_cause():
    assert h.classify_log("INFO Application startup complete.") == (None, None, None)
    assert h.classify_log("") == (None, None, None)


def test_parse_systemctl_show():
    got = h.parse_systemctl_show("ActiveState=failed\nNRestarts=2\nResult=exit-code\nnoise\n")
    assert got == {"ActiveState": "failed", "NRestarts": "2", "Result": "exit-code"}


@pytest.mark.parametrize("url", ["https://x:1", "ftp://h", "http://", "localhost:8000"])
def test_split_url_refuses_non_http(url):
    with pytest.raises(ValueError, match="url must be"):
        h.split_url(url)


def test_probe_refused_connection_counts_as_loading():
    # a port nobody listens on: bind a socket, read its port, close it
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    got = h.probe("http://127.0.0.1:%d" % port, "m", timeout=1)
    assert got["state"] == "loading"


def test_serving_gaps_is_the_one_rule_for_the_wanted_configuration():
    live = {"running": True, "config_current": True, "differences": [], "speculative": True}
    assert h.serving_gaps(live, True) == []
    assert h.serving_gaps(live, False, "the decision is revert") == ["speculation is loaded where the decision is revert"]
    assert h.serving_gaps(dict(live, speculative=False), True, "the speculative arm") == ["speculation is not loaded where the speculative arm"]
    # speculation that /metrics cannot tell is no gap; the files and the process are
    assert h.serving_gaps(dict(live, speculative=None), False) == []
    stale = dict(live, config_current=False, differences=["serve.yaml changed since the server started"])
    assert h.serving_gaps(stale, True) == ["serve.yaml changed since the server started"]
    assert h.serving_gaps(dict(stale, differences=[]), True) == ["the configuration files changed after the server started"]
    # undecided freshness (null) is no gap
    assert h.serving_gaps(dict(live, config_current=None), True) == []
    down = {"running": False, "config_current": None, "differences": [], "speculative": None}
    assert h.serving_gaps(down, True) == ["vLLM does not run"]
    # a unit that runs a server that does not answer /health (hung, still loading) is not serving it
    assert h.serving_gaps(dict(live, healthy=False, speculative=None), True) == ["vLLM runs but does not answer /health"]
    assert h.serving_gaps(dict(live, healthy=True), True) == []
    assert h.serving_gaps(dict(down, healthy=False), True) == ["vLLM does not run"]
