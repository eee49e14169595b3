# SPDX-License-Identifier: Apache-2.0
"""AGX Orin 64 GB, Qwen/Qwen3-8B natively: the trial keeps EAGLE-3 speculation at the planned utilization."""

from conftest import (
    ENV_FILE,
    HISTORY_DIR,
    NATIVE_ARGV,
    UNIT_FILE,
    assert_serving,
    drafts_after_completion,
    exec_start,
    speculative_config,
)

MODEL = "Qwen/Qwen3-8B"
HEAD = "AngelSlim/Qwen3-8B_eagle3"
BASELINE_UTIL = 0.70  # the role's AGX Orin default
PLANNED_UTIL = 0.65  # the baseline lowered by 0.05 for speculation


def test_vllm_serves_the_model(host):
    assert_serving(host, MODEL)


def test_unit_runs_vllm_natively_from_the_rendered_config(host):
    assert exec_start(host) == NATIVE_ARGV
    unit = host.file(UNIT_FILE)
    assert unit.mode == 0o644
    assert "EnvironmentFile=%s" % ENV_FILE in unit.content_string
    env = host.file(ENV_FILE)
    assert (env.user, env.mode) == ("root", 0o600)
    assert env.contains("^HF_HUB_OFFLINE=1$")


def test_serve_config_has_the_kept_speculative_config(serve):
    assert serve["model"] == MODEL
    assert serve["max-model-len"] == 8192
    assert serve["gpu-memory-utilization"] == PLANNED_UTIL
    assert speculative_config(serve) == {"method": "eagle3", "model": HEAD, "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1}


def test_the_served_model_speculates(host):
    before, after = drafts_after_completion(host, MODEL)
    assert after > before


def test_known_good_copy_is_the_baseline(host, known_good):
    assert known_good["model"] == MODEL
    assert known_good["gpu-memory-utilization"] == BASELINE_UTIL
    assert "speculative-config" not in known_good
    for name, mode in (("vllm.service", 0o644), ("vllm.env", 0o600)):
        assert host.file("/var/lib/jetson_llm/vllm/known-good/" + name).mode == mode


def test_decision_is_keep_on_the_first_rung(state):
    assert (state["decision"], state["outcome"]) == ("keep", "keep")
    assert state["label"].startswith("keep")
    assert state["verdict"]["decision"] == "keep"
    assert state["verdict"]["gain_c1"]["ci"][0] >= 0.10
    assert (state["family"], state["variant"], state["vllm_version"]) == ("agx_orin", "64gb", "0.20.0")
    # The planned configuration started: no out-of-memory rung was needed.
    assert state["ladder"] == []
    assert state["fitted"]["rung"] == "plan"
    assert (state["method"], state["speculator"], state["gpu_memory_utilization"]) == ("eagle3", HEAD, PLANNED_UTIL)
    assert state["baseline_gpu_memory_utilization"] == BASELINE_UTIL


def test_history_keeps_the_benchmarks_and_the_decision(host, state, history):
    key = state["key"]
    decisions = [n for n in history if n.startswith("decision-%s-" % key)]
    assert len(decisions) == 1
    for arm in ("baseline", "speculative"):
        assert any(n.startswith("%s-%s-" % (key, arm)) for n in history), arm
    # every block the verdict counted comes from a saved benchmark result
    files = {b["result_file"] for b in state["blocks"]}
    assert files <= {"%s/%s" % (HISTORY_DIR, n) for n in history}
    assert len(state["blocks"]) >= 4 * state["verdict"]["thresholds"]["min_rounds"]


def test_controller_report_matches_the_device(state, report):
    assert report == state


SANDBOX = {
    "User": "vllm",
    "Group": "vllm",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "RestrictRealtime": "yes",
    "LockPersonality": "yes",
}


def _main_pid(host):
    pid = int(host.check_output("systemctl show -p MainPID --value vllm"))
    assert pid > 0
    return pid


def test_the_service_user_is_an_unprivileged_system_user(host):
    user = host.user("vllm")
    assert user.exists
    assert 0 < user.uid < 1000
    assert user.shell == "/usr/sbin/nologin"
    assert user.home == "/var/lib/vllm"
    home = host.file("/var/lib/vllm")
    assert (home.is_directory, home.user, home.mode) == (True, "vllm", 0o750)
    # the GPU groups the device has, and only those
    for group in ("video", "render"):
        if host.group(group).exists:
            assert group in user.groups, group


def test_the_unit_is_sandboxed(host):
    keys = ",".join(SANDBOX)
    out = host.check_output("systemctl show -p %s vllm", keys)
    shown = dict(line.split("=", 1) for line in out.splitlines())
    assert shown == SANDBOX
    rw = host.check_output("systemctl show -p ReadWritePaths --value vllm").split()
    assert "/var/lib/vllm" in rw


def test_vllm_runs_as_the_service_user_without_new_privileges(host):
    pid = _main_pid(host)
    status = host.file("/proc/%d/status" % pid).content_string
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    uid = host.user("vllm").uid
    assert [int(v) for v in fields["Uid"].split()] == [uid] * 4
    assert fields["NoNewPrivs"].strip() == "1"
    # The mount-namespace settings (ProtectSystem, ProtectHome, PrivateTmp) are checked as systemd's
    # unit properties above, not in the process's mount table: in the simulated host (a rootless
    # container) that table still shows / read-write, so it proves nothing here.
    # the environment file with the secrets stays root-only; the service never reads it itself
    assert host.file(ENV_FILE).user == "root"
