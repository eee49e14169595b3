# SPDX-License-Identifier: Apache-2.0
"""Unit tests for the model catalog in plugins/plugin_utils/_catalog.py."""

import copy
import os

import pytest
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _catalog as catalog
from hypothesis import given
from hypothesis import strategies as st

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

# The ids fixed in docs/devel/architecture.md ("Model ids shared by the catalog and the simulator zoo").
TARGETS = [
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
]
HEADS = [
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
    "AngelSlim/Qwen3-8B_eagle3",
    "AngelSlim/Qwen3-4B_eagle3",
    "AngelSlim/Qwen3-1.7B_eagle3",
    "RedHatAI/Qwen3-8B-speculator.eagle3",
    "nvidia/Llama-3.3-70B-Instruct-Eagle3",
]
DRAFTS = ["meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen3-0.6B", "Qwen/Qwen2.5-0.5B-Instruct"]


def test_catalog_holds_exactly_the_architecture_ids():
    assert sorted(catalog.MODELS) == sorted(TARGETS + HEADS + DRAFTS)
    for mid in TARGETS:
        assert catalog.MODELS[mid]["kind"] == "target"
    for mid in HEADS:
        assert catalog.MODELS[mid]["kind"] == "eagle3_head"
    for mid in DRAFTS:
        assert catalog.MODELS[mid]["kind"] == "draft"


def test_architecture_document_lists_the_same_ids():
    with open(os.path.join(ROOT, "docs", "devel", "architecture.md")) as handle:
        text = handle.read()
    for mid in catalog.MODELS:
        assert "`{}`".format(mid) in text, mid


@pytest.mark.parametrize("mid", sorted(catalog.MODELS))
def test_every_builtin_entry_passes_the_strict_schema(mid):
    entry = catalog.MODELS[mid]
    assert catalog.validate_entry(mid, entry) == dict(entry, weights_gb=float(entry["weights_gb"]))
    assert catalog.valid_model_id(mid)


@pytest.mark.parametrize(
    ("mid", "weights_gb"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", 16.1),
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", 5.7),
        ("nvidia/Llama-3.1-8B-Instruct-FP4", 6.52),  # 6.07 GiB measured on Thor
        ("Qwen/Qwen3-8B", 16.4),
        ("RedHatAI/Qwen3-8B-quantized.w4a16", 6.0),
        ("Qwen/Qwen3-4B", 8.0),
        ("Qwen/Qwen3-1.7B", 3.4),
        ("Qwen/Qwen2.5-7B-Instruct", 15.2),
        ("meta-llama/Llama-3.3-70B-Instruct", 141.0),
        ("nvidia/Llama-3.3-70B-Instruct-FP4", 40.0),
        ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 0.8),
        ("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", 0.8),
        ("AngelSlim/Qwen3-8B_eagle3", 0.75),
        ("AngelSlim/Qwen3-4B_eagle3", 0.4),
        ("AngelSlim/Qwen3-1.7B_eagle3", 0.27),
        ("RedHatAI/Qwen3-8B-speculator.eagle3", 0.75),
        ("nvidia/Llama-3.3-70B-Instruct-Eagle3", 6.4),
        ("meta-llama/Llama-3.2-1B-Instruct", 2.5),
        ("Qwen/Qwen3-0.6B", 1.2),
        ("Qwen/Qwen2.5-0.5B-Instruct", 1.0),
    ],
)
def test_weight_sizes(mid, weights_gb):
    assert catalog.MODELS[mid]["weights_gb"] == weights_gb


def test_fp4_size_matches_the_thor_measurement_in_gib():
    gib = catalog.MODELS["nvidia/Llama-3.1-8B-Instruct-FP4"]["weights_gb"] * catalog.GB / 1024.0**3
    assert round(gib, 2) == 6.07


@pytest.mark.parametrize(
    ("mid", "vocab", "layers", "kv_heads", "head_dim"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", 128256, 32, 8, 128),
        ("Qwen/Qwen3-8B", 151936, 36, 8, 128),
        ("Qwen/Qwen3-4B", 151936, 36, 8, 128),
        ("Qwen/Qwen3-1.7B", 151936, 28, 8, 128),
        ("Qwen/Qwen3-0.6B", 151936, 28, 8, 128),
        ("meta-llama/Llama-3.2-1B-Instruct", 128256, 16, 8, 64),
        ("Qwen/Qwen2.5-7B-Instruct", 152064, 28, 4, 128),
        ("Qwen/Qwen2.5-0.5B-Instruct", 151936, 24, 2, 64),
        ("meta-llama/Llama-3.3-70B-Instruct", 128256, 80, 8, 128),
    ],
)
def test_config_shapes(mid, vocab, layers, kv_heads, head_dim):
    entry = catalog.MODELS[mid]
    assert (entry["vocab_size"], entry["num_hidden_layers"], entry["num_key_value_heads"], entry["head_dim"]) == (
        vocab,
        layers,
        kv_heads,
        head_dim,
    )


