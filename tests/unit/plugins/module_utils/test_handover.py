# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""What to set so that the collection serves what a server it did not start serves (module_utils/_handover.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.jetson_llm.speculative.plugins.module_utils._handover import handover, parse, serve_args
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import extra_args_problem, extra_mounts_problem

# NVIDIA's recipe, as docker inspect reports it: the upstream image's entrypoint is vllm serve
RECIPE = {
    "engine": "docker",
    "image": "vllm/vllm-openai:latest",
    "name": "vllm",
    "entrypoint": ["vllm", "serve"],
    "runtime": "nvidia",
    "network": "host",
    "mounts": [
        {"source": "/home/jetson/.cache/huggingface", "destination": "/root/.cache/huggingface", "rw": True},
        {"source": "/data/lora", "destination": "/lora", "rw": False},
    ],
    "env_names": ["HF_TOKEN", "HF_HUB_OFFLINE", "PATH", "NVIDIA_VISIBLE_DEVICES", "VLLM_USAGE_SOURCE", "VLLM_ATTENTION_BACKEND"],
}
RECIPE_ARGV = ["vllm", "serve", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--port", "8000", "--max-model-len", "8192",
               "--gpu-memory-utilization", "0.75", "--enable-prefix-caching", "--kv-cache-dtype", "fp8", "--api-key", "sk-1"]  # fmt: skip


def test_the_recipe_container_is_described_by_settings_the_preflight_accepts():
    out = handover(RECIPE_ARGV, RECIPE)
    assert out["settings"] == {
        "vllm_server_runtime": "docker",
        "vllm_server_image": "vllm/vllm-openai:latest",
        "vllm_server_image_flavor": "upstream",
        "vllm_server_container_name": "vllm",
        "vllm_server_oci_runtime": "nvidia",
        "vllm_server_hf_cache_dir": "/home/jetson/.cache/huggingface",
        "vllm_server_model": "Qwen/Qwen3-8B",
        "vllm_server_host": "0.0.0.0",
        "vllm_server_port": 8000,
        "vllm_server_max_model_len": 8192,
        "vllm_server_gpu_memory_utilization": 0.75,
        "vllm_server_extra_args": {"enable-prefix-caching": True, "kv-cache-dtype": "fp8"},
        "vllm_server_extra_mounts": ["/data/lora:/lora:ro"],
    }
    # secrets by name only, never their values; what the unit would not carry over, named
    assert out["secrets"] == ["vllm_server_api_key (its --api-key)", "vllm_server_hf_token (its HF_TOKEN)"]
    assert "sk-1" not in repr(out)
    assert out["not_carried"] == ["the environment variable VLLM_ATTENTION_BACKEND"]
    # the collection's own rules accept what it suggests
    assert extra_args_problem(out["settings"]["vllm_server_extra_args"]) is None
    assert extra_mounts_problem(out["settings"]["vllm_server_extra_mounts"]) is None


def test_a_native_server_and_the_forms_of_its_options():
    argv = ["/opt/venv/bin/python3", "/opt/venv/bin/vllm", "serve", "--model=meta-llama/Llama-3.1-8B-Instruct", "-tp", "1",
            "--max_num_seqs", "16", "--trust-remote-code", "--seed", "-1", "--speculative-config", '{"method": "ngram"}',
            "--config", "/etc/my.yaml", "--port", "eighty"]  # fmt: skip
    out = handover(argv)
    assert out["settings"] == {
        "vllm_server_runtime": "native",
        "vllm_server_vllm_bin": "/opt/venv/bin/vllm",
        "vllm_server_model": "meta-llama/Llama-3.1-8B-Instruct",
        "vllm_server_tensor_parallel_size": 1,
        "vllm_server_max_num_seqs": 16,
        "vllm_server_extra_args": {"trust-remote-code": True, "seed": -1},
    }
    assert out["not_carried"] == [
        "--speculative-config (speculation: the collection plans its own)",
        "--config /etc/my.yaml (set its options here)",
        "--port eighty (not a value the collection's setting vllm_server_port takes)",
    ]


def test_a_flag_does_not_take_the_model_that_follows_it():
    assert parse(["--trust-remote-code", "Qwen/Qwen3-8B", "--enforce-eager"]) == ("Qwen/Qwen3-8B", [("trust-remote-code", True), ("enforce-eager", True)])
    assert parse(["--no-enable-prefix-caching", "m"]) == ("m", [("no-enable-prefix-caching", True)])


def test_only_a_vllm_server_is_read():
    assert serve_args(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]) == ["--model", "m"]
    assert serve_args(["/usr/bin/nginx", "-g", "daemon off;"]) is None
    assert handover(["/usr/bin/nginx"])["not_carried"] == ["the command line is not a vllm serve"]


def test_a_container_on_its_own_network_and_a_jetson_image():
    out = handover(["vllm", "serve", "m"], dict(RECIPE, entrypoint=["/bin/bash", "-c"], network="bridge", runtime="runc", mounts=[], env_names=[]))
    assert out["settings"]["vllm_server_image_flavor"] == "jetson" and out["settings"]["vllm_server_oci_runtime"] == ""
    assert out["not_carried"] == ["network mode bridge (the collection's container uses the host's network)"]
