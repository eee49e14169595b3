# SPDX-License-Identifier: Apache-2.0
"""vllm_benchmark module: option checks, result files, check mode and failure without a server."""

import json
import os
import socket
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from ansible_collections.jetson_llm.speculative.plugins.modules import vllm_benchmark as mod

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN = os.path.join(ROOT, ".venv", "bin")


def params(**over):
    base = {
        "concurrency": [1, 8],
        "num_prompts": 50,
        "num_warmups": 10,
        "output_len": 128,
        "blocks": 1,
        "timeout": 300.0,
        "deadline": 3600.0,
        "ready_timeout": 60.0,
        "max_failed_fraction": 0.0,
        "temperature": 0.0,
    }
    base.update(over)
    return base


def test_defaults_are_valid():
    assert mod.validate(params()) == []


@pytest.mark.parametrize(
    ("over", "text"),
    [
        ({"concurrency": []}, "at least one level"),
        ({"concurrency": [1, 0]}, "concurrency levels must be >= 1"),
        ({"num_prompts": 0}, "num_prompts must be >= 1"),
        ({"num_warmups": -1}, "num_warmups must be >= 0"),
        ({"output_len": 1}, "output_len must be >= 2"),
        ({"blocks": 51}, "blocks must be between 1 and num_prompts (50)"),
        ({"blocks": 0}, "blocks must be between"),
        ({"timeout": 0}, "timeout must be > 0"),
        ({"deadline": -5}, "deadline must be > 0"),
        ({"max_failed_fraction": 1.5}, "max_failed_fraction must be between 0 and 1"),
        ({"temperature": -0.1}, "temperature must be >= 0"),
    ],
)
def test_invalid_options(over, text):
    errors = mod.validate(params(**over))
    assert len(errors) == 1
    assert text in errors[0]


RESULT = {
    "label": "spec k=3/eagle",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "config": {"concurrency": [1, 8]},
    "runs": [{"concurrency": 1, "output_throughput": 20.5}],
}
NOW = datetime(2025, 6, 1, 10, 15, 0, tzinfo=timezone.utc)


def test_result_filename():
    assert mod.result_filename(RESULT, NOW) == "spec_k_3_eagle-c1_8-Llama-3.1-8B-Instruct-20250601T101500Z.json"
    unlabeled = dict(RESULT, label=None)
    assert mod.result_filename(unlabeled, NOW).startswith("vllm-c1_8-")


def test_save_result_never_overwrites(tmp_path):
    history = tmp_path / "history" / "bench"
    paths = [mod.save_result(str(history), dict(RESULT, runs=[{"n": i}]), NOW) for i in range(3)]
    assert len(set(paths)) == 3
    assert [os.path.basename(p) for p in paths] == [
        "spec_k_3_eagle-c1_8-Llama-3.1-8B-Instruct-20250601T101500Z.json",
        "spec_k_3_eagle-c1_8-Llama-3.1-8B-Instruct-20250601T101500Z-1.json",
        "spec_k_3_eagle-c1_8-Llama-3.1-8B-Instruct-20250601T101500Z-2.json",
    ]
    for i, path in enumerate(paths):
        with open(path) as handle:
            assert json.load(handle)["runs"] == [{"n": i}]
        assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(history)) == sorted(os.path.basename(p) for p in paths)  # no temp files left


def test_save_result_into_unwritable_place_raises(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        mod.save_result(str(blocker / "sub"), RESULT, NOW)


# ---------------------------------------------------------------------------- through ansible


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ansible_env(tmp_path):
    env = dict(os.environ)
    env.update(
        HOME=os.path.join(ROOT, ".cache", "home"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
        ANSIBLE_DEPRECATION_WARNINGS="false",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
    )
    return env


def run_module(tmp_path, args, check=False, timeout=600):
    """Run the module on localhost through ``ansible``; return the host result dict."""
    cmd = [
        os.path.join(BIN, "ansible"),
        "localhost",
        "-m",
        "jetson_llm.speculative.vllm_benchmark",
        "-a",
        json.dumps(args),
    ]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, env=ansible_env(tmp_path), capture_output=True, text=True, timeout=timeout, check=False)
    out = json.loads(proc.stdout)
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]


needs_ansible = pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "ansible")), reason="needs the venv")


@needs_ansible
def test_check_mode_sends_nothing(tmp_path):
    # nothing listens on this port: check mode must not even try to connect
    result = run_module(tmp_path, {"url": "http://127.0.0.1:%d" % free_port(), "result_dir": str(tmp_path / "h")}, check=True)
    assert result.get("failed") is not True, result
    assert result["skipped"] is True
    assert result["changed"] is False
    assert "Check mode" in result["msg"]
    assert not (tmp_path / "h").exists()


