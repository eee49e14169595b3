# SPDX-License-Identifier: Apache-2.0
"""Resolve model names like vLLM in offline mode and derive sizes from their config files."""

from __future__ import annotations

import glob
import json
import os
import re

from .errors import VllmError

OFFLINE_ERROR = (
    "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the "
    "cached files.\nCheck your internet connection or see how to run the library in offline mode at "
    "'https://huggingface.co/docs/transformers/installation#offline-mode'."
)

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def invalid_repo_error(model: str) -> VllmError:
    return VllmError(
        "ValueError",
        f"Invalid repository ID or local directory specified: '{model}'.\n"
        "Please verify the following requirements:\n"
        "1. Provide a valid Hugging Face repository ID.\n"
        "2. Specify a local directory that contains a recognized configuration file.\n"
        "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
        "   - For Mistral models: ensure the presence of a 'params.json'.\n",
        "api",
        ("cli", "hf"),
    )


def offline_error() -> VllmError:
    return VllmError("OSError", OFFLINE_ERROR, "api", ("cli", "hf"))


def hub_dirs(env=None, download_dir=None) -> list:
    env = os.environ if env is None else env
    dirs = []
    if download_dir:
        dirs.append(download_dir)
    if env.get("HF_HUB_CACHE"):
        dirs.append(env["HF_HUB_CACHE"])
    hf_home = env.get("HF_HOME")
    if not hf_home:
        xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        hf_home = os.path.join(xdg, "huggingface")
    dirs.append(os.path.join(hf_home, "hub"))
    return dirs


def find_snapshot(model: str, env=None, download_dir=None, revision=None):
    """Path of the local directory holding ``model``'s files, or None."""
    if os.path.isdir(model):
        return model if os.path.isfile(os.path.join(model, "config.json")) else None
    if not _REPO_ID.match(model):
        return None
    for hub in hub_dirs(env, download_dir):
        base = os.path.join(hub, "models--" + model.replace("/", "--"))
        if not os.path.isdir(base):
            continue
        rev = revision or "main"
        commit = rev if _COMMIT.match(rev) else None
        if commit is None:
            try:
                with open(os.path.join(base, "refs", rev), encoding="utf-8") as handle:
                    commit = handle.read().strip()
            except OSError:
                commit = None
        if commit is None:
            continue
        snap = os.path.join(base, "snapshots", commit)
        if os.path.isfile(os.path.join(snap, "config.json")):
            return snap
    return None


