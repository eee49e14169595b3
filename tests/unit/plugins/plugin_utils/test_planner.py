# SPDX-License-Identifier: Apache-2.0
"""The speculation planner in plugins/plugin_utils/_planning/planner.py, branch by branch."""

import copy
import json
import os

import pytest
import yaml
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _jetson as jetson
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _catalog as catalog
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning import checks, planner, versions

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_W4 = "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"
LLAMA_FP4 = "nvidia/Llama-3.1-8B-Instruct-FP4"
YUHUILI = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
REDHAT_LLAMA = "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"
QWEN8 = "Qwen/Qwen3-8B"
QWEN8_W4 = "RedHatAI/Qwen3-8B-quantized.w4a16"
QWEN17 = "Qwen/Qwen3-1.7B"
QWEN25 = "Qwen/Qwen2.5-7B-Instruct"

GIB_MB = 1024
PLAN_KEYS = [
    "decision",
    "reason",
    "method",
    "model",
    "num_speculative_tokens",
    "draft_tensor_parallel_size",
    "gpu_memory_utilization",
    "baseline_gpu_memory_utilization",
    "speculative_config",
    "budget",
    "warnings",
    "target_present",
]


def facts(family="agx_orin", total_gib=61.3, avail_gib=56.0, l4t_major=36, *, supported=None, reason=""):
    if supported is None:
        supported = family in ("thor", "igx_thor", "agx_orin", "igx_orin")
        if not supported and not reason:
            reason = "family policy"
    return {
        "is_jetson": family != "none",
        "family": family,
        "memory": {"total_mb": int(total_gib * GIB_MB), "available_mb": int(avail_gib * GIB_MB), "total_gib": 0},
        "l4t": {"major": l4t_major},
        "speculation_supported": supported,
        "speculation_reason": reason,
    }


THOR = dict(family="thor", total_gib=122.0, avail_gib=110.0, l4t_major=38)
AGX64 = dict(family="agx_orin", total_gib=61.3, avail_gib=56.0, l4t_major=36)
NANO8 = dict(family="orin_nano", total_gib=7.4, avail_gib=6.5, l4t_major=36)
NX16 = dict(family="orin_nx", total_gib=15.3, avail_gib=14.0, l4t_major=36)


def serve(**kw):
    base = {
        "gpu_memory_utilization": 0.75,
        "max_model_len": 8192,
        "max_num_seqs": 8,
        "tensor_parallel_size": 1,
        "vllm_version": "0.20.2",
        "running": False,
    }
    base.update(kw)
    return base


def run(fact_kw=None, target=LLAMA, serve_kw=None, concurrency=1, **kw):
    kw.setdefault("host", "jetson-001")
    return planner.plan(facts(**(fact_kw or AGX64)), target, serve(**(serve_kw or {})), concurrency, **kw)


def skipped(result, *fragments):
    assert result["decision"] == "skipped", result
    for fragment in fragments:
        assert fragment in result["reason"], result["reason"]
    assert result["method"] is None and result["model"] is None
    assert result["num_speculative_tokens"] is None and result["speculative_config"] is None
    assert result["gpu_memory_utilization"] == result["baseline_gpu_memory_utilization"]
    return result


def enabled(result, method, model, k):
    assert result["decision"] == "enabled", result["reason"]
    assert (result["method"], result["model"], result["num_speculative_tokens"]) == (method, model, k)
    assert result["speculative_config"]["method"] == method
    assert result["speculative_config"]["model"] == model
    assert result["speculative_config"]["num_speculative_tokens"] == k
    return result


# ---------------------------------------------------------------- the reference cases


def test_thor_t5000_llama_gets_eagle3_yuhuili_k5():
    result = enabled(run(THOR), "eagle3", YUHUILI, 5)
    assert list(result) == PLAN_KEYS
    assert result["speculative_config"] == {
        "method": "eagle3",
        "model": YUHUILI,
        "num_speculative_tokens": 5,
        "draft_tensor_parallel_size": 1,
    }
    assert result["gpu_memory_utilization"] == 0.7
    assert result["baseline_gpu_memory_utilization"] == 0.75
    assert result["draft_tensor_parallel_size"] == 1
    assert result["reason"].startswith("eagle3 with {}, k=5 on thor: needs ".format(YUHUILI))


def test_agx_orin_64gb_gets_k3():
    enabled(run(AGX64), "eagle3", YUHUILI, 3)


def test_orin_nano_8gb_with_an_8b_target_skips_clearly():
    result = skipped(
        run(NANO8),
        "speculation is not suggested on orin_nano",
        "target plus draft rarely fit and startup will OOM",
        "the memory budget for {} does not fit either: needs 19.35 GB".format(YUHUILI),
    )
    assert result["budget"]["required_gb"] > result["budget"]["allowed_gb"]


def test_orin_nano_forced_with_an_8b_target_still_skips_on_memory():
    result = skipped(run(NANO8, overrides={"force": True}), "eagle3 with {} does not fit: needs".format(YUHUILI))
    assert "(target 16.10 + EAGLE-3 head 0.80 + KV 1.11 + overhead 1.35) but 0.70 x 7.95 GB = 5.56 GB" in result["reason"]
    assert any("forced on orin_nano" in w for w in result["warnings"])