@needs_ansible
def test_absent_server_fails_clearly(tmp_path):
    url = "http://127.0.0.1:%d" % free_port()
    result = run_module(tmp_path, {"url": url, "ready_timeout": 1, "concurrency": [1]})
    assert result["failed"] is True
    assert result["msg"] == "vLLM server at %s is not ready after 1 s: connection refused" % url
    assert result["runs"] == []
    assert "output_throughput" not in json.dumps(result)


@needs_ansible
def test_invalid_options_fail_before_any_request(tmp_path):
    result = run_module(tmp_path, {"url": "http://127.0.0.1:%d" % free_port(), "output_len": 1, "blocks": 0})
    assert result["failed"] is True
    assert "output_len must be >= 2" in result["msg"]
    assert "blocks must be between" in result["msg"]


# ---------------------------------------------------------------- prompts_file


def test_load_prompts_names_the_set_after_the_file(tmp_path):
    path = tmp_path / "workload.jsonl"
    path.write_text('{"prompt": "a"}\n{"messages": [{"role": "user", "content": "b"}]}\n')
    prompts, prompt_set = mod.load_prompts(str(path))
    assert [p["id"] for p in prompts] == ["line-1", "line-2"]
    assert prompt_set["name"] == "workload.jsonl" and prompt_set["source"] == "file" and prompt_set["count"] == 2
    assert mod.load_prompts(str(path), name="ops-chat.jsonl")[1]["name"] == "ops-chat.jsonl"


def test_load_prompts_refuses_messages_lines_for_the_completions_endpoint(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text('{"prompt": "a"}\n{"messages": [{"role": "user", "content": "b"}]}\n')
    with pytest.raises(ValueError, match="line 2 is a messages line, which only the chat endpoint can send"):
        mod.load_prompts(str(path), endpoint="completions")


def test_load_prompts_names_the_file_and_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": ""}\n')
    with pytest.raises(ValueError) as caught:
        mod.load_prompts(str(path))
    assert str(caught.value).startswith("prompts_file %s is not allowed: line 2: prompt is empty; expected a UTF-8 JSONL file" % path)
    with pytest.raises(ValueError, match="cannot read prompts_file"):
        mod.load_prompts(str(tmp_path / "missing.jsonl"))


@needs_ansible
def test_bad_prompts_file_fails_before_any_request(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("not json\n")
    result = run_module(tmp_path, {"url": "http://127.0.0.1:%d" % free_port(), "prompts_file": str(path), "ready_timeout": 1})
    assert result["failed"] is True
    assert "line 1: not JSON" in result["msg"]
    assert "not ready" not in result["msg"]


class _FakeModule:
    def __init__(self, out, rc=0, systemctl="/usr/bin/systemctl"):
        self.out, self.rc, self.systemctl, self.calls = out, rc, systemctl, []

    def get_bin_path(self, name):
        return self.systemctl if name == "systemctl" else None

    def run_command(self, argv):
        self.calls.append(argv)
        return self.rc, self.out, ""


def test_unit_state_reads_the_invocation_and_main_pid_of_the_service():
    fake = _FakeModule("InvocationID=0f5b0c8e2d1d4e0f9b1b7b2f3a4c5d6e\nMainPID=4242\n")
    assert mod.unit_state(fake, "vllm.service") == {"invocation": "0f5b0c8e2d1d4e0f9b1b7b2f3a4c5d6e", "main_pid": 4242}
    assert fake.calls == [["/usr/bin/systemctl", "show", "-p", "InvocationID", "-p", "MainPID", "--", "vllm.service"]]
    # a stopped unit: no invocation, MainPID=0
    assert mod.unit_state(_FakeModule("InvocationID=\nMainPID=0\n"), "vllm.service") == {"invocation": None, "main_pid": None}
    # no service, no systemctl, or systemctl failing: nothing known (the arm proof then fails, never passes)
    assert mod.unit_state(fake, None) == {}
    assert mod.unit_state(_FakeModule("", systemctl=None), "vllm.service") == {}
    assert mod.unit_state(_FakeModule("", rc=1), "vllm.service") == {}


def test_served_speculation_is_none_without_a_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert mod.served_speculation("http://127.0.0.1:%d" % port, None) is None


def test_a_server_whose_main_process_changed_died_during_the_benchmark():
    assert mod.died_during({"main_pid": 42}, {"main_pid": 42}) is None
    assert mod.died_during({}, {"main_pid": 42}) is None  # nothing to compare with
    assert mod.died_during({"main_pid": 42}, {"main_pid": 77}) == ("vLLM died during the benchmark (main process 42 is gone; systemd started it again as 77)")
    assert mod.died_during({"main_pid": 42}, {"main_pid": None}) == (
        "vLLM died during the benchmark (main process 42 is gone and the unit has no main process)"
    )
