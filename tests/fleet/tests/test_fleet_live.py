# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests on the running ci fleet (tests/fleet/ci.yml): identity, Ansible over SSH,
the simulated vLLM served natively and from the stand-in container image, and a clean teardown.

Run as root: `make fleet-test`. The session fixture brings the fleet up and always tears it down.
"""

import json
import os
import shlex
import subprocess

import openai
import pytest
from fleet_helpers import BIN, ansible_env, config, fleet_cmd, ops
from jlfleet.description import load_profiles

NATIVE = "ci-orin"
SMALL = "ci-nano"
DOCKER = "ci-thor-docker"
TARGET = "Qwen/Qwen3-8B"
EAGLE = "AngelSlim/Qwen3-8B_eagle3"


def metric_sum(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


class NativeServer:
    """`vllm serve` started by hand on a fleet host, as a transient systemd unit."""

    def __init__(self, fleet, host, args, unit="jlf-test-vllm"):
        self.fleet, self.host, self.unit = fleet, host, unit
        cmd = "systemd-run --unit=%s --collect --quiet /usr/local/bin/vllm serve %s" % (
            unit,
            " ".join(shlex.quote(a) for a in args),
        )
        fleet.ssh(host, cmd, check=True)

    def alive(self):
        proc = self.fleet.ssh(self.host, "systemctl is-active %s" % self.unit)
        if proc.stdout.strip() in ("active", "activating"):
            return True, ""
        return False, self.journal()

    def journal(self):
        return self.fleet.ssh(self.host, "journalctl -u %s --no-pager -n 60" % self.unit).stdout

    def stop(self):
        self.fleet.ssh(self.host, "systemctl stop %s; systemctl reset-failed %s" % (self.unit, self.unit))


def client(fleet, host):
    return openai.OpenAI(base_url="http://%s:8000/v1" % fleet.address(host), api_key="EMPTY", max_retries=0, timeout=120)


def stream_completion(fleet, host, model, max_tokens=24):
    chunks = []
    usage = None
    stream = client(fleet, host).completions.create(
        model=model,
        prompt="Explain speculative decoding in one sentence.",
        max_tokens=max_tokens,
        stream=True,
        stream_options={"include_usage": True},
    )
    for event in stream:
        if event.choices:
            chunks.append(event.choices[0].text)
        if event.usage:
            usage = event.usage
    return chunks, usage


# ------------------------------------------------------------------ identity and Ansible


def test_each_host_has_its_own_identity(ci_fleet):
    profiles = load_profiles()
    for name, h in ci_fleet.hosts.items():
        prof = profiles[h["profile"]]
        script = (
            "hostname; tr -d '\\0' < /sys/firmware/devicetree/base/model; echo; "
            "tr '\\0' ';' < /sys/firmware/devicetree/base/compatible; echo; head -n 1 /etc/nv_tegra_release; "
            "awk '/^MemTotal:|^MemAvailable:/ {print $2}' /proc/meminfo; nvpmodel -q; "
            "dpkg-query -W -f='${Version}\\n' nvidia-l4t-core; ip route | grep -c default; wc -c < /etc/resolv.conf; "
            "getent hosts %s | cut -d' ' -f1" % name
        )
        out = ci_fleet.ssh(name, script, check=True).stdout.splitlines()
        assert out[0] == name
        assert out[1] == prof["model"]
        assert out[2] == "".join(c + ";" for c in prof["compatible"])
        assert out[3] == prof["nv_tegra_release"]
        assert int(out[4]) == prof["mem_total_kib"]
        assert int(out[5]) == h["mem_available_kib"]
        assert out[6:8] == ["NV Power Mode: %s" % prof["nvpmodel"]["name"], str(prof["nvpmodel"]["id"])]
        assert out[8].startswith(prof["nv_tegra_release"].split()[1][1:] + ".")
        assert out[9:12] == ["0", "0", h["address"]]


def test_jetson_facts_over_ssh_report_each_host(ci_fleet):
    if not os.path.exists(os.path.join(config.REPO_ROOT, "plugins", "modules", "jetson_facts.py")):
        pytest.fail("plugins/modules/jetson_facts.py is missing")
    env = ansible_env()
    env.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    proc = subprocess.run(
        [os.path.join(BIN, "ansible"), "all", "-i", ops.STATE_INVENTORY, "-m", "jetson_llm.speculative.jetson_facts"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]
    assert set(results) == set(ci_fleet.hosts)
    for name, h in ci_fleet.hosts.items():
        facts = results[name]["ansible_facts"]["jetson"]
        assert facts["family"] == h["expect"]["family"], name
        assert facts["variant"] == h["expect"]["variant"], name
        assert facts["memory"]["total_mb"] == h["mem_total_kib"] // 1024, name
        assert facts["memory"]["available_mb"] == h["mem_available_kib"] // 1024, name


# ------------------------------------------------------------------ the simulated vLLM, native


def test_native_vllm_serves_streamed_completions(ci_fleet):
    server = NativeServer(ci_fleet, NATIVE, [TARGET, "--host", "0.0.0.0", "--port", "8000"])
    try:
        ci_fleet.wait_healthy(NATIVE, server.alive)
        models = client(ci_fleet, NATIVE).models.list()
        assert [m.id for m in models.data] == [TARGET]
        chunks, usage = stream_completion(ci_fleet, NATIVE, TARGET)
        assert len(chunks) > 1
        assert "".join(chunks).strip()
        assert usage is not None and usage.completion_tokens > 0
        _unused, metrics = ci_fleet.http_get(NATIVE, "/metrics")
        assert metric_sum(metrics, "vllm:spec_decode_num_drafts_total") == 0
    finally:
        server.stop()


def test_native_vllm_exposes_spec_decode_metrics(ci_fleet):
    spec = json.dumps({"method": "eagle3", "model": EAGLE, "num_speculative_tokens": 3})
    server = NativeServer(ci_fleet, NATIVE, [TARGET, "--host", "0.0.0.0", "--port", "8000", "--speculative-config", spec])
    try:
        ci_fleet.wait_healthy(NATIVE, server.alive)
        for _unused in range(2):
            chunks, _usage = stream_completion(ci_fleet, NATIVE, TARGET, max_tokens=32)
            assert chunks
        _unused, metrics = ci_fleet.http_get(NATIVE, "/metrics")
        drafts = metric_sum(metrics, "vllm:spec_decode_num_drafts_total")
        drafted = metric_sum(metrics, "vllm:spec_decode_num_draft_tokens_total")
        accepted = metric_sum(metrics, "vllm:spec_decode_num_accepted_tokens_total")
        assert drafts > 0
        assert drafted == pytest.approx(3 * drafts)
        assert 0 <= accepted <= drafted
    finally:
        server.stop()


def test_native_vllm_refuses_an_oversized_config(ci_fleet):
    # 0.99 x MemTotal is more than MemAvailable on every profile: vLLM's startup check fails
    proc = ci_fleet.ssh(SMALL, "timeout 120 vllm serve Qwen/Qwen3-1.7B --port 8001 --gpu-memory-utilization 0.99 2>&1", timeout=180)
    assert proc.returncode not in (0, 124), proc.stdout[-2000:]
    assert "Engine core initialization failed" in proc.stdout
    assert "less than desired GPU memory utilization" in proc.stdout


# ------------------------------------------------------------------ the container-capable host


def test_container_host_serves_the_upstream_image(ci_fleet):
    run = (
        "docker run -d --name jlf-test-vllm --runtime nvidia --network host "
        "-v /root/.cache/huggingface:/root/.cache/huggingface vllm/vllm-openai:v0.20.0 %s --port 8000" % TARGET
    )
    ci_fleet.ssh(DOCKER, run, check=True)

    def alive():
        state = ci_fleet.ssh(DOCKER, "docker inspect -f '{{.State.Running}}' jlf-test-vllm").stdout.strip()
        if state == "true":
            return True, ""
        return False, ci_fleet.ssh(DOCKER, "docker logs --tail 60 jlf-test-vllm 2>&1").stdout

    try:
        ci_fleet.wait_healthy(DOCKER, alive)
        chunks, usage = stream_completion(ci_fleet, DOCKER, TARGET)
        assert len(chunks) > 1
        assert usage is not None and usage.completion_tokens > 0
        inner = ci_fleet.ssh(DOCKER, "docker exec jlf-test-vllm head -n 1 /proc/meminfo", check=True).stdout
        assert int(inner.split()[1]) == ci_fleet.hosts[DOCKER]["mem_total_kib"]
    finally:
        ci_fleet.ssh(DOCKER, "docker rm -f jlf-test-vllm")


def test_container_images_need_the_nvidia_runtime_and_the_jetson_entrypoint(ci_fleet):
    version = ci_fleet.hosts[DOCKER]["sim"]["version"]
    ok = ci_fleet.ssh(
        DOCKER,
        "docker run --rm --runtime nvidia --entrypoint vllm ghcr.io/nvidia-ai-iot/vllm:r36.4-jetson-orin --version",
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert version in ok.stdout
    no_entrypoint = ci_fleet.ssh(DOCKER, "docker run --rm --runtime nvidia ghcr.io/nvidia-ai-iot/vllm:r36.4-jetson-orin serve %s" % TARGET)
    assert no_entrypoint.returncode != 0
    no_gpu = ci_fleet.ssh(DOCKER, "docker run --rm vllm/vllm-openai:v0.20.0 %s 2>&1" % TARGET)
    assert no_gpu.returncode != 0
    assert "Failed to infer device type" in no_gpu.stdout


# ------------------------------------------------------------------ descriptions and teardown


def test_bad_description_is_refused_before_anything_starts(ci_fleet, tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("---\nhosts:\n  - name: x1\n    profile: agx-orin-128gb\n  - name: x1\n    profile: thor-t5000\n")

    def hosts():
        rows = json.loads(fleet_cmd("status", "--json").stdout)["hosts"]
        return [(r["name"], r["address"], r["container"].split()[0], r["ssh"]) for r in rows]

    before = hosts()
    assert before and all(h[2] == "Up" and h[3] == "up" for h in before)
    proc = fleet_cmd("up", str(bad))
    assert proc.returncode == 2
    assert str(bad) in proc.stderr
    assert "unknown profile 'agx-orin-128gb'" in proc.stderr
    assert "duplicate name 'x1'" in proc.stderr
    # the running fleet was not touched: same hosts, all still up
    assert hosts() == before


def test_zz_fleet_down_leaves_nothing(ci_fleet):
    proc = fleet_cmd("down")
    assert proc.returncode == 0, proc.stderr
    containers = subprocess.run(
        ["podman", "ps", "-a", "--filter", "label=%s" % config.LABEL, "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        env=dict(os.environ, **config.podman_env()),
        check=True,
    )
    assert containers.stdout.strip() == ""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    assert config.NETNS_PREFIX not in netns
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert config.BRIDGE not in links
    assert " %s" % config.VETH_PREFIX not in links
    with open("/proc/self/mountinfo") as f:
        assert config.STATE not in f.read()
    assert not os.path.exists(ops.STATE_JSON)
    assert ops.cgroup_options() == ci_fleet.cgroup_before
