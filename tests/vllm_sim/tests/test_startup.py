# SPDX-License-Identifier: Apache-2.0
"""Start-up failures: every error text, where it is printed and the exit code (README.md, section 6)."""

from __future__ import annotations

import re
import socket

import pytest
from conftest import free_port, run_vllm

from vllm_sim import memory
from vllm_sim.versions import Version

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
ENGINE_FAILED = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"


def serve(env, *args):
    return run_vllm(["serve", *args, "--host", "127.0.0.1", "--port", str(free_port())], env)


def last_line(text: str) -> str:
    return text.rstrip("\n").splitlines()[-1]


def strip_prefix(line: str) -> str:
    return re.sub(r"^\((APIServer|EngineCore_DP0|EngineCore_0) pid=\d+\) ", "", line)


def test_free_memory_check(sim_env):
    proc = serve(sim_env(total_gib=61.3, available_gib=30.0), LLAMA, "--gpu-memory-utilization", "0.8")
    assert proc.returncode == 1
    message = (
        "ValueError: Free memory on device (30.00/61.30 GiB) on startup is less than desired GPU memory utilization "
        "(0.8, 49.04 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
    assert message in [strip_prefix(line) for line in proc.stderr.splitlines()]
    assert strip_prefix(last_line(proc.stderr)) == ENGINE_FAILED
    assert "EngineCore failed to start." in proc.stdout
    assert "Application startup complete." not in proc.stdout


def test_free_memory_is_memfree_before_0_11_2(sim_env):
    env = sim_env({"version": "0.11.0"}, total_gib=61.3, available_gib=56.0, free_gib=20.0)
    proc = serve(env, LLAMA, "--gpu-memory-utilization", "0.5", "--max-model-len", "4096")
    assert proc.returncode == 1
    assert "Free memory on device (20.00/61.30 GiB) on startup is less than desired GPU memory utilization (0.5, 30.65 GiB)" in proc.stderr
    assert "(EngineCore_DP0 pid=" in proc.stderr


def test_device_memory_source_by_version():
    info = {"MemTotal": 1024 * 1024, "MemFree": 100 * 1024, "MemAvailable": 600 * 1024}
    assert memory.device_memory(Version("0.11.0"), info) == (1024**3, 100 * 1024**2)
    assert memory.device_memory(Version("0.11.2"), info) == (1024**3, 600 * 1024**2)


@pytest.mark.parametrize("version", ["0.12.0", "0.13.0", "0.20.0"])
def test_weights_do_not_fit(sim_env, version):
    proc = serve(
        sim_env({"version": version}, total_gib=61.3, available_gib=60.0),
        "meta-llama/Llama-3.3-70B-Instruct",
        "--max-model-len",
        "4096",
    )
    assert proc.returncode == 1
    failed_line = "Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to free memory for weights"
    assert (failed_line in proc.stdout) == (version >= "0.13.0")
    oom = [strip_prefix(line) for line in proc.stderr.splitlines() if "torch.OutOfMemoryError" in line]
    assert oom
    assert re.match(
        r"torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate [\d.]+ MiB\. GPU 0 has a total capacity of "
        r"61\.30 GiB of which [\d.]+ MiB is free\.",
        oom[-1],
    )
    assert strip_prefix(last_line(proc.stderr)) == ENGINE_FAILED


def test_no_memory_left_for_the_kv_cache(sim_env):
    proc = serve(
        sim_env(total_gib=17.0, available_gib=16.5),
        LLAMA,
        "--gpu-memory-utilization",
        "0.92",
        "--max-model-len",
        "4096",
    )
    assert proc.returncode == 1
    assert "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine." in [
        strip_prefix(line) for line in proc.stderr.splitlines()
    ]
    assert "Model loading took 14.9" in proc.stdout
    assert strip_prefix(last_line(proc.stderr)) == ENGINE_FAILED


def test_kv_cache_too_small_for_max_model_len(sim_env):
    proc = serve(sim_env(total_gib=61.3, available_gib=56.0), LLAMA, "--gpu-memory-utilization", "0.5")
    assert proc.returncode == 1
    line = next(strip_prefix(x) for x in proc.stderr.splitlines() if "To serve at least one request" in x)
    assert re.fullmatch(
        r"ValueError: To serve at least one request with the model's max seq len \(131072\), \(16\.00 GiB KV cache is "
        r"needed, which is larger than the available KV cache memory \((\d+\.\d\d) GiB\)\. "
        r"Based on the available memory, "
        r"the estimated maximum model length is (\d+)\. Try increasing `gpu_memory_utilization` or decreasing "
        r"`max_model_len` when initializing the engine\.",
        line,
    )
    available, estimated = re.search(r"memory \((\d+\.\d\d) GiB\).*length is (\d+)\.", line).groups()
    assert abs(int(estimated) * 128 * 1024 / 2**30 - float(available)) < 0.01  # 128 KiB of KV per token
    assert strip_prefix(last_line(proc.stderr)) == ENGINE_FAILED


def test_speculator_counts_against_the_budget(sim_env, start_server):
    """The budget that fits the target alone fails once a draft model is added (vLLM's free-memory check at start-up)."""
    env = sim_env({"version": "0.20.0"}, total_gib=18.0, available_gib=17.5)
    args = [LLAMA, "--gpu-memory-utilization", "0.95", "--max-model-len", "2048"]
    server = start_server(args, env)
    assert server.stop() == 0
    spec = '{"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4}'
    proc = serve(env, *args, "--speculative-config", spec)
    assert proc.returncode == 1
    assert "torch.OutOfMemoryError: CUDA out of memory." in proc.stderr
    assert "Loading drafter model..." not in proc.stdout


def test_offline_model_missing(sim_env):
    proc = serve(sim_env(), "meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert proc.returncode == 1
    lines = [strip_prefix(x) for x in proc.stderr.rstrip().splitlines()]
    assert lines[-2] == ("OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files.")
    assert lines[-1].startswith("Check your internet connection or see how to run the library in offline mode")
    assert lines[0] == "Traceback (most recent call last):"
    assert ENGINE_FAILED not in proc.stderr


def test_speculative_config_error_is_raised_before_the_engine(sim_env):
    proc = serve(
        sim_env({"version": "0.17.0"}),
        LLAMA,
        "--speculative-config",
        '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3, "disable_by_batch_size": 4}',
    )
    assert proc.returncode == 1
    lines = [strip_prefix(x) for x in proc.stderr.rstrip().splitlines()]
    assert lines[-4:] == [
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
        "disable_by_batch_size",
        "  Unexpected keyword argument [type=unexpected_keyword_argument, input_value=4, input_type=int]",
        "    For further information visit https://errors.pydantic.dev/2.12/v/unexpected_keyword_argument",
    ]
    assert "Initializing a V1 LLM engine" not in proc.stdout


def test_draft_model_rejected_before_0_15(sim_env):
    spec = '{"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4}'
    proc = serve(sim_env({"version": "0.14.0"}), LLAMA, "--speculative-config", spec)
    assert proc.returncode == 1
    assert strip_prefix(last_line(proc.stderr)).startswith("NotImplementedError: Speculative decoding with draft model is not supported yet.")


def test_max_model_len_above_the_model_limit(sim_env):
    proc = serve(sim_env(), "Qwen/Qwen3-8B", "--max-model-len", "65536")
    assert proc.returncode == 1
    assert "1 validation error for ModelConfig" in proc.stderr
    assert (
        "Value error, User-specified max_model_len (65536) is greater than the derived max_model_len "
        "(max_position_embeddings=40960.0 or model_max_length=None in model's config.json)." in proc.stderr
    )


def test_quantization_flag_mismatch(sim_env):
    proc = serve(sim_env(), "RedHatAI/Qwen3-8B-quantized.w4a16", "--quantization", "awq")
    assert proc.returncode == 1
    assert (
        "Quantization method specified in the model config (compressed-tensors) does not match the quantization "
        "method specified in the `quantization` argument (awq)." in proc.stderr
    )


def test_tensor_parallel_needs_more_gpus(sim_env):
    proc = serve(sim_env(), "Qwen/Qwen3-1.7B", "-tp", "2", "--max-model-len", "4096")
    assert proc.returncode == 1
    assert "AssertionError: please set tensor_parallel_size (2) to less than max local gpu count (1)" in proc.stderr
    assert strip_prefix(last_line(proc.stderr)) == ENGINE_FAILED


def test_head_of_another_model_fails_to_load(sim_env):
    spec = '{"method": "eagle3", "model": "AngelSlim/Qwen3-1.7B_eagle3", "num_speculative_tokens": 3}'
    proc = serve(sim_env(), "Qwen/Qwen3-8B", "--max-model-len", "4096", "--speculative-config", spec)
    assert proc.returncode == 1
    assert "AssertionError: Attempted to load weight (torch.Size([2048, 6144])) into parameter (torch.Size([4096, 12288]))" in proc.stderr


def test_address_in_use(sim_env):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        proc = run_vllm(["serve", "Qwen/Qwen3-1.7B", "--host", "127.0.0.1", "--port", str(port)], sim_env())
    assert proc.returncode == 1
    assert strip_prefix(last_line(proc.stderr)) == "OSError: [Errno 98] Address already in use"


def test_log_prefixes_by_version(sim_env):
    old = serve(sim_env({"version": "0.10.0"}, available_gib=1.0), LLAMA, "--max-model-len", "4096")
    new = serve(sim_env({"version": "0.10.2"}, available_gib=1.0), LLAMA, "--max-model-len", "4096")
    assert old.returncode == new.returncode == 1
    assert "(APIServer pid=" not in old.stdout + old.stderr
    assert last_line(old.stderr) == ENGINE_FAILED
    assert "Process EngineCore_0:" in old.stderr
    assert re.search(
        r"^\(EngineCore_0 pid=\d+\) ERROR \d\d-\d\d \d\d:\d\d:\d\d \[core\.py:\d+\] EngineCore failed to start\.$",
        new.stdout,
        re.M,
    )
    assert re.search(
        r"^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[api_server\.py:\d+\] "
        r"vLLM API server version 0\.10\.2$",
        new.stdout,
        re.M,
    )


def test_speculators_checkpoint_as_model_before_0_10_1(sim_env):
    proc = serve(sim_env({"version": "0.10.0"}), "RedHatAI/Qwen3-8B-speculator.eagle3", "--max-model-len", "4096")
    assert proc.returncode == 1
    assert "Model architectures ['Eagle3Speculator'] are not supported for now." in proc.stderr


def test_max_model_len_auto_fits_the_kv_cache(sim_env, start_server):
    """0.14+: ``--max-model-len auto`` takes the longest context the KV cache can hold."""
    env = sim_env({"version": "0.14.0"}, total_gib=30.0, available_gib=29.0)
    server = start_server([LLAMA, "--max-model-len", "auto", "--gpu-memory-utilization", "0.6"], env)
    fitted = server.json("GET", "/v1/models")[1]["data"][0]["max_model_len"]
    tokens = int(re.search(r"GPU KV cache size: ([\d,]+) tokens", server.log).group(1).replace(",", ""))
    assert fitted == min(tokens, 131072) and fitted < 131072
    assert f"Maximum concurrency for {fitted:,} tokens per request: 1.00x" in server.log
