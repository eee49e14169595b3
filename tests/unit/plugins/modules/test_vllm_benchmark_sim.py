# SPDX-License-Identifier: Apache-2.0
"""vllm_benchmark through ``ansible`` against the vLLM simulator on loopback."""

import importlib.util
import json
import os
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Simulator fixtures and the ansible runner live next to the other benchmark tests.
_sim = _load("_bench_sim_helpers", os.path.join(HERE, "..", "module_utils", "test_bench_sim.py"))
_mod = _load("_vllm_benchmark_helpers", os.path.join(HERE, "test_vllm_benchmark.py"))
hf_home = _sim.hf_home
sim = _sim.sim
SPEC_ARGS = _sim.SPEC_ARGS
TARGET = _sim.TARGET
SPEC_FIELDS = (
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
    "spec_decode_per_position_acceptance_rates",
)
PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"

pytestmark = [
    pytest.mark.skipif(not os.path.exists(_sim.SIM_CLI), reason="the vLLM simulator is not in the tree"),
    pytest.mark.skipif(not os.path.exists(os.path.join(_mod.BIN, "ansible")), reason="needs the venv"),
]

SMALL = {"num_prompts": 6, "num_warmups": 2, "output_len": 32, "timeout": 60, "deadline": 600}


def run_module(tmp_path, args, **kw):
    return _mod.run_module(tmp_path, args, **kw)


def test_speculative_server_with_history_file(tmp_path, sim):
    server = sim(args=SPEC_ARGS)
    history = tmp_path / "history"
    args = dict(SMALL, url=server.url, concurrency=[1, 3], blocks=2, result_dir=str(history), label="spec")
    result = run_module(tmp_path, args)
    assert result.get("failed") is not True, result
    assert result["changed"] is True
    assert result["model"] == TARGET and result["runtime"] == "vllm"
    assert result["vllm_version"]
    assert result["server"]["model"] == TARGET and result["server"]["max_model_len"] > 0
    assert result["config"]["output_len"] == 32 and result["config"]["concurrency"] == [1, 3]
    assert "warnings" not in result or result["warnings"] == []
    assert [r["concurrency"] for r in result["runs"]] == [1, 3]
    for run in result["runs"]:
        assert run["completed"] == 6 and run["failed"] == 0
        assert run["throughput_tok_s"] == run["output_throughput"] > 0
        assert run["e2e_latency_ms_p50"] > 0
        for key in SPEC_FIELDS:
            assert key in run
        assert 1.0 < run["spec_decode_acceptance_length"] <= 4.0
        assert [b["block"] for b in run["blocks"]] == [0, 1]
        assert all(key in b for b in run["blocks"] for key in SPEC_FIELDS)
    # the history file holds the same document, under a new name per run
    assert os.path.dirname(result["result_file"]) == str(history)
    with open(result["result_file"]) as handle:
        saved = json.load(handle)
    assert saved["runs"] == result["runs"]
    assert saved["warnings"] == []
    again = run_module(tmp_path, dict(args, concurrency=[1]))
    assert again["result_file"] != result["result_file"]
    assert len(os.listdir(history)) == 2
    # kept for the report: one run as the module returns it
    sample = dict(result)
    sample["runs"] = [dict(result["runs"][0], samples={k: v[:3] for k, v in result["runs"][0]["samples"].items()})]
    sample["runs"][0]["blocks"] = sample["runs"][0]["blocks"][:1]
    (tmp_path / "sample.json").write_text(json.dumps(sample, indent=2))
    if os.environ.get("VLLM_BENCHMARK_SAMPLE"):
        with open(os.environ["VLLM_BENCHMARK_SAMPLE"], "w") as handle:
            json.dump(sample, handle, indent=2)


def test_baseline_server_has_no_acceptance_and_changes_nothing(tmp_path, sim):
    server = sim()
    result = run_module(tmp_path, dict(SMALL, url=server.url, concurrency=[2], endpoint="completions"))
    assert result.get("failed") is not True, result
    assert result["changed"] is False
    assert result["result_file"] is None
    assert result["endpoint"] == "/v1/completions"
    run = result["runs"][0]
    assert run["completed"] == 6
    assert not [k for k in run if k.startswith("spec_decode")]


def test_crashed_server_fails_with_a_clear_message(tmp_path, sim):
    server = sim(settings={"faults": {"crash_after_requests": 4}})
    # long enough requests that the crash (50 ms after the 4th) lands before the level ends
    result = run_module(tmp_path, dict(SMALL, url=server.url, concurrency=[1, 2], output_len=200, result_dir=str(tmp_path / "h")))
    assert result["failed"] is True
    msg = result["msg"]
    assert server.url + "/v1/chat/completions" in msg
    assert "failed" in msg and "first failure:" in msg
    # no made-up numbers: the level that failed is not reported, and nothing is saved
    assert result["runs"] == []
    assert not (tmp_path / "h").exists()


def test_api_key_is_sent_and_not_logged(tmp_path, sim):
    server = sim(args=("--api-key", "tok-5ecret"))
    denied = run_module(tmp_path, dict(SMALL, url=server.url, concurrency=[1], ready_timeout=2))
    assert denied["failed"] is True
    assert denied["msg"].startswith("GET %s/v1/models returned HTTP 401: the api_key is missing or wrong" % server.url)
    ok = run_module(tmp_path, dict(SMALL, url=server.url, concurrency=[1], api_key="tok-5ecret"))
    assert ok.get("failed") is not True, ok
    assert "tok-5ecret" not in json.dumps(ok)


@pytest.mark.skipif(not os.path.exists(PY38), reason="no Python 3.8 interpreter for the device side")
def test_module_runs_on_python_38(tmp_path, sim, monkeypatch):
    server = sim(args=SPEC_ARGS)
    env = _mod.ansible_env(tmp_path)
    env["ANSIBLE_PYTHON_INTERPRETER"] = PY38
    monkeypatch.setattr(_mod, "ansible_env", lambda _tmp: env)
    result = run_module(tmp_path, dict(SMALL, url=server.url, concurrency=[2]))
    assert result.get("failed") is not True, result
    assert result["runs"][0]["completed"] == 6
    assert "spec_decode_acceptance_length" in result["runs"][0]
    assert sys.version_info[:2] != (3, 8)  # the controller itself is newer; only the module ran on 3.8


def test_hung_server_fails_in_seconds_with_cause_hung(tmp_path, sim):
    server = sim(settings={"faults": {"hang_after_requests": 4}})
    start = time.monotonic()
    result = run_module(tmp_path, dict(SMALL, url=server.url, concurrency=[2], timeout=300, stall_timeout=1, output_len=400))
    assert time.monotonic() - start < 60  # the request timeout is 300 s
    assert result["failed"] is True
    assert result["cause"] == "hung"
    assert result["msg"].startswith("vLLM stopped answering: no token and no progress for ")
    assert result["runs"] == []
