# SPDX-License-Identifier: Apache-2.0
"""The start-up duration model used for device-time accounting."""

from vllm_sim.startup_time import startup_seconds


def test_bf16_8b_takes_minutes_and_quantised_less():
    bf16 = startup_seconds("meta-llama/Llama-3.1-8B-Instruct")
    int4 = startup_seconds("RedHatAI/Qwen3-8B-quantized.w4a16")
    assert 150 < bf16 < 200
    assert 80 < int4 < bf16


def test_speculator_weights_add_time():
    base = startup_seconds("meta-llama/Llama-3.1-8B-Instruct")
    spec = startup_seconds("meta-llama/Llama-3.1-8B-Instruct", {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"})
    assert spec > base
