# SPDX-License-Identifier: Apache-2.0
"""Model catalog for speculative-decoding planning: data plus accessors.

Private module (stdlib only, Python >= 3.8): imported by the planner on the controller and usable
by modules on devices.

Every model is keyed by its Hugging Face repository id (or an absolute local path, for entries
users add) and described by one flat dict:

``kind``
    ``target`` (a model that is served), ``eagle3_head`` (an EAGLE-3 speculator trained for one
    target family) or ``draft`` (a small same-family model for ``method: draft_model``).
``family``
    Base family. For targets and drafts it is the model's own family (``llama3.1-8b``); for an
    EAGLE-3 head it is the family of the target the head was trained for. Quantized checkpoints
    share the family of their BF16 original, so a head or draft pairs with all of them.
``model_type``
    ``config.json`` ``model_type`` (``llama``, ``qwen3``, ``qwen2``); vLLM's early EAGLE-3
    allow-lists are keyed on it.
``quantization``
    ``bf16``, ``w4a16`` or ``nvfp4`` (see ``QUANTIZATIONS`` for the devices each suits).
``weights_gb``
    Weight bytes in GB (10^9 bytes), as the Hugging Face file list reports them.
``vocab_size``, ``num_hidden_layers``, ``num_key_value_heads``, ``head_dim``,
``max_position_embeddings``
    From ``config.json``; the middle three size the KV cache (``kv_bytes_per_token``). An EAGLE-3
    head has one decoder layer with the target's KV heads and head dimension.
``preference``
    Lower is tried first among the heads (or drafts) of one family.
``checkpoint_format`` (heads only)
    ``eagle`` (plain EAGLE-3 checkpoint) or ``speculators`` (RedHatAI speculators format).
``draft_for`` (drafts only)
    Target families the draft shares a tokenizer lineage with. vLLM still checks the vocabulary
    sizes (``vocab_mismatch_message``); a pair whose sizes differ is refused, never chosen.
``notes``
    Free text, sources.

Sources: the model cards and ``config.json`` of the Hugging Face repositories named below, vLLM's
speculative-decoding documentation and configuration checks, and NVIDIA's Jetson AI Lab guidance on
quantization per family; sizes are Hugging Face file sizes or estimates from parameter counts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.jetson_llm.speculative.plugins.module_utils import _families

KINDS = ("target", "eagle3_head", "draft")

# Weight formats a catalog entry may declare; which families each suits is in the family table
# (module_utils/_families.py: NVFP4 needs Blackwell FP4 tensor cores, so Thor only).
QUANTIZATIONS = ("bf16", "w4a16", "nvfp4")

CHECKPOINT_FORMATS = ("eagle", "speculators")

# KV cache entries are kept in BF16/FP16 whatever the weight quantization (vLLM's default
# kv_cache_dtype "auto" follows the model dtype, which is 16-bit for all catalog models).
KV_BYTES_PER_ELEMENT = 2

GB = 1000.0**3

_NAME_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_HF_ID_RE = re.compile(r"^" + _NAME_PART + r"/" + _NAME_PART + r"$")
_LOCAL_PATH_RE = re.compile(r"^/[A-Za-z0-9._/-]{1,1023}$")


def valid_model_id(value):
    """True when ``value`` is a safe model reference.

    Accepted forms: a Hugging Face repository id ``org/name`` (each part starts with a letter or
    digit, then letters, digits, ``.``, ``_``, ``-``; at most 96 characters per part; no ``..``),
    or an absolute local path made of ``[A-Za-z0-9._/-]`` without ``..``. Nothing else is
    accepted, so a model id can never carry whitespace, quotes, ``%``, ``$``, shell or systemd
    metacharacters into a configuration file or a command line.
    """
    if not isinstance(value, str) or ".." in value:
        return False
    if value.startswith("/"):
        return _LOCAL_PATH_RE.fullmatch(value) is not None and value != "/"
    return _HF_ID_RE.fullmatch(value) is not None


MODEL_ID_EXPECTATION = (
    "a Hugging Face repository id 'org/name' (letters, digits, '.', '_', '-'; each part starting "
    "with a letter or digit, at most 96 characters, no '..') or an absolute local path of "
    "[A-Za-z0-9._/-] without '..'"
)


def _attention(layers, kv_heads, head_dim):
    return {"num_hidden_layers": layers, "num_key_value_heads": kv_heads, "head_dim": head_dim}


def _target(**fields):
    entry = {"kind": "target", "preference": 100}
    entry.update(fields)
    return entry


def _head(target_id, **fields):
    """An EAGLE-3 head for ``target_id``: one decoder layer with the target's attention shape and
    vocabulary (the head reuses the target's embeddings and vocabulary)."""
    target = _BUILTIN[target_id]
    entry = {
        "kind": "eagle3_head",
        "family": target["family"],
        "model_type": target["model_type"],
        "quantization": "bf16",
        "vocab_size": target["vocab_size"],
        "num_hidden_layers": 1,
        "num_key_value_heads": target["num_key_value_heads"],
        "head_dim": target["head_dim"],
    }
    entry.update(fields)
    return entry


def _draft(**fields):
    entry = {"kind": "draft", "quantization": "bf16", "preference": 100}
    entry.update(fields)
    return entry


_LLAMA3_8B = _attention(32, 8, 128)
_LLAMA3_70B = _attention(80, 8, 128)
_QWEN3_8B = _attention(36, 8, 128)
_QWEN3_4B = _attention(36, 8, 128)
_QWEN3_1_7B = _attention(28, 8, 128)

_BUILTIN = {}

# ---------------------------------------------------------------- targets
# Llama 3.x: vocabulary 128256, context 131072; 8B = 32 layers x 8 KV heads x 128, 70B = 80 x 8 x 128.
_BUILTIN["meta-llama/Llama-3.1-8B-Instruct"] = _target(
    family="llama3.1-8b",
    model_type="llama",
    quantization="bf16",
    weights_gb=16.1,
    vocab_size=128256,
    max_position_embeddings=131072,
    notes="8.03 B parameters in BF16.",
    **_LLAMA3_8B,
)
_BUILTIN["RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"] = _target(
    family="llama3.1-8b",
    model_type="llama",
    quantization="w4a16",
    weights_gb=5.7,
    vocab_size=128256,
    max_position_embeddings=131072,
    notes="INT4 weights, 16-bit activations (Orin's first choice in NVIDIA's Jetson guidance).",
    **_LLAMA3_8B,
)
_BUILTIN["nvidia/Llama-3.1-8B-Instruct-FP4"] = _target(
    family="llama3.1-8b",
    model_type="llama",
    quantization="nvfp4",
    # vLLM measured 6.07 GiB (= 6.52 GB) for this checkpoint on AGX Thor, and 6.86 GiB with the
    # yuhuili EAGLE-3 head (the one NVIDIA's Jetson AI Lab workshop uses on Thor and AGX Orin).
    weights_gb=6.52,
    vocab_size=128256,
    max_position_embeddings=131072,
    notes="NVFP4, Thor only.",
    **_LLAMA3_8B,
)
# Qwen3 dense: vocabulary 151936, context 40960; 8B and 4B = 36 x 8 x 128, 1.7B = 28 x 8 x 128.
_BUILTIN["Qwen/Qwen3-8B"] = _target(
    family="qwen3-8b",
    model_type="qwen3",
    quantization="bf16",
    weights_gb=16.4,
    vocab_size=151936,
    max_position_embeddings=40960,
    notes="8.2 B parameters in BF16.",
    **_QWEN3_8B,
)
_BUILTIN["RedHatAI/Qwen3-8B-quantized.w4a16"] = _target(
    family="qwen3-8b",
    model_type="qwen3",
    quantization="w4a16",
    weights_gb=6.0,
    vocab_size=151936,
    max_position_embeddings=40960,
    notes="INT4 weights; the Jetson AI Lab tutorial pairs it with RedHatAI/Qwen3-8B-speculator.eagle3.",
    **_QWEN3_8B,
)
_BUILTIN["Qwen/Qwen3-4B"] = _target(
    family="qwen3-4b",
    model_type="qwen3",
    quantization="bf16",
    weights_gb=8.0,
    vocab_size=151936,
    max_position_embeddings=40960,
    notes="4.0 B parameters in BF16.",
    **_QWEN3_4B,
)
_BUILTIN["Qwen/Qwen3-1.7B"] = _target(
    family="qwen3-1.7b",
    model_type="qwen3",
    quantization="bf16",
    weights_gb=3.4,
    vocab_size=151936,
    max_position_embeddings=40960,
    notes="1.7 B parameters in BF16.",
    **_QWEN3_1_7B,
)
# Qwen2.5-7B pads its vocabulary to 152064; the <= 3B models use 151936 (their config.json).
_BUILTIN["Qwen/Qwen2.5-7B-Instruct"] = _target(
    family="qwen2.5-7b",
    model_type="qwen2",
    quantization="bf16",
    weights_gb=15.2,
    vocab_size=152064,
    max_position_embeddings=32768,
    notes="7.6 B parameters in BF16; no published EAGLE-3 head.",
    **_attention(28, 4, 128),
)
_BUILTIN["meta-llama/Llama-3.3-70B-Instruct"] = _target(
    family="llama3.3-70b",
    model_type="llama",
    quantization="bf16",
    weights_gb=141.0,
    vocab_size=128256,
    max_position_embeddings=131072,
    notes="Too big for any Jetson in BF16.",
    **_LLAMA3_70B,
)
_BUILTIN["nvidia/Llama-3.3-70B-Instruct-FP4"] = _target(
    family="llama3.3-70b",
    model_type="llama",
    quantization="nvfp4",
    weights_gb=40.0,
    vocab_size=128256,
    max_position_embeddings=131072,
    notes="NVFP4, Thor only.",
    **_LLAMA3_70B,
)

# ---------------------------------------------------------------- EAGLE-3 heads
# One decoder layer + fusion layer (3 x hidden -> hidden) + a 32000-token draft LM head, reusing
# the target's embeddings: about 0.4 B parameters, 0.8 GB in BF16, for an 8B target.
_BUILTIN["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"] = _head(
    "meta-llama/Llama-3.1-8B-Instruct",
    weights_gb=0.8,
    # 2048: vLLM >= 0.27 raises it to the target's max_model_len; earlier releases limit
    # speculation to the head's context (vLLM issue #21986).
    max_position_embeddings=2048,
    preference=1,
    checkpoint_format="eagle",
    notes="Used in vLLM tests, on the TensorRT Edge-LLM list and in NVIDIA's Thor measurement (k=5).",
)
_BUILTIN["RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"] = _head(
    "meta-llama/Llama-3.1-8B-Instruct",
    weights_gb=0.8,
    max_position_embeddings=131072,
    preference=2,
    checkpoint_format="speculators",
    notes="Speculators format (vLLM >= 0.10.1). Served as --model it would replace the target "
    "with its verifier; the collection passes it inside --speculative-config with explicit method "
    "and model instead (vLLM 0.10 changed the format). Context length assumed from the verifier.",
)
_BUILTIN["AngelSlim/Qwen3-8B_eagle3"] = _head(
    "Qwen/Qwen3-8B",
    weights_gb=0.75,
    max_position_embeddings=40960,
    preference=1,
    checkpoint_format="eagle",
    notes="About 750 MB (one mid-layer, fc 4096x12288, draft vocabulary 32000); vLLM test "
    "qwen3_eagle3; AngelSlim mean acceptance length 1.99. Context length assumed from the target.",
)
_BUILTIN["RedHatAI/Qwen3-8B-speculator.eagle3"] = _head(
    "Qwen/Qwen3-8B",
    weights_gb=0.75,
    max_position_embeddings=40960,
    preference=2,
    checkpoint_format="speculators",
    notes="Speculators format (vLLM >= 0.10.1), passed with explicit method and model; the Jetson "
    "AI Lab tutorial uses it with Qwen3-8B or its w4a16 quantization at k=3.",
)
_BUILTIN["AngelSlim/Qwen3-4B_eagle3"] = _head(
    "Qwen/Qwen3-4B",
    weights_gb=0.4,
    max_position_embeddings=40960,
    preference=1,
    checkpoint_format="eagle",
    notes="About 0.4 GB (estimate); AngelSlim mean acceptance length 2.08.",
)
_BUILTIN["AngelSlim/Qwen3-1.7B_eagle3"] = _head(
    "Qwen/Qwen3-1.7B",
    weights_gb=0.27,
    max_position_embeddings=40960,
    preference=1,
    checkpoint_format="eagle",
    notes="About 0.27 GB (estimate); AngelSlim mean acceptance length 2.17.",
)
_BUILTIN["nvidia/Llama-3.3-70B-Instruct-Eagle3"] = _head(
    "meta-llama/Llama-3.3-70B-Instruct",
    weights_gb=6.4,
    max_position_embeddings=131072,
    preference=1,
    checkpoint_format="eagle",
    notes="3.2 B parameters including embeddings, BF16; behind NVIDIA's Thor 70B figure.",
)

# ---------------------------------------------------------------- drafts (same-family small models)
_BUILTIN["meta-llama/Llama-3.2-1B-Instruct"] = _draft(
    family="llama3.2-1b",
    model_type="llama",
    weights_gb=2.5,
    vocab_size=128256,
    max_position_embeddings=131072,
    draft_for=["llama3.1-8b"],
    notes="Vocabulary 128256 like Llama-3.1-8B: passes vLLM's equal-vocabulary check.",
    **_attention(16, 8, 64),
)
_BUILTIN["Qwen/Qwen3-0.6B"] = _draft(
    family="qwen3-0.6b",
    model_type="qwen3",
    weights_gb=1.2,
    vocab_size=151936,
    max_position_embeddings=40960,
    draft_for=["qwen3-8b", "qwen3-4b", "qwen3-1.7b"],
    notes="Qwen3 dense configs share 151936; vLLM's tests pair Qwen3-1.7B with it.",
    **_attention(28, 8, 128),
)
_BUILTIN["Qwen/Qwen2.5-0.5B-Instruct"] = _draft(
    family="qwen2.5-0.5b",
    model_type="qwen2",
    weights_gb=1.0,
    vocab_size=151936,
    max_position_embeddings=32768,
    draft_for=["qwen2.5-7b"],
    notes="Same lineage as Qwen2.5-7B but vocabulary 151936 vs 152064: vLLM refuses the pair "
    "(PR #13849, QwenLM/Qwen3 issue #466). Listed so that it is refused with vLLM's message, "
    "never chosen.",
    **_attention(24, 2, 64),
)

MODELS = _BUILTIN

# vLLM >= 0.15 text for a draft_model pair with different vocabularies (vLLM's speculative config check).
_VOCAB_MISMATCH = (
    "Target and draft model should have the same vocabulary size. Target model vocab_size={0}. "
    "Draft model vocab_size={1}. Using models with different tokenizers can cause out-of-bounds "
    "errors during speculative decoding."
)


def vocab_mismatch_message(target_vocab, draft_vocab):
    """vLLM's error text for a draft whose vocabulary size differs from the target's."""
    return _VOCAB_MISMATCH.format(target_vocab, draft_vocab)


def quantization_suits(quantization, family):
    """True when a checkpoint of ``quantization`` can run on device ``family`` (the family table)."""
    return _families.quantization_suits(quantization, family)


def kv_bytes_per_token(entry):
    """KV-cache bytes one token occupies: 2 (K and V) x layers x KV heads x head_dim x 2 bytes."""
    return 2 * entry["num_hidden_layers"] * entry["num_key_value_heads"] * entry["head_dim"] * KV_BYTES_PER_ELEMENT


def eagle3_heads(catalog, family):
    """Ids of the EAGLE-3 heads for target ``family``, preferred first."""
    found = [(m["preference"], mid) for mid, m in catalog.items() if m["kind"] == "eagle3_head" and m["family"] == family]
    return [mid for _pref, mid in sorted(found)]


def drafts_for(catalog, family):
    """Ids of the drafts declared for target ``family`` (compatible or not), preferred first."""
    found = [(m["preference"], m["weights_gb"], mid) for mid, m in catalog.items() if m["kind"] == "draft" and family in m.get("draft_for", ())]
    return [mid for _pref, _size, mid in sorted(found)]


class CatalogError(ValueError):
    """An extra catalog entry does not follow the schema."""


_COMMON_FIELDS = {
    "kind": "one of " + ", ".join(KINDS),
    "family": "a family name of [a-z0-9._-] (1 to 64 characters)",
    "model_type": "a config.json model_type of [a-z0-9_] (1 to 64 characters)",
    "quantization": "one of " + ", ".join(sorted(QUANTIZATIONS)),
    "weights_gb": "a number of GB from 0.01 to 2000",
    "vocab_size": "an integer from 1 to 10000000",
    "num_hidden_layers": "an integer from 1 to 1000",
    "num_key_value_heads": "an integer from 1 to 1024",
    "head_dim": "an integer from 1 to 4096",
    "max_position_embeddings": "an integer from 1 to 100000000",
}
_OPTIONAL_FIELDS = {
    "preference": "an integer from 0 to 1000",
    "notes": "a string of at most 1000 characters",
}
_KIND_FIELDS = {
    "target": {},
    "eagle3_head": {"checkpoint_format": "one of " + ", ".join(CHECKPOINT_FORMATS)},
    "draft": {"draft_for": "a list of family names"},
}
_FAMILY_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_MODEL_TYPE_RE = re.compile(r"^[a-z0-9_]{1,64}$")
_INT_RANGES = {
    "vocab_size": (1, 10000000),
    "num_hidden_layers": (1, 1000),
    "num_key_value_heads": (1, 1024),
    "head_dim": (1, 4096),
    "max_position_embeddings": (1, 100000000),
    "preference": (0, 1000),
}


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _field_ok(key, value):
    if key == "kind":
        return value in KINDS
    if key == "family":
        return isinstance(value, str) and _FAMILY_RE.fullmatch(value) is not None
    if key == "model_type":
        return isinstance(value, str) and _MODEL_TYPE_RE.fullmatch(value) is not None
    if key == "quantization":
        return isinstance(value, str) and value in QUANTIZATIONS
    if key == "weights_gb":
        return (_is_int(value) or isinstance(value, float)) and 0.01 <= value <= 2000
    if key in _INT_RANGES:
        low, high = _INT_RANGES[key]
        return _is_int(value) and low <= value <= high
    if key == "notes":
        return isinstance(value, str) and len(value) <= 1000
    if key == "checkpoint_format":
        return isinstance(value, str) and value in CHECKPOINT_FORMATS
    if key == "draft_for":
        return isinstance(value, list) and len(value) > 0 and all(isinstance(v, str) and _FAMILY_RE.fullmatch(v) is not None for v in value)
    return False


def _where(host):
    return "host {}: ".format(host) if host else ""


def validate_entry(model_id, entry, host="", var="catalog"):
    """Check one catalog entry strictly and return a normalised copy.

    Raises ``CatalogError`` naming the host, the entry, the field, the value and what is allowed.
    """
    prefix = _where(host)
    if not valid_model_id(model_id):
        raise CatalogError("{}{} key {!r} is not allowed; expected {}".format(prefix, var, model_id, MODEL_ID_EXPECTATION))
    if not isinstance(entry, dict):
        raise CatalogError("{}{}[{!r}]={!r} is not allowed; expected a mapping of catalog fields".format(prefix, var, model_id, entry))
    kind = entry.get("kind")
    if kind not in KINDS:
        raise CatalogError("{}{}[{!r}].kind={!r} is not allowed; expected {}".format(prefix, var, model_id, kind, _COMMON_FIELDS["kind"]))
    allowed = dict(_COMMON_FIELDS)
    allowed.update(_OPTIONAL_FIELDS)
    allowed.update(_KIND_FIELDS[kind])
    for key in sorted(entry, key=str):
        if key not in allowed:
            raise CatalogError(
                "{}{}[{!r}].{}={!r} is not allowed; expected only the fields {} for kind {}".format(
                    prefix, var, model_id, key, entry[key], ", ".join(sorted(allowed)), kind
                )
            )
    required = list(_COMMON_FIELDS) + list(_KIND_FIELDS[kind])
    for key in required:
        if key not in entry:
            raise CatalogError("{}{}[{!r}].{} is missing; expected {}".format(prefix, var, model_id, key, allowed[key]))
    for key in sorted(entry, key=str):
        if not _field_ok(key, entry[key]):
            raise CatalogError("{}{}[{!r}].{}={!r} is not allowed; expected {}".format(prefix, var, model_id, key, entry[key], allowed[key]))
    out = copy.deepcopy(entry)
    out["weights_gb"] = float(out["weights_gb"])
    out.setdefault("preference", 100)
    out.setdefault("notes", "")
    return out


def merged_catalog(extra=None, host="", var="catalog"):
    """The built-in catalog with ``extra`` entries (validated strictly) added or replacing."""
    catalog = copy.deepcopy(MODELS)
    if extra is None:
        return catalog
    if not isinstance(extra, dict):
        raise CatalogError("{}{}={!r} is not allowed; expected a mapping of model id to catalog entry".format(_where(host), var, extra))
    for model_id in sorted(extra, key=str):
        catalog[model_id] = validate_entry(model_id, extra[model_id], host=host, var=var)
    return catalog
