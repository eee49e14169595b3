# SPDX-License-Identifier: Apache-2.0
"""vllm_server_info: the live unit and server against the files, with the simulator on loopback."""

import hashlib
import importlib.util
import json
import os
import signal
import stat
import subprocess
import time

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _vllm_health as health
from ansible_collections.jetson_llm.speculative.plugins.modules import vllm_server_info as info

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_sim = _load("_bench_sim_helpers_info", os.path.join(HERE, "..", "module_utils", "test_bench_sim.py"))
_mod = _load("_vllm_benchmark_helpers_info", os.path.join(HERE, "test_vllm_benchmark.py"))
hf_home = _sim.hf_home
sim = _sim.sim
SHA = "a" * 64


# ---------------------------------------------------------------------------- helpers


def test_speculation_from_metrics():
    assert health.speculation_from_metrics('vllm:num_requests_running{a="b"} 0\nvllm:spec_decode_num_drafts_total{a="b"} 0.0\n') is True
    assert health.speculation_from_metrics("# HELP vllm:spec_decode_num_drafts_total x\nvllm:prompt_tokens_total 3\n") is False
    assert health.speculation_from_metrics("python_info 1.0\nprocess_resident_memory_bytes 1e6\n") is None


def test_parse_start_record():
    text = "# invocation 0123abcd\n%s  /etc/vllm/serve.yaml\n%s */etc/vllm/vllm.env\n\n" % (SHA, "B" * 64)
    assert health.parse_start_record(text) == {
        "invocation_id": "0123abcd",
        "files": {"/etc/vllm/serve.yaml": SHA, "/etc/vllm/vllm.env": "b" * 64},
    }
    with pytest.raises(ValueError):
        health.parse_start_record("sha256sum: /etc/vllm/serve.yaml: No such file or directory\n")


def test_systemd_epoch_uses_the_monotonic_clock():
    show = {"ActiveEnterTimestampMonotonic": "5000000"}
    assert health.systemd_epoch(show, "ActiveEnterTimestamp", 15.0, 1000.0) == pytest.approx(990.0)
    assert health.systemd_epoch({"ActiveEnterTimestampMonotonic": "0"}, "ActiveEnterTimestamp", 15.0, 1000.0) is None


def _files(tmp_path, written_at):
    paths = []
    for name, text in (("serve.yaml", "model: x\n"), ("vllm.env", "A=1\n")):
        path = tmp_path / name
        path.write_text(text)
        os.utime(str(path), (written_at, written_at))
        paths.append(str(path))
    return paths


def _record(paths, invocation="inv-1"):
    lines = ["# invocation %s" % invocation] if invocation else []
    for path in paths:
        with open(path, "rb") as handle:
            lines.append("%s  %s" % (hashlib.sha256(handle.read()).hexdigest(), path))
    return "\n".join(lines) + "\n"


UNIT = {"active_state": "active", "sub_state": "running", "invocation_id": "inv-1", "main_pid": 42, "n_restarts": 0, "started_at": 2000.0}


def test_config_current_by_record(tmp_path):
    paths = _files(tmp_path, 1000.0)
    res = info.config_info(paths, "/run/vllm/config.sha256", _record(paths), None, UNIT, True)
    assert res["start_record"] == "current" and res["config_evidence"] == "record"
    assert res["config_current"] is True and res["started_after_config"] is True
    assert res["config_sha256"] is not None
    assert res["config_sha256"] == res["started_config_sha256"]
    assert res["differences"] == []
    # content changed but the file is older than the start (mtime restored): the record still sees it
    (tmp_path / "serve.yaml").write_text("model: y\n")
    os.utime(paths[0], (1000.0, 1000.0))
    res = info.config_info(paths, "/run/vllm/config.sha256", _record(paths[1:]) + "%s  %s\n" % (SHA, paths[0]), None, UNIT, True)
    assert res["config_current"] is False and res["started_after_config"] is True
    assert res["differences"][0].startswith("%s changed since the server started (sha256 aaaaaaaaaaaa at start" % paths[0])


def test_stale_or_missing_record_falls_back_to_mtime(tmp_path):
    paths = _files(tmp_path, 2500.0)  # written after the start at 2000
    stale = info.config_info(paths, "/r", _record(paths, "inv-0"), None, UNIT, True)
    assert stale["start_record"] == "stale" and stale["config_evidence"] == "mtime"
    assert stale["config_current"] is False and stale["started_after_config"] is False
    assert any("written 500.0 s after the server started" in d for d in stale["differences"])
    missing = info.config_info(paths, "/r", None, "missing", dict(UNIT, started_at=3000.0), True)
    assert missing["start_record"] == "missing" and missing["config_current"] is True and missing["config_evidence"] == "mtime"
    nothing = info.config_info(paths, None, None, None, dict(UNIT, started_at=None), True)
    assert nothing["config_current"] is None and nothing["start_record"] is None
    stopped = info.config_info(paths, "/r", _record(paths), None, dict(UNIT, active_state="failed"), False)
    assert stopped["config_current"] is None