# ---------------------------------------------------------------- budget arithmetic


def test_budget_figures_are_computed_not_tabled():
    result = run(AGX64, serve_kw={"max_model_len": 4096})
    budget = result["budget"]
    total_gb = int(61.3 * 1024) * 1024 * 1024 / 1e9
    available_gb = int(56.0 * 1024) * 1024 * 1024 / 1e9
    kv = (2 * 32 * 8 * 128 * 2 + 2 * 1 * 8 * 128 * 2) * 4096 / 1e9
    overhead = 0.5 + 0.05 * (16.1 + 0.8)
    required = 16.1 + 0.8 + kv + overhead
    assert budget["total_gb"] == pytest.approx(total_gb, abs=0.006)
    assert budget["available_gb"] == pytest.approx(available_gb, abs=0.006)
    assert budget["target_weights_gb"] == 16.1
    assert budget["speculator_weights_gb"] == 0.8
    assert budget["kv_cache_gb"] == pytest.approx(kv, abs=0.006)
    assert budget["overhead_gb"] == pytest.approx(overhead, abs=0.006)
    assert budget["required_gb"] == pytest.approx(required, abs=0.011)
    assert budget["allowed_gb"] == pytest.approx(0.7 * total_gb, abs=0.006)
    assert budget["reclaimable_gb"] == 0.0
    assert budget["available_at_restart_gb"] == budget["available_gb"]
    assert budget["headroom_gb"] == pytest.approx(available_gb - 0.7 * total_gb, abs=0.011)
    assert budget["min_headroom_gb"] == 2.0
    for value in budget.values():
        assert round(value, 2) == value


def test_kv_cache_grows_with_max_model_len():
    short = run(THOR, serve_kw={"max_model_len": 2048})["budget"]["kv_cache_gb"]
    long_ = run(THOR, serve_kw={"max_model_len": 32768})["budget"]["kv_cache_gb"]
    per_token = 2 * 32 * 8 * 128 * 2 + 2 * 1 * 8 * 128 * 2
    assert short == pytest.approx(per_token * 2048 / 1e9, abs=0.006)
    assert long_ == pytest.approx(per_token * 32768 / 1e9, abs=0.006)


def test_weights_do_not_fit_in_the_reservation():
    # AGX Orin 32 GB at 0.40: 0.35 x 31.5 GB = 11.0 GB < 19.3 GB needed
    result = skipped(
        run(dict(family="agx_orin", total_gib=30.0, avail_gib=28.0), serve_kw={"gpu_memory_utilization": 0.40}),
        "eagle3 with {} does not fit: needs ".format(YUHUILI),
        "but 0.35 x 32.21 GB = 11.27 GB",
    )
    assert result["budget"]["required_gb"] > result["budget"]["allowed_gb"]


def test_vllm_startup_check_needs_the_reservation_free():
    # 0.70 x 65.8 GB = 46 GB reserved but only 30 GiB available and the server is not running
    result = skipped(
        run(dict(AGX64, avail_gib=30.0)),
        "vLLM's startup check needs 0.70 x 65.82 GB = 46.07 GB free but only 32.21 GB would be available at restart",
    )
    assert result["budget"]["headroom_gb"] < 0


def test_running_server_reservation_is_reclaimable_at_restart():
    # the baseline server holds 0.75 x total: MemAvailable is low now but recovers at restart
    now = dict(AGX64, avail_gib=12.0)
    stopped = skipped(run(now), "vLLM's startup check")
    assert stopped["budget"]["reclaimable_gb"] == 0.0
    result = enabled(run(now, serve_kw={"running": True}), "eagle3", YUHUILI, 3)
    budget = result["budget"]
    assert budget["reclaimable_gb"] == pytest.approx(0.75 * budget["total_gb"], abs=0.01)
    assert budget["available_at_restart_gb"] == pytest.approx(budget["available_gb"] + budget["reclaimable_gb"], abs=0.01)


def test_available_at_restart_is_capped_at_total_memory():
    result = run(dict(AGX64, avail_gib=56.0), serve_kw={"running": True})
    assert result["budget"]["available_at_restart_gb"] == result["budget"]["total_gb"]


def test_headroom_below_the_minimum():
    # 0.70 x 65.82 = 46.08 reserved, 47.2 GiB = 50.68 GB available: 4.6 GB headroom
    ok = enabled(run(dict(AGX64, avail_gib=47.2)), "eagle3", YUHUILI, 3)
    assert 2.0 <= ok["budget"]["headroom_gb"] < 5.0
    result = skipped(
        run(dict(AGX64, avail_gib=47.2), min_headroom_gb=5.0),
        "is below the 5.00 GB minimum (NVIDIA's guidance: free at least ~2 GB first)",
    )
    assert result["budget"]["min_headroom_gb"] == 5.0


