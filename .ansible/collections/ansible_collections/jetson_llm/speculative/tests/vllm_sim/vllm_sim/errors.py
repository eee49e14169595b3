# SPDX-License-Identifier: Apache-2.0
"""Exceptions as vLLM raises them, and their rendering as tracebacks and pydantic errors."""

from __future__ import annotations

import sys

VLLM_PKG = "/usr/local/lib/python3.12/dist-packages/vllm"

# Where vLLM raises each class of error; used to print tracebacks whose last frames name the
# real module (the message is what clients parse, the frames only help a reader).
FRAMES = {
    "cli": [
        ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
        (f"{VLLM_PKG}/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
        (f"{VLLM_PKG}/entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
        (
            f"{VLLM_PKG}/entrypoints/openai/api_server.py",
            1884,
            "run_server",
            "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
        ),
        (
            f"{VLLM_PKG}/entrypoints/openai/api_server.py",
            1902,
            "run_server_worker",
            "async with build_async_engine_client(",
        ),
        (
            f"{VLLM_PKG}/entrypoints/openai/api_server.py",
            180,
            "build_async_engine_client_from_engine_args",
            "vllm_config = engine_args.create_engine_config(usage_context=usage_context)",
        ),
    ],
    "speculative": [
        (
            f"{VLLM_PKG}/engine/arg_utils.py",
            1313,
            "create_engine_config",
            "speculative_config = self.create_speculative_config(",
        ),
        (
            f"{VLLM_PKG}/engine/arg_utils.py",
            1125,
            "create_speculative_config",
            "return SpeculativeConfig(**self.speculative_config)",
        ),
    ],
    "model": [
        (
            f"{VLLM_PKG}/entrypoints/openai/api_server.py",
            180,
            "build_async_engine_client_from_engine_args",
            "vllm_config = engine_args.create_engine_config(usage_context=usage_context)",
        ),
        (f"{VLLM_PKG}/engine/arg_utils.py", 1194, "create_engine_config", "model_config = self.create_model_config()"),
        (f"{VLLM_PKG}/engine/arg_utils.py", 1051, "create_model_config", "return ModelConfig("),
    ],
    "hf": [
        (
            f"{VLLM_PKG}/entrypoints/openai/api_server.py",
            180,
            "build_async_engine_client_from_engine_args",
            "vllm_config = engine_args.create_engine_config(usage_context=usage_context)",
        ),
        (f"{VLLM_PKG}/engine/arg_utils.py", 1194, "create_engine_config", "model_config = self.create_model_config()"),
        (
            f"{VLLM_PKG}/config/model.py",
            520,
            "__post_init__",
            "hf_config = get_config(self.hf_config_path or self.model,",
        ),
        (
            f"{VLLM_PKG}/transformers_utils/config.py",
            470,
            "get_config",
            "config_dict, _ = PretrainedConfig.get_config_dict(",
        ),
    ],
    "engine_core": [
        (f"{VLLM_PKG}/v1/engine/core.py", 770, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
        (f"{VLLM_PKG}/v1/engine/core.py", 540, "__init__", "super().__init__("),
    ],
    "free_memory": [
        (f"{VLLM_PKG}/v1/engine/core.py", 83, "__init__", "self.model_executor = executor_class(vllm_config)"),
        (f"{VLLM_PKG}/v1/executor/abstract.py", 54, "__init__", "self._init_executor()"),
        (f"{VLLM_PKG}/v1/executor/uniproc_executor.py", 55, "_init_executor", 'self.collective_rpc("init_device")'),
        (f"{VLLM_PKG}/v1/worker/gpu_worker.py", 210, "init_device", "raise ValueError("),
    ],
    "load_model": [
        (f"{VLLM_PKG}/v1/engine/core.py", 83, "__init__", "self.model_executor = executor_class(vllm_config)"),
        (f"{VLLM_PKG}/v1/executor/abstract.py", 54, "__init__", "self._init_executor()"),
        (f"{VLLM_PKG}/v1/executor/uniproc_executor.py", 56, "_init_executor", 'self.collective_rpc("load_model")'),
        (
            f"{VLLM_PKG}/v1/worker/gpu_worker.py",
            245,
            "load_model",
            "self.model_runner.load_model(eep_scale_up=eep_scale_up)",
        ),
        (f"{VLLM_PKG}/v1/worker/gpu_model_runner.py", 2890, "load_model", "self.model = model_loader.load_model("),
        (
            f"{VLLM_PKG}/model_executor/model_loader/base_loader.py",
            49,
            "load_model",
            "model = initialize_model(vllm_config=vllm_config,",
        ),
    ],
    "kv_cache": [
        (f"{VLLM_PKG}/v1/engine/core.py", 92, "__init__", "self._initialize_kv_caches(vllm_config)"),
        (
            f"{VLLM_PKG}/v1/engine/core.py",
            199,
            "_initialize_kv_caches",
            "kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,",
        ),
        (
            f"{VLLM_PKG}/v1/core/kv_cache_utils.py",
            1157,
            "get_kv_cache_configs",
            "check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,",
        ),
    ],
    "executor": [
        (f"{VLLM_PKG}/v1/engine/core.py", 83, "__init__", "self.model_executor = executor_class(vllm_config)"),
        (f"{VLLM_PKG}/v1/executor/abstract.py", 54, "__init__", "self._init_executor()"),
    ],
    "engine_start_failed": [
        (
            f"{VLLM_PKG}/entrypoints/openai/api_server.py",
            205,
            "build_async_engine_client_from_engine_args",
            "async_llm = AsyncLLM.from_vllm_config(",
        ),
        (f"{VLLM_PKG}/v1/engine/core_client.py", 95, "make_async_mp_client", "return AsyncMPClient(*client_args)"),
        (
            f"{VLLM_PKG}/v1/engine/core_client.py",
            466,
            "__init__",
            "with launch_core_engines(vllm_config, executor_class,",
        ),
        (f"{VLLM_PKG}/v1/engine/utils.py", 880, "launch_core_engines", "wait_for_engine_startup("),
        (f"{VLLM_PKG}/v1/engine/utils.py", 937, "wait_for_engine_startup", "raise RuntimeError("),
    ],
}


class VllmError(Exception):
    """An error vLLM would raise.

    ``exc_type`` is the printed class name (``ValueError``, ``NotImplementedError``,
    ``pydantic_core._pydantic_core.ValidationError``, ``torch.OutOfMemoryError``, ...),
    ``message`` the text after ``exc_type: ``, ``stage`` either ``api`` (raised while the API
    server builds the engine configuration) or ``engine`` (raised inside the engine core while
    it initialises, followed by "Engine core initialization failed"). ``frames`` names the keys of
    FRAMES to print above the message. ``log_before`` are (level, source, text) log lines vLLM
    prints before the traceback.
    """

    def __init__(self, exc_type, message, stage="api", frames=(), log_before=()):
        super().__init__(message)
        self.exc_type = exc_type
        self.message = message
        self.stage = stage
        self.frames = tuple(frames)
        self.log_before = tuple(log_before)

    def __str__(self) -> str:
        return f"{self.exc_type}: {self.message}"


def value_error(message, stage="api", frames=()):
    return VllmError("ValueError", message, stage, frames)


def not_implemented(message, stage="api", frames=()):
    return VllmError("NotImplementedError", message, stage, frames)


# --------------------------------------------------------------------------- pydantic


def pydantic_repr(value) -> str:
    """``repr`` as pydantic-core prints ``input_value`` (long values cut in the middle)."""
    text = value if isinstance(value, _Raw) else repr(value)
    text = str(text)
    if len(text) > 50:
        text = text[:25] + "..." + text[-24:]
    return text


class _Raw(str):
    """A string printed verbatim (not repr'd) as an input value."""


def args_kwargs(kwargs: dict) -> _Raw:
    return _Raw(f"ArgsKwargs((), {kwargs!r})")


def input_type(value) -> str:
    if isinstance(value, _Raw):
        return "ArgsKwargs"
    return type(value).__name__


class PydanticErrorItem:
    def __init__(self, loc, msg, err_type, value):
        self.loc = loc
        self.msg = msg
        self.err_type = err_type
        self.value = value


def pydantic_message(title: str, items, pyd_version: str) -> str:
    """The ``str()`` of a pydantic ``ValidationError`` (first line up to the last URL line)."""
    count = len(items)
    plural = "error" if count == 1 else "errors"
    lines = [f"{count} validation {plural} for {title}"]
    for item in items:
        if item.loc:
            lines.append(item.loc)
        lines.append(f"  {item.msg} [type={item.err_type}, input_value={pydantic_repr(item.value)}, input_type={input_type(item.value)}]")
        lines.append(f"    For further information visit https://errors.pydantic.dev/{pyd_version}/v/{item.err_type}")
    return "\n".join(lines)


def validation_error(title, items, version, frames=("speculative",), stage="api") -> VllmError:
    return VllmError(
        "pydantic_core._pydantic_core.ValidationError",
        pydantic_message(title, items, version.pydantic_version),
        stage,
        frames,
    )


def pydantic_value_error(title, message, kwargs, version, frames=("speculative",)) -> VllmError:
    item = PydanticErrorItem("", f"Value error, {message}", "value_error", args_kwargs(kwargs))
    return validation_error(title, [item], version, frames)


def literal_message(choices) -> str:
    quoted = [repr(c) for c in choices]
    if len(quoted) == 1:
        return f"Input should be {quoted[0]}"
    return "Input should be " + ", ".join(quoted[:-1]) + " or " + quoted[-1]


# --------------------------------------------------------------------------- tracebacks


def traceback_lines(frame_keys, exc_type, message) -> list:
    lines = ["Traceback (most recent call last):"]
    for key in frame_keys:
        for path, lineno, func, code in FRAMES.get(key, ()):
            lines.append(f'  File "{path}", line {lineno}, in {func}')
            lines.append(f"    {code}")
    text = f"{exc_type}: {message}" if message else exc_type
    lines.extend(text.split("\n"))
    return lines


def python_version_tag() -> str:
    return f"python{sys.version_info[0]}.{sys.version_info[1]}"
