# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""vLLM releases: version parsing, the ``--speculative-config`` fields each release knows, version gates.

Private controller-side module. Deterministic: the same input gives the same output, byte for byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.jetson_llm.speculative.plugins.module_utils import _families

V_MIN_COVERED = (0, 10, 0)
# 0.10.0-0.10.1.x classify an "EAGLE3-" repository name as EAGLE-1 when method is unset
# (vLLM's method inference); the method is always written, but an automatic choice waits for 0.10.2.
V_EAGLE3_AUTO = (0, 10, 2)
# 0.10.0: "Eagle3 is only supported for Llama models." (its configuration check)
V_EAGLE3_ANY_FAMILY = (0, 10, 1)
V_SPECULATORS = (0, 10, 1)
# draft_model is rejected by the V1 engine until 0.15.0 (release notes of 0.15.0).
V_DRAFT_MODEL = (0, 15, 0)
# EAGLE drafts with a short max_position_embeddings are raised to the target's length from 0.27
# (release notes of 0.27.0).
V_EAGLE_CONTEXT = (0, 27, 0)
# Integrated-GPU free-memory handling (MemAvailable instead of MemFree) from 0.11.2 (release notes of 0.11.2).
V_UMA_MEMORY = (0, 11, 2)
V_THOR = _families.TABLE["thor"]["min_vllm"]
L4T_ORIN_VLLM = _families.TABLE["agx_orin"]["min_l4t"]
# Memory freed by stopping vLLM is stuck before L4T r39 / JetPack 7.2 (NVIDIA's L4T release notes).
L4T_MEMORY_RELEASE = 39

# ---------------------------------------------------------------- speculative-config fields
# Fields of vLLM's SpeculativeConfig present in every release 0.10.0-0.34.0 (vllm/config/speculative.py).
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
# Where only the last release containing a field is known, the next release number is
# taken as the first without it, so a patch release of unknown content never counts as having it.
SPEC_FIELDS_BOUNDED = {
    "disable_logprobs": ((0, 10, 0), (0, 11, 1)),
    "disable_by_batch_size": ((0, 10, 0), (0, 16, 1)),
    "speculative_token_tree": ((0, 10, 0), (0, 20, 1)),
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
    # 0.34.0 (vllm/config/speculative.py of the 0.34.0 wheel): a registered method lands in custom_method.
    "draft_decode_context_parallel_size": ((0, 34, 0), None),
    "suffix_decoding_corpus_tokens": ((0, 34, 0), None),
    "speculator_options": ((0, 34, 0), None),
    "custom_method": ((0, 34, 0), None),
}
# Fields a release still accepts but no longer reads (first release where the field has no effect):
# known to spec_fields, never emitted from that release on.
SPEC_FIELDS_NO_EFFECT = {
    "parallel_drafting": (0, 34, 0),
    "suffix_decoding_max_spec_factor": (0, 34, 0),
    "suffix_decoding_min_token_prob": (0, 34, 0),
}
# Never emitted, whatever the version: disable_by_batch_size is a no-op up to 0.16 and fatal from 0.17;
# tensor_parallel_size is only accepted to raise an error.
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
    """The ``--speculative-config`` keys vLLM ``version`` (a tuple) knows (the tables above)."""
    fields = set(SPEC_FIELDS_ALWAYS)
    for key, (first, removed) in SPEC_FIELDS_BOUNDED.items():
        if _at_least(version, first) and (removed is None or not _at_least(version, removed)):
            fields.add(key)
    return frozenset(fields)


def emitted_fields(version):
    """The keys the collection may write for vLLM ``version``: known to it, read by it, never a no-op or fatal key."""
    return frozenset(
        key
        for key in spec_fields(version)
        if key not in SPEC_FIELDS_NEVER and not (key in SPEC_FIELDS_NO_EFFECT and _at_least(version, SPEC_FIELDS_NO_EFFECT[key]))
    )


def _fmt_version(version):
    return ".".join(str(p) for p in version)