def test_the_default_headroom_is_two_gb():
    # available exactly 1.5 GB above the reservation
    total_gb = int(61.3 * 1024) * 1024 * 1024 / 1e9
    avail_gib = (0.7 * total_gb + 1.5) * 1e9 / 1024**3
    skipped(run(dict(AGX64, avail_gib=avail_gib)), "below the 2.00 GB minimum")
    enabled(run(dict(AGX64, avail_gib=avail_gib), min_headroom_gb=1.0), "eagle3", YUHUILI, 3)


def test_all_shortfalls_are_reported_together():
    result = skipped(run(dict(family="agx_orin", total_gib=30.0, avail_gib=5.0)), "does not fit")
    assert "needs " in result["reason"] and "vLLM's startup check" in result["reason"]


def test_a_smaller_later_candidate_is_used_when_the_preferred_one_does_not_fit():
    big_head = dict(catalog.MODELS[YUHUILI], weights_gb=40.0, preference=0)
    extra = {"example/Huge-EAGLE3-8B": big_head}
    result = enabled(run(AGX64, catalog=extra), "eagle3", YUHUILI, 3)
    assert result["budget"]["speculator_weights_gb"] == 0.8
    # and when nothing fits, the reason is about the preferred candidate
    small = dict(family="agx_orin", total_gib=14.0, avail_gib=13.0)
    skipped(run(small, catalog=extra), "eagle3 with example/Huge-EAGLE3-8B does not fit")


def test_llama_70b_bf16_fits_no_jetson():
    result = skipped(run(THOR, target="meta-llama/Llama-3.3-70B-Instruct"), "needs 1")
    assert result["budget"]["target_weights_gb"] == 141.0


def test_llama_70b_fp4_with_nvidia_head_on_thor():
    result = enabled(run(THOR, target="nvidia/Llama-3.3-70B-Instruct-FP4"), "eagle3", "nvidia/Llama-3.3-70B-Instruct-Eagle3", 5)
    assert result["budget"]["speculator_weights_gb"] == 6.4


# ---------------------------------------------------------------- device policy


@pytest.mark.parametrize(("family", "k"), [("thor", 5), ("igx_thor", 5), ("agx_orin", 3), ("igx_orin", 3)])
def test_k_per_family(family, k):
    enabled(run(dict(THOR, family=family)), "eagle3", YUHUILI, k)


def test_k_override_wins():
    enabled(run(THOR, overrides={"num_speculative_tokens": 2}), "eagle3", YUHUILI, 2)


@pytest.mark.parametrize("family", ["xavier", "unknown", "none"])
def test_never_families_skip_with_the_facts_reason(family):
    result = skipped(
        planner.plan(
            facts(family, 30, 28, supported=False, reason="reason from facts: " + family),
            LLAMA,
            serve(),
            1,
            overrides={"force": True},
        ),
        "reason from facts: " + family,
    )
    assert result["reason"] == "reason from facts: " + family


def test_unlisted_family_without_reason():
    skipped(
        planner.plan(facts("jetson_tx2", 8, 7, supported=False, reason=""), LLAMA, serve(), 1),
        "speculation is not planned on device family jetson_tx2",
    )
    skipped(planner.plan({"memory": {}}, LLAMA, serve(), 1), "not planned on device family unknown")


def test_facts_saying_unsupported_skip_a_supported_family():
    skipped(
        planner.plan(facts("agx_orin", 61, 50, 35, supported=False, reason="L4T R35 (JetPack 5)"), LLAMA, serve(), 1),
        "L4T R35 (JetPack 5)",
    )
    skipped(
        planner.plan(facts("agx_orin", 61, 50, supported=False, reason=""), LLAMA, serve(), 1),
        "speculation is not supported on this device (jetson facts)",
    )


def test_orin_nx_without_force_reports_that_force_would_fit():
    result = skipped(run(NX16, target=QWEN17), "speculation is not suggested on orin_nx", "set speculative_decoding_force: true")
    assert result["budget"]["required_gb"] < result["budget"]["allowed_gb"]


def test_orin_nx_forced_small_model_is_planned_with_k3_and_warnings():
    result = enabled(run(NX16, target=QWEN17, overrides={"force": True}), "eagle3", "AngelSlim/Qwen3-1.7B_eagle3", 3)
    assert any("speculation forced on orin_nx by speculative_decoding_force" in w for w in result["warnings"])
    assert any(w == "jetson facts: family policy" for w in result["warnings"])


def test_force_cannot_override_an_unsupported_l4t():
    result = planner.plan(
        facts("orin_nano", 7.4, 6.5, l4t_major=35, supported=False, reason="L4T R35 (JetPack 5) is not supported"),
        QWEN17,
        serve(),
        1,
        overrides={"force": True},
    )
    skipped(result, "L4T R35 (JetPack 5) is not supported")


def test_forced_family_with_missing_memory_facts():
    data = facts(**NX16)
    data["memory"] = {"total_mb": None, "available_mb": None}
    skipped(planner.plan(data, QWEN17, serve(), 1), "speculation is not suggested on orin_nx")
    skipped(planner.plan(data, QWEN17, serve(), 1, overrides={"force": True}), "memory facts")


def test_forced_family_without_a_speculator_keeps_the_guidance_prefix():
    skipped(run(NX16, target=QWEN25), "speculation is not suggested on orin_nx", "no published EAGLE-3 head")


