# SPDX-License-Identifier: Apache-2.0
"""vllm_weights_info: which models vLLM finds offline, on a hub cache written as huggingface_hub writes it."""

import json
import os
import subprocess
import sys

from ansible_collections.jetson_llm.speculative.plugins.modules import vllm_weights_info as weights

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(HERE, "..", "..", "..", "..", "plugins", "modules", "vllm_weights_info.py")


def _repo(hub, model_id, commit="0123abcd", config=True, ref=True):
    base = hub / ("models--" + model_id.replace("/", "--"))
    snap = base / "snapshots" / commit
    snap.mkdir(parents=True)
    if config:
        (snap / "config.json").write_text("{}")
    if ref:
        (base / "refs").mkdir()
        (base / "refs" / "main").write_text(commit + "\n")
    return base


def test_repository_ids_come_from_the_cache_directory_names():
    assert weights.repo_id("models--meta-llama--Llama-3.1-8B-Instruct") == "meta-llama/Llama-3.1-8B-Instruct"
    assert weights.repo_id("models--org--name--with--dashes") == "org/name--with--dashes"
    assert weights.repo_id("datasets--org--name") is None
    assert weights.repo_id("models--orphan") is None
    assert weights.repo_id(".locks") is None


def test_a_repository_is_there_only_when_main_resolves_to_a_snapshot_with_config_json(tmp_path):
    hub = tmp_path / "hub"
    _repo(hub, "meta-llama/Llama-3.1-8B-Instruct")
    _repo(hub, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", config=False)  # an interrupted download
    _repo(hub, "Qwen/Qwen3-8B", ref=False)  # no refs/main: offline vLLM cannot resolve it
    (hub / ".locks").mkdir()
    assert weights.present_repos(str(hub)) == ["meta-llama/Llama-3.1-8B-Instruct"]
    assert weights.present_repos(str(tmp_path / "none")) == []


def _run(args, tmp_path):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    proc = subprocess.run([sys.executable, MODULE, str(path)], capture_output=True, text=True, check=False)
    return json.loads(proc.stdout)


def test_the_module_answers_for_the_hub_and_each_local_path(tmp_path):
    home = tmp_path / "hf"
    _repo(home / "hub", "Qwen/Qwen3-1.7B")
    local = tmp_path / "head"
    local.mkdir()
    (local / "config.json").write_text("{}")
    out = _run({"hf_home": str(home), "paths": [str(local), str(tmp_path / "gone")]}, tmp_path)
    assert out["changed"] is False and out["hub"] == str(home / "hub")
    assert out["repos"] == ["Qwen/Qwen3-1.7B"]
    assert out["paths"] == {str(local): True, str(tmp_path / "gone"): False}
    out = _run({"hub_cache": str(home / "hub"), "hf_home": "/nowhere"}, tmp_path)
    assert out["repos"] == ["Qwen/Qwen3-1.7B"]
    out = _run({"paths": ["relative/path"]}, tmp_path)
    assert out["failed"] and "not an absolute path" in out["msg"]
