# SPDX-License-Identifier: Apache-2.0
"""Speculation planner, override validation and vLLM serve-configuration renderer.

Private module (stdlib only, Python >= 3.8). Everything here is deterministic: the same input
gives the same output, byte for byte.

Facts and rules come from the developer reference (``jetson.md`` sections 4-6 and ``vllm.md``
sections 2, 3, 6, 7 and 10); the comments cite the section each rule mirrors.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import posixpath
import re
import unicodedata

from ansible_collections.jetson_llm.speculative.plugins.module_utils import _families
from ansible_collections.jetson_llm.speculative.plugins.module_utils._catalog import (
    GB,
    MODEL_ID_EXPECTATION,
    CatalogError,
    drafts_for,
    eagle3_heads,
    kv_bytes_per_token,
    merged_catalog,
    quantization_suits,
    valid_model_id,
    vocab_mismatch_message,
)


class SpecdecError(ValueError):
    """Invalid input to the planner or the renderer; the message names host, variable, value and
    what is allowed."""


# ---------------------------------------------------------------- constants

METHODS = ("eagle3", "draft_model")
SPEC_TOKENS_MIN = 1
SPEC_TOKENS_MAX = 15
UTIL_MIN = 0.05
UTIL_MAX = 0.95
# jetson.md 6.4: lower --gpu-memory-utilization by ~0.05 versus the non-speculative baseline and
# keep at least ~2 GB free.
UTIL_STEP = 0.05
DEFAULT_MIN_HEADROOM_GB = 2.0
# jetson.md 6.1: do not use speculation at high concurrency (>= 8); 3..7 is not addressed.
DEFAULT_MAX_CONCURRENCY = 8
LOW_CONCURRENCY = 2
# Activation, sampler and CUDA-graph memory on top of weights and KV cache: a fixed 0.5 GB plus 5 %
# of all weights. An estimate: vLLM profiles the real figure at startup (vllm.md 6.1), so this
# constant only has to keep plans on the safe side of the startup checks.
OVERHEAD_FIXED_GB = 0.5
OVERHEAD_WEIGHT_FRACTION = 0.05
MIB = 1024 * 1024

# Family policy, starting k and minimum vLLM come from the family table (module_utils/_families.py).
FAMILY_K = dict((name, entry["num_speculative_tokens"]) for name, entry in _families.TABLE.items() if entry["policy"] != "never")
FORCE_FAMILIES = _families.with_policy("force")
NEVER_FAMILIES = _families.with_policy("never")
THOR_FAMILIES = _families.of_generation("thor")

V_MIN_COVERED = (0, 10, 0)
# 0.10.0-0.10.1.x classify an "EAGLE3-" repository name as EAGLE-1 when method is unset
# (vllm.md 2.7); the method is always written, but an automatic choice waits for 0.10.2.
V_EAGLE3_AUTO = (0, 10, 2)
# 0.10.0: "Eagle3 is only supported for Llama models." (vllm.md 2.6)
V_EAGLE3_ANY_FAMILY = (0, 10, 1)
V_SPECULATORS = (0, 10, 1)
# draft_model is rejected by the V1 engine until 0.15.0 (vllm.md 2.8).
V_DRAFT_MODEL = (0, 15, 0)
# EAGLE drafts with a short max_position_embeddings are raised to the target's length from 0.27
# (vllm.md 2.9).
V_EAGLE_CONTEXT = (0, 27, 0)
# Integrated-GPU free-memory handling (MemAvailable instead of MemFree) from 0.11.2 (vllm.md 6.3).
V_UMA_MEMORY = (0, 11, 2)
V_THOR = _families.TABLE["thor"]["min_vllm"]
L4T_ORIN_VLLM = _families.TABLE["agx_orin"]["min_l4t"]
# Memory freed by stopping vLLM is stuck before L4T r39 / JetPack 7.2 (jetson.md 5.4).
L4T_MEMORY_RELEASE = 39

GUIDANCE_NANO_NX = (
    'NVIDIA\'s Jetson speculative-decoding guidance does not suggest EAGLE-3 on Orin Nano / Orin NX ("target plus draft rarely fit and startup will OOM")'
)
GUIDANCE_CONCURRENCY = "NVIDIA's Jetson guidance does not use speculation at high concurrency (>= 8), where batched decode wins and the draft only takes memory"

# ---------------------------------------------------------------- speculative-config fields
# vllm.md 2.3: fields present in every release 0.10.0-0.33.0.
SPEC_FIELDS_ALWAYS = (
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
# Fields with a bounded life: (first release with the field, first release without it or None).
# Where the reference names only the last release containing a field, the next release number is
# taken as the first without it, so a patch release of unknown content never counts as having it.
SPEC_FIELDS_BOUNDED = {
    "disable_logprobs": ((0, 10, 0), (0, 11, 1)),
    "disable_by_batch_size": ((0, 10, 0), (0, 16, 1)),
    "speculative_token_tree": ((0, 10, 0), (0, 20, 1)),
    "enable_chunked_prefill": ((0, 10, 0), (0, 11, 1)),
    "disable_log_stats": ((0, 10, 0), (0, 11, 1)),
    "enforce_eager": ((0, 11, 0), None),
    "disable_padded_drafter_batch": ((0, 11, 0), None),
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
    "use_heterogeneous_vocab": ((0, 25, 0), None),
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
}
# vllm.md 10 rule 4: never emitted, whatever the version (no-op then fatal; error-only field).
SPEC_FIELDS_NEVER = ("disable_by_batch_size", "tensor_parallel_size")

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def parse_version(value):
    """``"0.10.1.1"`` -> ``(0, 10, 1, 1)``; ``"0.20.2+cu130"`` -> ``(0, 20, 2)``; pre-release
    suffixes are ignored (``"0.11.0rc1"`` -> ``(0, 11, 0)``). ``None`` when not a version."""
    if not isinstance(value, str):
        return None
    match = _VERSION_RE.match(value.strip())
    if match is None:
        return None
    parts = [int(p) for p in match.groups() if p is not None]
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def _at_least(version, bound):
    return tuple(version[: len(bound)]) >= bound


def spec_fields(version):
    """The ``--speculative-config`` keys vLLM ``version`` (a tuple) knows, per vllm.md 2.3."""
    fields = set(SPEC_FIELDS_ALWAYS)
    for key, (first, removed) in SPEC_FIELDS_BOUNDED.items():
        if _at_least(version, first) and (removed is None or not _at_least(version, removed)):
            fields.add(key)
    return frozenset(fields)


def _fmt_version(version):
    return ".".join(str(p) for p in version)


# ---------------------------------------------------------------- value checks


def _where(host):
    return "host {}: ".format(host) if host else ""


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return (_is_int(value) or isinstance(value, float)) and not (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def _bad(host, name, value, expected, why=""):
    message = "{}{}={!r} is not allowed; expected {}".format(_where(host), name, value, expected)
    if why:
        message += " ({})".format(why)
    return SpecdecError(message)


def _check_bool(value):
    return isinstance(value, bool)


def _check_int_range(low, high):
    def check(value):
        return _is_int(value) and low <= value and (high is None or value <= high)

    return check


def _check_float_range(low, high):
    def check(value):
        return _is_number(value) and low <= value <= high

    return check


_OVERRIDES = (
    ("enabled", _check_bool, "a boolean (true or false, not a string)"),
    ("force", _check_bool, "a boolean (true or false, not a string)"),
    ("method", lambda v: isinstance(v, str) and v in METHODS, "one of " + ", ".join(METHODS)),
    ("model", valid_model_id, MODEL_ID_EXPECTATION),
    (
        "num_speculative_tokens",
        _check_int_range(SPEC_TOKENS_MIN, SPEC_TOKENS_MAX),
        "an integer from {} to {}".format(SPEC_TOKENS_MIN, SPEC_TOKENS_MAX),
    ),
    (
        "draft_tensor_parallel_size",
        _check_int_range(1, 64),
        "an integer, 1 or the target tensor_parallel_size",
    ),
    (
        "gpu_memory_utilization",
        _check_float_range(UTIL_MIN, UTIL_MAX),
        "a number from {} to {}".format(UTIL_MIN, UTIL_MAX),
    ),
    ("min_gain", _check_float_range(0.0, 1.0), "a number from 0 to 1 (a fraction, 0.1 = 10 %)"),
    ("max_concurrency", _check_int_range(1, None), "an integer >= 1"),
)
OVERRIDE_KEYS = tuple(key for key, _check, _expected in _OVERRIDES)
_FLOAT_OVERRIDES = ("gpu_memory_utilization", "min_gain")


def validate_overrides(overrides, host="", var_prefix="speculative_decoding_"):
    """Validate per-host overrides and return them normalised (``None`` values dropped).

    ``overrides`` maps setting names without the prefix (``num_speculative_tokens``) to values.
    A ``None`` value means "not set" (so role defaults can list every key as null). Booleans must
    be real booleans, integers must not be booleans, strings are never coerced.
    """
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise _bad(host, var_prefix + "*", overrides, "a mapping of setting name to value")
    checks = dict((key, (check, expected)) for key, check, expected in _OVERRIDES)
    known = ", ".join(var_prefix + key for key in OVERRIDE_KEYS)
    result = {}
    for key in sorted(overrides, key=str):
        value = overrides[key]
        if key not in checks:
            raise _bad(host, "{}{}".format(var_prefix, key), value, "one of the known settings: " + known)
        if value is None:
            continue
        check, expected = checks[key]
        if not check(value):
            why = ""
            if isinstance(value, str) and key not in ("method", "model"):
                why = "a string is never converted; pass typed values, e.g. -e as JSON"
            raise _bad(host, var_prefix + key, value, expected, why)
        result[key] = float(value) if key in _FLOAT_OVERRIDES else value
    return dict((key, result[key]) for key in OVERRIDE_KEYS if key in result)


_SERVE_FIELDS = {
    "gpu_memory_utilization": (_check_float_range(0.01, 1.0), "a number from 0.01 to 1.0"),
    "max_model_len": (_check_int_range(1, 100000000), "an integer from 1 to 100000000"),
    "max_num_seqs": (_check_int_range(1, 1000000), "an integer from 1 to 1000000"),
    "tensor_parallel_size": (_check_int_range(1, 64), "an integer from 1 to 64"),
    "vllm_version": (
        lambda v: isinstance(v, str) and len(v) <= 64,
        "a vLLM version string such as '0.20.2' (or 'unknown')",
    ),
    "running": (_check_bool, "a boolean: whether the baseline server runs now"),
    "model": (valid_model_id, MODEL_ID_EXPECTATION),
    "host": (
        lambda v: isinstance(v, str) and re.fullmatch(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$", v) is not None,
        "an IP address or host name of [A-Za-z0-9.:-]",
    ),
    "port": (_check_int_range(1, 65535), "an integer from 1 to 65535"),
    "served_model_name": (
        lambda v: isinstance(v, str) and re.fullmatch(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}$", v) is not None,
        "a name of [A-Za-z0-9._/:-] starting with a letter or digit (at most 128 characters)",
    ),
}


def _serve_value(serve, key, host, required=False, default=None):
    if key not in serve or serve[key] is None:
        if required:
            raise SpecdecError("{}serve.{} is missing; expected {}".format(_where(host), key, _SERVE_FIELDS[key][1]))
        return default
    value = serve[key]
    check, expected = _SERVE_FIELDS[key]
    if not check(value):
        raise _bad(host, "serve." + key, value, expected)
    return value


def _check_mapping(value, name, host, expected):
    if not isinstance(value, dict):
        raise _bad(host, name, value, expected)
    return value


# ---------------------------------------------------------------- planner


def _r2(value):
    return None if value is None else round(float(value), 2)


_BUDGET_KEYS = (
    "total_gb",
    "available_gb",
    "target_weights_gb",
    "speculator_weights_gb",
    "kv_cache_gb",
    "headroom_gb",
    "required_gb",
    "overhead_gb",
    "reclaimable_gb",
    "available_at_restart_gb",
    "allowed_gb",
    "min_headroom_gb",
)


def _empty_budget(total_gb=None, available_gb=None):
    budget = dict((key, None) for key in _BUDGET_KEYS)
    budget["total_gb"] = _r2(total_gb)
    budget["available_gb"] = _r2(available_gb)
    return budget


def _memory(facts):
    memory = facts.get("memory")
    if not isinstance(memory, dict):
        return None, None
    total, available = memory.get("total_mb"), memory.get("available_mb")
    if not (_is_number(total) and total > 0 and _is_number(available) and available >= 0):
        return None, None
    return total * MIB / GB, min(available, total) * MIB / GB


def _budget(mem, target, spec, *, spec_label, max_model_len, baseline, new_util, running, min_headroom):
    """Compute the memory budget; return (figures, list of shortfall texts)."""
    total_gb, available_gb = mem
    reclaimable = baseline * total_gb if running else 0.0
    at_restart = min(total_gb, available_gb + reclaimable)
    weights = target["weights_gb"] + spec["weights_gb"]
    kv = (kv_bytes_per_token(target) + kv_bytes_per_token(spec)) * max_model_len / GB
    overhead = OVERHEAD_FIXED_GB + OVERHEAD_WEIGHT_FRACTION * weights
    figures = _empty_budget(total_gb, available_gb)
    figures.update(
        {
            "target_weights_gb": _r2(target["weights_gb"]),
            "speculator_weights_gb": _r2(spec["weights_gb"]),
            "kv_cache_gb": _r2(kv),
            "overhead_gb": _r2(overhead),
            "required_gb": _r2(weights + kv + overhead),
            "reclaimable_gb": _r2(reclaimable),
            "available_at_restart_gb": _r2(at_restart),
            "allowed_gb": _r2(new_util * total_gb),
            "headroom_gb": _r2(at_restart - new_util * total_gb),
            "min_headroom_gb": _r2(min_headroom),
        }
    )
    # Comparisons use the reported (rounded) figures so that the verdict agrees with the report.
    f = figures
    short = []
    if f["required_gb"] > f["allowed_gb"]:
        short.append(
            "needs {:.2f} GB (target {:.2f} + {} {:.2f} + KV {:.2f} + overhead {:.2f}) but {:.2f} x {:.2f} GB = {:.2f} GB".format(
                f["required_gb"],
                f["target_weights_gb"],
                spec_label,
                f["speculator_weights_gb"],
                f["kv_cache_gb"],
                f["overhead_gb"],
                new_util,
                f["total_gb"],
                f["allowed_gb"],
            )
        )
    if f["available_at_restart_gb"] < f["allowed_gb"]:
        short.append(
            "vLLM's startup check needs {:.2f} x {:.2f} GB = {:.2f} GB free but only {:.2f} GB "
            "would be available at restart (available {:.2f} + reclaimable {:.2f})".format(
                new_util,
                f["total_gb"],
                f["allowed_gb"],
                f["available_at_restart_gb"],
                f["available_gb"],
                f["reclaimable_gb"],
            )
        )
    elif f["headroom_gb"] < f["min_headroom_gb"]:
        short.append(
            "headroom {:.2f} GB ({:.2f} available at restart - {:.2f} reserved) is below the "
            "{:.2f} GB minimum (NVIDIA's guidance: free at least ~2 GB first)".format(
                f["headroom_gb"], f["available_at_restart_gb"], f["allowed_gb"], f["min_headroom_gb"]
            )
        )
    return figures, short


def _plan_result():
    return {
        "decision": "skipped",
        "reason": "",
        "method": None,
        "model": None,
        "num_speculative_tokens": None,
        "draft_tensor_parallel_size": None,
        "gpu_memory_utilization": None,
        "baseline_gpu_memory_utilization": None,
        "speculative_config": None,
        "budget": _empty_budget(),
        "warnings": [],
    }


def _candidates(cat, target_id, target, *, version, ov, target_tp, host, var_prefix):
    """Ordered (method, model id) candidates and the notes on rejected ones.

    Raises SpecdecError when an override names a model that cannot work with the target.
    """
    family = target["family"]
    explicit_method = ov.get("method")
    rejected = []
    if "model" in ov:
        model_id = ov["model"]
        name = var_prefix + "model"
        entry = cat.get(model_id)
        if entry is None:
            raise _bad(
                host,
                name,
                model_id,
                "a model in the catalog (built-in, or added with the catalog option) so its size is known",
            )
        if entry["kind"] == "target":
            raise _bad(host, name, model_id, "an EAGLE-3 head or a draft model", "it is a target model")
        method = "eagle3" if entry["kind"] == "eagle3_head" else "draft_model"
        if explicit_method is not None and explicit_method != method:
            raise _bad(
                host,
                name,
                model_id,
                "a model matching {}method={!r}".format(var_prefix, explicit_method),
                "it is a {} model".format(method),
            )
        if method == "eagle3" and entry["family"] != family:
            raise _bad(
                host,
                name,
                model_id,
                "an EAGLE-3 head trained for the {} family of {}".format(family, target_id),
                "this head serves {}".format(entry["family"]),
            )
        if method == "draft_model" and entry["vocab_size"] != target["vocab_size"]:
            raise _bad(
                host,
                name,
                model_id,
                "a draft with the target's vocabulary size",
                "vLLM refuses this pair: {}".format(vocab_mismatch_message(target["vocab_size"], entry["vocab_size"])),
            )
        pool = [(method, model_id)]
    else:
        pool = []
        if explicit_method in (None, "eagle3"):
            pool.extend(("eagle3", mid) for mid in eagle3_heads(cat, family))
        if explicit_method in (None, "draft_model"):
            for mid in drafts_for(cat, family):
                draft = cat[mid]
                if draft["vocab_size"] != target["vocab_size"]:
                    rejected.append("{} refused: {}".format(mid, vocab_mismatch_message(target["vocab_size"], draft["vocab_size"])))
                    continue
                pool.append(("draft_model", mid))
    explicit = explicit_method is not None or "model" in ov
    usable = []
    for method, mid in pool:
        entry = cat[mid]
        if method == "eagle3":
            if not explicit and not _at_least(version, V_EAGLE3_AUTO):
                rejected.append(
                    "{} needs vLLM >= 0.10.2 to be chosen automatically (0.10.0-0.10.1 treat "
                    "EAGLE-3 names as EAGLE-1; set {}method: eagle3 to use it anyway)".format(mid, var_prefix)
                )
                continue
            if not _at_least(version, V_EAGLE3_ANY_FAMILY) and target["model_type"] != "llama":
                rejected.append('{}: vLLM {} says "Eagle3 is only supported for Llama models. Got {}"'.format(mid, _fmt_version(version), target["model_type"]))
                continue
            if entry.get("checkpoint_format") == "speculators" and not _at_least(version, V_SPECULATORS):
                rejected.append("{} is a speculators-format checkpoint, read by vLLM >= 0.10.1".format(mid))
                continue
        else:
            if not _at_least(version, V_DRAFT_MODEL):
                rejected.append("{} needs method draft_model, which vLLM rejects before 0.15.0 (found {})".format(mid, _fmt_version(version)))
                continue
            dtp = ov.get("draft_tensor_parallel_size", target_tp)
            if dtp != target_tp:
                rejected.append(
                    "{}: vLLM says \"Currently, 'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the same. Got {} and {}.\"".format(
                        mid, dtp, target_tp
                    )
                )
                continue
        usable.append((method, mid))
    return pool, usable, rejected


# The positional signature is the contract in docs/devel/architecture.md ("Planner").
def plan(
    facts,
    target_model,
    serve,
    concurrency,
    catalog=None,
    overrides=None,
    host="",
    *,
    min_headroom_gb=DEFAULT_MIN_HEADROOM_GB,
    var_prefix="speculative_decoding_",
):
    """Plan speculative decoding for one host. See docs/devel/architecture.md ("Planner").

    ``facts``: ``ansible_facts.jetson``; ``target_model``: the served model id; ``serve``: the
    baseline serve settings (``gpu_memory_utilization``, ``max_model_len``, ``max_num_seqs``,
    ``tensor_parallel_size``, ``vllm_version``, ``running``); ``concurrency``: the expected number
    of concurrent requests; ``catalog``: extra catalog entries; ``overrides``: per-host settings
    (see ``validate_overrides``). Raises ``SpecdecError`` on invalid input; a plan that cannot be
    enabled is returned with ``decision: skipped`` and a reason.
    """
    ov = validate_overrides(overrides, host=host, var_prefix=var_prefix)
    _check_mapping(facts, "facts", host, "a mapping (ansible_facts.jetson)")
    _check_mapping(serve, "serve", host, "a mapping of serve settings")
    if not valid_model_id(target_model):
        raise _bad(host, "target_model", target_model, MODEL_ID_EXPECTATION)
    if not (_is_int(concurrency) and concurrency >= 1):
        raise _bad(host, "concurrency", concurrency, "an integer >= 1 (expected concurrent requests)")
    if not (_is_number(min_headroom_gb) and 0 <= min_headroom_gb <= 1000):
        raise _bad(host, "min_headroom_gb", min_headroom_gb, "a number of GB from 0 to 1000")
    baseline = float(_serve_value(serve, "gpu_memory_utilization", host, required=True))
    max_model_len = _serve_value(serve, "max_model_len", host, required=True)
    target_tp = _serve_value(serve, "tensor_parallel_size", host, default=1)
    running = _serve_value(serve, "running", host, default=False)
    version_text = _serve_value(serve, "vllm_version", host)
    _serve_value(serve, "max_num_seqs", host)
    if "draft_tensor_parallel_size" in ov and ov["draft_tensor_parallel_size"] not in (1, target_tp):
        raise _bad(
            host,
            var_prefix + "draft_tensor_parallel_size",
            ov["draft_tensor_parallel_size"],
            "1 or the target tensor_parallel_size ({})".format(target_tp),
            "vLLM: speculative_draft_tensor_parallel_size={} cannot be other value than 1 or target model tensor_parallel_size".format(
                ov["draft_tensor_parallel_size"]
            ),
        )
    try:
        cat = merged_catalog(catalog, host=host)
    except CatalogError as exc:
        raise SpecdecError(str(exc)) from exc

    result = _plan_result()
    result["baseline_gpu_memory_utilization"] = _r2(baseline)
    result["gpu_memory_utilization"] = _r2(baseline)
    warnings = result["warnings"]
    mem = _memory(facts)
    if mem[0] is not None:
        result["budget"] = _empty_budget(*mem)

    def skipped(reason):
        result["reason"] = reason
        return result

    # 1. Switched off.
    if ov.get("enabled") is False:
        return skipped("disabled by {}enabled".format(var_prefix))

    # 2. Device family.
    family = facts.get("family")
    family = family if isinstance(family, str) and family else "unknown"
    fact_reason = facts.get("speculation_reason")
    fact_reason = fact_reason if isinstance(fact_reason, str) else ""
    if family in NEVER_FAMILIES or family not in FAMILY_K:
        return skipped(fact_reason or "speculation is not planned on device family {}".format(family))
    force = ov.get("force", False)
    l4t = facts.get("l4t")
    l4t_major = l4t.get("major") if isinstance(l4t, dict) else None
    if facts.get("speculation_supported") is False:
        # On Orin NX / Nano the facts report the family policy ("not suggested"), which force
        # overrides; anything else they report (no L4T, JetPack 5) cannot be forced.
        forceable = family in FORCE_FAMILIES and _is_int(l4t_major) and l4t_major >= L4T_ORIN_VLLM
        if not forceable:
            return skipped(fact_reason or "speculation is not supported on this device (jetson facts)")

    # 3. Target model.
    target = cat.get(target_model)
    if target is None or target["kind"] != "target":
        return skipped(
            "no published EAGLE-3 head or compatible draft for {} (not a target model in the catalog; add it with the catalog option)".format(target_model)
        )
    if not quantization_suits(target["quantization"], family):
        return skipped("{} is {}, which needs a Thor-class device (thor, igx_thor); this host is {}".format(target_model, target["quantization"], family))

    # 4. vLLM version.
    version = parse_version(version_text)
    if version is None:
        return skipped("vLLM version {!r} is unknown; the speculative configuration depends on it".format(version_text))
    if not _at_least(version, V_MIN_COVERED):
        return skipped("vLLM {} is older than 0.10.0, which the collection does not cover".format(version_text))

    # 5. Concurrency.
    max_concurrency = ov.get("max_concurrency", DEFAULT_MAX_CONCURRENCY)
    if concurrency >= max_concurrency:
        return skipped(
            "expected concurrency {} is at or above {} ({}max_concurrency): {}".format(concurrency, max_concurrency, var_prefix, GUIDANCE_CONCURRENCY)
        )
    if concurrency > LOW_CONCURRENCY:
        if concurrency >= DEFAULT_MAX_CONCURRENCY:
            warnings.append(
                "expected concurrency {} is allowed by {}max_concurrency={} although {}; the benchmark verdict measures it".format(
                    concurrency, var_prefix, max_concurrency, GUIDANCE_CONCURRENCY
                )
            )
        else:
            warnings.append(
                "expected concurrency {} lies between 3 and 7, which NVIDIA's Jetson guidance does not "
                "address (it covers <= 2 and >= 8); the benchmark verdict measures it".format(concurrency)
            )

    # 6. Utilization.
    if "gpu_memory_utilization" in ov:
        new_util = _r2(ov["gpu_memory_utilization"])
        if new_util > baseline:
            warnings.append(
                "{}gpu_memory_utilization={} is above the baseline {}; the guidance lowers it by {} for speculation".format(
                    var_prefix, new_util, _r2(baseline), UTIL_STEP
                )
            )
    else:
        new_util = _r2(baseline - UTIL_STEP)
        if new_util < UTIL_MIN:
            return skipped(
                "the baseline gpu_memory_utilization {} leaves nothing to lower by {} for speculation (minimum {})".format(_r2(baseline), UTIL_STEP, UTIL_MIN)
            )

    # 7. Speculator choice.
    pool, usable, rejected = _candidates(cat, target_model, target, version=version, ov=ov, target_tp=target_tp, host=host, var_prefix=var_prefix)
    for method, mid in usable:
        if method == "draft_model" and "model" in ov and target["family"] not in cat[mid].get("draft_for", ()):
            warnings.append("{} is not declared as a draft for the {} family; vLLM only checks that the vocabulary sizes match".format(mid, target["family"]))

    # 8. Device policy (after the choice, so a forced plan still reports its budget).
    budget_only = False
    if family in FORCE_FAMILIES:
        if not force:
            budget_only = True
        else:
            warnings.append("speculation forced on {} by {}force: {}".format(family, var_prefix, GUIDANCE_NANO_NX))
            if facts.get("speculation_supported") is False and fact_reason:
                warnings.append("jetson facts: " + fact_reason)

    if not usable:
        if not pool and not rejected:
            what = {"eagle3": "published EAGLE-3 head", "draft_model": "compatible draft"}.get(ov.get("method"))
            if what:
                reason = "{}method={!r} but there is no {} for {}".format(var_prefix, ov["method"], what, target_model)
            else:
                reason = "no published EAGLE-3 head or compatible draft for {}".format(target_model)
        elif not pool:
            reason = "no published EAGLE-3 head or compatible draft for {} ({})".format(target_model, "; ".join(rejected))
        else:
            reason = "no speculator for {} works with vLLM {}: {}".format(target_model, _fmt_version(version), "; ".join(rejected))
        if budget_only:
            reason = "speculation is not suggested on {}: {}; {}".format(family, GUIDANCE_NANO_NX, reason)
        return skipped(reason)

    if mem[0] is None:
        if budget_only:
            return skipped("speculation is not suggested on {}: {}".format(family, GUIDANCE_NANO_NX))
        return skipped("memory facts (memory.total_mb, memory.available_mb) are missing; the budget cannot be checked")

    if "num_speculative_tokens" in ov:
        k = ov["num_speculative_tokens"]
    else:
        k = FAMILY_K[family]
    chosen = None
    first = None
    for method, mid in usable:
        spec = cat[mid]
        label = "EAGLE-3 head" if method == "eagle3" else "draft"
        figures, short = _budget(
            mem,
            target,
            spec,
            spec_label=label,
            max_model_len=max_model_len,
            baseline=baseline,
            new_util=new_util,
            running=running,
            min_headroom=float(min_headroom_gb),
        )
        if first is None:
            first = (method, mid, figures, short)
        if not short:
            chosen = (method, mid, figures, short)
            break
    if budget_only:
        method, mid, figures, short = chosen or first
        result["budget"] = figures
        tail = (
            "the memory budget for {} does not fit either: {}".format(mid, "; ".join(short))
            if chosen is None
            else "set {}force: true to plan it (the memory budget for {} fits)".format(var_prefix, mid)
        )
        return skipped("speculation is not suggested on {}: {}; {}".format(family, GUIDANCE_NANO_NX, tail))
    if chosen is None:
        method, mid, figures, short = first
        result["budget"] = figures
        return skipped("{} with {} does not fit: {}".format(method, mid, "; ".join(short)))

    method, mid, figures, _short = chosen
    spec = cat[mid]
    dtp = ov.get("draft_tensor_parallel_size", 1 if method == "eagle3" else target_tp)

    # Warnings that depend on the choice.
    if method == "eagle3" and spec["max_position_embeddings"] < max_model_len and not _at_least(version, V_EAGLE_CONTEXT):
        warnings.append(
            "{} has max_position_embeddings {} < max_model_len {}: before vLLM 0.27 speculation is limited to the head's context (issue #21986)".format(
                mid, spec["max_position_embeddings"], max_model_len
            )
        )
    if family in THOR_FAMILIES and not _at_least(version, V_THOR):
        warnings.append("vLLM {} on Thor: NVIDIA's guidance requires vLLM 0.20+".format(version_text))
    if not _at_least(version, V_UMA_MEMORY):
        warnings.append("vLLM {} compares MemFree (page cache counts as used) in its startup memory check; drop caches before the restart".format(version_text))
    if running and _is_int(l4t_major) and l4t_major < L4T_MEMORY_RELEASE:
        warnings.append(
            "L4T r{} (< r39) does not return memory freed by stopping vLLM until caches are dropped "
            "(sync; echo 3 > /proc/sys/vm/drop_caches) between restarts".format(l4t_major)
        )

    result.update(
        {
            "decision": "enabled",
            "method": method,
            "model": mid,
            "num_speculative_tokens": k,
            "draft_tensor_parallel_size": dtp,
            "gpu_memory_utilization": new_util,
            "budget": figures,
        }
    )
    result["speculative_config"] = speculative_config(result, version_text, host=host)
    result["reason"] = "{} with {}, k={} on {}: needs {:.2f} GB of {:.2f} x {:.2f} GB = {:.2f} GB; {:.2f} GB headroom at restart".format(
        method,
        mid,
        k,
        family,
        figures["required_gb"],
        new_util,
        figures["total_gb"],
        figures["allowed_gb"],
        figures["headroom_gb"],
    )
    return result


def speculative_config(plan_result, vllm_version, host=""):
    """The ``--speculative-config`` dict for an enabled plan, with only keys ``vllm_version`` knows.

    ``method`` is always written (vllm.md 10 rule 2); ``disable_by_batch_size``,
    ``tensor_parallel_size`` and hyphenated keys never are (rule 4).
    """
    _check_mapping(plan_result, "plan", host, "a plan mapping from speculative_plan")
    version = parse_version(vllm_version)
    if version is None:
        raise _bad(host, "vllm_version", vllm_version, "a vLLM version such as '0.20.2'")
    method = plan_result.get("method")
    if method not in METHODS:
        raise _bad(host, "plan.method", method, "one of " + ", ".join(METHODS), "the plan is not enabled")
    if method == "draft_model" and not _at_least(version, V_DRAFT_MODEL):
        raise _bad(host, "plan.method", method, "eagle3 with vLLM {}".format(vllm_version), "draft_model needs 0.15+")
    model = plan_result.get("model")
    if not valid_model_id(model):
        raise _bad(host, "plan.model", model, MODEL_ID_EXPECTATION)
    k = plan_result.get("num_speculative_tokens")
    if not (_is_int(k) and SPEC_TOKENS_MIN <= k <= SPEC_TOKENS_MAX):
        raise _bad(
            host,
            "plan.num_speculative_tokens",
            k,
            "an integer from {} to {}".format(SPEC_TOKENS_MIN, SPEC_TOKENS_MAX),
        )
    dtp = plan_result.get("draft_tensor_parallel_size")
    if not (_is_int(dtp) and dtp >= 1):
        raise _bad(host, "plan.draft_tensor_parallel_size", dtp, "an integer >= 1")
    wanted = (
        ("method", method),
        ("model", model),
        ("num_speculative_tokens", k),
        ("draft_tensor_parallel_size", dtp),
    )
    fields = spec_fields(version)
    return dict((key, value) for key, value in wanted if key in fields and key not in SPEC_FIELDS_NEVER and "-" not in key)


# ---------------------------------------------------------------- renderer

CONFIG_HEADER = "# vllm serve --config file rendered by jetson_llm.speculative; local changes are overwritten.\n"
SERVE_CONFIG_KEYS = (
    ("model", "model"),
    ("host", "host"),
    ("port", "port"),
    ("served_model_name", "served-model-name"),
    ("gpu_memory_utilization", "gpu-memory-utilization"),
    ("max_model_len", "max-model-len"),
    ("max_num_seqs", "max-num-seqs"),
    ("tensor_parallel_size", "tensor-parallel-size"),
)


def spec_config_json(config):
    """Deterministic JSON text: sorted keys, no spaces."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def serve_config(serve, plan=None, host=""):
    """Mapping for vLLM's ``--config`` YAML file (long option names as keys, insertion-ordered).

    Secrets never appear: vLLM reads ``VLLM_API_KEY`` and ``HF_TOKEN`` from its environment.
    With an enabled ``plan`` the plan's utilization and ``speculative-config`` (a JSON string,
    which every vLLM release parses, vllm.md 3) are written; otherwise the baseline settings.
    """
    _check_mapping(serve, "serve", host, "a mapping of serve settings")
    out = {}
    for key, option in SERVE_CONFIG_KEYS:
        value = _serve_value(serve, key, host, required=key in ("model", "gpu_memory_utilization"))
        if value is None:
            continue
        out[option] = float(value) if key == "gpu_memory_utilization" else value
    if plan is None:
        return out
    _check_mapping(plan, "plan", host, "a plan mapping from speculative_plan")
    decision = plan.get("decision")
    if decision not in ("enabled", "skipped"):
        raise _bad(host, "plan.decision", decision, "enabled or skipped")
    if decision == "skipped":
        return out
    util = plan.get("gpu_memory_utilization")
    if not (_is_number(util) and UTIL_MIN <= util <= 1.0):
        raise _bad(host, "plan.gpu_memory_utilization", util, "a number from {} to 1.0".format(UTIL_MIN))
    out["gpu-memory-utilization"] = float(util)
    version = _serve_value(serve, "vllm_version", host, required=True)
    out["speculative-config"] = spec_config_json(speculative_config(plan, version, host=host))
    return out


