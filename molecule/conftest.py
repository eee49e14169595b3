# SPDX-License-Identifier: Apache-2.0
"""Helpers of the testinfra verifiers of every Molecule scenario (backend podman://NAME).

The checks read the end state on the simulated Jetson host itself: the systemd unit, the rendered
vLLM configuration, the known-good copy, the decision and history kept by the role, and vLLM
answering on 127.0.0.1 inside the host (the hosts have no network but loopback).
"""

import json
import os
import shlex

import pytest
import yaml

SERVICE = "vllm"
UNIT_FILE = "/etc/systemd/system/vllm.service"
CONFIG_FILE = "/etc/vllm/serve.yaml"
ENV_FILE = "/etc/vllm/vllm.env"
KNOWN_GOOD = "/var/lib/jetson_llm/vllm/known-good"
SPEC_STATE_DIR = "/var/lib/jetson_llm/speculative"
STATE_FILE = SPEC_STATE_DIR + "/state.json"
HISTORY_DIR = SPEC_STATE_DIR + "/history"
NATIVE_ARGV = ["/usr/local/bin/vllm", "serve", "--config", CONFIG_FILE]

# Runs inside the host: one HTTP request to vLLM on loopback, status and body as JSON.
_HTTP = """
import json, sys, urllib.request, urllib.error
path, body = sys.argv[1], sys.argv[2]
req = urllib.request.Request("http://127.0.0.1:8000" + path, data=body.encode() if body else None,
                             headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        print(json.dumps({"status": r.status, "body": r.read().decode()}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": e.read().decode()}))
"""


def http(host, path, body=None):
    """(status, body text) of a request to vLLM on 127.0.0.1:8000 inside the host."""
    cmd = host.run("python3 -c %s %s %s", _HTTP, path, json.dumps(body) if body is not None else "")
    assert cmd.rc == 0, cmd.stderr
    out = json.loads(cmd.stdout)
    return out["status"], out["body"]


def metric(text, name):
    """Sum of a Prometheus counter over its label sets."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def read_json(host, path):
    f = host.file(path)
    assert f.exists, path
    return json.loads(f.content_string)


def read_yaml(host, path):
    f = host.file(path)
    assert f.exists, path
    return yaml.safe_load(f.content_string)


def exec_start(host):
    """argv of the unit's ExecStart as systemd parsed it."""
    out = host.check_output("systemctl show -p ExecStart --value %s", SERVICE)
    # "{ path=/usr/local/bin/vllm ; argv[]=/usr/local/bin/vllm serve --config /etc/vllm/serve.yaml ; ignore_errors=no ; ... }"
    argv = out.split("argv[]=", 1)[1].split(" ; ", 1)[0]
    return shlex.split(argv)


def speculative_config(serve):
    """The --speculative-config of a rendered serve.yaml as a dict, or None."""
    raw = serve.get("speculative-config")
    return None if raw is None else json.loads(raw)


@pytest.fixture(scope="module")
def state(host):
    return read_json(host, STATE_FILE)


@pytest.fixture(scope="module")
def serve(host):
    return read_yaml(host, CONFIG_FILE)


@pytest.fixture(scope="module")
def known_good(host):
    return read_yaml(host, KNOWN_GOOD + "/serve.yaml")


@pytest.fixture(scope="module")
def history(host):
    """File names in the device's history directory."""
    return host.check_output("ls -1 %s", HISTORY_DIR).split()


@pytest.fixture(scope="module")
def report():
    """The result the role fetched to the controller (speculative_decoding_report_dir)."""
    base = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "speculation-report", "hosts")
    names = os.listdir(base)
    assert len(names) == 1, names
    with open(os.path.join(base, names[0])) as f:
        return json.load(f)


def assert_serving(host, model):
    """The unit is enabled and active, /health answers 200 and /v1/models lists the model."""
    svc = host.service(SERVICE)
    assert svc.is_enabled
    assert host.check_output("systemctl is-active %s", SERVICE) == "active"
    assert http(host, "/health")[0] == 200
    status, body = http(host, "/v1/models")
    assert status == 200
    assert [m["id"] for m in json.loads(body)["data"]] == [model]


def complete(host, model, max_tokens=16):
    """One completion; returns the response body as a dict."""
    status, body = http(host, "/v1/completions", {"model": model, "prompt": "Explain speculative decoding.", "max_tokens": max_tokens})
    assert status == 200, body
    out = json.loads(body)
    assert 0 < out["usage"]["completion_tokens"] <= max_tokens
    return out


def drafts_after_completion(host, model):
    """Drafts counted by vLLM's metrics before and after one completion."""
    before = http(host, "/metrics")[1]
    complete(host, model)
    after = http(host, "/metrics")[1]
    return metric(before, "vllm:spec_decode_num_drafts_total"), metric(after, "vllm:spec_decode_num_drafts_total")
