# SPDX-License-Identifier: Apache-2.0
"""Modelled duration of one vLLM (re)start, for cost accounting in virtual time.

``startup_seconds(target, spec)`` = weight loading (weight bytes of target and speculator over a
read rate) + a fixed engine initialisation (torch.compile, memory profiling, KV cache, CUDA graph
capture). The server process (``server.py``) sleeps its own shorter figures so tests stay quick;
this model is for benchmarks that count device time (``tests/bench/bench_decisions.py``).

Calibration (no start-up time of vLLM on a Jetson for an 8B model is published; these are the
nearest published figures, see docs/decisions.md):

* Weight loading: 0.14 GB/s, from a vLLM cold start on NVIDIA DGX Spark (unified-memory ARM system
  like Jetson): about 20 GB of weights loaded in about 142 s from local NVMe (route179.dev,
  "Optimizing vLLM cold start with model streaming and compile caching", 2026-06-30).
* Engine initialisation: 60 s, torch.compile about 39 s on the same DGX Spark (same source) plus
  about 20 s for profiling, KV cache and CUDA graphs (the simulator's ``init_s``); a dense 8B model
  needs 28.8 s to ``/health`` on an H100 host with every cache warm and 86.6 s cold (vLLM issue
  #47456), so a Jetson with its slower CPU is not faster than that.

For meta-llama/Llama-3.1-8B-Instruct in BF16 (about 16 GB) this gives about 175 s; for an 8B INT4 or
FP4 checkpoint (about 5.5 GB) about 100 s. The issue reports of Jetson start-ups ("tens of seconds
to minutes"; NVIDIA-AI-IOT/jetson-ai-lab issue #346: over 30 minutes for a 30B MoE container) are
consistent with this range.
"""

from __future__ import annotations

LOAD_GBPS = 0.14
INIT_S = 60.0
GB = 1e9


def weight_bytes(model_id):
    """Weight bytes of a zoo model (target or speculator)."""
    from .engine import model_from_zoo

    return float(model_from_zoo(model_id).weight_bytes)


def startup_seconds(target, spec=None, load_gbps=LOAD_GBPS, init_s=INIT_S):
    """Seconds from ``vllm serve`` to ready for ``target`` (model id) and an optional speculative config."""
    total = weight_bytes(target)
    if spec and spec.get("model"):
        total += weight_bytes(spec["model"])
    return total / GB / float(load_gbps) + float(init_s)