# ---------------------------------------------------------------------------- through ansible against the simulator

pytestmark_sim = [
    pytest.mark.skipif(not os.path.exists(_sim.SIM_CLI), reason="the vLLM simulator is not in the tree"),
    pytest.mark.skipif(not os.path.exists(os.path.join(_mod.BIN, "ansible")), reason="needs the venv"),
]


def fake_systemctl(tmp_path, props):
    """A ``systemctl`` first in PATH that prints ``props`` for ``show``."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (tmp_path / "show.txt").write_text("".join("%s=%s\n" % kv for kv in props.items()))
    script = bindir / "systemctl"
    script.write_text('#!/bin/sh\n[ "$1" = show ] || exit 1\ncat "%s"\n' % (tmp_path / "show.txt"))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(bindir)


def run_info(tmp_path, args, bindir, check=False):
    env = _mod.ansible_env(tmp_path)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    cmd = [os.path.join(_mod.BIN, "ansible"), "localhost", "-m", "jetson_llm.speculative.vllm_server_info", "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.mark.usefixtures("hf_home")
@pytest.mark.parametrize("arm", ["speculative", "baseline"])
def test_live_server_through_ansible(tmp_path, sim, arm):
    for mark in pytestmark_sim:
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    paths = _files(tmp_path, time.time() - 5)
    server = sim(args=_sim.SPEC_ARGS if arm == "speculative" else ())
    props = {
        "LoadState": "loaded",
        "ActiveState": "active",
        "SubState": "running",
        "InvocationID": "inv-live",
        "MainPID": server.proc.pid,
        "NRestarts": 0,
        "ActiveEnterTimestamp": "Thu 2026-12-03 06:41:31 UTC",
        "ActiveEnterTimestampMonotonic": int(time.monotonic() * 1e6),
    }
    bindir = fake_systemctl(tmp_path, props)
    record = tmp_path / "config.sha256"
    record.write_text(_record(paths, "inv-live"))
    args = {"url": server.url, "service": "vllm.service", "config_files": paths, "start_record": str(record)}
    res = run_info(tmp_path, args, bindir, check=True)
    assert res.get("failed") is not True, res
    assert res["changed"] is False
    assert res["running"] and res["responding"] and res["healthy"]
    assert res["speculative"] is (arm == "speculative")
    assert res["model"] == _sim.TARGET and res["max_model_len"] > 0
    assert res["invocation_id"] == "inv-live" and res["main_pid"] == server.proc.pid and res["active_state"] == "active"
    assert abs(res["started_at"] - time.time()) < 30
    assert res["start_record"] == "current" and res["config_current"] is True and res["config_evidence"] == "record"
    # without a wanted configuration the module does not judge; with one it says whether the server is it
    assert res["wanted"] is None
    same = run_info(tmp_path, dict(args, want_speculative=arm == "speculative"), bindir)
    assert same["wanted"] == {"speculative": arm == "speculative", "serves": True, "gaps": []}
    other = run_info(tmp_path, dict(args, want_speculative=arm != "speculative", want_label="the decision is X"), bindir)
    loaded = "loaded" if arm == "speculative" else "not loaded"
    assert other["wanted"] == {"speculative": arm != "speculative", "serves": False, "gaps": ["speculation is %s where the decision is X" % loaded]}
    # the role rewrites serve.yaml without restarting: the live server no longer matches the files
    with open(paths[0], "a") as handle:
        handle.write("speculative-config: '{}'\n")
    changed = run_info(tmp_path, dict(args, want_speculative=arm == "speculative"), bindir)
    assert changed["config_current"] is False
    assert changed["config_current"] is False and changed["config_evidence"] == "record"
    assert changed["differences"][-1].startswith(paths[0] + " changed since the server started (sha256 ")
    assert changed["wanted"]["serves"] is False and changed["wanted"]["gaps"] == changed["differences"]


def test_hung_server_is_not_responding(tmp_path, sim):
    for mark in pytestmark_sim:
        if mark.args[0]:
            pytest.skip(mark.kwargs["reason"])
    server = sim()
    assert info.server_info(server.url, timeout=5.0)["responding"] is True
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        res = info.server_info(server.url, timeout=1.0)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert time.monotonic() - start < 5
    assert res["responding"] is False and res["healthy"] is False and res["speculative"] is None
    assert "timed out" in res["detail"]