def test_missing_memory_facts_skip():
    data = facts(**AGX64)
    del data["memory"]
    result = skipped(planner.plan(data, LLAMA, serve(), 1), "memory facts (memory.total_mb, memory.available_mb) are missing")
    assert result["budget"]["total_gb"] is None


def test_disabled_by_override():
    result = skipped(run(THOR, overrides={"enabled": False}))
    assert result["reason"] == "disabled by speculative_decoding_enabled"
    assert result["budget"]["total_gb"] is not None


def test_enabled_true_changes_nothing():
    assert run(THOR, overrides={"enabled": True}) == run(THOR)


# ---------------------------------------------------------------- concurrency


@pytest.mark.parametrize("concurrency", [8, 9, 64])
def test_high_concurrency_skips(concurrency):
    skipped(
        run(THOR, concurrency=concurrency),
        "expected concurrency {} is at or above 8 (speculative_decoding_max_concurrency)".format(concurrency),
        "batched decode wins",
    )


@pytest.mark.parametrize("concurrency", [1, 2])
def test_low_concurrency_has_no_warning(concurrency):
    result = run(THOR, concurrency=concurrency, serve_kw={"vllm_version": "0.27.0"})
    assert result["warnings"] == []


@pytest.mark.parametrize("concurrency", [3, 5, 7])
def test_middle_concurrency_warns(concurrency):
    result = enabled(run(THOR, concurrency=concurrency), "eagle3", YUHUILI, 5)
    assert any("does not address" in w and "verdict measures it" in w for w in result["warnings"])


def test_max_concurrency_override_both_ways():
    result = enabled(run(THOR, concurrency=10, overrides={"max_concurrency": 16}), "eagle3", YUHUILI, 5)
    assert any("allowed by speculative_decoding_max_concurrency=16" in w for w in result["warnings"])
    skipped(run(THOR, concurrency=2, overrides={"max_concurrency": 2}), "at or above 2")


# ---------------------------------------------------------------- utilization


def test_utilization_override_wins_and_warns_when_above_baseline():
    lower = enabled(run(THOR, overrides={"gpu_memory_utilization": 0.6}), "eagle3", YUHUILI, 5)
    assert lower["gpu_memory_utilization"] == 0.6 and lower["warnings"][1:] == []
    higher = enabled(run(THOR, overrides={"gpu_memory_utilization": 0.8}), "eagle3", YUHUILI, 5)
    assert higher["gpu_memory_utilization"] == 0.8
    assert any("above the baseline 0.75" in w for w in higher["warnings"])


def test_utilization_is_rounded_to_two_decimals():
    result = run(THOR, serve_kw={"gpu_memory_utilization": 0.85})
    assert result["gpu_memory_utilization"] == 0.8
    assert repr(result["gpu_memory_utilization"]) == "0.8"


def test_baseline_too_low_to_lower():
    skipped(run(THOR, serve_kw={"gpu_memory_utilization": 0.09}), "leaves nothing to lower by 0.05")


# ---------------------------------------------------------------- models and versions


def test_target_not_in_catalog():
    skipped(
        run(THOR, target="mistralai/Mistral-7B-Instruct-v0.3"),
        "no published EAGLE-3 head or compatible draft for mistralai/Mistral-7B-Instruct-v0.3",
        # what to add, and where it is documented
        "add it to speculative_decoding_catalog as an entry of kind target",
        "max_position_embeddings from its config.json",
        "an entry of kind eagle3_head or draft for that family",
        "'Models outside the catalog'",
    )


def test_the_catalog_example_of_readme_plans_a_local_target_with_its_local_head():
    """The example README gives for a model outside the catalog is a valid catalog that plans as it says."""
    with open(os.path.join(ROOT, "README.md")) as handle:
        text = handle.read().split("### Models outside the catalog", 1)[1]
    example = yaml.safe_load(text.split("```yaml", 1)[1].split("```", 1)[0])
    host = example["all"]["children"]["specdec_fleet"]["hosts"]["orin-07"]
    result = enabled(
        run(AGX64, target=host["vllm_server_model"], catalog=host["speculative_decoding_catalog"]),
        "eagle3",
        "/opt/models/support-bot-8b-eagle3",
        3,
    )
    assert result["target_present"] is None


def test_a_head_is_not_a_target():
    skipped(run(THOR, target=YUHUILI), "no published EAGLE-3 head or compatible draft for " + YUHUILI)


def test_nvfp4_target_needs_thor():
    skipped(run(AGX64, target=LLAMA_FP4), "nvfp4, which needs a Thor-class device")
    enabled(run(THOR, target=LLAMA_FP4), "eagle3", YUHUILI, 5)


def test_quantized_targets_use_their_familys_heads():
    enabled(run(AGX64, target=LLAMA_W4), "eagle3", YUHUILI, 3)
    enabled(run(AGX64, target=QWEN8_W4), "eagle3", "AngelSlim/Qwen3-8B_eagle3", 3)


