# SPDX-License-Identifier: Apache-2.0
"""The simulated model zoo: config files (no weights) for the model ids the collection knows.

``python3 -m vllm_sim.zoo install HUB_DIR [--models ID ...]`` writes a Hugging Face hub cache
(``HUB_DIR/models--ORG--NAME/{refs/main,snapshots/<rev>/...}``) that the simulator, like vLLM in
offline mode, resolves model ids against. ``HUB_DIR`` is ``$HF_HOME/hub`` (default
``/root/.cache/huggingface/hub``). Each snapshot holds ``config.json``,
``model.safetensors.index.json`` (``metadata.total_size`` = weight bytes), ``tokenizer_config.json``
and, where the model publishes one, ``generation_config.json``.

Architectures and sizes follow the published configs; weight totals are the published checkpoints'
sizes (rounded); where none is published (RedHatAI speculators, the extra
``RedHatAI/Qwen3-1.7B-quantized.w4a16``) they are estimates from the architecture.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import sys

# --------------------------------------------------------------------------- building blocks

_LLAMA3_ROPE = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3",
}

_W4A16 = {
    "config_groups": {
        "group_0": {
            "input_activations": None,
            "output_activations": None,
            "targets": ["Linear"],
            "weights": {
                "actorder": "weight",
                "block_structure": None,
                "dynamic": False,
                "group_size": 128,
                "num_bits": 4,
                "observer": "minmax",
                "observer_kwargs": {},
                "strategy": "group",
                "symmetric": True,
                "type": "int",
            },
        }
    },
    "format": "pack-quantized",
    "global_compression_ratio": None,
    "ignore": ["lm_head"],
    "kv_cache_scheme": None,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}

_NVFP4 = {
    "quant_method": "modelopt",
    "quant_algo": "NVFP4",
    "kv_cache_quant_algo": None,
    "group_size": 16,
    "exclude_modules": ["lm_head"],
}

_LLAMA_TOK = {
    "add_bos_token": True,
    "bos_token": "<|begin_of_text|>",
    "eos_token": "<|eot_id|>",
    "model_max_length": 131072,
    "tokenizer_class": "PreTrainedTokenizerFast",
    "chat_template": (
        "{{- bos_token }}{%- for message in messages %}"
        "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' "
        "+ message['content'] | trim + '<|eot_id|>' }}"
        "{%- endfor %}{%- if add_generation_prompt %}"
        "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
    ),
}

_QWEN_TOK = {
    "add_bos_token": False,
    "bos_token": None,
    "eos_token": "<|im_end|>",
    "pad_token": "<|endoftext|>",
    "model_max_length": 131072,
    "tokenizer_class": "Qwen2Tokenizer",
    "chat_template": (
        "{%- for message in messages %}"
        "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
        "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    ),
}

_LLAMA_GEN = {
    "bos_token_id": 128000,
    "do_sample": True,
    "eos_token_id": [128001, 128008, 128009],
    "temperature": 0.6,
    "top_p": 0.9,
}
_QWEN3_GEN = {
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
}
_QWEN25_GEN = {
    "bos_token_id": 151643,
    "pad_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "repetition_penalty": 1.05,
    "temperature": 0.7,
    "top_p": 0.8,
    "top_k": 20,
}


def _llama(hidden, inter, heads, kv, layers, head_dim=128, max_pos=131072, tie=False, rope=None, **extra):
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009],
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": inter,
        "max_position_embeddings": max_pos,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": copy.deepcopy(rope if rope is not None else _LLAMA3_ROPE),
        "rope_theta": 500000.0,
        "tie_word_embeddings": tie,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0",
        "use_cache": True,
        "vocab_size": 128256,
    }
    cfg.update(extra)
    return cfg


def _qwen3(hidden, inter, heads, layers, tie, kv=8):
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": inter,
        "max_position_embeddings": 40960,
        "max_window_layers": layers,
        "model_type": "qwen3",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "sliding_window": None,
        "tie_word_embeddings": tie,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.51.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151936,
    }


def _qwen25(hidden, inter, heads, kv, layers, tie, vocab):
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "head_dim": hidden // heads,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": inter,
        "max_position_embeddings": 32768,
        "max_window_layers": layers,
        "model_type": "qwen2",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": 131072,
        "tie_word_embeddings": tie,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.43.1",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab,
    }


def _eagle3_head(hidden, inter, heads, kv, vocab, max_pos, draft_vocab=32000, dtype="bfloat16", **extra):
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "bos_token_id": 128000 if vocab == 128256 else 151643,
        "eos_token_id": 128001 if vocab == 128256 else 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": inter,
        "max_position_embeddings": max_pos,
        "model_type": "llama",
        "num_attention_heads": heads,
        "num_hidden_layers": 1,
        "num_key_value_heads": kv,
        "pad_token_id": 0,
        "rms_norm_eps": 1e-05 if vocab == 128256 else 1e-06,
        "tie_word_embeddings": False,
        "torch_dtype": dtype,
        "transformers_version": "4.51.0",
        "use_cache": True,
        "vocab_size": vocab,
        "draft_vocab_size": draft_vocab,
    }
    cfg.update(extra)
    return cfg


def _speculator(layer_cfg, verifier, verifier_arch, tokens=3, draft_vocab=32000):
    layer = dict(layer_cfg)
    layer["architectures"] = None
    layer["model_type"] = "llama"
    layer["num_hidden_layers"] = 1
    return {
        "architectures": ["Eagle3Speculator"],
        "auto_map": {"": "eagle3.Eagle3SpeculatorConfig"},
        "draft_vocab_size": draft_vocab,
        "has_no_defaults_at_init": False,
        "norm_before_residual": False,
        "speculators_config": {
            "algorithm": "eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [
                {
                    "accept_tolerance": 0.0,
                    "proposal_type": "greedy",
                    "speculative_tokens": tokens,
                    "verifier_accept_k": 1,
                }
            ],
            "verifier": {"architectures": [verifier_arch], "name_or_path": verifier},
        },
        "speculators_model_type": "eagle3",
        "speculators_version": "0.1.0.dev13",
        "target_hidden_size": None,
        "torch_dtype": "bfloat16",
        "transformer_layer_config": layer,
        "transformers_version": "4.53.2",
    }


# --------------------------------------------------------------------------- the zoo

_LLAMA8B = _llama(4096, 14336, 32, 8, 32)
_QWEN3_8B = _qwen3(4096, 12288, 32, 36, tie=False)


def _with_quant(cfg, quant):
    cfg = copy.deepcopy(cfg)
    cfg["quantization_config"] = copy.deepcopy(quant)
    if quant.get("quant_method") == "compressed-tensors":
        cfg["torch_dtype"] = "bfloat16"
    return cfg


# id -> {config, total_size, generation_config, tokenizer, role, note}
MODELS = {
    # Targets -----------------------------------------------------------------------------------
    "meta-llama/Llama-3.1-8B-Instruct": {
        "role": "target",
        "config": _LLAMA8B,
        "total_size": 16_060_522_496,
        "generation_config": _LLAMA_GEN,
        "tokenizer": _LLAMA_TOK,
    },
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": {
        "role": "target",
        "config": _with_quant(_LLAMA8B, _W4A16),
        "total_size": 5_700_000_000,
        "generation_config": _LLAMA_GEN,
        "tokenizer": _LLAMA_TOK,
    },
    "nvidia/Llama-3.1-8B-Instruct-FP4": {
        "role": "target",
        "config": _with_quant(_LLAMA8B, _NVFP4),
        "total_size": 6_000_000_000,
        "generation_config": _LLAMA_GEN,
        "tokenizer": _LLAMA_TOK,
        "hf_quant_config": True,
    },
    "Qwen/Qwen3-8B": {
        "role": "target",
        "config": _QWEN3_8B,
        "total_size": 16_400_000_000,
        "generation_config": _QWEN3_GEN,
        "tokenizer": _QWEN_TOK,
    },
    "RedHatAI/Qwen3-8B-quantized.w4a16": {
        "role": "target",
        "config": _with_quant(_QWEN3_8B, _W4A16),
        "total_size": 6_000_000_000,
        "generation_config": _QWEN3_GEN,
        "tokenizer": _QWEN_TOK,
    },
    "Qwen/Qwen3-4B": {
        "role": "target",
        "config": _qwen3(2560, 9728, 32, 36, tie=True),
        "total_size": 8_000_000_000,
        "generation_config": _QWEN3_GEN,
        "tokenizer": _QWEN_TOK,
    },
    "Qwen/Qwen3-1.7B": {
        "role": "target",
        "config": _qwen3(2048, 6144, 16, 28, tie=True),
        "total_size": 3_400_000_000,
        "generation_config": _QWEN3_GEN,
        "tokenizer": _QWEN_TOK,
    },
    "Qwen/Qwen2.5-7B-Instruct": {
        "role": "target",
        "config": _qwen25(3584, 18944, 28, 4, 28, tie=False, vocab=152064),
        "total_size": 15_200_000_000,
        "generation_config": _QWEN25_GEN,
        "tokenizer": _QWEN_TOK,
    },
    "meta-llama/Llama-3.3-70B-Instruct": {
        "role": "target",
        "config": _llama(8192, 28672, 64, 8, 80),
        "total_size": 141_000_000_000,
        "generation_config": _LLAMA_GEN,
        "tokenizer": _LLAMA_TOK,
    },
    "nvidia/Llama-3.3-70B-Instruct-FP4": {
        "role": "target",
        "config": _with_quant(_llama(8192, 28672, 64, 8, 80), _NVFP4),
        "total_size": 40_000_000_000,
        "generation_config": _LLAMA_GEN,
        "tokenizer": _LLAMA_TOK,
        "hf_quant_config": True,
    },
    # EAGLE-3 heads -------------------------------------------------------------------------------
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": {
        "role": "eagle3",
        "config": _eagle3_head(4096, 14336, 32, 8, 128256, 2048, dtype="float16"),
        "total_size": 800_000_000,
        "tokenizer": _LLAMA_TOK,
    },
    "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3": {
        "role": "eagle3",
        "config": _speculator(_LLAMA8B, "meta-llama/Llama-3.1-8B-Instruct", "LlamaForCausalLM"),
        "total_size": 800_000_000,
        "tokenizer": _LLAMA_TOK,
    },
    "AngelSlim/Qwen3-8B_eagle3": {
        "role": "eagle3",
        "config": _eagle3_head(4096, 12288, 32, 8, 151936, 40960, rope_theta=1000000.0),
        "total_size": 750_000_000,
        "tokenizer": _QWEN_TOK,
    },
    "AngelSlim/Qwen3-4B_eagle3": {
        "role": "eagle3",
        "config": _eagle3_head(2560, 9728, 32, 8, 151936, 40960, rope_theta=1000000.0),
        "total_size": 400_000_000,
        "tokenizer": _QWEN_TOK,
    },
    "AngelSlim/Qwen3-1.7B_eagle3": {
        "role": "eagle3",
        "config": _eagle3_head(2048, 6144, 16, 8, 151936, 40960, rope_theta=1000000.0),
        "total_size": 270_000_000,
        "tokenizer": _QWEN_TOK,
    },
    "RedHatAI/Qwen3-8B-speculator.eagle3": {
        "role": "eagle3",
        "config": _speculator(_QWEN3_8B, "Qwen/Qwen3-8B", "Qwen3ForCausalLM"),
        "total_size": 750_000_000,
        "tokenizer": _QWEN_TOK,
    },
    "nvidia/Llama-3.3-70B-Instruct-Eagle3": {
        "role": "eagle3",
        "config": _eagle3_head(8192, 28672, 64, 8, 128256, 131072, draft_vocab=128256),
        "total_size": 6_400_000_000,
        "tokenizer": _LLAMA_TOK,
    },
    # Draft models ----------------------------------------------------------------------------------
    "meta-llama/Llama-3.2-1B-Instruct": {
        "role": "draft",
        "config": _llama(
            2048,
            8192,
            32,
            8,
            16,
            head_dim=64,
            tie=True,
            rope=dict(_LLAMA3_ROPE, factor=32.0),
        ),
        "total_size": 2_471_645_184,
        "generation_config": _LLAMA_GEN,
        "tokenizer": _LLAMA_TOK,
    },
    "Qwen/Qwen3-0.6B": {
        "role": "draft",
        "config": _qwen3(1024, 3072, 16, 28, tie=True),
        "total_size": 1_200_000_000,
        "generation_config": _QWEN3_GEN,
        "tokenizer": _QWEN_TOK,
    },
    "Qwen/Qwen2.5-0.5B-Instruct": {
        "role": "draft",
        "config": _qwen25(896, 4864, 14, 2, 24, tie=True, vocab=151936),
        "total_size": 988_097_536,
        "generation_config": _QWEN25_GEN,
        "tokenizer": _QWEN_TOK,
    },
    # Extra (not in the collection's catalog): the INT4 1.7B target of the Orin Nano calibration row.
    "RedHatAI/Qwen3-1.7B-quantized.w4a16": {
        "role": "target",
        "extra": True,
        "config": _with_quant(_qwen3(2048, 6144, 16, 28, tie=True), _W4A16),
        "total_size": 1_400_000_000,
        "generation_config": _QWEN3_GEN,
        "tokenizer": _QWEN_TOK,
    },
}

CATALOG_IDS = [mid for mid, spec in MODELS.items() if not spec.get("extra")]


def revision(model_id: str) -> str:
    """A stable 40-hex commit id per model (the snapshot directory name)."""
    return hashlib.sha1(f"vllm-sim-zoo:{model_id}".encode()).hexdigest()  # noqa: S324 (not security)


def cache_dir_name(model_id: str) -> str:
    return "models--" + model_id.replace("/", "--")


def _weight_map(config: dict, total_size: int) -> dict:
    shards = max(1, math.ceil(total_size / 4_900_000_000))
    layers = config.get("num_hidden_layers") or config.get("transformer_layer_config", {}).get("num_hidden_layers", 1)
    names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    for i in range(layers):
        for part in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"):
            names.append(f"model.layers.{i}.{part}.weight")
        for part in ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            names.append(f"model.layers.{i}.{part}.weight")
    if shards == 1:
        return dict.fromkeys(names, "model.safetensors")
    out = {}
    for idx, name in enumerate(names):
        shard = 1 + idx * shards // len(names)
        out[name] = f"model-{shard:05d}-of-{shards:05d}.safetensors"
    return out


def snapshot_files(model_id: str) -> dict:
    """File name -> JSON-serialisable content for one model's snapshot."""
    spec = MODELS[model_id]
    files = {
        "config.json": spec["config"],
        "model.safetensors.index.json": {
            "metadata": {"total_size": spec["total_size"]},
            "weight_map": _weight_map(spec["config"], spec["total_size"]),
        },
        "tokenizer_config.json": spec["tokenizer"],
    }
    if spec.get("generation_config"):
        files["generation_config.json"] = spec["generation_config"]
    if spec.get("hf_quant_config"):
        q = spec["config"]["quantization_config"]
        files["hf_quant_config.json"] = {
            "producer": {"name": "modelopt", "version": "0.27.0"},
            "quantization": {k: v for k, v in q.items() if k != "quant_method"},
        }
    return files