def test_quantized_targets_share_their_originals_shape_and_family():
    pairs = [
        ("meta-llama/Llama-3.1-8B-Instruct", "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"),
        ("meta-llama/Llama-3.1-8B-Instruct", "nvidia/Llama-3.1-8B-Instruct-FP4"),
        ("Qwen/Qwen3-8B", "RedHatAI/Qwen3-8B-quantized.w4a16"),
        ("meta-llama/Llama-3.3-70B-Instruct", "nvidia/Llama-3.3-70B-Instruct-FP4"),
    ]
    keys = ("family", "vocab_size", "num_hidden_layers", "num_key_value_heads", "head_dim")
    for original, quantized in pairs:
        for key in keys:
            assert catalog.MODELS[original][key] == catalog.MODELS[quantized][key]
        assert catalog.MODELS[quantized]["weights_gb"] < catalog.MODELS[original]["weights_gb"] / 2


def test_heads_have_one_layer_with_their_targets_attention_shape():
    targets = dict((m["family"], m) for m in catalog.MODELS.values() if m["kind"] == "target" and m["quantization"] == "bf16")
    for mid in HEADS:
        head = catalog.MODELS[mid]
        target = targets[head["family"]]
        assert head["num_hidden_layers"] == 1
        assert head["num_key_value_heads"] == target["num_key_value_heads"]
        assert head["head_dim"] == target["head_dim"]
        assert head["vocab_size"] == target["vocab_size"]
        assert head["checkpoint_format"] in catalog.CHECKPOINT_FORMATS