@pytest.mark.parametrize(
    ("target", "head"),
    [
        ("Qwen/Qwen3-8B", "AngelSlim/Qwen3-8B_eagle3"),
        ("Qwen/Qwen3-4B", "AngelSlim/Qwen3-4B_eagle3"),
        ("Qwen/Qwen3-1.7B", "AngelSlim/Qwen3-1.7B_eagle3"),
    ],
)
def test_angelslim_heads_are_preferred_for_qwen3(target, head):
    enabled(run(THOR, target=target), "eagle3", head, 5)


def test_qwen25_has_no_head_and_its_draft_is_refused_with_vllms_message():
    skipped(
        run(THOR, target=QWEN25),
        "no published EAGLE-3 head or compatible draft for Qwen/Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-0.5B-Instruct refused: " + catalog.vocab_mismatch_message(152064, 151936),
    )


def test_method_override_without_a_matching_speculator():
    skipped(
        run(THOR, target=QWEN25, overrides={"method": "eagle3"}),
        "speculative_decoding_method='eagle3' but there is no published EAGLE-3 head for Qwen/Qwen2.5-7B-Instruct",
    )
    skipped(
        run(THOR, target="meta-llama/Llama-3.3-70B-Instruct", overrides={"method": "draft_model"}),
        "speculative_decoding_method='draft_model' but there is no compatible draft",
    )


def test_override_naming_the_refused_draft_is_an_error_with_vllms_message():
    with pytest.raises(checks.SpecdecError) as excinfo:
        run(THOR, target=QWEN25, overrides={"model": "Qwen/Qwen2.5-0.5B-Instruct"}, host="jetson-004")
    message = str(excinfo.value)
    assert message.startswith(
        "host jetson-004: speculative_decoding_model='Qwen/Qwen2.5-0.5B-Instruct' is not allowed; expected a draft with the target's vocabulary size"
    )
    assert catalog.vocab_mismatch_message(152064, 151936) in message


def test_draft_model_override_on_015():
    result = enabled(
        run(AGX64, target=QWEN8, overrides={"method": "draft_model"}, serve_kw={"vllm_version": "0.15.0"}),
        "draft_model",
        "Qwen/Qwen3-0.6B",
        3,
    )
    assert result["draft_tensor_parallel_size"] == 1
    assert result["budget"]["speculator_weights_gb"] == 1.2
    kv = (2 * 36 * 8 * 128 * 2 + 2 * 28 * 8 * 128 * 2) * 8192 / 1e9
    assert result["budget"]["kv_cache_gb"] == pytest.approx(kv, abs=0.006)
    assert "draft 1.20" not in result["reason"]


def test_draft_model_before_015_is_not_planned():
    skipped(
        run(AGX64, target=QWEN8, overrides={"method": "draft_model"}, serve_kw={"vllm_version": "0.14.1"}),
        "no speculator for Qwen/Qwen3-8B works with vLLM 0.14.1",
        "Qwen/Qwen3-0.6B needs method draft_model, which vLLM rejects before 0.15.0",
    )


DRAFT_ONLY_CATALOG = {
    "example/Tiny-Target-7B": {
        "kind": "target",
        "family": "tiny-7b",
        "model_type": "llama",
        "quantization": "bf16",
        "weights_gb": 14.0,
        "vocab_size": 32000,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 8192,
    },
    "example/Tiny-Draft-1B": {
        "kind": "draft",
        "family": "tiny-1b",
        "model_type": "llama",
        "quantization": "bf16",
        "weights_gb": 2.0,
        "vocab_size": 32000,
        "num_hidden_layers": 16,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "draft_for": ["tiny-7b"],
    },
}


def test_target_without_any_speculator():
    lonely = {"example/Lonely-7B": dict(DRAFT_ONLY_CATALOG["example/Tiny-Target-7B"], family="lonely-7b")}
    result = skipped(run(THOR, target="example/Lonely-7B", catalog=lonely))
    assert result["reason"] == "no published EAGLE-3 head or compatible draft for example/Lonely-7B"


def test_draft_fallback_is_automatic_from_015():
    result = enabled(
        run(THOR, target="example/Tiny-Target-7B", catalog=DRAFT_ONLY_CATALOG),
        "draft_model",
        "example/Tiny-Draft-1B",
        5,
    )
    assert "draft_model with example/Tiny-Draft-1B, k=5 on thor" in result["reason"]
    skipped(
        run(THOR, target="example/Tiny-Target-7B", catalog=DRAFT_ONLY_CATALOG, serve_kw={"vllm_version": "0.13.0"}),
        "no speculator for example/Tiny-Target-7B works with vLLM 0.13.0",
    )


def test_draft_tp_follows_the_target_and_must_match_it():
    two = {"tensor_parallel_size": 2}
    result = enabled(
        run(THOR, target="example/Tiny-Target-7B", catalog=DRAFT_ONLY_CATALOG, serve_kw=two),
        "draft_model",
        "example/Tiny-Draft-1B",
        5,
    )
    assert result["draft_tensor_parallel_size"] == 2
    assert result["speculative_config"]["draft_tensor_parallel_size"] == 2
    skipped(
        run(
            THOR,
            target="example/Tiny-Target-7B",
            catalog=DRAFT_ONLY_CATALOG,
            serve_kw=two,
            overrides={"draft_tensor_parallel_size": 1},
        ),
        "'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the same. Got 1 and 2.",
    )


