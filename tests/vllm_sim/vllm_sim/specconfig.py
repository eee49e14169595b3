# SPDX-License-Identifier: Apache-2.0
"""``--speculative-config`` validation per vLLM version (``vllm/config/speculative.py`` of each release; README.md, section 5).

``build(raw, version, target, target_tp, resolve)`` returns a :class:`SpecPlan` or raises
:class:`~vllm_sim.errors.VllmError` with vLLM's exception type and text.
"""

from __future__ import annotations

from . import errors
from .errors import PydanticErrorItem, VllmError

# --------------------------------------------------------------------------- fields per version

ALWAYS_FIELDS = (
    "num_speculative_tokens",
    "model",
    "method",
    "draft_tensor_parallel_size",
    "quantization",
    "max_model_len",
    "revision",
    "code_revision",
    "prompt_lookup_max",
    "prompt_lookup_min",
)

# key -> (first version containing it, first version no longer containing it or None)
BOUNDED_FIELDS = {
    "disable_logprobs": ((0, 10, 0), (0, 11, 1)),
    "disable_by_batch_size": ((0, 10, 0), (0, 17, 0)),
    "speculative_token_tree": ((0, 10, 0), (0, 21, 0)),
    "enable_chunked_prefill": ((0, 10, 0), (0, 11, 1)),
    "disable_log_stats": ((0, 10, 0), (0, 11, 1)),
    "enforce_eager": ((0, 11, 0), None),
    "disable_padded_drafter_batch": ((0, 11, 0), (0, 34, 0)),
    "suffix_decoding_max_tree_depth": ((0, 11, 2), None),
    "suffix_decoding_max_cached_requests": ((0, 11, 2), None),
    "suffix_decoding_max_spec_factor": ((0, 11, 2), None),
    "suffix_decoding_min_token_prob": ((0, 11, 2), None),
    "tensor_parallel_size": ((0, 15, 0), None),
    "parallel_drafting": ((0, 16, 0), None),
    "use_local_argmax_reduction": ((0, 17, 0), None),
    "draft_load_config": ((0, 17, 0), None),
    "rejection_sample_method": ((0, 18, 0), None),
    "moe_backend": ((0, 19, 0), None),
    "synthetic_acceptance_rate": ((0, 19, 0), (0, 20, 0)),
    "synthetic_acceptance_rates": ((0, 20, 0), None),
    "synthetic_acceptance_length": ((0, 20, 0), None),
    "attention_backend": ((0, 22, 0), None),
    "draft_sample_method": ((0, 22, 0), None),
    "num_speculative_tokens_per_batch_size": ((0, 24, 0), None),
    "use_heterogeneous_vocab": ((0, 25, 0), (0, 34, 0)),
    "kv_cache_dtype": ((0, 26, 0), None),
    "enable_adaptive_verification": ((0, 28, 0), None),
    "dspark_draft_topk": ((0, 28, 0), None),
    "index_share_for_mtp_iteration": ((0, 29, 0), None),
    "disable_eagle_block_drop": ((0, 30, 0), None),
    "disable_lookahead_block_hashes": ((0, 33, 0), None),
    "draft_lm_head_quantization": ((0, 33, 0), None),
    "xpress_topc": ((0, 33, 0), None),
    "fly_window_size": ((0, 33, 0), None),
    "fly_entropy_threshold": ((0, 33, 0), None),
    "fly_entropy_top_k": ((0, 33, 0), None),
    # 0.34.0: a method registered with register_speculative_method lands in custom_method.
    "draft_decode_context_parallel_size": ((0, 34, 0), None),
    "suffix_decoding_corpus_tokens": ((0, 34, 0), None),
    "speculator_options": ((0, 34, 0), None),
    "custom_method": ((0, 34, 0), None),
}

# Fields set by vLLM itself; passing them from the JSON is not an "unknown key".
INTERNAL_FIELDS = ("target_model_config", "target_parallel_config", "draft_model_config", "draft_parallel_config")