_YAML_FLOAT_RE = re.compile(r"^-?[0-9]+\.[0-9]+$")


def _yaml_scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_int(value):
        return str(value)
    if isinstance(value, float):
        if not _is_number(value):
            raise SpecdecError("{!r} cannot be written to the vLLM configuration".format(value))
        text = repr(value)
        return text if _YAML_FLOAT_RE.fullmatch(text) else "{:.6f}".format(value)
    if isinstance(value, str):
        # Every value reaching the file is validated printable ASCII; a JSON string of printable
        # ASCII only escapes '"' and '\\', and is then a valid YAML double-quoted scalar.
        if not all(" " <= ch <= "~" for ch in value):
            raise SpecdecError("{!r} cannot be written to the vLLM configuration (printable ASCII only)".format(value))
        return json.dumps(value, ensure_ascii=True)
    raise SpecdecError("{!r} cannot be written to the vLLM configuration".format(value))


def serve_config_yaml(serve, plan=None, host=""):
    """``serve_config`` as deterministic YAML text (no PyYAML needed; every string quoted)."""
    lines = [CONFIG_HEADER.rstrip("\n")]
    for key, value in serve_config(serve, plan, host=host).items():
        lines.append("{}: {}".format(key, _yaml_scalar(value)))
    return "\n".join(lines) + "\n"