def test_eagle_draft_tp_is_one_by_default_and_may_equal_the_target_tp():
    two = {"tensor_parallel_size": 2}
    assert run(THOR, serve_kw=two)["draft_tensor_parallel_size"] == 1
    assert run(THOR, serve_kw=two, overrides={"draft_tensor_parallel_size": 2})["draft_tensor_parallel_size"] == 2


def test_draft_tp_other_than_one_or_the_target_tp_is_an_error():
    with pytest.raises(checks.SpecdecError) as excinfo:
        run(THOR, serve_kw={"tensor_parallel_size": 2}, overrides={"draft_tensor_parallel_size": 3}, host="h9")
    assert str(excinfo.value).startswith(
        "host h9: speculative_decoding_draft_tensor_parallel_size=3 is not allowed; expected 1 or the target tensor_parallel_size (2)"
    )
    assert "cannot be other value than 1 or target model tensor_parallel_size" in str(excinfo.value)


def test_undeclared_draft_with_equal_vocabulary_is_allowed_with_a_warning():
    result = enabled(
        run(
            THOR,
            target="nvidia/Llama-3.3-70B-Instruct-FP4",
            overrides={"model": "meta-llama/Llama-3.2-1B-Instruct"},
        ),
        "draft_model",
        "meta-llama/Llama-3.2-1B-Instruct",
        5,
    )
    assert any("not declared as a draft for the llama3.3-70b family" in w for w in result["warnings"])


def test_model_override_picks_the_alternative_head():
    enabled(run(THOR, overrides={"model": REDHAT_LLAMA}), "eagle3", REDHAT_LLAMA, 5)
    enabled(run(THOR, overrides={"model": REDHAT_LLAMA, "method": "eagle3"}), "eagle3", REDHAT_LLAMA, 5)


@pytest.mark.parametrize(
    ("ov", "fragment"),
    [
        ({"model": "example/not-in-catalog"}, "expected a model in the catalog"),
        ({"model": QWEN8}, "expected an EAGLE-3 head or a draft model (it is a target model)"),
        (
            {"model": YUHUILI, "method": "draft_model"},
            "expected a model matching speculative_decoding_method='draft_model' (it is a eagle3 model)",
        ),
        ({"model": "AngelSlim/Qwen3-8B_eagle3"}, "expected an EAGLE-3 head trained for the llama3.1-8b family"),
    ],
)
def test_model_override_errors(ov, fragment):
    with pytest.raises(checks.SpecdecError) as excinfo:
        run(THOR, overrides=ov, host="jetson-005")
    message = str(excinfo.value)
    assert message.startswith("host jetson-005: speculative_decoding_model={!r} is not allowed; ".format(ov["model"]))
    assert fragment in message


def test_local_path_speculator_from_an_extra_catalog():
    extra = {"/srv/models/llama-head": dict(catalog.MODELS[YUHUILI], preference=0)}
    enabled(run(THOR, catalog=extra), "eagle3", "/srv/models/llama-head", 5)


@pytest.mark.parametrize("version", ["unknown", "", None, "latest"])
def test_unknown_vllm_version_skips(version):
    skipped(run(THOR, serve_kw={"vllm_version": version}), "vLLM version {!r} is unknown".format(version))


def test_vllm_before_010_is_not_covered():
    skipped(run(THOR, serve_kw={"vllm_version": "0.9.2"}), "older than 0.10.0")


@pytest.mark.parametrize("version", ["0.10.0", "0.10.1", "0.10.1.1"])
def test_eagle3_is_not_chosen_automatically_before_0102(version):
    skipped(
        run(AGX64, serve_kw={"vllm_version": version}),
        "no speculator for {} works with vLLM".format(LLAMA),
        "needs vLLM >= 0.10.2 to be chosen automatically",
    )


def test_explicit_eagle3_on_0101_is_planned_with_the_method_written():
    result = enabled(run(AGX64, serve_kw={"vllm_version": "0.10.1.1"}, overrides={"method": "eagle3"}), "eagle3", YUHUILI, 3)
    assert result["speculative_config"]["method"] == "eagle3"
    assert any("compares MemFree" in w for w in result["warnings"])


def test_eagle3_on_0100_is_llama_only():
    skipped(
        run(AGX64, target=QWEN8, serve_kw={"vllm_version": "0.10.0"}, overrides={"method": "eagle3"}),
        "Eagle3 is only supported for Llama models. Got qwen3",
    )


def test_speculators_checkpoints_need_0101():
    skipped(
        run(AGX64, serve_kw={"vllm_version": "0.10.0"}, overrides={"model": REDHAT_LLAMA}),
        REDHAT_LLAMA + " is a speculators-format checkpoint, read by vLLM >= 0.10.1",
    )
    enabled(run(AGX64, serve_kw={"vllm_version": "0.10.1"}, overrides={"model": REDHAT_LLAMA}), "eagle3", REDHAT_LLAMA, 3)


