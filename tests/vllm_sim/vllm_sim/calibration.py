# SPDX-License-Identifier: Apache-2.0
"""Published Jetson speculative-decoding figures and the simulator's figures for the same setups.

``python3 -m vllm_sim.calibration`` prints the table (virtual time, a few seconds of CPU).
Sources: the Thor FP4 row is vLLM (NVIDIA-AI-IOT/jetson-ai-lab, ``workshop-gtc-dc-2025.md``); the others are
TensorRT Edge-LLM's performance benchmarks (``NVIDIA/TensorRT-Edge-LLM``, tree drafting), which the simulator approximates with vLLM's chain drafting.
"""

from __future__ import annotations

import sys

from . import prompts
from .engine import simulate_run

DEVICES = {
    "agx-orin-64gb": {"name": "agx-orin-64gb", "bandwidth_gbs": 204.8, "tflops": 42.6},
    "thor-t5000": {"name": "thor-t5000", "bandwidth_gbs": 273, "tflops": 259},
    "orin-nano-8gb": {"name": "orin-nano-8gb", "bandwidth_gbs": 68, "tflops": 10.2},
    "orin-nx-16gb": {"name": "orin-nx-16gb", "bandwidth_gbs": 102.4, "tflops": 15.0},
}

# (label, device, target, speculator, k, concurrency, published baseline, published speculative, asserted)
ROWS = [
    (
        "AGX Orin 64GB Qwen3-8B INT4 bs1",
        "agx-orin-64gb",
        "RedHatAI/Qwen3-8B-quantized.w4a16",
        "AngelSlim/Qwen3-8B_eagle3",
        3,
        1,
        32.1,
        57.8,
        True,
    ),
    (
        "AGX Orin 64GB Qwen3-8B INT4 bs8",
        "agx-orin-64gb",
        "RedHatAI/Qwen3-8B-quantized.w4a16",
        "AngelSlim/Qwen3-8B_eagle3",
        3,
        8,
        139.0,
        70.4,
        True,
    ),
    (
        "Thor Llama-3.1-8B FP4 (vLLM) k=5",
        "thor-t5000",
        "nvidia/Llama-3.1-8B-Instruct-FP4",
        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        5,
        1,
        19.1,
        25.6,
        True,
    ),
    (
        "Thor Llama-3.1-8B INT4 bs1",
        "thor-t5000",
        "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        3,
        1,
        50.8,
        81.0,
        True,
    ),
    (
        "Thor Llama-3.1-8B INT4 bs8",
        "thor-t5000",
        "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        3,
        8,
        135.3,
        118.0,
        True,
    ),
    (
        "Orin Nano 8GB Qwen3-1.7B INT4 bs1",
        "orin-nano-8gb",
        "RedHatAI/Qwen3-1.7B-quantized.w4a16",
        "AngelSlim/Qwen3-1.7B_eagle3",
        3,
        1,
        36.3,
        48.7,
        True,
    ),
    (
        "AGX Orin 64GB Qwen3-1.7B INT4 bs1",
        "agx-orin-64gb",
        "RedHatAI/Qwen3-1.7B-quantized.w4a16",
        "AngelSlim/Qwen3-1.7B_eagle3",
        3,
        1,
        95.5,
        152.4,
        False,
    ),
    (
        "AGX Orin 64GB Qwen3-1.7B INT4 bs8",
        "agx-orin-64gb",
        "RedHatAI/Qwen3-1.7B-quantized.w4a16",
        "AngelSlim/Qwen3-1.7B_eagle3",
        3,
        8,
        406.7,
        250.7,
        False,
    ),
    (
        "Orin NX 16GB Qwen3-8B INT4 bs1",
        "orin-nx-16gb",
        "RedHatAI/Qwen3-8B-quantized.w4a16",
        "AngelSlim/Qwen3-8B_eagle3",
        3,
        1,
        18.6,
        29.7,
        False,
    ),
    (
        "Orin NX 16GB Qwen3-1.7B INT4 bs1",
        "orin-nx-16gb",
        "RedHatAI/Qwen3-1.7B-quantized.w4a16",
        "AngelSlim/Qwen3-1.7B_eagle3",
        3,
        1,
        58.8,
        86.5,
        False,
    ),
]

# The stated tolerance: simulated speedup within 20 % (relative) of the published speedup and on
# the same side of 1.0, for the asserted rows.
TOLERANCE = 0.20


def run_pair(device, target, head, k, concurrency, seed=11, max_tokens=256, num_prompts=None):
    """(baseline result, speculative result) of one closed-loop chat benchmark in virtual time."""
    settings = {"device": DEVICES[device], "noise": 0.0, "seed": seed}
    n = num_prompts or (24 if concurrency == 1 else 8 * concurrency)
    chat = prompts.chat_messages()
    base = simulate_run(settings, target, None, chat, concurrency, max_tokens, seed=seed, num_prompts=n)
    spec = {"method": "eagle3", "model": head, "num_speculative_tokens": k}
    fast = simulate_run(settings, target, spec, chat, concurrency, max_tokens, seed=seed, num_prompts=n)
    return base, fast


def table(seed=11) -> list:
    out = []
    for label, device, target, head, k, conc, pub_base, pub_spec, asserted in ROWS:
        base, spec = run_pair(device, target, head, k, conc, seed)
        sim_ratio = spec["output_throughput"] / base["output_throughput"]
        pub_ratio = pub_spec / pub_base
        out.append(
            {
                "label": label,
                "k": k,
                "published": (pub_base, pub_spec, pub_ratio),
                "simulated": (base["output_throughput"], spec["output_throughput"], sim_ratio),
                "acceptance_length": spec.get("spec_decode_acceptance_length"),
                "deviation": sim_ratio / pub_ratio - 1.0,
                "asserted": asserted,
            }
        )
    return out


def markdown(rows) -> str:
    lines = [
        "| Setup | k | Published tok/s (ratio) | Simulated tok/s (ratio) | Sim. acceptance length | Deviation |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        pb, ps, pr = row["published"]
        sb, ss, sr = row["simulated"]
        label = row["label"] if row["asserted"] else f"({row['label']}, not asserted)"
        lines.append(
            f"| {label} | {row['k']} | {pb:.1f} -> {ps:.1f} ({pr:.2f}x) | {sb:.1f} -> {ss:.1f} ({sr:.2f}x) | "
            f"{row['acceptance_length']:.2f} | {100 * row['deviation']:+.1f} % |"
        )
    return "\n".join(lines)


def main() -> int:
    print(markdown(table()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
