# SPDX-License-Identifier: Apache-2.0
"""vllm_server_discover: what serves vLLM on a device, read from /proc, systemd and the container engine."""

import importlib.util
import os
import socket
import subprocess
import sys
import time

import pytest
from ansible_collections.jetson_llm.speculative.plugins.modules import vllm_server_discover as disc
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.unit import service_unit

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PARAMS = {
    "port": 8000,
    "service": "vllm.service",
    "unit_path": "/etc/systemd/system/vllm.service",
    "start_record": "/run/vllm/config.sha256",
    "container_name": "vllm",
    "engines": ["docker", "podman"],
}
# the unit settings of the renderer's own tests (one copy)
UNIT = _load("_unit_rendering_for_discover", os.path.join(HERE, "..", "plugin_utils", "test_unit_rendering.py")).UNIT
SERVE = {"model": "Qwen/Qwen3-8B", "host": "0.0.0.0", "port": 8000, "gpu_memory_utilization": 0.75, "max_model_len": 8192}


def test_secrets_are_masked_in_every_shape_of_a_command_line():
    argv = ["docker", "run", "-e", "HF_TOKEN=hf_abc", "--env", "API_KEY=k1", "-e", "HF_HUB_OFFLINE=1", "vllm/vllm-openai"]
    argv += ["serve", "m", "--api-key", "sekrit", "--hf-token=t0", "--port", "8000", "PASSWORD=p"]
    out = disc.mask(argv)
    assert out == [
        "docker", "run", "-e", "HF_TOKEN=***", "--env", "API_KEY=***", "-e", "HF_HUB_OFFLINE=1", "vllm/vllm-openai",
        "serve", "m", "--api-key", "***", "--hf-token=***", "--port", "8000", "PASSWORD=***",
    ]  # fmt: skip
    text = disc.quote(out)
    assert "hf_abc" not in text and "sekrit" not in text and "--api-key ***" in text


