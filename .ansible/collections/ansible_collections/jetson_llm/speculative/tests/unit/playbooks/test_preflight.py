# SPDX-License-Identifier: Apache-2.0
"""The preflight play refuses bad input with a clear message before any host is touched.

Runs the real playbook with ansible-playbook. The inventories point at addresses from the
documentation range (192.0.2.0/24) that nothing answers: preflight runs on the controller only, so
a successful run proves that no device was contacted.
"""

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.join(ROOT, ".venv", "bin")
EXAMPLE = os.path.join(ROOT, "inventories", "example")


def run_preflight(inventory, *extra):
    env = dict(os.environ)
    env.update(
        HOME=os.path.join(ROOT, ".cache", "home"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
        ANSIBLE_STDOUT_CALLBACK="json",
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_DEPRECATION_WARNINGS="false",
    )
    cmd = [
        os.path.join(BIN, "ansible-playbook"),
        "-i",
        inventory,
        "--vault-password-file",
        os.path.join(EXAMPLE, "vault-password.example"),
        os.path.join(ROOT, "playbooks", "preflight.yml"),
        *extra,
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("no JSON from ansible-playbook: %s %s" % (proc.stdout[-2000:], proc.stderr[-2000:]))
    return proc.returncode, doc


def failures(doc):
    msgs = []
    for play in doc["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("failed"):
                    msgs.append((host, task["task"]["name"], res.get("msg", "")))
                for item in res.get("results", []) or []:
                    if item.get("failed"):
                        msgs.append((host, task["task"]["name"], item.get("msg", "")))
    return msgs


def write_inventory(tmp_path, host_vars):
    inv = {
        "all": {
            "children": {
                "specdec_fleet": {"hosts": {"dev-1": dict({"ansible_host": "192.0.2.50"}, **host_vars)}},
                "specdec_canary": {"hosts": {"dev-1": None}},
            }
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps(inv))
    return str(path)


GOOD = {"vllm_server_model": "Qwen/Qwen3-8B"}


def test_example_inventory_passes_without_touching_hosts():
    rc, doc = run_preflight(EXAMPLE)
    assert rc == 0, failures(doc)
    stats = doc["stats"]
    assert set(stats) == {"localhost"}, stats  # no device was contacted


@pytest.mark.parametrize(
    ("extra_vars", "expect"),
    [
        (
            {"speculative_decoding_num_speculative_tokens": 0},
            ["host dev-1", "speculative_decoding_num_speculative_tokens=0", "an integer from 1 to 15"],
        ),
        ({"speculative_decoding_enabled": "yes"}, ["host dev-1", "speculative_decoding_enabled='yes'", "boolean"]),
        ({"speculative_decoding_method": "medusa"}, ["speculative_decoding_method='medusa'", "eagle3"]),
        (
            {"speculative_decoding_model": "org/model; rm -rf /"},
            ["speculative_decoding_model=", "rm -rf", "Hugging Face"],
        ),
        ({"speculative_decoding_gpu_memory_utilization": 1.5}, ["speculative_decoding_gpu_memory_utilization=1.5"]),
        ({"speculative_decoding_num_tokens": 3}, ["unknown variable speculative_decoding_num_tokens"]),
        ({"vllm_server_model": "../../etc/passwd"}, ["host dev-1", "vllm_server_model=../../etc/passwd"]),
        ({"vllm_server_runtime": "lxc"}, ["vllm_server_runtime=lxc", "native, docker or podman"]),
    ],
)
def test_bad_values_are_refused_with_host_variable_value_and_allowed(tmp_path, extra_vars, expect):
    host_vars = dict(GOOD, **extra_vars)
    rc, doc = run_preflight(write_inventory(tmp_path, host_vars))
    assert rc != 0
    text = " ".join(m for _h, _t, m in failures(doc))
    for fragment in expect:
        assert fragment in text, (fragment, text)
    assert set(doc["stats"]) == {"localhost"}


def test_canary_outside_the_fleet_is_refused(tmp_path):
    inv = {
        "all": {
            "children": {
                "specdec_fleet": {"hosts": {"dev-1": dict(GOOD, ansible_host="192.0.2.50")}},
                "specdec_canary": {"hosts": {"stray": {"ansible_host": "192.0.2.51"}}},
            }
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps(inv))
    rc, doc = run_preflight(str(path))
    assert rc != 0
    text = " ".join(m for _h, _t, m in failures(doc))
    assert "not in it: stray" in text
