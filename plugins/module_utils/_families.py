# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The Jetson family table: the one place that says what each family is and what it gets.

Private module (standard library only, Python >= 3.8): detection (``_jetson``, on the device),
the planner and the catalog (on the controller) read it; the role defaults and the docs are checked
against it by unit tests (tests/unit/plugins/module_utils/test_families.py).

Per family:

* ``generation``: ``thor``, ``orin`` or ``xavier`` (SoC generation);
* ``soc``, ``cuda_arch``: the SoC token of the device tree and the GPU architecture;
* ``variants``: the variants detection can report (``unknown`` is always possible);
* ``memtotal_gib``: MemTotal thresholds (rounded GiB, largest first) that tell the variants apart;
* ``policy``: ``plan`` (speculation is planned), ``force`` (only with ``speculative_decoding_force``
  and when the memory budget fits) or ``never`` (with ``reason``);
* ``min_l4t``: the oldest L4T major release whose vLLM builds the collection plans for;
* ``min_vllm``: the oldest vLLM release that runs on the family;
* ``num_speculative_tokens``: the starting ``k`` (NVIDIA's Jetson guidance: Thor 5, Orin 3);
* ``quantizations``: weight formats that suit the family (NVFP4 needs Blackwell FP4 tensor cores);
* ``serve``: baseline serve settings when the inventory sets none (utilization and sequences as
  NVIDIA's Jetson memory-tuning defaults, ``max_model_len`` 8192 on Thor and AGX/IGX Orin, 4096 on
  Orin NX/Nano).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

_THOR_SERVE = {"gpu_memory_utilization": 0.75, "max_model_len": 8192, "max_num_seqs": 32}
_AGX_ORIN_SERVE = {"gpu_memory_utilization": 0.70, "max_model_len": 8192, "max_num_seqs": 16}
# Devices the collection does not plan for still get a conservative baseline.
DEFAULT_SERVE = {"gpu_memory_utilization": 0.55, "max_model_len": 4096, "max_num_seqs": 4}

FORCE_REASON = (
    "speculative decoding is not suggested on Orin NX / Orin Nano: target plus draft rarely fit and startup may run out of memory; an override is possible"
)

TABLE = {
    "thor": {
        "generation": "thor",
        "soc": "tegra264",
        "cuda_arch": "11.0",
        "variants": ("t5000", "t4000"),
        "memtotal_gib": ((96, "t5000"), (32, "t4000")),
        "policy": "plan",
        "min_l4t": 38,
        "min_vllm": (0, 20, 0),
        "num_speculative_tokens": 5,
        "quantizations": ("bf16", "w4a16", "nvfp4"),
        "serve": _THOR_SERVE,
    },
    "igx_thor": {
        "generation": "thor",
        "soc": "tegra264",
        "cuda_arch": "11.0",
        "variants": ("devkit",),
        "memtotal_gib": (),
        "policy": "plan",
        "min_l4t": 38,
        "min_vllm": (0, 20, 0),
        "num_speculative_tokens": 5,
        "quantizations": ("bf16", "w4a16", "nvfp4"),
        "serve": _THOR_SERVE,
    },
    "agx_orin": {
        "generation": "orin",
        "soc": "tegra234",
        "cuda_arch": "8.7",
        "variants": ("64gb", "32gb", "industrial"),
        "memtotal_gib": ((56, "64gb"), (28, "32gb")),
        "policy": "plan",
        "min_l4t": 36,
        "min_vllm": (0, 10, 0),
        "num_speculative_tokens": 3,
        "quantizations": ("bf16", "w4a16"),
        "serve": _AGX_ORIN_SERVE,
    },
    "igx_orin": {
        "generation": "orin",
        "soc": "tegra234",
        "cuda_arch": "8.7",
        "variants": ("devkit",),
        "memtotal_gib": (),
        "policy": "plan",
        "min_l4t": 36,
        "min_vllm": (0, 10, 0),
        "num_speculative_tokens": 3,
        "quantizations": ("bf16", "w4a16"),
        "serve": _AGX_ORIN_SERVE,
    },
    "orin_nx": {
        "generation": "orin",
        "soc": "tegra234",
        "cuda_arch": "8.7",
        "variants": ("16gb", "8gb"),
        "memtotal_gib": ((14, "16gb"), (7, "8gb")),
        "policy": "force",
        "reason": FORCE_REASON,
        "min_l4t": 36,
        "min_vllm": (0, 10, 0),
        "num_speculative_tokens": 3,
        "quantizations": ("bf16", "w4a16"),
        "serve": {"gpu_memory_utilization": 0.60, "max_model_len": 4096, "max_num_seqs": 8},
    },
    "orin_nano": {
        "generation": "orin",
        "soc": "tegra234",
        "cuda_arch": "8.7",
        "variants": ("8gb", "4gb"),
        "memtotal_gib": ((7, "8gb"), (3, "4gb")),
        "policy": "force",
        "reason": FORCE_REASON,
        "min_l4t": 36,
        "min_vllm": (0, 10, 0),
        "num_speculative_tokens": 3,
        "quantizations": ("bf16", "w4a16"),
        "serve": {"gpu_memory_utilization": 0.50, "max_model_len": 4096, "max_num_seqs": 4},
    },
    "xavier": {
        "generation": "xavier",
        "soc": "tegra194",
        "cuda_arch": "7.2",
        "variants": ("agx", "nx"),
        "memtotal_gib": (),
        "policy": "never",
        "reason": "Jetson Xavier is limited to JetPack 5 (L4T R35), which vLLM 0.20+ and the Jetson vLLM images do not support",
        "min_l4t": None,
        "min_vllm": None,
        "num_speculative_tokens": None,
        "quantizations": ("bf16", "w4a16"),
        "serve": DEFAULT_SERVE,
    },
    "unknown": {
        "generation": None,
        "soc": None,
        "cuda_arch": None,
        "variants": (),
        "memtotal_gib": (),
        "policy": "never",
        "reason": "unrecognised Jetson board: speculative decoding is planned only for known families",
        "min_l4t": None,
        "min_vllm": None,
        "num_speculative_tokens": None,
        "quantizations": ("bf16", "w4a16"),
        "serve": DEFAULT_SERVE,
    },
    "none": {
        "generation": None,
        "soc": None,
        "cuda_arch": None,
        "variants": (),
        "memtotal_gib": (),
        "policy": "never",
        "reason": "no Jetson device detected",
        "min_l4t": None,
        "min_vllm": None,
        "num_speculative_tokens": None,
        "quantizations": ("bf16", "w4a16"),
        "serve": DEFAULT_SERVE,
    },
}

FAMILIES = tuple(TABLE)
POLICIES = ("plan", "force", "never")


def family(name):
    """The table entry of a family (a copy); unknown names get the ``unknown`` entry."""
    return copy.deepcopy(TABLE.get(name, TABLE["unknown"]))


def of_generation(generation):
    """The families of a SoC generation, in table order."""
    return tuple(name for name, entry in TABLE.items() if entry["generation"] == generation)


def with_policy(*policies):
    return tuple(name for name, entry in TABLE.items() if entry["policy"] in policies)


def variants(name):
    return (*tuple(TABLE.get(name, TABLE["unknown"])["variants"]), "unknown")


def speculation(name, l4t_major):
    """``(supported, reason)`` for a family on an L4T major release (``None`` when unknown)."""
    entry = TABLE.get(name, TABLE["unknown"])
    if entry["policy"] == "never":
        return False, entry["reason"]
    if l4t_major is None:
        if entry["generation"] == "thor":
            return True, ""
        return False, "L4T release unknown: the vLLM runtime for this Orin cannot be chosen"
    if l4t_major < entry["min_l4t"]:
        if entry["generation"] == "thor":
            return False, "Thor needs L4T R%d or later (found R%d)" % (entry["min_l4t"], l4t_major)
        return False, "L4T R%d (JetPack 5) is not supported by vLLM 0.20+ or the Jetson Orin vLLM image" % l4t_major
    if entry["policy"] == "force":
        return False, entry["reason"]
    return True, ""


def serve_defaults(name):
    """The baseline serve settings of a family (a copy); unknown names and ``none`` get DEFAULT_SERVE."""
    entry = TABLE.get(name)
    return dict(entry["serve"] if entry else DEFAULT_SERVE)


def quantization_suits(quantization, name):
    """Whether weights in ``quantization`` suit the family."""
    return quantization in TABLE.get(name, TABLE["unknown"])["quantizations"]