def looks_local(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or not _REPO_ID.match(model)


def load(model: str, env=None, download_dir=None, revision=None) -> ModelInfo:
    snap = find_snapshot(model, env, download_dir, revision)
    if snap is None:
        if os.path.isdir(model) or looks_local(model):
            raise invalid_repo_error(model)
        raise offline_error()
    return ModelInfo.from_dir(model, snap)


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def quant_scheme(qcfg) -> str | None:
    """Short name of a checkpoint's quantization (``w4a16``, ``w8a16``, ``nvfp4``, ``fp8``) or None."""
    if not isinstance(qcfg, dict):
        return None
    method = str(qcfg.get("quant_method", "")).lower()
    if method == "modelopt":
        algo = str(qcfg.get("quant_algo", "")).upper()
        return "nvfp4" if "FP4" in algo else "fp8"
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        return "w4a16" if int(qcfg.get("bits", 4)) == 4 else "w8a16"
    if method == "fp8":
        return "fp8"
    if method == "compressed-tensors":
        for group in (qcfg.get("config_groups") or {}).values():
            weights = group.get("weights") or {}
            bits = int(weights.get("num_bits", 8))
            kind = weights.get("type", "int")
            if kind == "float" and bits == 4:
                return "nvfp4"
            if kind == "float":
                return "fp8"
            return "w4a16" if bits == 4 else "w8a16"
        return "w8a16"
    if method:
        return method
    return None


# Bytes per parameter of the quantised linear layers (scales included).
BYTES_PER_PARAM = {None: 2.0, "w4a16": 0.53, "w8a16": 1.02, "nvfp4": 0.5625, "fp8": 1.0}


class ModelInfo:
    """What the simulator needs from a checkpoint's ``config.json`` and weight index."""

    def __init__(self, name, path, config, total_size, generation_config=None, tokenizer_config=None):
        self.name = name
        self.path = path
        self.config = config
        self.generation_config = generation_config or {}
        self.tokenizer_config = tokenizer_config or {}
        self.speculators = config.get("speculators_config") if isinstance(config, dict) else None
        layer = config.get("transformer_layer_config") if self.speculators else None
        src = dict(layer or {})
        src.update({k: v for k, v in config.items() if k not in ("transformer_layer_config",)})
        if layer:
            for key in (
                "hidden_size",
                "num_attention_heads",
                "num_key_value_heads",
                "head_dim",
                "intermediate_size",
                "vocab_size",
                "max_position_embeddings",
                "num_hidden_layers",
                "model_type",
            ):
                if key in layer:
                    src[key] = layer[key]
        text = src.get("text_config") if isinstance(src.get("text_config"), dict) else None
        if text:
            for key, value in text.items():
                src.setdefault(key, value)
        self.architectures = list(config.get("architectures") or [])
        self.model_type = str(src.get("model_type") or "")
        if self.speculators:
            self.model_type = str(config.get("speculators_model_type") or self.model_type)
        self.layer_model_type = str((layer or {}).get("model_type") or src.get("model_type") or "")
        self.hidden_size = int(src.get("hidden_size") or 4096)
        self.num_layers = int(src.get("num_hidden_layers") or 1)
        self.num_heads = int(src.get("num_attention_heads") or 32)
        self.num_kv_heads = int(src.get("num_key_value_heads") or self.num_heads)
        self.head_dim = int(src.get("head_dim") or self.hidden_size // self.num_heads)
        self.intermediate_size = int(src.get("intermediate_size") or 4 * self.hidden_size)
        self.vocab_size = int(src.get("vocab_size") or 32000)
        self.draft_vocab_size = int(src.get("draft_vocab_size") or self.vocab_size)
        self.max_position_embeddings = int(src.get("max_position_embeddings") or 2048)
        self.tie_word_embeddings = bool(src.get("tie_word_embeddings", False))
        self.torch_dtype = str(src.get("torch_dtype") or src.get("dtype") or "bfloat16")
        self.quantization_config = config.get("quantization_config")
        self.quant = quant_scheme(self.quantization_config)
        self.n_predict = src.get("n_predict")
        self.total_size = int(total_size)

    @classmethod
    def from_dir(cls, name: str, path: str) -> ModelInfo:
        config = _read_json(os.path.join(path, "config.json"))
        if not isinstance(config, dict):
            raise invalid_repo_error(name)
        index = _read_json(os.path.join(path, "model.safetensors.index.json"))
        total = None
        if isinstance(index, dict):
            total = (index.get("metadata") or {}).get("total_size")
        if total is None:
            files = glob.glob(os.path.join(path, "*.safetensors")) or glob.glob(os.path.join(path, "*.bin"))
            total = sum(os.path.getsize(f) for f in files)
        return cls(
            name,
            path,
            config,
            total,
            _read_json(os.path.join(path, "generation_config.json")),
            _read_json(os.path.join(path, "tokenizer_config.json")),
        )

    # ----------------------------------------------------------------------------- derived sizes
    @property
    def is_eagle_head(self) -> bool:
        archs = " ".join(self.architectures).lower()
        return bool(self.speculators) or "eagle" in archs

    @property
    def is_eagle3_head(self) -> bool:
        archs = " ".join(self.architectures).lower()
        return (self.speculators and self.model_type == "eagle3") or "eagle3" in archs

    @property
    def layer_params(self) -> int:
        h = self.hidden_size
        q = self.num_heads * self.head_dim
        kv = self.num_kv_heads * self.head_dim
        attn_in = 2 * h if self.is_eagle3_head else h
        attn = attn_in * (q + 2 * kv) + q * h
        mlp = 3 * h * self.intermediate_size
        return attn + mlp

    @property
    def lm_head_params(self) -> int:
        return self.draft_vocab_size * self.hidden_size

    @property
    def embed_bytes(self) -> int:
        return self.vocab_size * self.hidden_size * 2

    @property
    def flops_per_token(self) -> float:
        """Matrix-multiply FLOPs of one token through the model (2 per weight)."""
        fc = 3 * self.hidden_size * self.hidden_size if self.is_eagle3_head else 0
        return 2.0 * (self.num_layers * self.layer_params + self.lm_head_params + fc)

    @property
    def weight_bytes(self) -> int:
        return self.total_size

    @property
    def decode_read_bytes(self) -> float:
        """Bytes read from memory per forward pass: all weights but an untied input embedding."""
        bpp = BYTES_PER_PARAM.get(self.quant, 1.0)
        fc = 3 * self.hidden_size * self.hidden_size if self.is_eagle3_head else 0
        est = (self.num_layers * self.layer_params + fc) * bpp + self.lm_head_params * 2
        if self.tie_word_embeddings:
            return float(self.total_size)
        if self.total_size >= est + 0.8 * self.embed_bytes:
            return float(self.total_size - self.embed_bytes)
        return float(self.total_size)

    def kv_bytes_per_token(self, dtype_bytes: float = 2.0) -> float:
        return 2.0 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes

    @property
    def family(self) -> str:
        """Shape-based family name used by the acceptance table (e.g. ``llama3-8b``, ``qwen3-1.7b``)."""
        key = (self.hidden_size, self.num_layers, self.vocab_size)
        return FAMILIES.get(key, f"{self.layer_model_type or self.model_type}-h{self.hidden_size}")

    @property
    def default_temperature(self):
        value = self.generation_config.get("temperature") if self.generation_config else None
        return float(value) if isinstance(value, (int, float)) else None


FAMILIES = {
    (4096, 32, 128256): "llama3-8b",
    (8192, 80, 128256): "llama3-70b",
    (2048, 16, 128256): "llama3.2-1b",
    (4096, 36, 151936): "qwen3-8b",
    (2560, 36, 151936): "qwen3-4b",
    (2048, 28, 151936): "qwen3-1.7b",
    (1024, 28, 151936): "qwen3-0.6b",
    (3584, 28, 152064): "qwen2.5-7b",
    (896, 24, 151936): "qwen2.5-0.5b",
}