@pytest.mark.parametrize(("version", "warns"), [("0.20.2", True), ("0.26.0", True), ("0.27.0", False), ("0.33.0", False)])
def test_short_head_context_warning(version, warns):
    result = run(THOR, serve_kw={"vllm_version": version})
    assert any("max_position_embeddings 2048 < max_model_len 8192" in w for w in result["warnings"]) is warns


def test_short_head_context_warning_needs_a_longer_max_model_len():
    result = run(THOR, serve_kw={"max_model_len": 2048})
    assert not any("max_position_embeddings" in w for w in result["warnings"])


def test_thor_before_020_warns():
    result = run(THOR, serve_kw={"vllm_version": "0.19.0"})
    assert any("NVIDIA's guidance requires vLLM 0.20+" in w for w in result["warnings"])
    assert not any("0.20+" in w for w in run(AGX64, serve_kw={"vllm_version": "0.19.0"})["warnings"])


def test_stuck_memory_warning_before_r39_when_restarting():
    running = {"running": True}
    assert any("drop_caches" in w for w in run(dict(AGX64, avail_gib=20.0), serve_kw=running)["warnings"])
    assert not any("drop_caches" in w for w in run(dict(AGX64, avail_gib=20.0))["warnings"])
    assert not any("drop_caches" in w for w in run(dict(AGX64, avail_gib=20.0, l4t_major=39), serve_kw=running)["warnings"])


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("0.10.1.1", (0, 10, 1, 1)),
        ("0.20.2+cu130", (0, 20, 2)),
        ("v0.11.0rc1", (0, 11, 0)),
        ("0.33", (0, 33, 0)),
        (" 0.15.0\n", (0, 15, 0)),
        ("unknown", None),
        (None, None),
        (15, None),
    ],
)
def test_parse_version(text, parsed):
    assert versions.parse_version(text) == parsed


# ---------------------------------------------------------------- input errors


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (
            lambda: planner.plan("thor", LLAMA, serve(), 1, host="h"),
            "host h: facts='thor' is not allowed; expected a mapping",
        ),
        (lambda: planner.plan(facts(), LLAMA, "x", 1, host="h"), "host h: serve='x' is not allowed"),
        (
            lambda: planner.plan(facts(), "llama 8b", serve(), 1, host="h"),
            "host h: target_model='llama 8b' is not allowed",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(), 0, host="h"),
            "host h: concurrency=0 is not allowed; expected an integer >= 1",
        ),
        (lambda: planner.plan(facts(), LLAMA, serve(), True, host="h"), "host h: concurrency=True is not allowed"),
        (lambda: planner.plan(facts(), LLAMA, serve(), "1", host="h"), "host h: concurrency='1' is not allowed"),
        (
            lambda: planner.plan(facts(), LLAMA, serve(), 1, host="h", min_headroom_gb=-1),
            "host h: min_headroom_gb=-1 is not allowed",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, {"max_model_len": 4096}, 1, host="h"),
            "host h: serve.gpu_memory_utilization is missing",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(max_model_len=None), 1, host="h"),
            "host h: serve.max_model_len is missing",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(gpu_memory_utilization="0.7"), 1, host="h"),
            "host h: serve.gpu_memory_utilization='0.7' is not allowed",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(max_model_len=8192.0), 1, host="h"),
            "host h: serve.max_model_len=8192.0 is not allowed",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(running="yes"), 1, host="h"),
            "host h: serve.running='yes' is not allowed; expected a boolean",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(tensor_parallel_size=0), 1, host="h"),
            "host h: serve.tensor_parallel_size=0 is not allowed",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(max_num_seqs=-1), 1, host="h"),
            "host h: serve.max_num_seqs=-1 is not allowed",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(vllm_version=20), 1, host="h"),
            "host h: serve.vllm_version=20 is not allowed",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(), 1, host="h", catalog={"a/b": {}}),
            "host h: catalog['a/b'].kind=None is not allowed",
        ),
        (
            lambda: planner.plan(facts(), LLAMA, serve(), 1, host="h", overrides={"k": 3}),
            "host h: speculative_decoding_k=3 is not allowed",
        ),
    ],
)
def test_invalid_input_raises_naming_host_variable_and_value(call, fragment):
    with pytest.raises(checks.SpecdecError) as excinfo:
        call()
    assert str(excinfo.value).startswith(fragment), str(excinfo.value)


def test_invalid_overrides_raise_even_on_hosts_that_are_skipped():
    with pytest.raises(checks.SpecdecError, match="speculative_decoding_num_speculative_tokens=0"):
        planner.plan(facts("xavier", 30, 28, supported=False), LLAMA, serve(), 1, overrides={"num_speculative_tokens": 0})


# ---------------------------------------------------------------- determinism


def test_same_input_same_bytes_and_inputs_untouched():
    args = (facts(**THOR), LLAMA, serve(), 3)
    kwargs = {"overrides": {"num_speculative_tokens": 4}, "catalog": DRAFT_ONLY_CATALOG, "host": "h"}
    before = copy.deepcopy((args, kwargs))
    first = json.dumps(planner.plan(*args, **kwargs), sort_keys=False)
    second = json.dumps(planner.plan(*args, **kwargs), sort_keys=False)
    assert first == second
    assert (args, kwargs) == before


