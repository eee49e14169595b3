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


def _text(msg):
    return "\n".join(msg) if isinstance(msg, list) else str(msg)


def failures(doc):
    msgs = []
    for play in doc["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("failed"):
                    msgs.append((host, task["task"]["name"], _text(res.get("msg", ""))))
                for item in res.get("results", []) or []:
                    if item.get("failed"):
                        msgs.append((host, task["task"]["name"], _text(item.get("msg", ""))))
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
        (
            {"speculative_decoding_num_tokens": 3},
            ["speculative_decoding_num_tokens: unknown variable of the speculative_decoding role"],
        ),
        ({"vllm_server_model": "../../etc/passwd"}, ["host dev-1", "vllm_server_model='../../etc/passwd'"]),
        ({"vllm_server_model": "Qwen/Qwen3-8B\n"}, ["vllm_server_model='Qwen/Qwen3-8B\\n'", "no control characters"]),
        ({"vllm_server_runtime": "lxc"}, ["vllm_server_runtime='lxc'", "one of native, docker, podman"]),
        ({"vllm_server_host": "0.0.0.0 --evil"}, ["vllm_server_host='0.0.0.0 --evil'", "IP address or a host name"]),
        ({"vllm_server_served_model_name": "a b"}, ["vllm_server_served_model_name='a b'"]),
        ({"vllm_server_image": "vllm/vllm-openai:v0.20.0 --privileged"}, ["vllm_server_image=", "OCI image reference"]),
        ({"vllm_server_container_name": "-x"}, ["vllm_server_container_name='-x'"]),
        ({"vllm_server_oci_runtime": "nvidia;id"}, ["vllm_server_oci_runtime='nvidia;id'"]),
        ({"vllm_server_vllm_bin": "vllm"}, ["vllm_server_vllm_bin='vllm'", "absolute path"]),
        ({"vllm_server_engine_bin": "/usr/bin/docker ps"}, ["vllm_server_engine_bin="]),
        ({"vllm_server_service_name": "../../etc/systemd/system/x"}, ["vllm_server_service_name=", "systemd unit name"]),
        ({"vllm_server_config_dir": "/etc/../root"}, ["vllm_server_config_dir='/etc/../root'"]),
        ({"vllm_server_state_dir": "relative/dir"}, ["vllm_server_state_dir='relative/dir'"]),
        ({"vllm_server_max_model_len": "4096"}, ["vllm_server_max_model_len='4096'", "an integer"]),
        ({"vllm_server_max_num_seqs": 0}, ["vllm_server_max_num_seqs=0", "an integer from 1"]),
        ({"vllm_server_tensor_parallel_size": 0}, ["vllm_server_tensor_parallel_size=0"]),
        ({"speculative_decoding_state_dir": "/var/lib/x\n"}, ["speculative_decoding_state_dir=", "no control characters"]),
        ({"jetson_llm_serial": [1, 2]}, ["host dev-1: jetson_llm_serial=[1, 2] differs from the run's value"]),
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


@pytest.mark.parametrize(
    "secret",
    ["vllm_server_hf_token", "vllm_server_api_key"],
)
@pytest.mark.parametrize("value", ["hf_abc\nLD_PRELOAD=/tmp/evil.so", "k\nHF_HUB_OFFLINE=0", "trailing\n", "a b"])
def test_secrets_with_line_breaks_are_refused_and_never_shown(tmp_path, secret, value):
    rc, doc = run_preflight(write_inventory(tmp_path, dict(GOOD, **{secret: value})))
    assert rc != 0
    text = " ".join(m for _h, _t, m in failures(doc))
    assert "host dev-1: " + secret + "=<secret of %d characters" % len(value) in text, text
    for part in filter(None, value.split("\n")):
        assert part not in text.replace(secret, ""), text
    assert set(doc["stats"]) == {"localhost"}


def test_every_error_of_every_host_is_listed(tmp_path):
    inv = {
        "all": {
            "children": {
                "specdec_fleet": {
                    "hosts": {
                        "dev-1": dict(GOOD, ansible_host="192.0.2.50", vllm_server_port=0),
                        "dev-2": dict(GOOD, ansible_host="192.0.2.51", speculative_decoding_min_gain=-1.0),
                    }
                },
                "specdec_canary": {"hosts": {"dev-1": None}},
            }
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps(inv))
    rc, doc = run_preflight(str(path))
    assert rc != 0
    text = " ".join(m for _h, _t, m in failures(doc))
    assert "host dev-1: vllm_server_port=0" in text
    assert "host dev-2: speculative_decoding_min_gain=-1.0" in text


@pytest.mark.parametrize(
    ("pacing", "expect"),
    [
        ({"jetson_llm_serial": [-1]}, "jetson_llm_serial=[-1] is not allowed"),
        ({"jetson_llm_serial": "abc"}, "jetson_llm_serial='abc' is not allowed"),
        ({"jetson_llm_serial": ["0%"]}, "jetson_llm_serial=['0%'] is not allowed"),
        ({"jetson_llm_serial": []}, "jetson_llm_serial=[] is not allowed"),
        ({"jetson_llm_max_fail_percentage": 150}, "jetson_llm_max_fail_percentage=150 is not allowed"),
        ({"jetson_llm_max_fail_percentage": "10"}, "jetson_llm_max_fail_percentage='10' is not allowed"),
        ({"jetson_llm_tune_on_canaries": "no"}, "jetson_llm_tune_on_canaries='no' is not allowed"),
        ({"jetson_llm_canary_group": "canary; x"}, "jetson_llm_canary_group='canary; x' is not allowed"),
    ],
)
def test_bad_pacing_is_refused(tmp_path, pacing, expect):
    rc, doc = run_preflight(write_inventory(tmp_path, {}), "-e", json.dumps(dict(pacing, vllm_server_model="Qwen/Qwen3-8B")))
    assert rc != 0
    text = " ".join(m for _h, _t, m in failures(doc))
    assert expect in text, text


def test_pacing_in_group_vars_all_reaches_the_run(tmp_path):
    """Play keywords see no inventory variables; the preflight carries group_vars/all to them."""
    rc, doc = run_preflight(EXAMPLE)
    assert rc == 0, failures(doc)
    pacing = [
        res["ansible_facts"]["jetson_llm_pacing"]
        for play in doc["plays"]
        for task in play["tasks"]
        for res in task["hosts"].values()
        if "jetson_llm_pacing" in res.get("ansible_facts", {})
    ]
    assert pacing == [{"serial": [1, "25%", "100%"], "max_fail_percentage": 10}]


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


def test_a_bad_prompts_file_is_refused_before_any_device_is_touched(tmp_path):
    prompts = tmp_path / "workload.jsonl"
    prompts.write_text('{"prompt": "How do I reset the line 3 conveyor?"}\n{"messages": [{"role": "user", "content": ""}]}\n')
    rc, doc = run_preflight(write_inventory(tmp_path, dict(GOOD, speculative_decoding_prompts_file=str(prompts))))
    assert rc != 0
    assert set(doc["stats"]) == {"localhost"}, doc["stats"]
    text = " ".join(m for _h, _t, m in failures(doc))
    assert "host dev-1: speculative_decoding_prompts_file='%s' is not allowed" % prompts in text
    assert "%s line 2: messages[0].content is empty" % prompts in text
    prompts.write_text('{"prompt": "How do I reset the line 3 conveyor?"}\n')
    rc, doc = run_preflight(write_inventory(tmp_path, dict(GOOD, speculative_decoding_prompts_file=str(prompts))))
    assert rc == 0, failures(doc)