def test_vllm_is_told_from_other_programs_by_its_command_line():
    assert disc.is_vllm(["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "Qwen/Qwen3-8B"])
    assert disc.is_vllm(["vllm", "serve", "--config", "/etc/vllm/serve.yaml"])
    assert disc.is_vllm(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"])
    assert not disc.is_vllm(["nginx", "-g", "daemon off;"])
    assert not disc.is_vllm(["vllm", "--version"])
    assert not disc.is_vllm(["/usr/bin/python3", "-m", "http.server", "8000"])


def test_the_unit_of_a_process_comes_from_its_cgroup():
    assert disc.unit_of_cgroup("0::/system.slice/my-vllm.service\n") == "my-vllm.service"
    assert disc.unit_of_cgroup("0::/system.slice/docker-0123abcd.scope\n") is None
    assert disc.unit_of_cgroup("0::/user.slice/user-0.slice/session-3.scope\n") is None
    assert disc.unit_of_cgroup("12:pids:/system.slice/vllm.service\n1:name=systemd:/system.slice/vllm.service\n") == "vllm.service"
    assert disc.unit_of_cgroup("") is None


def test_the_collections_unit_is_recognised_by_the_start_record_its_renderer_writes():
    text = service_unit(SERVE, UNIT)
    assert disc.owned_unit_file(text, UNIT["start_record"])
    assert not disc.owned_unit_file(text.replace("# invocation", "# run"), UNIT["start_record"])
    operators = "[Service]\nExecStart=/usr/local/bin/vllm serve Qwen/Qwen3-8B --port 8000\n"
    assert not disc.owned_unit_file(operators, UNIT["start_record"])
    assert not disc.owned_unit_file(None, UNIT["start_record"])


def _proc(pid, argv, ppid=1, unit=None, started=100.0):
    return {"pid": pid, "ppid": ppid, "argv": argv, "started_at": started, "unit": unit}


HAND = {
    "engine": "docker",
    "id": "c0ffee",
    "name": "vllm",
    "image": "vllm/vllm-openai:latest",
    "command": "vllm serve Qwen/Qwen3-8B --max-model-len 8192",
    "mounts": ["/root/.cache/huggingface:/root/.cache/huggingface"],
    "env_names": ["HF_TOKEN", "PATH"],
    "network": "host",
    "started_at": "2026-12-07T10:00:00Z",
    "pid": 500,
    "ports": [],
}
SERVER = _proc(501, ["python3", "/usr/local/bin/vllm", "serve", "Qwen/Qwen3-8B", "--api-key", "s3cret"], ppid=500)
ENGINE_CLIENT = _proc(400, ["/usr/bin/docker", "run", "--rm", "--name", "vllm", "vllm/vllm-openai:v0.20.0"], unit="vllm.service")


def _lookup(*procs):
    table = dict((p["pid"], p) for p in procs)
    return table.get


def test_a_container_started_by_hand_is_foreign_and_described_with_secrets_masked():
    ours = {"owned": True, "active": False, "main_pid": 0}
    out = disc.classify(SERVER, ours, PARAMS, _lookup(SERVER, _proc(500, ["tini"])), [HAND])
    assert out["kind"] == "container" and out["foreign"] and out["vllm"]
    assert out["pid"] == 501 and out["started_at"] == 100.0
    assert out["container"]["name"] == "vllm" and "pid" not in out["container"]
    assert "s3cret" not in out["command"] and "--api-key ***" in out["command"]
    for part in ("port 8000", "container 'vllm'", "vllm/vllm-openai:latest", "HF_TOKEN", "not started by vllm.service", "Qwen/Qwen3-8B"):
        assert part in out["description"], (part, out["description"])


def test_the_container_the_collections_unit_started_is_its_own():
    ours = {"owned": True, "active": True, "main_pid": 400}
    out = disc.classify(SERVER, ours, PARAMS, _lookup(SERVER, _proc(500, ["tini"]), ENGINE_CLIENT), [HAND])
    assert out["kind"] == "collection" and not out["foreign"], out
    # the same container while the collection's unit file is somebody else's: foreign
    out = disc.classify(SERVER, dict(ours, owned=False), PARAMS, _lookup(SERVER, _proc(500, ["tini"]), ENGINE_CLIENT), [HAND])
    assert out["kind"] == "container" and out["foreign"]
    # a container of another name next to the collection's active unit: foreign
    other = dict(HAND, name="my-vllm")
    out = disc.classify(SERVER, ours, PARAMS, _lookup(SERVER, _proc(500, ["tini"]), ENGINE_CLIENT), [other])
    assert out["kind"] == "container" and "container 'my-vllm'" in out["description"]


def test_units_processes_and_nothing():
    native = _proc(700, ["/usr/local/bin/vllm", "serve", "--config", "/etc/vllm/serve.yaml"], unit="vllm.service")
    owned = {"owned": True, "active": True, "main_pid": 700}
    out = disc.classify(native, owned, PARAMS, _lookup(native), [])
    assert (out["kind"], out["foreign"]) == ("collection", False)
    out = disc.classify(native, dict(owned, owned=False), PARAMS, _lookup(native), [])
    assert (out["kind"], out["foreign"]) == ("unit", True)
    assert "vllm.service" in out["description"] and "was not written by this collection" in out["description"]
    theirs = dict(native, unit="llm.service")
    out = disc.classify(theirs, owned, PARAMS, _lookup(theirs), [])
    assert (out["kind"], out["unit"]) == ("unit", "llm.service") and "was not written" not in out["description"]
    bare = _proc(800, ["nginx", "-g", "daemon off;"])
    out = disc.classify(bare, owned, PARAMS, _lookup(bare), [])
    assert (out["kind"], out["foreign"], out["vllm"]) == ("process", True, False)
    assert "a program that is not vLLM" in out["description"] and "process 800" in out["description"]
    out = disc.classify(None, owned, PARAMS, _lookup(), [])
    assert (out["kind"], out["foreign"], out["pid"], out["description"]) == ("none", False, None, "nothing serves on port 8000")


def test_a_published_port_is_traced_from_the_engines_proxy_to_its_container():
    proxy = _proc(900, ["/usr/bin/docker-proxy", "-proto", "tcp", "-host-port", "8000", "-container-ip", "172.17.0.2"])
    published = dict(HAND, network="bridge", ports=["8000"], pid=950)
    out = disc.classify(proxy, {"owned": False, "active": False, "main_pid": 0}, PARAMS, _lookup(proxy), [published])
    assert out["kind"] == "container" and out["container"]["network"] == "bridge", out


def test_container_fields_keep_names_of_the_environment_and_mask_the_command():
    doc = {
        "Id": "abc",
        "Name": "/vllm",
        "Config": {"Image": "vllm/vllm-openai:latest", "Entrypoint": ["vllm", "serve"], "Cmd": ["m", "--api-key", "k"], "Env": ["HF_TOKEN=hf_x", "A=1"]},
        "State": {"Pid": 42, "StartedAt": "2026-12-07T10:00:00Z"},
        "HostConfig": {"NetworkMode": "host", "PortBindings": {"8000/tcp": [{"HostIp": "", "HostPort": "8000"}]}},
        "Mounts": [
            {"Source": "/root/.cache/huggingface", "Destination": "/root/.cache/huggingface", "RW": True},
            {"Source": "/m", "Destination": "/m", "RW": False},
        ],
    }
    c = disc.container_fields("docker", doc)
    assert c["name"] == "vllm" and c["pid"] == 42 and c["ports"] == ["8000"]
    assert c["env_names"] == ["A", "HF_TOKEN"] and "hf_x" not in str(c)
    assert c["command"] == "vllm serve m --api-key ***"
    assert c["mounts"] == ["/root/.cache/huggingface:/root/.cache/huggingface", "/m:/m:ro"]


class _Module:
    def __init__(self, params):
        self.params = params

    def get_bin_path(self, _name):
        return None  # no systemctl, no container engine: /proc alone

    def run_command(self, argv):
        raise AssertionError("no command expected: %s" % argv)


@pytest.fixture
def listener(tmp_path):
    """A process called like vLLM (``vllm serve ... --api-key``) that listens on a free port of loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = tmp_path / "vllm"
    script.write_text(
        "import socket, sys, time\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('127.0.0.1', int(sys.argv[sys.argv.index('--port') + 1])))\ns.listen(1)\nprint('up', flush=True)\ntime.sleep(60)\n"
    )
    before = time.time()
    proc = subprocess.Popen(
        [sys.executable, str(script), "serve", "Qwen/Qwen3-8B", "--api-key", "s3cret", "--port", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "up"
        yield proc, port, before
    finally:
        proc.kill()
        proc.wait()


def test_discover_finds_the_listener_on_the_live_proc(listener):
    proc, port, before = listener
    assert disc.listening_inodes(port)
    assert proc.pid in disc.socket_pids(disc.listening_inodes(port))
    out = disc.discover(_Module(dict(PARAMS, port=port)))
    with open("/proc/self/cgroup") as handle:
        unit = disc.unit_of_cgroup(handle.read())
    assert out["kind"] == ("unit" if unit else "process"), out
    assert out["foreign"] and out["listening"] and out["vllm"] and out["pid"] == proc.pid
    assert before - 2 <= out["started_at"] <= time.time() + 1, (before, out["started_at"])
    assert "s3cret" not in out["command"] and out["command"].endswith("serve Qwen/Qwen3-8B --api-key *** --port %d" % port)
    assert "port %d" % port in out["description"]
    proc.kill()
    proc.wait()
    out = disc.discover(_Module(dict(PARAMS, port=port)))
    assert not out["listening"] and out["pid"] != proc.pid, out
    # nothing listens: a vllm serve still starting anywhere on this machine would be found (a simulated fleet's, say)
    starting = [p for p in (disc.process(pid) for pid in disc._pids("/proc")) if p and disc.is_vllm(p["argv"])]
    if not starting:
        assert (out["kind"], out["foreign"]) == ("none", False), out


def test_a_process_reads_as_gone_once_it_exited(tmp_path):
    assert disc.process(2**22 + 7) is None
    assert disc.process(os.getpid())["argv"]


class _Found(_Module):
    """systemctl and the engines named in ``bins`` are found on PATH."""

    def __init__(self, params, bins):
        super().__init__(params)
        self.bins = bins

    def get_bin_path(self, name):
        return self.bins.get(name)


def lacking(params, bins, booted):
    """``lacking`` as discover calls it: with the systemctl command found once (None without one)."""
    return disc.lacking(_Found(params, bins), params, bins.get("systemctl"), booted=booted)


def test_what_the_device_lacks_to_serve_vllm_is_named(tmp_path):
    booted = tmp_path / "systemd"
    booted.mkdir()
    vllm = tmp_path / "vllm"
    vllm.write_text("#!/bin/sh\n")
    vllm.chmod(0o755)
    systemd = {"systemctl": "/usr/bin/systemctl"}
    native = dict(PARAMS, vllm_bin=str(vllm), engine=None)
    assert lacking(native, systemd, booted=str(booted)) == []
    # no systemd running (the command without a booted systemd, or no command)
    assert lacking(native, systemd, booted=str(tmp_path / "none")) == ["systemd does not run on this device (the collection serves vLLM as a systemd unit)"]
    assert lacking(native, {}, booted=str(booted))[0].startswith("systemd does not run")
    # vLLM not installed: missing, or not executable
    gone = dict(native, vllm_bin=str(tmp_path / "nowhere" / "vllm"))
    assert lacking(gone, systemd, booted=str(booted)) == ["vLLM is not installed: %s is not an executable file (vllm_server_vllm_bin)" % gone["vllm_bin"]]
    vllm.chmod(0o644)
    assert "is not an executable file" in lacking(native, systemd, booted=str(booted))[0]
    # a container runtime without its engine
    docker = dict(PARAMS, vllm_bin=None, engine="docker")
    assert lacking(docker, dict(systemd, docker="/usr/bin/docker"), booted=str(booted)) == []
    assert lacking(docker, systemd, booted=str(booted)) == ["the container engine docker is not installed (vllm_server_runtime, vllm_server_engine_bin)"]


def test_a_foreign_vllm_says_what_to_set_for_the_collection_to_serve_the_same():
    doc = {
        "Id": "abc",
        "Name": "/vllm",
        "Config": {
            "Image": "vllm/vllm-openai:v0.20.0",
            "Entrypoint": ["vllm", "serve"],
            "Cmd": ["Qwen/Qwen3-8B", "--max-model-len", "6144", "--api-key", "k3y"],
            "Env": ["HF_TOKEN=hf_x", "PATH=/usr/bin"],
        },
        "State": {"Pid": 500, "StartedAt": "2026-12-07T10:00:00Z"},
        "HostConfig": {"NetworkMode": "host", "Runtime": "nvidia"},
        "Mounts": [{"Source": "/root/.cache/huggingface", "Destination": "/root/.cache/huggingface", "RW": True}],
    }
    hand = disc.container_fields("docker", doc)
    server = _proc(501, ["python3", "/usr/local/bin/vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "6144", "--api-key", "k3y"], ppid=500)
    out = disc.classify(server, {"owned": False, "active": False, "main_pid": 0}, PARAMS, _lookup(server, _proc(500, ["tini"])), [hand])
    assert out["kind"] == "container" and out["handover"]["settings"] == {
        "vllm_server_runtime": "docker",
        "vllm_server_image": "vllm/vllm-openai:v0.20.0",
        "vllm_server_image_flavor": "upstream",
        "vllm_server_container_name": "vllm",
        "vllm_server_oci_runtime": "nvidia",
        "vllm_server_hf_cache_dir": "/root/.cache/huggingface",
        "vllm_server_model": "Qwen/Qwen3-8B",
        "vllm_server_max_model_len": 6144,
    }
    assert out["handover"]["secrets"] == ["vllm_server_api_key (its --api-key)", "vllm_server_hf_token (its HF_TOKEN)"]
    # what the module returns holds no secret and nothing private
    assert "k3y" not in repr(out) and "hf_x" not in repr(out) and not [k for k in out["container"] if k.startswith("_")]
    # a server the collection started, or a program that is not vLLM, has no handover
    bare = _proc(800, ["nginx"])
    assert disc.classify(bare, {"owned": True, "active": True, "main_pid": 1}, PARAMS, _lookup(bare), [])["handover"] is None