def test_plan_speculative_config_equals_the_version_function():
    result = run(THOR)
    assert result["speculative_config"] == planner.speculative_config(result, "0.20.2")


# ---------------------------------------------------------------- the fleet profiles through real detection


def _profile_sources(profile):
    kib = profile["mem_total_kib"]
    meminfo = "MemTotal: {} kB\nMemFree: {} kB\nMemAvailable: {} kB\n".format(kib, kib // 2, profile["mem_available_kib"])
    nvpmodel = profile.get("nvpmodel") or {}
    return {
        "model": profile["model"].encode() + b"\x00",
        "compatible": b"".join(c.encode() + b"\x00" for c in profile["compatible"]),
        "nv_tegra_release": profile["nv_tegra_release"] + "\n",
        "nv_boot_control": profile.get("nv_boot_control"),
        "meminfo": meminfo,
        "nvpmodel": "NV Power Mode: {}\n{}\n".format(nvpmodel.get("name"), nvpmodel.get("id")) if nvpmodel else None,
    }


def _profiles():
    with open(os.path.join(ROOT, "tests", "fleet", "profiles.yml")) as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("name", sorted(_profiles()))
def test_fleet_profiles_plan_by_family(name):
    profile = _profiles()[name]
    detected = jetson.detect(_profile_sources(profile))
    assert detected["family"] == profile["expect"]["family"]
    result = planner.plan(detected, LLAMA_W4, serve(gpu_memory_utilization=0.6, max_model_len=4096), 1, host=name)
    family = detected["family"]
    if family in ("thor", "igx_thor"):
        enabled(result, "eagle3", YUHUILI, 5)
    elif family in ("agx_orin", "igx_orin"):
        enabled(result, "eagle3", YUHUILI, 3)
    elif family in ("orin_nx", "orin_nano"):
        skipped(result, "speculation is not suggested on " + family)
    else:
        skipped(result, detected["speculation_reason"])


# ---------------------------------------------------------------- weights on the device (vllm_weights_info)

HUB = "/var/lib/vllm/.cache/huggingface/hub"


def held(*repos, paths=None):
    return {"hub": HUB, "repos": list(repos), "paths": dict(paths or {}), "changed": False}


def test_without_a_look_at_the_weights_nothing_changes():
    assert run(THOR)["target_present"] is None
    assert run(THOR, weights=None) == run(THOR)


def test_every_file_there_plans_as_before():
    result = enabled(run(THOR, weights=held(LLAMA, YUHUILI, REDHAT_LLAMA)), "eagle3", YUHUILI, 5)
    assert result["target_present"] is True
    assert {k: v for k, v in result.items() if k != "target_present"} == {k: v for k, v in run(THOR).items() if k != "target_present"}


def test_a_missing_served_model_skips_with_where_and_how_to_fetch_it_whatever_else_skips():
    result = skipped(
        run(THOR, weights=held(YUHUILI)),
        "the served model %s is not on the device" % LLAMA,
        HUB + "/models--meta-llama--Llama-3.1-8B-Instruct",
        "huggingface-cli download %s --cache-dir %s" % (LLAMA, HUB),
        "vllm_server_hf_offline: false",
    )
    assert result["target_present"] is False
    # known also where the device's family skips first: the role then leaves the device as it is
    xavier = skipped(run(dict(family="xavier", total_gib=31.0, avail_gib=28.0, l4t_major=35), weights=held()))
    assert xavier["target_present"] is False and "is not on the device" not in xavier["reason"]


def test_a_missing_speculator_is_not_planned_and_the_next_one_that_is_there_is():
    result = enabled(run(THOR, weights=held(LLAMA, REDHAT_LLAMA)), "eagle3", REDHAT_LLAMA, 5)
    assert result["target_present"] is True
    result = skipped(
        run(THOR, weights=held(LLAMA)),
        "speculator %s is not on the device" % YUHUILI,
        "speculator %s is not on the device" % REDHAT_LLAMA,
        "models--yuhuili--EAGLE3-LLaMA3.1-Instruct-8B",
        "huggingface-cli download %s" % YUHUILI,
    )
    assert result["target_present"] is True


def test_a_local_path_is_missing_only_when_looked_at_and_without_config_json():
    head = "/opt/models/llama31-8b-eagle3"
    local = {head: dict(catalog.MODELS[YUHUILI], preference=0)}
    ov = {"model": head}
    enabled(run(THOR, catalog=local, overrides=ov, weights=held(LLAMA, paths={head: True})), "eagle3", head, 5)
    enabled(run(THOR, catalog=local, overrides=ov, weights=held(LLAMA)), "eagle3", head, 5)  # not looked at
    skipped(
        run(THOR, catalog=local, overrides=ov, weights=held(LLAMA, paths={head: False})),
        "speculator %s is not on the device: %s holds no config.json" % (head, head),
    )


@pytest.mark.parametrize("bad", [[], {"hub": "relative", "repos": [], "paths": {}}, {"hub": HUB, "repos": "x", "paths": {}}])
def test_weights_of_the_wrong_shape_are_an_error_naming_the_host(bad):
    with pytest.raises(checks.SpecdecError, match="jetson-001"):
        run(THOR, weights=bad)
