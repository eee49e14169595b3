# SPDX-License-Identifier: Apache-2.0
"""``--speculative-config`` validation per vLLM version (``vllm/config/speculative.py`` of each release)."""

import copy
from typing import Literal, Optional

import pytest

from vllm_sim import errors, specconfig, zoo
from vllm_sim.engine import model_from_zoo
from vllm_sim.errors import VllmError
from vllm_sim.models import ModelInfo
from vllm_sim.versions import Version

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
HEAD = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
QWEN8 = "Qwen/Qwen3-8B"
QWEN_HEAD = "AngelSlim/Qwen3-8B_eagle3"


def resolve(name, revision=None):
    return model_from_zoo(name)


def build(raw, version, target=LLAMA, tp=1, **kw):
    target_info = model_from_zoo(target) if isinstance(target, str) else target
    return specconfig.build(raw, Version(version), target_info, tp, resolve, **kw)


def fails(raw, version, target=LLAMA, tp=1) -> VllmError:
    with pytest.raises(VllmError) as info:
        build(raw, version, target, tp)
    return info.value


def eagle(**extra):
    cfg = {"method": "eagle3", "model": HEAD, "num_speculative_tokens": 3}
    cfg.update(extra)
    return cfg


def other_target(model_type: str) -> ModelInfo:
    cfg = copy.deepcopy(zoo.MODELS[LLAMA]["config"])
    cfg["model_type"] = model_type
    cfg["architectures"] = ["Gemma3ForCausalLM"]
    return ModelInfo("google/gemma-3-x", "", cfg, 8_000_000_000)


# --------------------------------------------------------------------------- valid configurations


@pytest.mark.parametrize("version", ["0.10.1", "0.14.0", "0.15.0", "0.16.0", "0.17.0", "0.20.0", "0.22.0", "0.26.0", "0.33.0"])
def test_eagle3_llama_is_valid_everywhere(version):
    plan = build(eagle(draft_tensor_parallel_size=1), version)
    assert (plan.method, plan.model_name, plan.num_speculative_tokens) == ("eagle3", HEAD, 3)
    assert repr(plan) == f"SpeculativeConfig(method='eagle3', model='{HEAD}', num_spec_tokens=3)"


def test_no_config_means_no_speculation():
    assert build(None, "0.20.0") is None
    assert build({}, "0.20.0") is None


def test_ngram_defaults_and_lookup_rule():
    plan = build({"method": "ngram", "num_speculative_tokens": 4}, "0.20.0")
    assert plan.method == "ngram"
    assert (plan.options["prompt_lookup_min"], plan.options["prompt_lookup_max"]) == (5, 5)
    plan = build({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}, "0.20.0")
    assert (plan.options["prompt_lookup_min"], plan.options["prompt_lookup_max"]) == (3, 3)
    err = fails({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 4, "prompt_lookup_max": 2}, "0.20.0")
    assert err.message.splitlines()[1].startswith("  Value error, prompt_lookup_min=4 must be <= prompt_lookup_max=2 [")


# --------------------------------------------------------------------------- method literals


def test_method_literal_lists_follow_the_releases():
    assert "dflash" not in specconfig.method_choices(Version("0.17.0"))
    assert "dflash" in specconfig.method_choices(Version("0.20.0"))
    assert "extract_hidden_states" in specconfig.method_choices(Version("0.17.0"))
    assert "ngram_gpu" not in specconfig.method_choices(Version("0.17.0"))
    assert "ngram_gpu" in specconfig.method_choices(Version("0.18.0"))
    assert "custom_class" in specconfig.method_choices(Version("0.22.0"))
    assert "dspark" in specconfig.method_choices(Version("0.26.0"))
    assert "suffix" not in specconfig.method_choices(Version("0.11.0"))
    assert "suffix" in specconfig.method_choices(Version("0.11.2"))
    v033 = specconfig.method_choices(Version("0.33.0"))
    assert "medusa" not in v033 and "mlp_speculator" not in v033 and "eagle3" in v033
    v034 = specconfig.method_choices(Version("0.34.0"))
    assert "custom_class" in v033 and "custom_class" not in v034
    assert {"qwen3_5_mtp", "nemotron_h_mtp", "gemma4_mtp"} <= set(v034) and "qwen3_5_mtp" not in v033
    assert set(v033) - {"custom_class"} <= set(v034)


