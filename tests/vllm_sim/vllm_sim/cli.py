# SPDX-License-Identifier: Apache-2.0
"""The ``vllm`` command: ``vllm --version`` and ``vllm serve MODEL [flags]``.

Argument handling follows vLLM's ``FlexibleArgumentParser``: ``--config FILE.yaml`` is expanded in
place (command line > file > defaults), ``--foo_bar`` means ``--foo-bar``, dotted
``--speculative-config.key value`` options are folded into the JSON, and unknown flags are an
argparse error (exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from . import errors, models, specconfig
from . import settings as settings_mod
from .errors import VllmError
from .log import VllmLog
from .versions import Version

DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
JSON_ARGS = (
    "speculative-config",
    "compilation-config",
    "kv-transfer-config",
    "hf-overrides",
    "override-generation-config",
)
QUANT_CHOICES = [
    "aqlm",
    "awq",
    "awq_marlin",
    "bitsandbytes",
    "compressed-tensors",
    "experts_int8",
    "fbgemm_fp8",
    "fp8",
    "gguf",
    "gptq",
    "gptq_marlin",
    "gptq_marlin_24",
    "hqq",
    "marlin",
    "modelopt",
    "modelopt_fp4",
    "mxfp4",
    "torchao",
    "None",
]
KV_DTYPES = ["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]
DTYPES = ["auto", "half", "float16", "bfloat16", "float", "float32"]


class ConfigFileError(Exception):
    pass


# --------------------------------------------------------------------------- human-readable ints


def human_readable_int(value: str) -> int:
    """``32k`` = 32000, ``32K`` = 32768 (vLLM's parser), plain integers as they are."""
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if match:
        number, suffix = match.groups()
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        binary = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        if "." in number:
            raise ValueError(f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to use {number}{suffix.lower()} instead?")
        return int(number) * binary[suffix]
    return int(text)


def max_model_len_type(version):
    def parse_max_model_len(value):
        if version >= (0, 14, 0) and str(value).strip().lower() in ("auto", "-1"):
            return -1
        return human_readable_int(value)

    parse_max_model_len.__name__ = "human_readable_int"
    return parse_max_model_len


def _json_type(version):
    def loads(value):
        return json.loads(value)

    loads.__name__ = "loads" if version < (0, 11, 0) else "_optional_type"
    return loads


# --------------------------------------------------------------------------- parser


def build_parser(version) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm serve",
        usage="vllm serve [model_tag] [options]",
        description="Launch a local OpenAI-compatible API server to serve LLM completions via HTTP.",
        allow_abbrev=False,
    )
    add = parser.add_argument
    add("model_tag", nargs="?", default=None, help="The model tag to serve (optional if specified in config)")
    add(
        "--config",
        default=None,
        help="Read CLI options from a config file. Must be a YAML with the following options: ...",
    )
    # frontend
    add("--host", default=None, help="Host name.")
    add("--port", type=int, default=8000, help="Port number.")
    add("--uvicorn-log-level", default="info", choices=["debug", "info", "warning", "error", "critical", "trace"])
    add("--disable-uvicorn-access-log", action="store_true")
    add("--api-key", default=None, help="If provided, the server will require this key to be presented in the header.")
    add("--served-model-name", nargs="+", default=None)
    add("--chat-template", default=None)
    add("--enable-auto-tool-choice", action="store_true")
    add("--tool-call-parser", default=None)
    add("--disable-log-requests", action="store_true")
    if version >= (0, 10, 2):
        add("--enable-log-requests", action="store_true")
    add("--disable-log-stats", action="store_true")
    add("--disable-fastapi-docs", action="store_true")
    # model
    add("--model", default=None)
    add("--tokenizer", default=None)
    add("--revision", default=None)
    add("--trust-remote-code", action="store_true")
    add("--dtype", default="auto", choices=DTYPES)
    add("--seed", type=int, default=None if version < (0, 11, 0) else 0)
    add("--max-model-len", type=max_model_len_type(version), default=None)
    add("--quantization", "-q", default=None, choices=QUANT_CHOICES)
    add("--enforce-eager", action="store_true")
    add("--generation-config", default="auto")
    add("--hf-overrides", type=_json_type(version), default=None)
    add("--download-dir", default=None)
    add("--load-format", default="auto")
    # cache
    add("--gpu-memory-utilization", type=float, default=0.9)
    add("--kv-cache-dtype", default="auto", choices=KV_DTYPES)
    add("--block-size", type=int, default=None, choices=[1, 8, 16, 32, 64, 128])
    add("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    add("--swap-space", type=float, default=4)
    # parallel
    add("--tensor-parallel-size", "-tp", type=int, default=1)
    add("--pipeline-parallel-size", "-pp", type=int, default=1)
    # scheduler
    add("--max-num-seqs", type=int, default=None)
    add("--max-num-batched-tokens", type=human_readable_int, default=None)
    add("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)
    # speculative decoding
    spec_flags = ["--speculative-config"] + (["-sc"] if version >= (0, 19, 0) else [])
    add(
        *spec_flags,
        type=_json_type(version),
        default=None,
        help="The configurations for speculative decoding. Should be a JSON string.",
    )
    if version >= (0, 22, 0):
        add("--spec-method", default=None)
        add("--spec-model", default=None)
        add("--spec-tokens", type=int, default=None)
    add("--compilation-config", "-O", type=_json_type(version), default=None)
    return parser


# --------------------------------------------------------------------------- argv preprocessing


def _normalise(args):
    """``--max_model_len`` -> ``--max-model-len`` (only the flag name, up to the first ``.``)."""
    out = []
    for arg in args:
        if arg.startswith("--"):
            flag, eq, value = arg.partition("=")
            head, dot, rest = flag.partition(".")
            out.append(head.replace("_", "-") + dot + rest + eq + value)
        else:
            out.append(arg)
    return out


def _fold_dotted(args):
    """``--speculative-config.method eagle3`` -> ``--speculative-config '{"method": "eagle3"}'``."""
    folded = {}
    out = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "." in arg.split("=", 1)[0]:
            key = arg.split("=", 1)[0][2:]
            head, _unused, path = key.partition(".")
            if head in JSON_ARGS:
                if "=" in arg:
                    value = arg.split("=", 1)[1]
                    i += 1
                elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                    value = args[i + 1]
                    i += 2
                else:
                    value = "true"
                    i += 1
                try:
                    parsed = json.loads(value)
                except ValueError:
                    parsed = value
                node = folded.setdefault(head, {})
                parts = path.split(".")
                for part in parts[:-1]:
                    node = node.setdefault(part.replace("-", "_") if head != "speculative-config" else part, {})
                node[parts[-1]] = parsed
                continue
        out.append(arg)
        i += 1
    for head, dotted in folded.items():
        flag = f"--{head}"
        value = dotted
        if flag in out:
            idx = out.index(flag)
            try:
                base = json.loads(out[idx + 1])
            except (IndexError, ValueError):
                base = {}
            if isinstance(base, dict):
                value = {**base, **dotted}
            del out[idx : idx + 2]
        out += [flag, json.dumps(value)]
    return out


def _config_args(path, parser):
    extension = path.split(".")[-1]
    if extension not in ("yaml", "yml"):
        raise ConfigFileError(f"Config file must be of a yaml/yml type. {extension} supplied")
    import yaml

    with open(path, encoding="utf-8") as handle:
        config = yaml.safe_load(handle) or {}
    if not isinstance(config, dict):
        raise ConfigFileError(f"Config file {path} must contain a mapping of options")
    flags = set()
    for action in parser._actions:
        flags.update(action.option_strings)
    out = []
    for raw_key, value in config.items():
        key = str(raw_key)
        if isinstance(value, bool):
            if value:
                out.append("--" + key)
            elif "--no-" + key in flags:
                out.append("--no-" + key)
        elif isinstance(value, list):
            if value:
                out.append("--" + key)
                out.extend(str(item) for item in value)
        elif isinstance(value, dict):
            out += ["--" + key, json.dumps(value)]
        elif value is None:
            continue
        else:
            out += ["--" + key, str(value)]
    return out


def expand_config(args, parser):
    """Insert a ``--config`` file's options right after the model (vLLM's ``FlexibleArgumentParser``: command line > file > defaults)."""
    if "--config" not in args:
        return args
    if args.count("--config") > 1:
        raise ConfigFileError("More than one config file specified!")
    index = args.index("--config")
    if index == len(args) - 1:
        raise ConfigFileError("No config file specified! Please check your command-line arguments.")
    path = args[index + 1]
    config_args = _config_args(path, parser)
    model_in_cli = len(args) > 0 and not args[0].startswith("-")
    model_in_config = "--model" in config_args
    if not model_in_cli and not model_in_config:
        raise ConfigFileError("No model specified! Please specify model either as a positional argument or in a config file.")
    if model_in_cli:
        return [args[0], *config_args, *args[1:index], *args[index + 2 :]]
    return config_args + args[:index] + args[index + 2 :]


def parse_serve_args(argv, version):
    """Parse ``vllm serve`` arguments (after ``serve``); exits 2 on argparse errors."""
    parser = build_parser(version)
    args = _normalise(list(argv))
    args = expand_config(args, parser)
    args = _normalise(args)
    args = _fold_dotted(args)
    return parser.parse_args(args)


# --------------------------------------------------------------------------- top level


def _top_parser():
    parser = argparse.ArgumentParser(prog="vllm", description="vLLM CLI", allow_abbrev=False)
    parser.add_argument("-v", "--version", action="store_true", help="show the vLLM version and exit")
    parser.add_argument("subparser", nargs="?", choices=["chat", "complete", "serve", "bench", "collect-env", "run-batch"])
    return parser


def fail(vlog, err: VllmError, proc="api") -> int:
    for level, source, text in err.log_before:
        vlog.log(level, source, text, proc)
    vlog.traceback(err.frames, err.exc_type, err.message, proc)
    return 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        settings = settings_mod.load()
    except settings_mod.SettingsError as exc:
        sys.stderr.write(f"vllm-sim: {exc}\n")
        return 1
    version = Version(settings["version"])
    if not argv or argv[0] in ("-h", "--help"):
        _top_parser().print_help()
        return 0
    if argv[0] in ("-v", "--version", "version"):
        print(version)
        return 0
    if argv[0] != "serve":
        if argv[0] in ("chat", "complete", "bench", "collect-env", "run-batch"):
            sys.stderr.write(f"vllm-sim: 'vllm {argv[0]}' is not simulated\n")
            return 2
        _top_parser().parse_args(argv[:1])
        return 2
    vlog = VllmLog(version)
    try:
        args = parse_serve_args(argv[1:], version)
    except ConfigFileError as exc:
        return fail(vlog, errors.value_error(str(exc), "api", ("cli",)))
    except OSError as exc:
        vlog.error("argparse_utils.py:2135", f"Unable to read the config file at {exc.filename}. Check path correctness")
        return fail(
            vlog,
            VllmError(type(exc).__name__, f"[Errno {exc.errno}] {exc.strerror}: '{exc.filename}'", "api", ("cli",)),
        )
    from . import server

    try:
        cfg = prepare(args, version, settings, vlog, os.environ)
    except VllmError as err:
        return fail(vlog, err)
    return server.serve(cfg)


class ServeConfig:
    """Everything the server needs, validated."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


def _non_default(args, version) -> dict:
    parser = build_parser(version)
    out = {}
    for action in parser._actions:
        if action.dest in ("help", "config"):
            continue
        value = getattr(args, action.dest, None)
        if value != action.default:
            out[action.dest] = value
    if args.model_tag is not None:
        out["model"] = args.model_tag
    return out


def prepare(args, version, settings, vlog, env) -> ServeConfig:
    """Validate the configuration as vLLM's API server does before the engine starts."""
    model = args.model_tag or args.model or DEFAULT_MODEL
    args.model = model
    nd = _non_default(args, version)
    if version >= (0, 10, 1):
        vlog.info("api_server.py:1805", f"vLLM API server version {version}")
        vlog.info("utils.py:326", f"non-default args: {nd}")
    else:
        vlog.info("api_server.py:1774", f"vLLM API server version {version}")
        vlog.info("api_server.py:1775", f"args: {vars(args)}")
    if args.disable_log_requests and version >= (0, 11, 0):
        vlog.warning(
            "arg_utils.py:1905",
            "`--disable-log-requests` is deprecated and has been replaced with `--enable-log-requests`. Request logging is now disabled by default.",
        )
    download_dir = args.download_dir

    def resolve(name, revision=None):
        return models.load(name, env, download_dir, revision)

    target = resolve(model, args.revision)
    spec_raw = args.speculative_config
    shortcuts = {}
    if version >= (0, 22, 0):
        shortcuts = {
            "method": ("--spec-method", args.spec_method),
            "model": ("--spec-model", args.spec_model),
            "num_speculative_tokens": ("--spec-tokens", args.spec_tokens),
        }
    served_root = model
    if target.speculators:
        if version < (0, 10, 1):
            archs = target.architectures
            raise errors.pydantic_value_error(
                "ModelConfig",
                f"Model architectures {archs} are not supported for now. Supported architectures: "
                "dict_keys(['LlamaForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM', ...])",
                {"model": model},
                version,
                frames=("cli", "model"),
            )
        verifier = (target.speculators.get("verifier") or {}).get("name_or_path")
        if version >= (0, 33, 0) and (verifier is None or models.looks_local(verifier) or os.path.isdir(verifier)):
            raise errors.value_error(f"Speculators verifier must name a remote model repository, got {verifier!r}.", "api", ("cli",))
        proposals = target.speculators.get("proposal_methods") or [{}]
        merged = dict(spec_raw or {})
        merged.update(
            {
                "method": target.model_type,
                "model": model,
                "num_speculative_tokens": merged.get("num_speculative_tokens", proposals[0].get("speculative_tokens")),
            }
        )
        spec_raw = merged
        vlog.info("config.py:590", f"Speculators model detected: serving verifier {verifier}")
        target = resolve(verifier)
    # --quantization vs the checkpoint's own method
    quant_override = None
    if args.quantization and args.quantization != "None":
        ckpt = (target.quantization_config or {}).get("quant_method") if target.quantization_config else None
        if ckpt and ckpt != args.quantization and not (ckpt == "modelopt" and args.quantization == "modelopt_fp4"):
            raise errors.pydantic_value_error(
                "ModelConfig",
                f"Quantization method specified in the model config ({ckpt}) does not match the quantization "
                f"method specified in the `quantization` argument ({args.quantization}).",
                {"model": model, "quantization": args.quantization},
                version,
                frames=("cli", "model"),
            )
        if not ckpt:
            quant_override = "fp8" if args.quantization in ("fp8", "fbgemm_fp8") else None
    derived = target.max_position_embeddings
    if args.max_model_len is not None and args.max_model_len != -1 and args.max_model_len > derived:
        if env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1":
            raise errors.pydantic_value_error(
                "ModelConfig",
                f"User-specified max_model_len ({args.max_model_len}) is greater than the derived max_model_len "
                f"(max_position_embeddings={float(derived)} or model_max_length=None in model's config.json). "
                "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. "
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative "
                "position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model "
                "uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA "
                "array out-of-bounds error.",
                {"model": model, "max_model_len": args.max_model_len},
                version,
                frames=("cli", "model"),
            )
    if args.max_model_len is not None and args.max_model_len < 1 and args.max_model_len != -1:
        raise errors.value_error(f"max_model_len must be positive, got {args.max_model_len}", "api", ("cli", "model"))
    if not 0 < args.gpu_memory_utilization <= 1:
        raise errors.pydantic_value_error(
            "CacheConfig",
            f"GPU memory utilization must be less than 1.0. Got {args.gpu_memory_utilization}.",
            {"gpu_memory_utilization": args.gpu_memory_utilization},
            version,
            frames=("cli",),
        )
    archs = target.architectures or ["?"]
    vlog.info("model.py:547", f"Resolved architecture: {archs[0]}")
    if args.max_model_len == -1:
        max_model_len = None  # auto-fit after profiling
    else:
        max_model_len = args.max_model_len or derived
        vlog.info("model.py:1510", f"Using max model len {max_model_len}")
    if target.quant is not None or quant_override:
        vlog.info("model.py:1093", f"Using {quant_override or target.quant} quantization.")

    plan = specconfig.build(spec_raw, version, target, args.tensor_parallel_size, resolve, shortcuts)
    if plan is not None and plan.model_info is not None and plan.method != "draft_model":
        if plan.model_info.max_position_embeddings < (max_model_len or derived):
            if version >= (0, 27, 0):
                vlog.info(
                    "speculative.py:512",
                    f"Raising draft model max_position_embeddings from {plan.model_info.max_position_embeddings} to {max_model_len or derived}",
                )
    max_num_seqs = args.max_num_seqs or 256
    max_batched = args.max_num_batched_tokens or 2048
    vlog.info("scheduler.py:205", f"Chunked prefill is enabled with max_num_batched_tokens={max_batched}.")
    served = args.served_model_name or [model]
    api_key = args.api_key if args.api_key is not None else env.get("VLLM_API_KEY")
    log_requests = (not args.disable_log_requests) if version < (0, 11, 0) else bool(getattr(args, "enable_log_requests", False))
    return ServeConfig(
        args=args,
        version=version,
        settings=settings,
        vlog=vlog,
        model=model,
        root=served_root,
        target=target,
        spec=plan,
        served_names=served,
        api_key=api_key,
        max_model_len=max_model_len,
        derived_max=derived,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_batched,
        quant_override=quant_override,
        kv_dtype_bytes=1.0 if args.kv_cache_dtype.startswith("fp8") else 2.0,
        log_requests=log_requests,
        log_stats=not args.disable_log_stats,
        hf_token_present=bool(env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN")),
        hf_home=env.get("HF_HOME"),
        hf_offline=env.get("HF_HUB_OFFLINE"),
        env=env,
    )


if __name__ == "__main__":
    sys.exit(main())