RUNTIMES = ("native", "docker", "podman")
IMAGE_FLAVORS = ("upstream", "jetson")
HF_CACHE_IN_CONTAINER = "/root/.cache/huggingface"
_SAFE_PATH_RE = re.compile(r"^/[A-Za-z0-9._/-]{1,1023}$")
_BIN_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+-]{0,127}$")
_CONTAINER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_IMAGE_RE = re.compile(
    r"^[a-z0-9][a-z0-9._-]{0,127}(?::[0-9]{1,5})?(?:/[a-z0-9][a-z0-9._-]{0,127}){0,8}"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
_OCI_RUNTIME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _safe_path(value):
    return isinstance(value, str) and _SAFE_PATH_RE.fullmatch(value) is not None and ".." not in value


def _argv_value(serve, key, check, *, expected, host, default):
    value = serve.get(key)
    if value is None:
        return default
    if not check(value):
        raise _bad(host, "serve." + key, value, expected)
    return value


def serve_argv(serve, config_path, runtime, image=None, image_flavor="upstream", *, plan=None, host=""):
    """argv of the vLLM service (for ``ExecStart=`` through ``systemd_quote``).

    ``runtime`` ``native``: ``[vllm_bin, "serve", "--config", config_path]``. ``docker`` or
    ``podman``: the container engine's ``run`` line; the config directory is mounted read-only at
    the same path, the Hugging Face cache at ``/root/.cache/huggingface``, local model paths
    read-only at their own paths, and secrets come from ``serve.env_file`` (never from argv).
    ``image_flavor`` ``upstream`` (``vllm/vllm-openai``, ``ENTRYPOINT ["vllm","serve"]``) gets
    only the arguments after ``vllm serve``; ``jetson`` (entrypoint not known) gets
    ``--entrypoint vllm`` and ``serve ...`` (jetson.md 4.3).

    Optional ``serve`` keys: ``vllm_bin`` (default ``vllm``), ``engine_bin`` (default the runtime
    name), ``container_name`` (``vllm``), ``oci_runtime`` (``nvidia``; empty string to omit
    ``--runtime``), ``hf_cache_dir`` (``/root/.cache/huggingface``), ``env_file``, ``family`` (adds
    ``--ipc host`` on Thor, as the published Thor command does), ``model``.
    """
    _check_mapping(serve, "serve", host, "a mapping of serve settings")
    if not (_safe_path(config_path) and config_path.endswith((".yaml", ".yml"))):
        raise _bad(
            host,
            "config_path",
            config_path,
            "an absolute path of [A-Za-z0-9._/-] ending in .yaml or .yml (vLLM requires the suffix)",
        )
    if runtime not in RUNTIMES:
        raise _bad(host, "runtime", runtime, "one of " + ", ".join(RUNTIMES))

    def bin_ok(value):
        return _safe_path(value) or (isinstance(value, str) and _BIN_NAME_RE.fullmatch(value) is not None)

    bin_expected = "an absolute path of [A-Za-z0-9._/-] or a command name"
    if runtime == "native":
        vllm_bin = _argv_value(serve, "vllm_bin", bin_ok, expected=bin_expected, host=host, default="vllm")
        return [vllm_bin, "serve", "--config", config_path]

    if image_flavor not in IMAGE_FLAVORS:
        raise _bad(host, "image_flavor", image_flavor, "one of " + ", ".join(IMAGE_FLAVORS))
    if not (isinstance(image, str) and _IMAGE_RE.fullmatch(image) is not None and ".." not in image):
        raise _bad(host, "image", image, "a container image reference such as vllm/vllm-openai:v0.20.2[@sha256:...]")
    engine = _argv_value(serve, "engine_bin", bin_ok, expected=bin_expected, host=host, default=runtime)
    name = _argv_value(
        serve,
        "container_name",
        lambda v: isinstance(v, str) and _CONTAINER_NAME_RE.fullmatch(v) is not None,
        expected="a container name of [A-Za-z0-9_.-]",
        host=host,
        default="vllm",
    )
    oci = serve.get("oci_runtime", "nvidia")
    if oci is None:
        oci = ""
    if not (isinstance(oci, str) and (oci == "" or _OCI_RUNTIME_RE.fullmatch(oci))):
        raise _bad(host, "serve.oci_runtime", oci, "an OCI runtime name such as nvidia, or '' to omit --runtime")
    hf_cache = _argv_value(
        serve,
        "hf_cache_dir",
        _safe_path,
        expected="an absolute path of [A-Za-z0-9._/-]",
        host=host,
        default=HF_CACHE_IN_CONTAINER,
    )
    env_file = _argv_value(serve, "env_file", _safe_path, expected="an absolute path of [A-Za-z0-9._/-]", host=host, default=None)
    family = serve.get("family")

    argv = [engine, "run", "--rm", "--name", name]
    if oci:
        argv += ["--runtime", oci]
    argv += ["--network", "host"]
    if family in THOR_FAMILIES:
        argv += ["--ipc", "host"]
    config_dir = posixpath.dirname(config_path)
    argv += ["-v", "{0}:{0}:ro".format(config_dir)]
    argv += ["-v", "{}:{}".format(hf_cache, HF_CACHE_IN_CONTAINER)]
    local = []
    model = _serve_value(serve, "model", host)
    if isinstance(model, str) and model.startswith("/"):
        local.append(model)
    if isinstance(plan, dict) and plan.get("decision") == "enabled":
        spec_model = plan.get("model")
        if not valid_model_id(spec_model):
            raise _bad(host, "plan.model", spec_model, MODEL_ID_EXPECTATION)
        if spec_model.startswith("/"):
            local.append(spec_model)
    for path in sorted(set(local)):
        argv += ["-v", "{0}:{0}:ro".format(path)]
    if env_file:
        argv += ["--env-file", env_file]
    if image_flavor == "jetson":
        argv += ["--entrypoint", "vllm", image, "serve"]
    else:
        argv += [image]
    argv += ["--config", config_path]
    return argv


# ---------------------------------------------------------------- systemd quoting

# Prefixes systemd interprets on the first word of ExecStart= even after unquoting
# (systemd.service "Command lines": "-", "@", ":", "+", "!").
_EXEC_PREFIXES = ("-", "@", ":", "+", "!")


def _bad_char(ch):
    # C0/C1 controls and DEL (Cc), lone surrogates (Cs): systemd cannot carry them on a unit line.
    return unicodedata.category(ch) in ("Cc", "Cs")


def systemd_quote_word(word, index=1, host=""):
    """One argv word as a double-quoted systemd word (``\\`` and ``"`` escaped, ``%`` and ``$``
    doubled so no specifier or variable expansion can happen)."""
    if _is_int(word):
        word = str(word)
    if not isinstance(word, str):
        raise _bad(host, "argv[{}]".format(index), word, "a string")
    if word == "":
        raise _bad(host, "argv[{}]".format(index), word, "a non-empty string")
    for ch in word:
        if _bad_char(ch):
            raise _bad(host, "argv[{}]".format(index), word, "a string without control characters")
    if index == 0 and (word.startswith(_EXEC_PREFIXES) or word == ";"):
        raise _bad(
            host,
            "argv[0]",
            word,
            "an executable path or name not starting with one of - @ : + ! (systemd reads them as prefixes)",
        )
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return '"' + escaped + '"'


def systemd_quote(argv, host=""):
    """An ``ExecStart=`` value that systemd splits back into exactly ``argv``."""
    if not isinstance(argv, (list, tuple)) or not argv:
        raise _bad(host, "argv", argv, "a non-empty list of strings")
    return " ".join(systemd_quote_word(word, index, host) for index, word in enumerate(argv))
