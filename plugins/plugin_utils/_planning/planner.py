# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""The speculation planner: memory budget, candidate speculators, the plan and its ``--speculative-config``.

Private controller-side module. Deterministic: the same input gives the same output, byte for byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.jetson_llm.speculative.plugins.module_utils import _families
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._catalog import (
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
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import (
    METHODS,
    SPEC_TOKENS_MAX,
    SPEC_TOKENS_MIN,
    UTIL_MIN,
    SpecdecError,
    _bad,
    _check_mapping,
    _is_int,
    _is_number,
    _serve_value,
    validate_overrides,
)
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.versions import (
    L4T_MEMORY_RELEASE,
    L4T_ORIN_VLLM,
    V_DRAFT_MODEL,
    V_EAGLE3_ANY_FAMILY,
    V_EAGLE3_AUTO,
    V_EAGLE_CONTEXT,
    V_MIN_COVERED,
    V_SPECULATORS,
    V_THOR,
    V_UMA_MEMORY,
    _at_least,
    _fmt_version,
    emitted_fields,
    parse_version,
)

# NVIDIA's Jetson guidance: lower --gpu-memory-utilization by ~0.05 versus the non-speculative baseline and
# keep at least ~2 GB free.
UTIL_STEP = 0.05
DEFAULT_MIN_HEADROOM_GB = 2.0
# NVIDIA's Jetson guidance: do not use speculation at high concurrency (>= 8); 3..7 is not addressed.
DEFAULT_MAX_CONCURRENCY = 8
LOW_CONCURRENCY = 2
# Activation, sampler and CUDA-graph memory on top of weights and KV cache: a fixed 0.5 GB plus 5 %
# of all weights. An estimate: vLLM profiles the real figure at startup, so this
# constant only has to keep plans on the safe side of the startup checks.
OVERHEAD_FIXED_GB = 0.5
OVERHEAD_WEIGHT_FRACTION = 0.05
MIB = 1024 * 1024

# Family policy, starting k and minimum vLLM come from the family table (module_utils/_families.py).
FAMILY_K = dict((name, entry["num_speculative_tokens"]) for name, entry in _families.TABLE.items() if entry["policy"] != "never")
FORCE_FAMILIES = _families.with_policy("force")
NEVER_FAMILIES = _families.with_policy("never")
THOR_FAMILIES = _families.of_generation("thor")

GUIDANCE_NANO_NX = (
    'NVIDIA\'s Jetson speculative-decoding guidance does not suggest EAGLE-3 on Orin Nano / Orin NX ("target plus draft rarely fit and startup will OOM")'
)
GUIDANCE_CONCURRENCY = "NVIDIA's Jetson guidance does not use speculation at high concurrency (>= 8), where batched decode wins and the draft only takes memory"

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


def _absent(weights, host):
    """From what the device holds (``vllm_weights_info``), a function ``absent(model_id)``: None when vLLM finds the
    model's files, else where they should be and how to get them there. None when ``weights`` is None (not looked at)."""
    if weights is None:
        return None
    _check_mapping(weights, "weights", host, "the result of vllm_weights_info (hub, repos, paths) or null")
    hub, repos, paths = weights.get("hub"), weights.get("repos"), weights.get("paths") or {}
    if not (isinstance(hub, str) and hub.startswith("/")) or not isinstance(repos, (list, tuple)) or not isinstance(paths, dict):
        raise _bad(host, "weights", weights, "the result of vllm_weights_info: hub (an absolute path), repos (a list), paths (a mapping)")
    repos = set(repos)

    def absent(model_id):
        if model_id.startswith("/"):
            if paths.get(model_id, True):  # a path not looked at is not reported missing
                return None
            return "{} holds no config.json; copy the model's files there".format(model_id)
        if model_id in repos:
            return None
        return (
            "vLLM runs offline and reads it from {hub}/models--{dir}, which has no snapshot for main; fetch it on the device "
            "(huggingface-cli download {id} --cache-dir {hub}) or set vllm_server_hf_offline: false to let vLLM download it"
        ).format(hub=hub.rstrip("/"), dir=model_id.replace("/", "--"), id=model_id)

    return absent


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
    weights=None,
):
    """Plan speculative decoding for one host. See docs/devel/architecture.md ("Planner").

    ``facts``: ``ansible_facts.jetson``; ``target_model``: the served model id; ``serve``: the
    baseline serve settings (``gpu_memory_utilization``, ``max_model_len``, ``max_num_seqs``,
    ``tensor_parallel_size``, ``vllm_version``, ``running``); ``concurrency``: the expected number
    of concurrent requests; ``catalog``: extra catalog entries; ``overrides``: per-host settings
    (see ``validate_overrides``); ``weights``: what the device holds where vLLM will read it
    (``vllm_weights_info``: ``hub``, ``repos``, ``paths``), or None when not looked at (vLLM may
    download). Raises ``SpecdecError`` on invalid input; a plan that cannot be enabled is returned
    with ``decision: skipped`` and a reason.
    """
    absent = _absent(weights, host)
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
    # known whatever the decision: a device without the served model's files is left as it is
    result["target_present"] = None if absent is None else absent(target_model) is None
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
            "no published EAGLE-3 head or compatible draft for {0} ({0} is not a target of the catalog: add it to {1}catalog as an entry of "
            "kind target with family, model_type, quantization, weights_gb, vocab_size, num_hidden_layers, num_key_value_heads, head_dim "
            "and max_position_embeddings from its config.json, and an entry of kind eagle3_head or draft for that family; "
            "README, 'Models outside the catalog')".format(target_model, var_prefix)
        )
    if result["target_present"] is False:
        return skipped("the served model {} is not on the device: {}".format(target_model, absent(target_model)))
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
    # 7b. Weights: a speculator whose files are not where vLLM reads them cannot start (checked before any restart).
    missing = []
    if absent is not None:
        missing = ["speculator {} is not on the device: {}".format(mid, absent(mid)) for _m, mid in usable if absent(mid)]
        usable = [(m, mid) for m, mid in usable if absent(mid) is None]
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
        if missing:
            reason = "; ".join(missing)
        elif not pool and not rejected:
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

    ``method`` is always written (vLLM infers it from the model name otherwise); ``disable_by_batch_size``,
    ``tensor_parallel_size`` and hyphenated keys never are (no-ops or fatal, depending on the release).
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
    fields = emitted_fields(version)
    return dict((key, value) for key, value in wanted if key in fields and "-" not in key)