def install(hub_dir: str, model_ids=None) -> list:
    """Write the zoo into ``hub_dir`` (a Hugging Face hub cache). Returns the snapshot paths."""
    ids = list(model_ids) if model_ids else list(MODELS)
    unknown = [m for m in ids if m not in MODELS]
    if unknown:
        raise KeyError(f"unknown model id(s): {', '.join(unknown)}")
    paths = []
    for model_id in ids:
        rev = revision(model_id)
        base = os.path.join(hub_dir, cache_dir_name(model_id))
        snap = os.path.join(base, "snapshots", rev)
        os.makedirs(snap, exist_ok=True)
        os.makedirs(os.path.join(base, "refs"), exist_ok=True)
        os.makedirs(os.path.join(base, "blobs"), exist_ok=True)
        for name, content in snapshot_files(model_id).items():
            _write(os.path.join(snap, name), json.dumps(content, indent=2, sort_keys=False) + "\n")
        _write(os.path.join(base, "refs", "main"), rev)
        paths.append(snap)
    return paths


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m vllm_sim.zoo", description=__doc__.split("\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="write the zoo into a Hugging Face hub cache directory")
    p_install.add_argument("hub_dir", help="hub cache directory, i.e. $HF_HOME/hub")
    p_install.add_argument("--models", nargs="+", metavar="ID", help="model ids to install (default: all)")
    sub.add_parser("list", help="print the model ids of the zoo")
    args = parser.parse_args(argv)
    if args.command == "list":
        for model_id, spec in MODELS.items():
            print(f"{model_id}\t{spec['role']}\t{spec['total_size']}")
        return 0
    models = []
    for item in args.models or []:
        models.extend(x for x in item.split(",") if x)
    try:
        paths = install(args.hub_dir, models or None)
    except KeyError as exc:
        parser.error(str(exc.args[0]))
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