def test_speculators_format_is_marked_on_the_redhat_heads_only():
    speculators = sorted(mid for mid in HEADS if catalog.MODELS[mid]["checkpoint_format"] == "speculators")
    assert speculators == ["RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "RedHatAI/Qwen3-8B-speculator.eagle3"]


def test_yuhuili_head_context_is_2048():
    assert catalog.MODELS["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]["max_position_embeddings"] == 2048


def test_kv_bytes_per_token():
    # 2 (K and V) x layers x KV heads x head_dim x 2 bytes
    assert catalog.kv_bytes_per_token(catalog.MODELS["meta-llama/Llama-3.1-8B-Instruct"]) == 2 * 32 * 8 * 128 * 2
    assert catalog.kv_bytes_per_token(catalog.MODELS["Qwen/Qwen2.5-0.5B-Instruct"]) == 2 * 24 * 2 * 64 * 2
    assert catalog.kv_bytes_per_token(catalog.MODELS["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]) == 2 * 1 * 8 * 128 * 2


@pytest.mark.parametrize(
    ("family", "heads"),
    [
        ("llama3.1-8b", ["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"]),
        ("qwen3-8b", ["AngelSlim/Qwen3-8B_eagle3", "RedHatAI/Qwen3-8B-speculator.eagle3"]),
        ("qwen3-4b", ["AngelSlim/Qwen3-4B_eagle3"]),
        ("qwen3-1.7b", ["AngelSlim/Qwen3-1.7B_eagle3"]),
        ("llama3.3-70b", ["nvidia/Llama-3.3-70B-Instruct-Eagle3"]),
        ("qwen2.5-7b", []),
    ],
)
def test_heads_in_preference_order(family, heads):
    assert catalog.eagle3_heads(catalog.MODELS, family) == heads


@pytest.mark.parametrize(
    ("family", "drafts"),
    [
        ("llama3.1-8b", ["meta-llama/Llama-3.2-1B-Instruct"]),
        ("qwen3-8b", ["Qwen/Qwen3-0.6B"]),
        ("qwen3-4b", ["Qwen/Qwen3-0.6B"]),
        ("qwen3-1.7b", ["Qwen/Qwen3-0.6B"]),
        ("qwen2.5-7b", ["Qwen/Qwen2.5-0.5B-Instruct"]),
        ("llama3.3-70b", []),
    ],
)
def test_declared_draft_pairs(family, drafts):
    assert catalog.drafts_for(catalog.MODELS, family) == drafts


def test_draft_pair_vocabularies():
    models = catalog.MODELS
    assert models["meta-llama/Llama-3.2-1B-Instruct"]["vocab_size"] == models["meta-llama/Llama-3.1-8B-Instruct"]["vocab_size"]
    for target in ("Qwen/Qwen3-8B", "Qwen/Qwen3-4B", "Qwen/Qwen3-1.7B"):
        assert models["Qwen/Qwen3-0.6B"]["vocab_size"] == models[target]["vocab_size"]
    # the refused pair
    assert models["Qwen/Qwen2.5-0.5B-Instruct"]["vocab_size"] != models["Qwen/Qwen2.5-7B-Instruct"]["vocab_size"]


def test_vocab_mismatch_message_is_vllms_text():
    assert catalog.vocab_mismatch_message(152064, 151936) == (
        "Target and draft model should have the same vocabulary size. Target model vocab_size=152064. "
        "Draft model vocab_size=151936. Using models with different tokenizers can cause out-of-bounds "
        "errors during speculative decoding."
    )


@pytest.mark.parametrize(
    ("quantization", "family", "suits"),
    [
        ("nvfp4", "thor", True),
        ("nvfp4", "igx_thor", True),
        ("nvfp4", "agx_orin", False),
        ("nvfp4", "orin_nano", False),
        ("w4a16", "orin_nano", True),
        ("w4a16", "thor", True),
        ("bf16", "agx_orin", True),
    ],
)
def test_quantization_devices(quantization, family, suits):
    assert catalog.quantization_suits(quantization, family) is suits


# ---------------------------------------------------------------- model ids

VALID_IDS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "a/b",
    "A0/z_9.x-y",
    "/opt/models/llama-3.1",
    "/m",
    "x" * 96 + "/" + "y" * 96,
]
INVALID_IDS = [
    "",
    "llama",
    "a/b/c",
    "/",
    "-a/b",
    "a/-b",
    ".a/b",
    "a/.b",
    "a/b..c",
    "/opt/../etc/passwd",
    "/opt/models/..",
    "opt/models/x y",
    "a/b c",
    "a/b;rm",
    "a/b$HOME",
    "a/b%n",
    'a/b"',
    "a/b'",
    "a/b\n",
    "a/b\\",
    "a/b`id`",
    "a/b|x",
    "a/b&",
    "a/b>x",
    "a/b*",
    "~/models/x",
    "relative/path/x",
    "x" * 97 + "/b",
    "a/" + "y" * 97,
    "/" + "a" * 1024,
    None,
    5,
    ["a/b"],
]


@pytest.mark.parametrize("value", VALID_IDS)
def test_valid_model_ids(value):
    assert catalog.valid_model_id(value)


@pytest.mark.parametrize("value", INVALID_IDS)
def test_invalid_model_ids(value):
    assert not catalog.valid_model_id(value)


FORBIDDEN = set(" \t\r\n\"'`$%;&|<>()[]{}*?!#~\\=,:@^")


@given(st.text(max_size=80))
def test_no_id_with_a_metacharacter_is_accepted(text):
    if catalog.valid_model_id(text):
        assert not (set(text) & FORBIDDEN)
        assert ".." not in text
        assert all(ord(ch) < 128 for ch in text)


# ---------------------------------------------------------------- strict validation of extra entries

GOOD_TARGET = {
    "kind": "target",
    "family": "mistral-7b",
    "model_type": "mistral",
    "quantization": "bf16",
    "weights_gb": 14.5,
    "vocab_size": 32768,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 32768,
}


def test_extra_entry_is_added_and_normalised():
    merged = catalog.merged_catalog({"mistralai/Mistral-7B-Instruct-v0.3": dict(GOOD_TARGET, weights_gb=14)})
    entry = merged["mistralai/Mistral-7B-Instruct-v0.3"]
    assert entry["weights_gb"] == 14.0 and isinstance(entry["weights_gb"], float)
    assert entry["preference"] == 100
    assert entry["notes"] == ""
    # built-ins are still there and untouched
    assert merged["Qwen/Qwen3-8B"] == catalog.MODELS["Qwen/Qwen3-8B"]


def test_extra_entry_replaces_a_builtin_without_touching_the_module_data():
    before = copy.deepcopy(catalog.MODELS)
    merged = catalog.merged_catalog({"Qwen/Qwen3-8B": dict(GOOD_TARGET, family="qwen3-8b", weights_gb=17.0)})
    assert merged["Qwen/Qwen3-8B"]["weights_gb"] == 17.0
    assert before == catalog.MODELS


def test_local_path_entry():
    merged = catalog.merged_catalog({"/srv/models/head": dict(GOOD_TARGET, kind="eagle3_head", checkpoint_format="eagle")})
    assert merged["/srv/models/head"]["kind"] == "eagle3_head"


@pytest.mark.parametrize(
    ("model_id", "entry", "fragment"),
    [
        ("a/b", "x", "catalog['a/b']='x' is not allowed; expected a mapping of catalog fields"),
        ("a b/c", GOOD_TARGET, "catalog key 'a b/c' is not allowed; expected a Hugging Face repository id"),
        ("a/b", dict(GOOD_TARGET, kind="lora"), "catalog['a/b'].kind='lora' is not allowed; expected one of target"),
        (
            "a/b",
            dict(GOOD_TARGET, colour="red"),
            "catalog['a/b'].colour='red' is not allowed; expected only the fields",
        ),
        (
            "a/b",
            dict(GOOD_TARGET, checkpoint_format="eagle"),
            "catalog['a/b'].checkpoint_format='eagle' is not allowed",
        ),
        ("a/b", dict(GOOD_TARGET, weights_gb=0), "catalog['a/b'].weights_gb=0 is not allowed; expected a number of GB"),
        ("a/b", dict(GOOD_TARGET, weights_gb="14"), "catalog['a/b'].weights_gb='14' is not allowed"),
        ("a/b", dict(GOOD_TARGET, weights_gb=True), "catalog['a/b'].weights_gb=True is not allowed"),
        ("a/b", dict(GOOD_TARGET, vocab_size=1.5), "catalog['a/b'].vocab_size=1.5 is not allowed; expected an integer"),
        ("a/b", dict(GOOD_TARGET, head_dim=True), "catalog['a/b'].head_dim=True is not allowed"),
        ("a/b", dict(GOOD_TARGET, num_hidden_layers=0), "catalog['a/b'].num_hidden_layers=0 is not allowed"),
        (
            "a/b",
            dict(GOOD_TARGET, quantization="int8"),
            "catalog['a/b'].quantization='int8' is not allowed; expected one of bf16, nvfp4, w4a16",
        ),
        ("a/b", dict(GOOD_TARGET, family="Llama 3"), "catalog['a/b'].family='Llama 3' is not allowed"),
        ("a/b", dict(GOOD_TARGET, notes=1), "catalog['a/b'].notes=1 is not allowed"),
        ("a/b", dict(GOOD_TARGET, preference=-1), "catalog['a/b'].preference=-1 is not allowed"),
        (
            "a/b",
            dict((k, v) for k, v in GOOD_TARGET.items() if k != "vocab_size"),
            "catalog['a/b'].vocab_size is missing",
        ),
        ("a/b", dict(GOOD_TARGET, kind="eagle3_head"), "catalog['a/b'].checkpoint_format is missing"),
        ("a/b", dict(GOOD_TARGET, kind="draft"), "catalog['a/b'].draft_for is missing"),
        ("a/b", dict(GOOD_TARGET, kind="draft", draft_for=[]), "catalog['a/b'].draft_for=[] is not allowed"),
        ("a/b", dict(GOOD_TARGET, kind="draft", draft_for="x"), "catalog['a/b'].draft_for='x' is not allowed"),
        (
            "a/b",
            dict(GOOD_TARGET, kind="eagle3_head", checkpoint_format="gguf"),
            "checkpoint_format='gguf' is not allowed",
        ),
    ],
)
def test_invalid_extra_entries(model_id, entry, fragment):
    with pytest.raises(catalog.CatalogError) as excinfo:
        catalog.merged_catalog({model_id: entry}, host="jetson-007")
    message = str(excinfo.value)
    assert message.startswith("host jetson-007: ")
    assert fragment in message


def test_extra_catalog_must_be_a_mapping():
    with pytest.raises(catalog.CatalogError, match=r"host h: catalog=\['a/b'\] is not allowed; expected a mapping"):
        catalog.merged_catalog(["a/b"], host="h")
