# SPDX-License-Identifier: Apache-2.0
"""speculative_decoding_prompts_file through the role: the role's own tasks copy the file to the device
and the benchmark options the trial task gives (tasks/trial.yml's ``benchmark``, which the speculative_trial
action plugin passes to vllm_benchmark with the levels of each measurement) send the user's prompts to the
vLLM simulator on loopback, and the prompt set comes back with the runs."""

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
TRIAL = os.path.join(ROOT, "roles", "speculative_decoding", "tasks", "trial.yml")


def trial_benchmark_options():
    """The ``benchmark`` option of the role's speculative_trial task, as written in tasks/trial.yml."""
    with open(TRIAL) as handle:
        tasks = yaml.safe_load(handle)
    stack = list(tasks)
    while stack:
        task = stack.pop()
        if "jetson_llm.speculative.speculative_trial" in task:
            return dict(task["jetson_llm.speculative.speculative_trial"]["benchmark"])
        stack.extend(task.get("block") or [])
    raise AssertionError("tasks/trial.yml has no speculative_trial task")


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
            },
            "tasks": [
                {
                    "name": "copy",
                    "ansible.builtin.include_role": {"name": "jetson_llm.speculative.speculative_decoding", "tasks_from": "prompts.yml", "public": True},
                },
                {
                    # what the action plugin sends for one measurement: the task's options plus the levels
                    "name": "bench",
                    "jetson_llm.speculative.vllm_benchmark": dict(
                        trial_benchmark_options(),
                        url=server.url,
                        model=_sim.TARGET,
                        concurrency=[1],
                        num_prompts_per_level=[3],
                        num_warmups=1,
                        seed=3,
                    ),
                    "register": "bench",
                },
                {
                    "name": "keep what the trial saw",
                    "ansible.builtin.copy": {
                        "content": "{{ {'runs': bench.runs, 'prompt_set': bench.config.prompt_set, 'result_file': bench.result_file} | to_json }}",
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
    (block,) = seen["runs"]
    assert block["completed"] == 3 and block["concurrency"] == 1
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
    with open(seen["result_file"]) as handle:
        saved = json.load(handle)
    assert saved["config"]["prompt_set"]["sha256"] == sha
    assert saved["endpoint"] == "/v1/chat/completions"
