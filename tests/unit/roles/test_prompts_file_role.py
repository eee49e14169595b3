# SPDX-License-Identifier: Apache-2.0
"""speculative_decoding_prompts_file through the role: the role's own tasks copy the file to the device
and its benchmark step (tasks/bench_segment.yml, as the trial runs it) sends the user's prompts to the
vLLM simulator on loopback, and the prompt set reaches the trial's facts."""

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import urllib.request

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BIN = os.path.join(ROOT, ".venv", "bin")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_sim = _load("_bench_sim_helpers_role", os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", "test_bench_sim.py"))
hf_home = _sim.hf_home
sim = _sim.sim

pytestmark = [
    pytest.mark.skipif(not os.path.exists(_sim.SIM_CLI), reason="the vLLM simulator is not in the tree"),
    pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "ansible-playbook")), reason="needs the venv"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the role's files are owned by root"),
]

LINES = [
    {"prompt": "Shift report: conveyor C3 stopped twice because of a jammed pallet. " * 20},
    {
        "messages": [
            {"role": "system", "content": "Answer as the plant's maintenance assistant."},
            {"role": "user", "content": "Which sensors on line 3 need calibration this week?"},
        ]
    },
    {"prompt": "Fault code E42 on the packaging robot: what does it mean and what should the operator check first?"},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "Draft a two-line handover note for the night crew."}]}]},
]


def test_the_trials_benchmark_sends_the_users_prompts(tmp_path, sim):
    server = sim()
    prompts = tmp_path / "controller" / "plant-ops.jsonl"
    prompts.parent.mkdir()
    data = ("\n".join(json.dumps(line) for line in LINES) + "\n").encode()
    prompts.write_bytes(data)
    state_dir = tmp_path / "device" / "speculative"
    out = tmp_path / "out.json"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "vllm_server_model": _sim.TARGET,
                "vllm_server_result": {"url": server.url},
                "speculative_decoding_state_dir": str(state_dir),
                "speculative_decoding_prompts_file": str(prompts),
                "speculative_decoding_num_warmups": 1,
                "speculative_decoding_output_len": 16,
                "speculative_decoding_benchmark_timeout": 300,
                "speculative_decoding_seed": 3,
                "__speculative_decoding_key": "k",
                "__speculative_decoding_blocks": [],
                "__speculative_decoding_intervals": [],
                "__speculative_decoding_segment": [{"arm": "baseline", "concurrency": 1, "n_requests": 3}],
            },
            "tasks": [
                {"name": "copy", "ansible.builtin.include_role": {"name": "jetson_llm.speculative.speculative_decoding", "tasks_from": "prompts.yml"}},
                {"name": "bench", "ansible.builtin.include_role": {"name": "jetson_llm.speculative.speculative_decoding", "tasks_from": "bench_segment.yml"}},
                {
                    "name": "keep what the trial saw",
                    "ansible.builtin.copy": {
                        "content": "{{ {'blocks': __speculative_decoding_blocks, 'prompt_set': __speculative_decoding_prompt_set} | to_json }}",
                        "dest": str(out),
                        "mode": "0600",
                    },
                },
            ],
        }
    ]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = dict(
        os.environ,
        HOME=os.path.join(ROOT, ".cache", "home"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
        ANSIBLE_DEPRECATION_WARNINGS="false",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
        ANSIBLE_ASYNC_DIR=str(tmp_path / "async"),
    )
    proc = subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), "-c", "local", "-i", "localhost,", str(playbook)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # the copy on the device is the user's file, byte for byte
    assert (state_dir / "prompts.jsonl").read_bytes() == data
    seen = json.loads(out.read_text())
    sha = hashlib.sha256(data).hexdigest()
    assert seen["prompt_set"] == {"name": "plant-ops.jsonl", "source": "file", "count": 4, "sha256": sha, "kinds": ["messages", "prompt"]}
    (block,) = seen["blocks"]
    assert block["completed"] == 3 and block["arm"] == "baseline"
    ids = block["samples"]["prompt_ids"]
    assert set(ids) <= {"line-1", "line-2", "line-3", "line-4"} and len(set(ids)) == 3
    # the simulator received the user's text: its prompt token counts are those of the chosen lines
    expected = 0
    for prompt_id in ids:
        line = LINES[int(prompt_id.split("-")[1]) - 1]
        messages = line.get("messages") or [{"role": "user", "content": line["prompt"]}]
        body = json.dumps({"model": _sim.TARGET, "messages": messages}).encode()
        request = urllib.request.Request(server.url + "/tokenize", data=body, headers={"Content-Type": "application/json"})  # noqa: S310 (loopback http)
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            expected += json.load(answer)["count"]
    assert block["total_input_tokens"] == expected
    with open(block["result_file"]) as handle:
        saved = json.load(handle)
    assert saved["config"]["prompt_set"]["sha256"] == sha
    assert saved["endpoint"] == "/v1/chat/completions"