def test_unknown_method_is_a_pydantic_literal_error():
    err = fails(eagle(method="eagle4"), "0.10.0")
    assert err.exc_type == "pydantic_core._pydantic_core.ValidationError"
    assert err.message.splitlines()[:3] == [
        "1 validation error for SpeculativeConfig",
        "method",
        "  Input should be 'ngram', 'eagle', 'eagle3', 'medusa', 'mlp_speculator', 'draft_model' or 'deepseek_mtp' "
        "[type=literal_error, input_value='eagle4', input_type=str]",
    ]
    assert err.message.splitlines()[3] == "    For further information visit https://errors.pydantic.dev/2.11/v/literal_error"


def test_medusa_is_gone_in_0_33():
    assert "literal_error" in fails({"method": "medusa", "model": HEAD, "num_speculative_tokens": 3}, "0.33.0").message


def test_valid_but_unsimulated_methods_say_so():
    err = fails({"method": "dflash", "model": HEAD, "num_speculative_tokens": 3}, "0.20.0")
    assert err.exc_type == "NotImplementedError" and "vllm-sim" in err.message


def test_suffix_needs_arctic_inference():
    err = fails({"method": "suffix"}, "0.20.0")
    assert err.exc_type == "ImportError"
    assert err.message.startswith("Arctic Inference is required for suffix decoding")


def test_suffix_is_built_in_from_0_34():
    """0.34 imports no arctic-inference: suffix is valid there (and not simulated), custom_class is refused."""
    err = fails({"method": "suffix"}, "0.34.0")
    assert err.exc_type == "NotImplementedError" and "'suffix' is valid for this vLLM version but is not simulated" in err.message
    assert "literal_error" in fails({"method": "custom_class"}, "0.34.0").message


@pytest.mark.parametrize("key", ["draft_decode_context_parallel_size", "suffix_decoding_corpus_tokens", "speculator_options", "custom_method"])
def test_keys_new_in_0_34(key):
    assert key in specconfig.fields_for(Version("0.34.0"))
    assert key not in specconfig.fields_for(Version("0.33.0"))


@pytest.mark.parametrize(("key", "first"), [("disable_padded_drafter_batch", "0.11.0"), ("use_heterogeneous_vocab", "0.25.0")])
def test_keys_removed_in_0_34_fail_its_start(key, first):
    """0.34.0's SpeculativeConfig lost both fields and forbids unknown ones: a server given either does not start."""
    assert key in specconfig.fields_for(Version(first))
    assert key in specconfig.fields_for(Version("0.33.0"))
    assert key not in specconfig.fields_for(Version("0.34.0"))
    cfg = {"method": "draft_model", "model": "Qwen/Qwen2.5-0.5B-Instruct", "num_speculative_tokens": 4, key: True}
    assert "%s\n  Unexpected keyword argument" % key in fails(cfg, "0.34.0", target="Qwen/Qwen2.5-7B-Instruct").message


# --------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize("version", ["0.10.0", "0.14.0", "0.15.1"])
def test_unknown_keys_are_dropped_up_to_0_15(version):
    plan = build(eagle(bogus_key=1, **{"max-model-len": 100}), version)
    assert plan.method == "eagle3"
    assert "bogus_key" not in plan.options


@pytest.mark.parametrize("version", ["0.16.0", "0.20.0", "0.33.0"])
def test_unknown_keys_are_fatal_from_0_16(version):
    err = fails(eagle(bogus_key=1), version)
    pyd = Version(version).pydantic_version
    assert err.message == (
        "1 validation error for SpeculativeConfig\n"
        "bogus_key\n"
        "  Unexpected keyword argument [type=unexpected_keyword_argument, input_value=1, input_type=int]\n"
        f"    For further information visit https://errors.pydantic.dev/{pyd}/v/unexpected_keyword_argument"
    )


def test_several_unknown_keys_are_counted():
    err = fails(eagle(a=1, b="x"), "0.20.0")
    assert err.message.startswith("2 validation errors for SpeculativeConfig\na\n")
    assert "\nb\n  Unexpected keyword argument [type=unexpected_keyword_argument, input_value='x', input_type=str]" in err.message


