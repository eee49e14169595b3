# SPDX-License-Identifier: Apache-2.0
"""The benchmark client end to end against the vLLM simulator (tests/vllm_sim) on loopback."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import BenchError, Server, wait_ready
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.metrics import SPEC_FIELDS, missing_metrics, sim_lag_fields
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.runner import run_benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SIM_DIR = os.path.join(ROOT, "tests", "vllm_sim")
SIM_CLI = os.path.join(SIM_DIR, "vllm_sim", "cli.py")
# The simulator's console script (tests/vllm_sim/pyproject.toml), installed by `make venv`.
SIM_LAUNCHER = os.path.join(os.path.dirname(sys.executable), "vllm")

TARGET = "Qwen/Qwen3-1.7B"
EAGLE = "AngelSlim/Qwen3-1.7B_eagle3"
SPEC_K = 3

pytestmark = pytest.mark.skipif(not os.path.exists(SIM_CLI), reason="the vLLM simulator is not in the tree")

MEMINFO = """\
MemTotal:       65890312 kB
MemFree:        50123456 kB
MemAvailable:   60123456 kB
Buffers:          123456 kB
Cached:          4123456 kB
SwapCached:            0 kB
SwapTotal:             0 kB
SwapFree:              0 kB
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def hf_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("hf")
    subprocess.run(
        [sys.executable, "-m", "vllm_sim.zoo", "install", str(home / "hub"), "--models", TARGET, EAGLE],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return home


class Sim:
    """One simulator process; always stopped by PID."""

    def __init__(self, tmp_path, hf_home, args=(), settings=None):
        self.dir = tmp_path / ("sim-%d" % free_port())
        self.dir.mkdir()
        conf = {
            "time_scale": 0.01,
            # A hundredth of real time is faster than a busy host keeps; these tests are about the
            # client, not the simulator's timing (test_blocks_carry_the_simulators_lag sets its own).
            "lag_limit": 100.0,
            "noise": 0.02,
            "seed": 7,
            "device": {"bandwidth_gbs": 204.8, "tflops": 42.6},
            "state_dir": str(self.dir / "state"),
        }
        conf.update(settings or {})
        (self.dir / "settings.json").write_text(json.dumps(conf))
        (self.dir / "meminfo").write_text(MEMINFO)
        self.api_key = args[list(args).index("--api-key") + 1] if "--api-key" in args else None
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        env = dict(
            os.environ,
            HF_HOME=str(hf_home),
            VLLM_SIM_SETTINGS=str(self.dir / "settings.json"),
            VLLM_SIM_MEMINFO=str(self.dir / "meminfo"),
        )
        cmd = [SIM_LAUNCHER, "serve", TARGET, "--host", "127.0.0.1", "--port", str(self.port)]
        self.log = open(self.dir / "log", "w")
        self.proc = subprocess.Popen([*cmd, *args], env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError("simulator exited %s:\n%s" % (self.proc.returncode, self.read_log()))
            try:
                return wait_ready(Server(self.url, self.api_key), TARGET, timeout=0.5, interval=0.1)
            except BenchError:
                time.sleep(0.2)
        raise AssertionError("simulator not ready:\n%s" % self.read_log())

    def read_log(self):
        self.log.flush()
        return (self.dir / "log").read_text()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


@pytest.fixture
def sim(tmp_path, hf_home):
    started = []

    def start(args=(), settings=None, ready=True):
        server = Sim(tmp_path, hf_home, args, settings)
        started.append(server)
        if ready:
            server.wait_ready()
        return server

    yield start
    for server in started:
        server.stop()


SPEC_ARGS = (
    "--speculative-config",
    json.dumps({"method": "eagle3", "model": EAGLE, "num_speculative_tokens": SPEC_K}),
)


def bench(url, **kw):
    args = dict(concurrency=(1, 4), num_prompts=8, num_warmups=2, output_len=24, timeout=60, deadline=300)
    args.update(kw)
    return run_benchmark(url, **args)


def test_baseline_has_every_metric_and_no_acceptance(sim):
    server = sim()
    result = bench(server.url)
    assert result["model"] == TARGET
    assert result["server"]["max_model_len"] > 0
    assert result["config"]["input_len"] > 10
    assert [r["concurrency"] for r in result["runs"]] == [1, 4]
    for run in result["runs"]:
        assert run["completed"] == 8 and run["failed"] == 0
        assert run["total_output_tokens"] == 8 * 24
        assert run["samples"]["output_tokens"] == [24] * 8
        assert len(run["samples"]["tpot_ms"]) == 8
        assert missing_metrics(run) == []
        assert run["output_throughput"] > 0
        assert run["e2e_latency_ms_p50"] == run["median_e2el_ms"] > run["median_ttft_ms"] > 0
        assert not [k for k in run if k.startswith("spec_decode")]
        assert run["warnings"] == []


def test_counts_per_concurrency_level(sim):
    server = sim()
    result = bench(server.url, num_prompts=[3, 8])
    assert [(r["concurrency"], r["completed"]) for r in result["runs"]] == [(1, 3), (4, 8)]
    assert result["config"]["num_prompts"] == [3, 8]
    with pytest.raises(BenchError, match="lists 1 counts for 2 concurrency levels"):
        bench(server.url, num_prompts=[3])


def test_speculation_reports_acceptance_and_same_greedy_text(sim):
    base = sim()
    baseline = bench(base.url, concurrency=(1,))
    base.stop()
    spec = sim(args=SPEC_ARGS)
    result = bench(spec.url, concurrency=(1,), blocks=2)
    run = result["runs"][0]
    assert run["completed"] == 8
    for key in SPEC_FIELDS:
        assert key in run, key
    assert 1.0 <= run["spec_decode_acceptance_length"] <= SPEC_K + 1
    assert 0.0 <= run["spec_decode_acceptance_rate"] <= 100.0
    assert len(run["spec_decode_per_position_acceptance_rates"]) == SPEC_K
    assert all(0.0 <= r <= 1.0 for r in run["spec_decode_per_position_acceptance_rates"])
    assert run["spec_decode_draft_tokens"] == SPEC_K * run["spec_decode_num_drafts"]
    assert run["spec_decode_acceptance_length"] == pytest.approx(1 + run["spec_decode_accepted_tokens"] / run["spec_decode_num_drafts"], abs=1e-3)
    # per-block acceptance adds up to the run's
    assert len(run["blocks"]) == 2
    assert sum(b["spec_decode_num_drafts"] for b in run["blocks"]) == run["spec_decode_num_drafts"]
    assert sum(b["spec_decode_accepted_tokens"] for b in run["blocks"]) == run["spec_decode_accepted_tokens"]
    # greedy decoding: speculation must not change the text (same prompts in the same order)
    assert run["samples"]["prompt_ids"] == baseline["runs"][0]["samples"]["prompt_ids"]
    assert run["samples"]["text_sha256"] == baseline["runs"][0]["samples"]["text_sha256"]


def test_completions_endpoint(sim):
    server = sim()
    result = bench(server.url, concurrency=(2,), endpoint="completions")
    assert result["endpoint"] == "/v1/completions"
    assert result["runs"][0]["completed"] == 8


def test_crashing_server_is_an_error_not_zeros(sim):
    server = sim(settings={"faults": {"crash_after_requests": 5}})
    with pytest.raises(BenchError) as err:
        bench(server.url, concurrency=(1,), num_warmups=0, output_len=200)
    text = str(err.value)
    assert server.url in text
    assert "failed" in text


def test_blocks_carry_the_simulators_lag(sim):
    server = sim(settings={"time_scale": 0.1, "lag_limit": 0.02})
    result = bench(server.url, concurrency=(1,), blocks=2, num_warmups=0, num_prompts=4)
    run = result["runs"][0]
    assert [sorted(k for k in b if k.startswith("sim_")) for b in run["blocks"]] == [["sim_lag_share", "sim_late_steps", "sim_out_of_spec"]] * 2
    assert run["sim_out_of_spec"] is any(b["sim_out_of_spec"] for b in run["blocks"])
    assert run["sim_lag_share"] == max(b["sim_lag_share"] for b in run["blocks"])


def test_sim_lag_fields_flag_a_block_beyond_the_limit():
    before = {"busy": 10.0, "lost": 0.1, "steps": 100.0, "late_steps": 0.0, "limit": 0.02}
    fine = dict(before, busy=20.0, lost=0.2, steps=200.0)
    late = dict(fine, busy=30.0, lost=0.7, steps=300.0, late_steps=12.0)
    assert sim_lag_fields(before, fine) == {"sim_lag_share": 0.01, "sim_out_of_spec": False, "sim_late_steps": 0}
    assert sim_lag_fields(fine, late) == {"sim_lag_share": 0.05, "sim_out_of_spec": True, "sim_late_steps": 12}
    assert sim_lag_fields(None, late) == {}
