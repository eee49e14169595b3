# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""The command line of the vLLM unit: native, docker or podman.

Private controller-side module. Deterministic: the same input gives the same output, byte for byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath
import re

from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._catalog import (
    MODEL_ID_EXPECTATION,
    valid_model_id,
)
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import (
    _bad,
    _check_mapping,
    _serve_value,
    extra_mounts_problem,
)
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.planner import (
    THOR_FAMILIES,
)

RUNTIMES = ("native", "docker", "podman")
IMAGE_FLAVORS = ("upstream", "jetson")
HF_CACHE_IN_CONTAINER = "/root/.cache/huggingface"
_SAFE_PATH_RE = re.compile(r"^/[A-Za-z0-9._/-]{1,1023}$")
_BIN_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+-]{0,127}$")
_CONTAINER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_IMAGE_RE = re.compile(
    r"^[a-z0-9][a-z0-9._-]{0,127}(?::[0-9]{1,5})?(?:/[a-z0-9][a-z0-9._-]{0,127}){0,8}"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
_OCI_RUNTIME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _safe_path(value):
    return isinstance(value, str) and _SAFE_PATH_RE.fullmatch(value) is not None and ".." not in value


def _argv_value(serve, key, check, *, expected, host, default):
    value = serve.get(key)
    if value is None:
        return default
    if not check(value):
        raise _bad(host, "serve." + key, value, expected)
    return value


def serve_argv(serve, config_path, runtime, image=None, image_flavor="upstream", *, plan=None, host=""):
    """argv of the vLLM service (for ``ExecStart=`` through ``systemd_quote``).

    ``runtime`` ``native``: ``[vllm_bin, "serve", "--config", config_path]``. ``docker`` or
    ``podman``: the container engine's ``run`` line; the config directory is mounted read-only at
    the same path, the Hugging Face cache at ``/root/.cache/huggingface``, local model paths
    read-only at their own paths, and secrets come from ``serve.env_file`` (never from argv).
    ``image_flavor`` ``upstream`` (``vllm/vllm-openai``, ``ENTRYPOINT ["vllm","serve"]``) gets
    only the arguments after ``vllm serve``; ``jetson`` (entrypoint not known) gets
    ``--entrypoint vllm`` and ``serve ...`` (their entrypoint is a shell, not vLLM).

    Optional ``serve`` keys: ``vllm_bin`` (default ``vllm``), ``engine_bin`` (default the runtime
    name), ``container_name`` (``vllm``), ``oci_runtime`` (``nvidia``; empty string to omit
    ``--runtime``), ``hf_cache_dir`` (``/root/.cache/huggingface``), ``env_file``, ``family`` (adds
    ``--ipc host`` on Thor, as the published Thor command does), ``model``, ``extra_mounts`` (further
    ``SOURCE:DESTINATION[:ro]`` bind mounts, after the collection's own; none for ``native``).
    """
    _check_mapping(serve, "serve", host, "a mapping of serve settings")
    if not (_safe_path(config_path) and config_path.endswith((".yaml", ".yml"))):
        raise _bad(
            host,
            "config_path",
            config_path,
            "an absolute path of [A-Za-z0-9._/-] ending in .yaml or .yml (vLLM requires the suffix)",
        )
    if runtime not in RUNTIMES:
        raise _bad(host, "runtime", runtime, "one of " + ", ".join(RUNTIMES))

    def bin_ok(value):
        return _safe_path(value) or (isinstance(value, str) and _BIN_NAME_RE.fullmatch(value) is not None)

    bin_expected = "an absolute path of [A-Za-z0-9._/-] or a command name"
    mounts = serve.get("extra_mounts") or []
    if runtime == "native" and mounts:
        raise _bad(host, "serve.extra_mounts", mounts, "no bind mounts for the native runtime (they are for docker and podman)")
    if runtime == "native":
        vllm_bin = _argv_value(serve, "vllm_bin", bin_ok, expected=bin_expected, host=host, default="vllm")
        return [vllm_bin, "serve", "--config", config_path]

    if image_flavor not in IMAGE_FLAVORS:
        raise _bad(host, "image_flavor", image_flavor, "one of " + ", ".join(IMAGE_FLAVORS))
    if not (isinstance(image, str) and _IMAGE_RE.fullmatch(image) is not None and ".." not in image):
        raise _bad(host, "image", image, "a container image reference such as vllm/vllm-openai:v0.20.2[@sha256:...]")
    engine = _argv_value(serve, "engine_bin", bin_ok, expected=bin_expected, host=host, default=runtime)
    name = _argv_value(
        serve,
        "container_name",
        lambda v: isinstance(v, str) and _CONTAINER_NAME_RE.fullmatch(v) is not None,
        expected="a container name of [A-Za-z0-9_.-]",
        host=host,
        default="vllm",
    )
    oci = serve.get("oci_runtime", "nvidia")
    if oci is None:
        oci = ""
    if not (isinstance(oci, str) and (oci == "" or _OCI_RUNTIME_RE.fullmatch(oci))):
        raise _bad(host, "serve.oci_runtime", oci, "an OCI runtime name such as nvidia, or '' to omit --runtime")
    hf_cache = _argv_value(
        serve,
        "hf_cache_dir",
        _safe_path,
        expected="an absolute path of [A-Za-z0-9._/-]",
        host=host,
        default=HF_CACHE_IN_CONTAINER,
    )
    env_file = _argv_value(serve, "env_file", _safe_path, expected="an absolute path of [A-Za-z0-9._/-]", host=host, default=None)
    family = serve.get("family")

    argv = [engine, "run", "--rm", "--name", name]
    if oci:
        argv += ["--runtime", oci]
    argv += ["--network", "host"]
    if family in THOR_FAMILIES:
        argv += ["--ipc", "host"]
    config_dir = posixpath.dirname(config_path)
    argv += ["-v", "{0}:{0}:ro".format(config_dir)]
    argv += ["-v", "{}:{}".format(hf_cache, HF_CACHE_IN_CONTAINER)]
    local = []
    model = _serve_value(serve, "model", host)
    if isinstance(model, str) and model.startswith("/"):
        local.append(model)
    if isinstance(plan, dict) and plan.get("decision") == "enabled":
        spec_model = plan.get("model")
        if not valid_model_id(spec_model):
            raise _bad(host, "plan.model", spec_model, MODEL_ID_EXPECTATION)
        if spec_model.startswith("/"):
            local.append(spec_model)
    for path in sorted(set(local)):
        argv += ["-v", "{0}:{0}:ro".format(path)]
    # further bind mounts of the server (vllm_server_extra_mounts), in their order, after the collection's own
    problem = extra_mounts_problem(mounts, reserved=[config_dir, HF_CACHE_IN_CONTAINER, *sorted(set(local))])
    if problem:
        raise _bad(host, "serve.extra_mounts", mounts, problem)
    for mount in mounts:
        argv += ["-v", mount]
    if env_file:
        argv += ["--env-file", env_file]
    if image_flavor == "jetson":
        argv += ["--entrypoint", "vllm", image, "serve"]
    else:
        argv += [image]
    argv += ["--config", config_path]
    return argv