def test_disable_by_batch_size_lives_until_0_16():
    assert build(eagle(disable_by_batch_size=4), "0.16.0").method == "eagle3"
    assert "disable_by_batch_size\n  Unexpected keyword argument" in fails(eagle(disable_by_batch_size=4), "0.17.0").message
    err = fails(eagle(disable_by_batch_size=1), "0.11.0")
    assert "Expect the batch size threshold of disabling speculative decoding is > 1, but got self.disable_by_batch_size=1" in err.message
    err = fails(eagle(disable_by_batch_size=1), "0.12.0")
    assert "Input should be greater than or equal to 2 [type=greater_than_equal" in err.message


def test_disable_logprobs_dropped_then_fatal():
    assert build(eagle(disable_logprobs=True), "0.11.0").method == "eagle3"
    assert build(eagle(disable_logprobs=True), "0.15.0").method == "eagle3"
    assert "disable_logprobs\n  Unexpected keyword argument" in fails(eagle(disable_logprobs=True), "0.16.0").message


def test_hyphenated_keys_ignored_fatal_then_normalised():
    cfg = {"method": "eagle3", "model": HEAD, "num-speculative-tokens": 2, "num_speculative_tokens": 3}
    assert build(cfg, "0.15.0").num_speculative_tokens == 3
    assert "num-speculative-tokens\n  Unexpected keyword argument" in fails(cfg, "0.16.0").message
    cfg = {"method": "eagle3", "model": HEAD, "num-speculative-tokens": 2}
    assert build(cfg, "0.26.0").num_speculative_tokens == 2


# --------------------------------------------------------------------------- value errors


def test_num_speculative_tokens_must_be_positive():
    err = fails(eagle(num_speculative_tokens=0), "0.10.0")
    assert "Value error, Expected num_speculative_tokens to be greater than zero (0). [type=value_error" in err.message
    err = fails(eagle(num_speculative_tokens=0), "0.11.2")
    assert err.message.splitlines()[1:3] == [
        "num_speculative_tokens",
        "  Input should be greater than 0 [type=greater_than, input_value=0, input_type=int]",
    ]


def test_model_without_num_speculative_tokens():
    text = "num_speculative_tokens must be provided with speculative model unless the draft model config contains an n_predict parameter."
    assert text in fails({"method": "eagle3", "model": HEAD}, "0.16.0").message
    text17 = "A speculative model was provided, but `num_speculative_tokens` was not provided"
    assert text17 in fails({"method": "eagle3", "model": HEAD}, "0.17.0").message


def test_num_speculative_tokens_without_model():
    assert "num_speculative_tokens was provided without speculative model." in fails({"method": "eagle3", "num_speculative_tokens": 3}, "0.10.2").message
    assert "num_speculative_tokens was provided but without speculative model." in fails({"method": "eagle3", "num_speculative_tokens": 3}, "0.11.0").message


def test_draft_tensor_parallel_rule():
    err = fails(eagle(draft_tensor_parallel_size=2), "0.20.0")
    assert "Value error, speculative_draft_tensor_parallel_size=2 cannot be other value than 1 or target model tensor_parallel_size" in err.message
    assert build(eagle(draft_tensor_parallel_size=2), "0.20.0", tp=2).draft_tensor_parallel_size == 2
    err = fails(eagle(draft_tensor_parallel_size=0), "0.20.0")
    assert "Input should be greater than or equal to 1" in err.message


def test_tensor_parallel_size_key():
    text = "'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass 'draft_tensor_parallel_size' instead."
    assert text in fails(eagle(tensor_parallel_size=1), "0.15.0").message
    assert build(eagle(tensor_parallel_size=1), "0.14.0").method == "eagle3"  # unknown then: dropped


def test_max_model_len_limits():
    err = fails(eagle(max_model_len=4096), "0.20.0")
    assert "speculative_max_model_len=4096 cannot be larger than draft_max_model_len=2048" in err.message
    assert build(eagle(max_model_len=1024), "0.20.0").max_model_len == 1024


def test_value_error_text_matches_pydantic_rendering():
    err = fails(eagle(draft_tensor_parallel_size=3), "0.20.0")
    lines = err.message.splitlines()
    assert lines[0] == "1 validation error for SpeculativeConfig"
    assert lines[1].startswith("  Value error, speculative_draft_tensor_parallel_size=3 ")
    assert lines[1].endswith(", input_type=ArgsKwargs]")
    assert "input_value=ArgsKwargs((), {'method':..." in lines[1]
    assert lines[2] == "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"


