# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""What to set so that the collection serves what a vLLM server it did not start serves now.

Device side (standard library only, Python 3.8+): ``handover(argv, container)`` reads the command line of a
``vllm serve`` (and, for a container, how the engine runs it) and returns the ``vllm_server_*`` settings that
reproduce it, the secret settings to set from a vault (never a secret's value), and what the collection's unit
would not carry over. First contact (``vllm_server_discover``) says it when it leaves such a server alone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

VLLM_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main")
HF_CACHE_IN_CONTAINER = "/root/.cache/huggingface"
# vllm serve's short options, by their long names
SHORT_OPTIONS = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size", "-q": "quantization", "-O": "compilation-config", "-sc": "speculative-config"}
# options the collection sets from a setting of its own: (setting, type)
SETTINGS = {
    "host": ("vllm_server_host", str),
    "port": ("vllm_server_port", int),
    "served-model-name": ("vllm_server_served_model_name", str),
    "gpu-memory-utilization": ("vllm_server_gpu_memory_utilization", float),
    "max-model-len": ("vllm_server_max_model_len", int),
    "max-num-seqs": ("vllm_server_max_num_seqs", int),
    "tensor-parallel-size": ("vllm_server_tensor_parallel_size", int),
}
SECRET_OPTIONS = {"api-key": "vllm_server_api_key", "hf-token": "vllm_server_hf_token"}
SECRET_ENV = {"HF_TOKEN": "vllm_server_hf_token", "HUGGING_FACE_HUB_TOKEN": "vllm_server_hf_token", "VLLM_API_KEY": "vllm_server_api_key"}
# environment an image or a container engine sets itself: not the operator's
_IMAGE_ENV = re.compile(
    r"^(PATH|HOME|HOSTNAME|TERM|LANG|LC_.*|TZ|LD_LIBRARY_PATH|PYTHON.*|PIP_.*|UV_.*|DEBIAN_FRONTEND|NVIDIA_.*|CUDA_.*|NV_.*|VLLM_USAGE_SOURCE)$"
)
# options that take no value (vLLM's store-true and boolean options; every --enable-*, --disable-* and --no-* too)
FLAGS = frozenset(("trust-remote-code", "enforce-eager", "enable-auto-tool-choice", "disable-log-requests", "disable-log-stats", "skip-tokenizer-init"))
_INT_RE = re.compile(r"^-?[0-9]+$")
_FLOAT_RE = re.compile(r"^-?[0-9]*\.[0-9]+$")


def serve_args(argv):
    """The arguments after ``vllm serve`` (or after vLLM's API server module), or None when ``argv`` runs neither."""
    for i, arg in enumerate(argv):
        if os.path.basename(arg) == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return list(argv[i + 2 :])
        if arg in VLLM_MODULES:
            rest = list(argv[i + 1 :])
            return rest[1:] if rest[:1] == ["serve"] else rest
    return None


def _value(text):
    if _INT_RE.match(text):
        return int(text)
    if _FLOAT_RE.match(text):
        return float(text)
    return text


def parse(args):
    """``(model, [(option, value), ...])`` of ``vllm serve`` arguments: long names without dashes (underscores as
    dashes), ``True`` for a flag without a value."""
    model, options, i = None, [], 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") or arg in SHORT_OPTIONS:
            name, eq, value = arg.partition("=")
            name = SHORT_OPTIONS.get(name) or name[2:].replace("_", "-")
            flag = name in FLAGS or name.startswith(("enable-", "disable-", "no-"))
            if not eq:
                if not flag and i + 1 < len(args) and not args[i + 1].startswith("--") and args[i + 1] not in SHORT_OPTIONS:
                    value = args[i + 1]
                    i += 1
                else:
                    value = True
            options.append((name, value))
        elif model is None:
            model = arg
        i += 1
    return model, options


def handover(argv, container=None):
    """``{settings, secrets, not_carried}``: the settings that serve what ``argv`` serves, the secret settings to set (from
    a vault), and what the collection's unit would not carry over. ``container``: ``{engine, image, name, entrypoint,
    runtime, network, mounts: [{source, destination, rw}], env_names}`` when the server runs in one."""
    settings, secrets, not_carried = {}, [], []
    out = {"settings": settings, "secrets": secrets, "not_carried": not_carried}
    args = serve_args(argv)
    if args is None:
        not_carried.append("the command line is not a vllm serve")
        return out
    model, options = parse(args)
    extra_args, extra_mounts = {}, []
    if container:
        settings["vllm_server_runtime"] = container["engine"]
        settings["vllm_server_image"] = container["image"]
        settings["vllm_server_image_flavor"] = "upstream" if list(container.get("entrypoint") or []) == ["vllm", "serve"] else "jetson"
        settings["vllm_server_container_name"] = container["name"]
        settings["vllm_server_oci_runtime"] = "" if container.get("runtime") in (None, "", "runc", "crun") else container["runtime"]
        if container.get("network") not in ("host",):
            not_carried.append("network mode %s (the collection's container uses the host's network)" % (container.get("network") or "default"))
        for mount in container.get("mounts") or []:
            if mount["destination"] == HF_CACHE_IN_CONTAINER:
                settings["vllm_server_hf_cache_dir"] = mount["source"]
            else:
                extra_mounts.append("%s:%s%s" % (mount["source"], mount["destination"], "" if mount.get("rw", True) else ":ro"))
        for name in container.get("env_names") or []:
            if name in SECRET_ENV:
                secrets.append("%s (its %s)" % (SECRET_ENV[name], name))
            elif name == "HF_HUB_OFFLINE":
                continue  # vllm_server_hf_offline (true by default) sets it
            elif not _IMAGE_ENV.match(name):
                not_carried.append("the environment variable %s" % name)
    else:
        vllm = [a for a in argv if os.path.basename(a) == "vllm"]
        settings["vllm_server_runtime"] = "native"
        if vllm and vllm[0].startswith("/"):
            settings["vllm_server_vllm_bin"] = vllm[0]
    for name, value in options:
        if name == "model":
            model = value if isinstance(value, str) else model
        elif name in SETTINGS:
            setting, kind = SETTINGS[name]
            try:
                settings[setting] = kind(value) if not isinstance(value, bool) else None
            except ValueError:
                settings[setting] = None
            if settings[setting] is None:
                del settings[setting]
                not_carried.append("--%s %s (not a value the collection's setting %s takes)" % (name, value, setting))
        elif name in SECRET_OPTIONS:
            secrets.append("%s (its --%s)" % (SECRET_OPTIONS[name], name))
        elif name == "config":
            not_carried.append("--config %s (set its options here)" % value)
        elif name.startswith("spec") or "speculative" in name or name.startswith("ngram"):
            not_carried.append("--%s (speculation: the collection plans its own)" % name)
        else:
            extra_args[name] = value if isinstance(value, bool) else _value(value)
    if model:
        settings["vllm_server_model"] = model
    else:
        not_carried.append("no model on the command line")
    if extra_args:
        settings["vllm_server_extra_args"] = extra_args
    if extra_mounts:
        settings["vllm_server_extra_mounts"] = extra_mounts
    secrets[:] = sorted(set(secrets))
    return out
