# SPDX-License-Identifier: Apache-2.0
"""vllm_output_probe through ``ansible`` against the vLLM simulator on loopback."""

import importlib.util
import json
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_sim = _load("_bench_sim_helpers_probe_module", os.path.join(HERE, "..", "module_utils", "test_bench_sim.py"))
_mod = _load("_vllm_benchmark_helpers_probe_module", os.path.join(HERE, "test_vllm_benchmark.py"))
hf_home = _sim.hf_home
sim = _sim.sim

pytestmark = [
    pytest.mark.skipif(not os.path.exists(_sim.SIM_CLI), reason="the vLLM simulator is not in the tree"),
    pytest.mark.skipif(not os.path.exists(os.path.join(_mod.BIN, "ansible")), reason="needs the venv"),
]


def run_module(tmp_path, args, check=False):
    cmd = [os.path.join(_mod.BIN, "ansible"), "localhost", "-m", "jetson_llm.speculative.vllm_output_probe", "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, env=_mod.ansible_env(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_reference_then_agreement_then_wrong_text(tmp_path, sim):
    base = sim()
    reference = run_module(tmp_path, {"url": base.url, "output_len": 24})
    assert reference.get("failed") is not True, reference
    assert reference["changed"] is False and reference["agree"] is None
    assert len(reference["outputs"]) == 6 and all(o["text"] and o["sha256"] for o in reference["outputs"])
    spec = sim(args=_sim.SPEC_ARGS)
    same = run_module(tmp_path, {"url": spec.url, "output_len": 24, "expected": reference["outputs"]})
    assert (same["agree"], same["matches"], same["required"]) == (True, 6, 4), same
    broken = sim(args=_sim.SPEC_ARGS, settings={"faults": {"wrong_answers": True}})
    wrong = run_module(tmp_path, {"url": broken.url, "output_len": 24, "expected": reference["outputs"]})
    assert wrong.get("failed") is not True, wrong
    assert wrong["agree"] is False and wrong["matches"] < 4
    assert wrong["summary"].startswith("%d of 6 probe outputs at temperature 0 equal the baseline's" % wrong["matches"])
    assert "differs at character" in wrong["summary"]


def test_bad_arguments_and_check_mode(tmp_path):
    bad = run_module(tmp_path, {"url": "http://127.0.0.1:9", "count": 2, "min_match_fraction": 1.5, "expected": []})
    assert bad["failed"] is True
    for text in ("count must be between 3 and 24", "min_match_fraction must be between 0 and 1", "expected is empty"):
        assert text in bad["msg"]
    skipped = run_module(tmp_path, {"url": "http://127.0.0.1:9"}, check=True)
    assert skipped["skipped"] is True and skipped["changed"] is False


def test_a_server_that_is_not_there_fails_with_its_url(tmp_path):
    result = run_module(tmp_path, {"url": "http://127.0.0.1:9", "ready_timeout": 0.5})
    assert result["failed"] is True and "http://127.0.0.1:9" in result["msg"]