# --------------------------------------------------------------------------- draft models


DRAFT_REJECTED = (
    "Speculative decoding with draft model is not supported yet. Please consider using other speculative "
    "decoding methods such as ngram, medusa, eagle, or deepseek_mtp."
)


@pytest.mark.parametrize("version", ["0.10.0", "0.13.0", "0.14.1"])
def test_draft_model_is_rejected_before_0_15(version):
    err = fails({"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4}, version)
    assert (err.exc_type, err.message) == ("NotImplementedError", DRAFT_REJECTED)


def test_draft_model_from_0_15():
    cfg = {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4}
    plan = build(cfg, "0.15.0")
    assert plan.method == "draft_model" and plan.model_info.vocab_size == 128256
    assert build({"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 4}, "0.15.0", target=QWEN8)


def test_vocabulary_mismatch_is_refused():
    cfg = {"method": "draft_model", "model": "Qwen/Qwen2.5-0.5B-Instruct", "num_speculative_tokens": 4}
    err = fails(cfg, "0.15.0", target="Qwen/Qwen2.5-7B-Instruct")
    assert (
        "Value error, Target and draft model should have the same vocabulary size. Target model vocab_size=152064. "
        "Draft model vocab_size=151936. Using models with different tokenizers can cause out-of-bounds errors "
        "during speculative decoding." in err.message
    )
    cfg["use_heterogeneous_vocab"] = True
    assert build(cfg, "0.25.0", target="Qwen/Qwen2.5-7B-Instruct").method == "draft_model"
    assert "use_heterogeneous_vocab\n  Unexpected keyword argument" in fails(cfg, "0.24.0", target="Qwen/Qwen2.5-7B-Instruct").message


def test_draft_model_needs_equal_tensor_parallel_sizes():
    cfg = {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4}
    cfg["draft_tensor_parallel_size"] = 1
    err = fails(cfg, "0.15.0", tp=2)
    assert "Currently, 'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the same. Got 1 and 2." in err.message


# --------------------------------------------------------------------------- EAGLE-3 target families


def test_eagle3_on_qwen_fails_only_in_0_10_0():
    err = fails({"method": "eagle3", "model": QWEN_HEAD, "num_speculative_tokens": 3}, "0.10.0", target=QWEN8)
    assert "Value error, Eagle3 is only supported for Llama models. Got self.target_model_config.hf_text_config.model_type='qwen3'" in err.message
    assert build({"method": "eagle3", "model": QWEN_HEAD, "num_speculative_tokens": 3}, "0.10.1", target=QWEN8)


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (
            "0.10.1",
            "Eagle3 is only supported for ['llama', 'qwen'] models. Got self.target_model_config.hf_text_config.model_type='gemma3'",
        ),
        ("0.11.0", "Eagle3 is only supported for ['llama', 'qwen', 'minicpm', 'gpt_oss'] models. Got"),
        ("0.17.0", "eagle3 is only supported for ['llama', 'qwen', 'minicpm', 'gpt_oss', 'hunyuan_vl'"),
    ],
)
def test_eagle3_supported_families_by_version(version, expected):
    assert expected in fails(eagle(), version, target=other_target("gemma3")).message


def test_eagle3_family_check_moves_to_runtime_in_0_22():
    assert build(eagle(), "0.22.0", target=other_target("gemma3")).method == "eagle3"


# --------------------------------------------------------------------------- method inference


def test_name_trap_in_0_10_0_makes_eagle3_heads_eagle1():
    assert build({"model": HEAD, "num_speculative_tokens": 3}, "0.10.0").method == "eagle"
    assert build({"model": HEAD, "num_speculative_tokens": 3}, "0.10.2").method == "eagle3"


def test_heads_without_eagle3_dash_are_not_recognised_in_0_10_1():
    err = fails({"model": QWEN_HEAD, "num_speculative_tokens": 3}, "0.10.1", target=QWEN8)
    assert (err.exc_type, err.message) == ("NotImplementedError", DRAFT_REJECTED)
    assert build({"model": QWEN_HEAD, "num_speculative_tokens": 3}, "0.14.0", target=QWEN8).method == "eagle3"


def test_plain_draft_without_method():
    cfg = {"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4}
    assert fails(cfg, "0.14.0").message == DRAFT_REJECTED
    assert fails(cfg, "0.15.0").message == "Unsupported speculative method: 'None'"
    assert fails(cfg, "0.16.0").exc_type == "NotImplementedError"
    assert build(cfg, "0.17.0").method == "draft_model"


def test_local_head_directory_without_eagle_in_the_path(tmp_path):
    """0.17+: a local head directory whose path lacks "eagle" becomes a draft model; 0.33 checks architectures."""
    snap = zoo.install(str(tmp_path / "hub"), [HEAD])[0]
    local = tmp_path / "myhead"
    local.symlink_to(snap)

    def resolve_local(name, revision=None):
        return ModelInfo.from_dir(name, name) if name.startswith("/") else model_from_zoo(name)

    target = model_from_zoo(LLAMA)
    raw = {"model": str(local), "num_speculative_tokens": 3}
    assert specconfig.build(raw, Version("0.20.0"), target, 1, resolve_local).method == "draft_model"
    assert specconfig.build(raw, Version("0.33.0"), target, 1, resolve_local).method == "eagle3"


# --------------------------------------------------------------------------- 0.22+ shortcuts and schedules


def test_spec_shortcut_flags_conflict_with_json():
    shortcuts = {
        "method": ("--spec-method", "eagle3"),
        "model": ("--spec-model", None),
        "num_speculative_tokens": ("--spec-tokens", None),
    }
    err = fails_with_shortcuts(eagle(), "0.22.0", shortcuts)
    assert err.message == "--spec-method and speculative_config['method'] are mutually exclusive"
    shortcuts = {
        "method": ("--spec-method", "eagle3"),
        "model": ("--spec-model", HEAD),
        "num_speculative_tokens": ("--spec-tokens", 2),
    }
    plan = build(None, "0.22.0", shortcuts=shortcuts)
    assert (plan.method, plan.num_speculative_tokens) == ("eagle3", 2)


def fails_with_shortcuts(raw, version, shortcuts):
    with pytest.raises(VllmError) as info:
        build(raw, version, shortcuts=shortcuts)
    return info.value


def test_dynamic_schedule_from_0_24():
    plan = build(eagle(num_speculative_tokens_per_batch_size=[[1, 4, 3], [5, 512, 0]]), "0.24.0")
    assert plan.k_for_batch(1) == 3 and plan.k_for_batch(8) == 0
    assert "Value error, num_speculative_tokens_per_batch_size" in fails(eagle(num_speculative_tokens_per_batch_size=[[2, 4, 3]]), "0.24.0").message


# --------------------------------------------------------------------------- formatting vs real pydantic


def test_rendering_matches_pydantic():
    pydantic = pytest.importorskip("pydantic")
    from pydantic import ConfigDict, Field
    from pydantic.dataclasses import dataclass

    @dataclass(config=ConfigDict(extra="forbid"))
    class SpeculativeConfig:
        num_speculative_tokens: Optional[int] = Field(default=None, gt=0)  # noqa: UP045 (pydantic evaluates it)
        model: Optional[str] = None  # noqa: UP045
        method: Optional[Literal["ngram", "eagle", "eagle3"]] = None  # noqa: UP045

        def __post_init__(self):
            if self.model and self.model.startswith("bad"):
                raise ValueError("boom")

    def real(**kwargs):
        with pytest.raises(pydantic.ValidationError) as info:
            SpeculativeConfig(**kwargs)
        return str(info.value).replace(f"errors.pydantic.dev/{pydantic.VERSION.rsplit('.', 1)[0]}/", "errors.pydantic.dev/X/")

    def ours(items):
        return errors.pydantic_message("SpeculativeConfig", items, "X")

    item = errors.PydanticErrorItem
    assert real(num_speculative_tokens=0, zzz="q") == ours(
        [
            item("num_speculative_tokens", "Input should be greater than 0", "greater_than", 0),
            item("zzz", "Unexpected keyword argument", "unexpected_keyword_argument", "q"),
        ]
    )
    assert real(method="x") == ours([item("method", errors.literal_message(["ngram", "eagle", "eagle3"]), "literal_error", "x")])
    for model in ("bad", "bad" + "y" * 40, "bad" + "z" * 200):
        kwargs = {"model": model, "num_speculative_tokens": 3, "method": "eagle3"}
        assert real(**kwargs) == ours([item("", "Value error, boom", "value_error", errors.args_kwargs(kwargs))])
