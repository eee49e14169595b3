# SPDX-License-Identifier: Apache-2.0
"""The model zoo and offline model resolution."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import SIM_ROOT

from vllm_sim import models, zoo
from vllm_sim.errors import VllmError

ARCH_IDS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
    "nvidia/Llama-3.1-8B-Instruct-FP4",
    "Qwen/Qwen3-8B",
    "RedHatAI/Qwen3-8B-quantized.w4a16",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-1.7B",
    "Qwen/Qwen2.5-7B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct",
    "nvidia/Llama-3.3-70B-Instruct-FP4",
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
    "AngelSlim/Qwen3-8B_eagle3",
    "AngelSlim/Qwen3-4B_eagle3",
    "AngelSlim/Qwen3-1.7B_eagle3",
    "RedHatAI/Qwen3-8B-speculator.eagle3",
    "nvidia/Llama-3.3-70B-Instruct-Eagle3",
    "meta-llama/Llama-3.2-1B-Instruct",
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen2.5-0.5B-Instruct",
]


def test_every_architecture_model_id_is_in_the_zoo():
    """The ids of docs/devel/architecture.md, "Model ids shared by the catalog and the simulator zoo"."""
    assert set(ARCH_IDS) <= set(zoo.MODELS)
    assert set(zoo.CATALOG_IDS) == set(ARCH_IDS)
    doc = os.path.join(SIM_ROOT, "..", "..", "docs", "devel", "architecture.md")
    if os.path.exists(doc):
        with open(doc, encoding="utf-8") as handle:
            text = handle.read()
        section = text.split("## Model ids shared by the catalog and the simulator zoo", 1)[1].split("\n## ", 1)[0]
        for model_id in ARCH_IDS:
            assert f"`{model_id}`" in section


@pytest.mark.parametrize(
    ("model_id", "size_gb", "tolerance"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", 16.06, 0.01),
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", 5.7, 0.05),
        ("nvidia/Llama-3.1-8B-Instruct-FP4", 6.0, 0.05),
        ("Qwen/Qwen3-8B", 16.4, 0.01),
        ("RedHatAI/Qwen3-8B-quantized.w4a16", 6.0, 0.05),
        ("Qwen/Qwen3-4B", 8.0, 0.01),
        ("Qwen/Qwen3-1.7B", 3.4, 0.01),
        ("Qwen/Qwen2.5-7B-Instruct", 15.2, 0.01),
        ("meta-llama/Llama-3.3-70B-Instruct", 141.0, 0.01),
        ("nvidia/Llama-3.3-70B-Instruct-FP4", 40.0, 0.05),
        ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 0.8, 0.01),
        ("AngelSlim/Qwen3-8B_eagle3", 0.75, 0.01),
        ("AngelSlim/Qwen3-4B_eagle3", 0.4, 0.01),
        ("AngelSlim/Qwen3-1.7B_eagle3", 0.27, 0.01),
        ("nvidia/Llama-3.3-70B-Instruct-Eagle3", 6.4, 0.01),
        ("meta-llama/Llama-3.2-1B-Instruct", 2.5, 0.02),
        ("Qwen/Qwen3-0.6B", 1.2, 0.01),
        ("Qwen/Qwen2.5-0.5B-Instruct", 1.0, 0.02),
    ],
)
def test_weight_sizes(model_id, size_gb, tolerance):
    assert abs(zoo.MODELS[model_id]["total_size"] / 1e9 - size_gb) <= size_gb * tolerance


def test_install_layout_and_resolution(tmp_path):
    hub = tmp_path / "hub"
    paths = zoo.install(str(hub), ["Qwen/Qwen3-8B", "RedHatAI/Qwen3-8B-quantized.w4a16"])
    base = hub / "models--Qwen--Qwen3-8B"
    rev = (base / "refs" / "main").read_text()
    assert len(rev) == 40 and paths[0] == str(base / "snapshots" / rev)
    files = sorted(os.listdir(paths[0]))
    assert files == ["config.json", "generation_config.json", "model.safetensors.index.json", "tokenizer_config.json"]
    index = json.loads((base / "snapshots" / rev / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == 16_400_000_000
    assert all(v.endswith(".safetensors") for v in index["weight_map"].values())
    info = models.load("Qwen/Qwen3-8B", {"HF_HOME": str(tmp_path)})
    assert (info.path, info.vocab_size, info.num_layers, info.quant) == (paths[0], 151936, 36, None)
    quant = models.load("RedHatAI/Qwen3-8B-quantized.w4a16", {"HF_HUB_CACHE": str(hub)})
    assert quant.quant == "w4a16" and quant.config["quantization_config"]["quant_method"] == "compressed-tensors"


def test_config_fields_are_realistic():
    llama = zoo.MODELS["meta-llama/Llama-3.1-8B-Instruct"]["config"]
    for key in (
        "architectures",
        "model_type",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "max_position_embeddings",
        "torch_dtype",
    ):
        assert key in llama
    assert (llama["vocab_size"], llama["max_position_embeddings"], llama["num_key_value_heads"]) == (128256, 131072, 8)
    assert zoo.MODELS["nvidia/Llama-3.1-8B-Instruct-FP4"]["config"]["quantization_config"]["quant_algo"] == "NVFP4"
    head = zoo.MODELS["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]["config"]
    assert (head["max_position_embeddings"], head["draft_vocab_size"], head["num_hidden_layers"]) == (2048, 32000, 1)
    assert zoo.MODELS["Qwen/Qwen2.5-7B-Instruct"]["config"]["vocab_size"] == 152064
    assert zoo.MODELS["Qwen/Qwen2.5-0.5B-Instruct"]["config"]["vocab_size"] == 151936


def test_speculators_format_heads():
    cfg = zoo.MODELS["RedHatAI/Qwen3-8B-speculator.eagle3"]["config"]
    sc = cfg["speculators_config"]
    assert cfg["speculators_model_type"] == "eagle3"
    assert sc["verifier"]["name_or_path"] == "Qwen/Qwen3-8B"
    assert sc["proposal_methods"][0]["speculative_tokens"] == 3
    info = models.ModelInfo("RedHatAI/Qwen3-8B-speculator.eagle3", "", cfg, 750_000_000)
    assert info.is_eagle3_head and info.hidden_size == 4096 and info.num_layers == 1 and info.model_type == "eagle3"


def test_kv_bytes_and_reads():
    llama = models.ModelInfo("x", "", zoo.MODELS["meta-llama/Llama-3.1-8B-Instruct"]["config"], 16_060_522_496)
    assert llama.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2  # 128 KiB per token
    assert llama.decode_read_bytes == 16_060_522_496 - 128256 * 4096 * 2  # untied input embedding is not read
    tied = models.ModelInfo("y", "", zoo.MODELS["Qwen/Qwen3-1.7B"]["config"], 3_400_000_000)
    assert tied.decode_read_bytes == 3_400_000_000
    assert llama.family == "llama3-8b" and tied.family == "qwen3-1.7b"


def test_offline_errors(tmp_path):
    env = {"HF_HOME": str(tmp_path)}
    with pytest.raises(VllmError) as info:
        models.load("meta-llama/Llama-3.1-8B-Instruct", env)
    assert info.value.exc_type == "OSError"
    assert info.value.message.startswith("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files.")
    with pytest.raises(VllmError) as info:
        models.load(str(tmp_path / "nowhere"), env)
    assert info.value.message.startswith(f"Invalid repository ID or local directory specified: '{tmp_path / 'nowhere'}'.")


def test_local_directory_and_revision(tmp_path):
    snap = zoo.install(str(tmp_path / "hub"), ["Qwen/Qwen3-0.6B"])[0]
    assert models.load(snap, {}).vocab_size == 151936
    env = {"HF_HOME": str(tmp_path)}
    assert models.load("Qwen/Qwen3-0.6B", env, revision=zoo.revision("Qwen/Qwen3-0.6B")).path == snap
    with pytest.raises(VllmError):
        models.load("Qwen/Qwen3-0.6B", env, revision="v9")


def test_zoo_command(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_sim.zoo", "install", str(tmp_path), "--models", "Qwen/Qwen3-0.6B,Qwen/Qwen3-1.7B"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["models--Qwen--Qwen3-0.6B", "models--Qwen--Qwen3-1.7B"]
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_sim.zoo", "install", str(tmp_path), "--models", "nope/x"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "unknown model id(s): nope/x" in proc.stderr
    listing = subprocess.run([sys.executable, "-m", "vllm_sim.zoo", "list"], capture_output=True, text=True, check=True).stdout
    assert "meta-llama/Llama-3.1-8B-Instruct\ttarget\t16060522496" in listing
