# SPDX-License-Identifier: Apache-2.0
"""AGX Orin 32 GB running the upstream vLLM image through docker: speculation is kept; the host itself
runs privileged only with a private cgroup namespace and without the machine's cgroup tree."""

import json
import os
import subprocess

from conftest import ENV_FILE, assert_serving, drafts_after_completion, exec_start, speculative_config

MODEL = "Qwen/Qwen3-8B"
HEAD = "AngelSlim/Qwen3-8B_eagle3"
IMAGE = "vllm/vllm-openai:v0.20.0"
PLATFORM = "molecule-docker"


def test_vllm_serves_the_model(host):
    assert_serving(host, MODEL)


def test_unit_runs_the_upstream_image_with_the_nvidia_runtime(host):
    assert exec_start(host) == [
        "/usr/bin/docker", "run", "--rm", "--name", "vllm", "--runtime", "nvidia", "--network", "host",
        "-v", "/etc/vllm:/etc/vllm:ro", "-v", "/root/.cache/huggingface:/root/.cache/huggingface",
        "--env-file", ENV_FILE, IMAGE, "--config", "/etc/vllm/serve.yaml",
    ]  # fmt: skip
    inspect = json.loads(host.check_output("docker inspect vllm"))[0]
    assert inspect["State"]["Running"]
    assert inspect["Config"]["Image"] == IMAGE
    assert inspect["HostConfig"]["Runtime"] == "nvidia"


def test_serve_config_has_the_kept_speculative_config(serve):
    # AGX Orin: baseline 0.70 lowered by 0.05, k=3 (the role's and the planner's defaults)
    assert serve["model"] == MODEL
    assert serve["gpu-memory-utilization"] == 0.65
    assert speculative_config(serve) == {"method": "eagle3", "model": HEAD, "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1}


def test_the_served_model_speculates(host):
    before, after = drafts_after_completion(host, MODEL)
    assert after > before


def test_decision_is_keep(state):
    assert (state["decision"], state["outcome"]) == ("keep", "keep")
    assert (state["family"], state["variant"], state["l4t"]) == ("agx_orin", "32gb", "39.0.0")
    assert state["fitted"]["rung"] == "plan"


def podman_inspect():
    out = subprocess.run(["podman", "container", "inspect", PLATFORM], capture_output=True, text=True, check=True, env=os.environ).stdout
    return json.loads(out)[0]


def test_the_host_has_a_private_cgroup_namespace_and_no_cgroup_mount():
    info = podman_inspect()
    assert info["HostConfig"]["Privileged"] is True
    assert info["HostConfig"]["CgroupMode"] == "private"
    assert not [m for m in info["Mounts"] if m["Source"].startswith("/sys/fs/cgroup")]