def fields_for(version) -> list:
    names = list(ALWAYS_FIELDS)
    for key, (lo, hi) in BOUNDED_FIELDS.items():
        if version >= lo and (hi is None or version < hi):
            names.append(key)
    return names + list(INTERNAL_FIELDS)


_MTP_0112 = [
    "deepseek_mtp",
    "mimo_mtp",
    "glm4_moe_mtp",
    "ernie_mtp",
    "qwen3_next_mtp",
    "longcat_flash_mtp",
    "mtp",
    "pangu_ultra_moe_mtp",
]
# model-specific aliases named in the 0.34.0 release (still rewritten to mtp)
_MTP_0340 = ("qwen3_5_mtp", "nemotron_h_mtp", "gemma4_mtp")


def method_choices(version) -> list:
    """Accepted ``method`` literals, in vLLM's order (the ``SpeculativeMethod`` literal of each release)."""
    if version < (0, 10, 2):
        return ["ngram", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model", "deepseek_mtp"]
    if version < (0, 11, 0):
        return [
            "ngram",
            "eagle",
            "eagle3",
            "medusa",
            "mlp_speculator",
            "draft_model",
            "deepseek_mtp",
            "ernie_mtp",
            "qwen3_next_mtp",
        ]
    if version < (0, 11, 2):
        return [
            "ngram",
            "eagle",
            "eagle3",
            "medusa",
            "mlp_speculator",
            "draft_model",
            "deepseek_mtp",
            "ernie_mtp",
            "qwen3_next_mtp",
            "mimo_mtp",
            "longcat_flash_mtp",
            "mtp",
        ]
    if version >= (0, 34, 0):
        # custom_class is gone (a registered method lands in the custom_method field)
        base = ["ngram", "draft_model", "suffix", "eagle", "eagle3", "extract_hidden_states", "dflash", "ngram_gpu", "dspark", "mtp"]
        return base + [m for m in _MTP_0112 if m != "mtp"] + list(_MTP_0340)
    if version >= (0, 33, 0):
        base = ["ngram", "draft_model", "suffix", "custom_class", "eagle", "eagle3", "extract_hidden_states"]
        base += ["dflash", "ngram_gpu", "dspark", "mtp"]
        return base + [m for m in _MTP_0112 if m != "mtp"]
    out = ["ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3", *_MTP_0112]
    if version >= (0, 17, 0):
        out.append("extract_hidden_states")
    if version >= (0, 18, 0):
        out.append("ngram_gpu")
    if version >= (0, 20, 0):
        out.append("dflash")
    if version >= (0, 22, 0):
        out.append("custom_class")
    if version >= (0, 26, 0):
        out.append("dspark")
    return out


def rejection_choices(version) -> list:
    if version < (0, 22, 0):
        return ["strict", "probabilistic", "synthetic"]
    if version >= (0, 33, 0):
        return ["standard", "synthetic", "block", "fly"]
    return ["standard", "synthetic"]


def eagle3_supported(version):
    """(message template, supported list) for the config-level EAGLE-3 target check, or None."""
    if version < (0, 10, 1):
        return ["llama"]
    if version < (0, 11, 0):
        return ["llama", "qwen"]
    if version < (0, 16, 0):
        return ["llama", "qwen", "minicpm", "gpt_oss"]
    if version < (0, 17, 0):
        return ["llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe"]
    if version < (0, 22, 0):
        return [
            "llama",
            "qwen",
            "minicpm",
            "gpt_oss",
            "hunyuan_vl",
            "hunyuan_v1_dense",
            "afmoe",
            "nemotron_h",
            "deepseek_v2",
            "deepseek_v3",
            "kimi_k2",
        ]
    return None


# Model types whose architecture implements the EAGLE-3 interface at runtime (0.22+ check).
EAGLE3_RUNTIME_TYPES = ("llama", "qwen2", "qwen3", "minicpm", "gpt_oss", "deepseek", "kimi", "nemotron", "hunyuan")

SIMULATED_METHODS = ("eagle", "eagle3", "draft_model", "ngram")

DRAFT_MODEL_REJECTED = (
    "Speculative decoding with draft model is not supported yet. Please consider using other "
    "speculative decoding methods such as ngram, medusa, eagle, or deepseek_mtp."
)


class SpecPlan:
    """A validated speculative configuration, as the engine uses it."""

    def __init__(self, method, model_name, model_info, k, draft_tp, max_model_len, options, raw):
        self.method = method
        self.model_name = model_name
        self.model_info = model_info  # ModelInfo of the head/draft, None for ngram
        self.num_speculative_tokens = k
        self.draft_tensor_parallel_size = draft_tp
        self.max_model_len = max_model_len
        self.options = options  # remaining recognised keys (prompt lookup, rejection method, ...)
        self.raw = raw

    def __repr__(self) -> str:
        return f"SpeculativeConfig(method={self.method!r}, model={self.model_name!r}, num_spec_tokens={self.num_speculative_tokens})"

    def k_for_batch(self, batch_size: int) -> int:
        schedule = self.options.get("num_speculative_tokens_per_batch_size")
        if not schedule:
            return self.num_speculative_tokens
        for start, end, k in schedule:
            if start <= batch_size <= end:
                return min(int(k), self.num_speculative_tokens)
        return self.num_speculative_tokens


# --------------------------------------------------------------------------- helpers


def _int_item(key, value, version, gt=None, ge=None):
    """Validate an optional int field the way pydantic does in lax mode. Returns (value, item)."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        value = int(value)
    elif isinstance(value, float):
        if value != int(value):
            return None, PydanticErrorItem(key, "Input should be a valid integer, got a number with a fractional part", "int_from_float", value)
        value = int(value)
    elif isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return None, PydanticErrorItem(key, "Input should be a valid integer, unable to parse string as an integer", "int_parsing", value)
    elif not isinstance(value, int):
        return None, PydanticErrorItem(key, "Input should be a valid integer", "int_type", value)
    if gt is not None and not value > gt:
        return value, PydanticErrorItem(key, f"Input should be greater than {gt}", "greater_than", value)
    if ge is not None and not value >= ge:
        return value, PydanticErrorItem(key, f"Input should be greater than or equal to {ge}", "greater_than_equal", value)
    return value, None


def _str_item(key, value):
    if value is None or isinstance(value, str):
        return value, None
    return None, PydanticErrorItem(key, "Input should be a valid string", "string_type", value)


def _literal_item(key, value, choices):
    if value is None or value in choices:
        return value, None
    return None, PydanticErrorItem(key, errors.literal_message(choices), "literal_error", value)


def _value_error(message, kwargs, version):
    return errors.pydantic_value_error("SpeculativeConfig", message, kwargs, version)


def _sim_unsupported(method):
    return VllmError(
        "NotImplementedError",
        f"vllm-sim: speculative method {method!r} is valid for this vLLM version but is not simulated (simulated methods: {', '.join(SIMULATED_METHODS)})",
        "api",
        ("cli", "speculative"),
    )


def infer_method(version, model_name, draft):
    """Method chosen by vLLM when the JSON has a ``model`` but no ``method`` (``SpeculativeConfig.__post_init__`` of each release)."""
    name = model_name.lower()
    archs = " ".join(draft.architectures).lower() if draft is not None else ""
    model_type = draft.model_type if draft is not None else ""
    if version < (0, 10, 2):
        if "eagle-" in name or "eagle3-" in name:
            return "eagle"
    else:
        if "eagle-" in name:
            return "eagle"
        if "eagle3" in name:
            return "eagle3"
    if version >= (0, 33, 0) and "eagle3" in archs:
        return "eagle3"
    if version >= (0, 33, 0) and "eagle" in archs:
        return "eagle"
    if version >= (0, 20, 0) and "dflash" in name:
        return "dflash"
    if version >= (0, 26, 0) and "dspark" in name:
        return "dspark"
    if model_type in ("medusa", "mlp_speculator"):
        return model_type
    if model_type.endswith("_mtp"):
        return "deepseek_mtp" if version < (0, 11, 0) else "mtp"
    return None


# --------------------------------------------------------------------------- main entry


def build(raw, version, target, target_tp, resolve, shortcuts=None):
    """Validate ``raw`` (the parsed JSON dict) for ``version``; return a SpecPlan or None.

    ``target`` is the target ModelInfo; ``resolve(name, revision)`` returns a ModelInfo for the
    draft or raises the offline error; ``shortcuts`` maps JSON keys to ``(flag, value)`` of the
    0.22+ ``--spec-method``/``--spec-model``/``--spec-tokens`` flags.
    """
    shortcuts = {k: fv for k, fv in (shortcuts or {}).items() if fv[1] is not None}
    if raw is None and not shortcuts:
        return None
    if raw is not None and not isinstance(raw, dict):
        raise VllmError(
            "TypeError",
            f"vllm.config.speculative.SpeculativeConfig() argument after ** must be a mapping, not {type(raw).__name__}",
            "api",
            ("cli", "speculative"),
        )
    raw = dict(raw or {})
    for key, (flag, value) in shortcuts.items():
        if key in raw:
            raise errors.value_error(f"{flag} and speculative_config[{key!r}] are mutually exclusive", "api", ("cli",))
        raw[key] = value
    if not raw:
        return None
    if version >= (0, 26, 0):
        raw = {str(k).replace("-", "_"): v for k, v in raw.items()}

    # Speculators-format draft given as --model is handled by the caller (cli), which passes the
    # merged dict here with method/model locked.
    kwargs = dict(raw)
    known = fields_for(version)
    strict = version >= (0, 16, 0)
    items = []

    k, item = _int_item("num_speculative_tokens", raw.get("num_speculative_tokens"), version, gt=0 if version >= (0, 11, 2) else None)
    items.append(item)
    model_name, item = _str_item("model", raw.get("model"))
    items.append(item)
    method, item = _literal_item("method", raw.get("method"), method_choices(version))
    items.append(item)
    draft_tp, item = _int_item(
        "draft_tensor_parallel_size",
        raw.get("draft_tensor_parallel_size"),
        version,
        ge=1 if version >= (0, 11, 2) else None,
    )
    items.append(item)
    tp_key = None
    if "tensor_parallel_size" in known:
        tp_key, item = _int_item("tensor_parallel_size", raw.get("tensor_parallel_size"), version)
        items.append(item)
    spec_max_len, item = _int_item("max_model_len", raw.get("max_model_len"), version, ge=1 if version >= (0, 11, 2) else None)
    items.append(item)
    ge1 = 1 if version >= (0, 11, 2) else None
    lookup_max, item = _int_item("prompt_lookup_max", raw.get("prompt_lookup_max"), version, ge=ge1)
    items.append(item)
    lookup_min, item = _int_item("prompt_lookup_min", raw.get("prompt_lookup_min"), version, ge=ge1)
    items.append(item)
    dbbs = None
    if "disable_by_batch_size" in known:
        dbbs, item = _int_item("disable_by_batch_size", raw.get("disable_by_batch_size"), version, ge=2 if version >= (0, 11, 2) else None)
        items.append(item)
    rejection = None
    if "rejection_sample_method" in known:
        rejection, item = _literal_item("rejection_sample_method", raw.get("rejection_sample_method"), rejection_choices(version))
        items.append(item)
    draft_sample = None
    if "draft_sample_method" in known:
        draft_sample, item = _literal_item("draft_sample_method", raw.get("draft_sample_method"), ["greedy", "probabilistic"])
        items.append(item)
    items = [i for i in items if i is not None]
    if strict:
        for key, value in raw.items():
            if key not in known:
                items.append(PydanticErrorItem(key, "Unexpected keyword argument", "unexpected_keyword_argument", value))
    if items:
        raise errors.validation_error("SpeculativeConfig", items, version)
    # <= 0.15: unknown keys are dropped silently.
    options = {key: raw[key] for key in raw if key in known and key not in ALWAYS_FIELDS}

    # ------------------------------------------------------------------ __post_init__ checks
    if tp_key is not None:
        raise _value_error(
            "'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass 'draft_tensor_parallel_size' instead.",
            kwargs,
            version,
        )
    if version < (0, 15, 0) and method == "draft_model":
        raise errors.not_implemented(DRAFT_MODEL_REJECTED, "api", ("cli",))

    if model_name is None and k is not None:
        if method in ("ngram", "[ngram]", "ngram_gpu"):
            model_name = "ngram"
        elif method == "suffix":
            pass
        else:
            text = (
                "num_speculative_tokens was provided without speculative model."
                if version < (0, 11, 0)
                else "num_speculative_tokens was provided but without speculative model."
            )
            raise _value_error(text, kwargs, version)
    if model_name in ("ngram", "[ngram]") and method is None:
        method = "ngram"
    # Up to 0.33 suffix decoding needs the arctic-inference package; 0.34 has it built in (then it is
    # valid, and reported as not simulated below).
    if method == "suffix" and version < (0, 34, 0):
        raise VllmError(
            "ImportError",
            "Arctic Inference is required for suffix decoding. Install via `pip install arctic-inference`.",
            "api",
            ("cli", "speculative"),
        )

    if method in ("ngram", "ngram_gpu"):
        if lookup_min is None and lookup_max is None:
            lookup_min = lookup_max = 5
        elif lookup_min is None:
            lookup_min = lookup_max
        elif lookup_max is None:
            lookup_max = lookup_min
        if version < (0, 11, 2):
            if lookup_min < 1:
                raise _value_error(f"prompt_lookup_min={lookup_min} must be > 0", kwargs, version)
            if lookup_max < 1:
                raise _value_error(f"prompt_lookup_max={lookup_max} must be > 0", kwargs, version)
        if lookup_min > lookup_max:
            raise _value_error(f"prompt_lookup_min={lookup_min} must be <= prompt_lookup_max={lookup_max}", kwargs, version)
        if k is None:
            raise _value_error(_missing_k_text(version), kwargs, version)
        options.update(prompt_lookup_min=lookup_min, prompt_lookup_max=lookup_max)
        plan = SpecPlan("ngram", "ngram", None, k, 1, target.max_position_embeddings, options, raw)
        _verify_args(plan, version, target, kwargs, dbbs)
        return _finish(plan, version, kwargs, rejection, draft_sample)

    if model_name is None:
        # No model, no num_speculative_tokens: vLLM builds nothing useful; mtp would use the target.
        if method is None:
            return None
        raise _sim_unsupported(method)

    draft = resolve(model_name, raw.get("revision"))

    if method is None:
        method = infer_method(version, model_name, draft)
        if method is None:
            if version < (0, 15, 0):
                raise errors.not_implemented(DRAFT_MODEL_REJECTED, "api", ("cli", "speculative"))
            if version < (0, 17, 0):
                raise errors.not_implemented("Unsupported speculative method: 'None'", "api", ("cli", "speculative"))
            method = "draft_model"
    if method not in SIMULATED_METHODS:
        raise _sim_unsupported(method)

    n_predict = draft.n_predict
    if k is None:
        if n_predict:
            k = int(n_predict)
        elif version >= (0, 17, 0):
            raise _value_error("A speculative model was provided, but `num_speculative_tokens` was not provided", kwargs, version)
        else:
            raise _value_error(_missing_k_text(version), kwargs, version)
    elif n_predict and k > n_predict and k % n_predict != 0:
        raise _value_error(f"num_speculative_tokens:{k} must be divisible by n_predict={n_predict}", kwargs, version)

    if draft_tp is None:
        draft_tp = target_tp
    elif draft_tp not in (1, target_tp):
        raise _value_error(
            f"speculative_draft_tensor_parallel_size={draft_tp} cannot be other value than 1 or target model tensor_parallel_size",
            kwargs,
            version,
        )

    draft_max = draft.max_position_embeddings
    target_max = target.max_position_embeddings
    if spec_max_len is not None:
        if spec_max_len > draft_max:
            raise _value_error(
                f"speculative_max_model_len={spec_max_len} cannot be larger than draft_max_model_len={draft_max}",
                kwargs,
                version,
            )
        if spec_max_len > target_max:
            raise _value_error(
                f"speculative_max_model_len={spec_max_len} cannot be larger than target_max_model_len={target_max}",
                kwargs,
                version,
            )
        draft_len = spec_max_len
    else:
        draft_len = min(draft_max, target_max)

    hetero = bool(options.get("use_heterogeneous_vocab"))
    if hetero and method != "draft_model":
        raise _value_error("use_heterogeneous_vocab only works with method='draft_model'", kwargs, version)
    if method == "draft_model":
        if draft_tp != target_tp:
            raise _value_error(
                f"Currently, 'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the same. Got {draft_tp} and {target_tp}.",
                kwargs,
                version,
            )
        if not hetero and target.vocab_size != draft.vocab_size:
            raise _value_error(
                "Target and draft model should have the same vocabulary size. "
                f"Target model vocab_size={target.vocab_size}. Draft model vocab_size={draft.vocab_size}. "
                "Using models with different tokenizers can cause out-of-bounds errors during speculative decoding.",
                kwargs,
                version,
            )

    schedule = options.get("num_speculative_tokens_per_batch_size")
    if schedule is not None:
        options["num_speculative_tokens_per_batch_size"] = _check_schedule(schedule, kwargs, version)

    plan = SpecPlan(method, model_name, draft, k, draft_tp, draft_len, options, raw)
    _verify_args(plan, version, target, kwargs, dbbs)
    return _finish(plan, version, kwargs, rejection, draft_sample)


def _missing_k_text(version):
    return "num_speculative_tokens must be provided with speculative model unless the draft model config contains an n_predict parameter."


def _check_schedule(schedule, kwargs, version):
    """0.24+ ``num_speculative_tokens_per_batch_size``: ``[[start, end, k], ...]``."""
    bad = _value_error(
        "num_speculative_tokens_per_batch_size must be a list of [start, end, k] ranges that are positive, sorted, non-overlapping and start at 1",
        kwargs,
        version,
    )
    if not isinstance(schedule, list) or not schedule:
        raise bad
    out = []
    expected_start = 1
    for entry in schedule:
        if not (isinstance(entry, list) and len(entry) == 3 and all(isinstance(x, int) for x in entry)):
            raise bad
        start, end, k = entry
        if start < 1 or end < start or k < 0 or start < expected_start:
            raise bad
        if not out and start != 1:
            raise bad
        out.append((start, end, k))
        expected_start = end + 1
    return out


def _verify_args(plan, version, target, kwargs, dbbs):
    """``SpeculativeConfig._verify_args`` (ValueErrors, wrapped by pydantic)."""
    k = plan.num_speculative_tokens
    if version < (0, 11, 2) and k is not None and k <= 0:
        raise _value_error(f"Expected num_speculative_tokens to be greater than zero ({k}).", kwargs, version)
    if dbbs is not None and version < (0, 11, 2) and dbbs < 2:
        raise _value_error(
            f"Expect the batch size threshold of disabling speculative decoding is > 1, but got self.disable_by_batch_size={dbbs}",
            kwargs,
            version,
        )
    if plan.method == "eagle3":
        supported = eagle3_supported(version)
        model_type = target.model_type
        if supported is not None and not any(s in model_type for s in supported):
            if version < (0, 10, 1):
                text = f"Eagle3 is only supported for Llama models. Got self.target_model_config.hf_text_config.model_type={model_type!r}"
            elif version < (0, 17, 0):
                text = f"Eagle3 is only supported for {supported} models. Got self.target_model_config.hf_text_config.model_type={model_type!r}"
            else:
                text = f"{plan.method} is only supported for {supported} models. Got self.target_model_config.hf_text_config.model_type={model_type!r}"
            raise _value_error(text, kwargs, version)


def _finish(plan, version, kwargs, rejection, draft_sample):
    if rejection is not None:
        plan.options["rejection_sample_method"] = rejection
    if draft_sample is not None:
        plan.options["draft_sample_method"] = draft_sample
    return plan
