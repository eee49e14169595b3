# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""Limits and value checks of the planner and the renderer, and the per-host override validation.

Private controller-side module. Deterministic: the same input gives the same output, byte for byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._catalog import (
    MODEL_ID_EXPECTATION,
    valid_model_id,
)


class SpecdecError(ValueError):
    """Invalid input to the planner or the renderer; the message names host, variable, value and
    what is allowed."""


METHODS = ("eagle3", "draft_model")
SPEC_TOKENS_MIN = 1
SPEC_TOKENS_MAX = 15
UTIL_MIN = 0.05
UTIL_MAX = 0.95

# ---------------------------------------------------------------- value checks


def _where(host):
    return "host {}: ".format(host) if host else ""


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return (_is_int(value) or isinstance(value, float)) and not (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def _bad(host, name, value, expected, why=""):
    message = "{}{}={!r} is not allowed; expected {}".format(_where(host), name, value, expected)
    if why:
        message += " ({})".format(why)
    return SpecdecError(message)


def _check_bool(value):
    return isinstance(value, bool)


def _check_int_range(low, high):
    def check(value):
        return _is_int(value) and low <= value and (high is None or value <= high)

    return check


def _check_float_range(low, high):
    def check(value):
        return _is_number(value) and low <= value <= high

    return check


_OVERRIDES = (
    ("enabled", _check_bool, "a boolean (true or false, not a string)"),
    ("force", _check_bool, "a boolean (true or false, not a string)"),
    ("method", lambda v: isinstance(v, str) and v in METHODS, "one of " + ", ".join(METHODS)),
    ("model", valid_model_id, MODEL_ID_EXPECTATION),
    (
        "num_speculative_tokens",
        _check_int_range(SPEC_TOKENS_MIN, SPEC_TOKENS_MAX),
        "an integer from {} to {}".format(SPEC_TOKENS_MIN, SPEC_TOKENS_MAX),
    ),
    (
        "draft_tensor_parallel_size",
        _check_int_range(1, 64),
        "an integer, 1 or the target tensor_parallel_size",
    ),
    (
        "gpu_memory_utilization",
        _check_float_range(UTIL_MIN, UTIL_MAX),
        "a number from {} to {}".format(UTIL_MIN, UTIL_MAX),
    ),
    ("min_gain", _check_float_range(0.0, 1.0), "a number from 0 to 1 (a fraction, 0.1 = 10 %)"),
    ("max_concurrency", _check_int_range(1, None), "an integer >= 1"),
)
OVERRIDE_KEYS = tuple(key for key, _check, _expected in _OVERRIDES)
_FLOAT_OVERRIDES = ("gpu_memory_utilization", "min_gain")


def validate_overrides(overrides, host="", var_prefix="speculative_decoding_"):
    """Validate per-host overrides and return them normalised (``None`` values dropped).

    ``overrides`` maps setting names without the prefix (``num_speculative_tokens``) to values.
    A ``None`` value means "not set" (so role defaults can list every key as null). Booleans must
    be real booleans, integers must not be booleans, strings are never coerced.
    """
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise _bad(host, var_prefix + "*", overrides, "a mapping of setting name to value")
    checks = dict((key, (check, expected)) for key, check, expected in _OVERRIDES)
    known = ", ".join(var_prefix + key for key in OVERRIDE_KEYS)
    result = {}
    for key in sorted(overrides, key=str):
        value = overrides[key]
        if key not in checks:
            raise _bad(host, "{}{}".format(var_prefix, key), value, "one of the known settings: " + known)
        if value is None:
            continue
        check, expected = checks[key]
        if not check(value):
            why = ""
            if isinstance(value, str) and key not in ("method", "model"):
                why = "a string is never converted; pass typed values, e.g. -e as JSON"
            raise _bad(host, var_prefix + key, value, expected, why)
        result[key] = float(value) if key in _FLOAT_OVERRIDES else value
    return dict((key, result[key]) for key in OVERRIDE_KEYS if key in result)


_SERVE_FIELDS = {
    "gpu_memory_utilization": (_check_float_range(UTIL_MIN, UTIL_MAX), "a number from {} to {}".format(UTIL_MIN, UTIL_MAX)),
    "max_model_len": (_check_int_range(1, 100000000), "an integer from 1 to 100000000"),
    "max_num_seqs": (_check_int_range(1, 1000000), "an integer from 1 to 1000000"),
    "tensor_parallel_size": (_check_int_range(1, 64), "an integer from 1 to 64"),
    "vllm_version": (
        lambda v: isinstance(v, str) and len(v) <= 64,
        "a vLLM version string such as '0.20.2' (or 'unknown')",
    ),
    "running": (_check_bool, "a boolean: whether the baseline server runs now"),
    "model": (valid_model_id, MODEL_ID_EXPECTATION),
    "host": (
        lambda v: isinstance(v, str) and re.fullmatch(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$", v) is not None,
        "an IP address or host name of [A-Za-z0-9.:-]",
    ),
    "port": (_check_int_range(1, 65535), "an integer from 1 to 65535"),
    "served_model_name": (
        lambda v: isinstance(v, str) and re.fullmatch(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}$", v) is not None,
        "a name of [A-Za-z0-9._/:-] starting with a letter or digit (at most 128 characters)",
    ),
}


def _serve_value(serve, key, host, required=False, default=None):
    if key not in serve or serve[key] is None:
        if required:
            raise SpecdecError("{}serve.{} is missing; expected {}".format(_where(host), key, _SERVE_FIELDS[key][1]))
        return default
    value = serve[key]
    check, expected = _SERVE_FIELDS[key]
    if not check(value):
        raise _bad(host, "serve." + key, value, expected)
    return value


def _check_mapping(value, name, host, expected):
    if not isinstance(value, dict):
        raise _bad(host, name, value, expected)
    return value


# ---------------------------------------------------------------- what else the server runs with

# Options of ``vllm serve`` that the collection writes itself, that carry a secret, or that configure speculation
# (which the plan owns): never an extra option. Names as ``vllm serve --help`` prints them, without the dashes.
# The serve settings the configuration file carries: (key of the serve settings, option of vllm serve), in file order.
SERVE_CONFIG_KEYS = (
    ("model", "model"),
    ("host", "host"),
    ("port", "port"),
    ("served_model_name", "served-model-name"),
    ("gpu_memory_utilization", "gpu-memory-utilization"),
    ("max_model_len", "max-model-len"),
    ("max_num_seqs", "max-num-seqs"),
    ("tensor_parallel_size", "tensor-parallel-size"),
)
MANAGED_OPTIONS = frozenset([option for _key, option in SERVE_CONFIG_KEYS] + ["model-tag", "config", "api-key", "hf-token"])
_OPTION_RE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_MOUNT_PATH_RE = re.compile(r"^/[A-Za-z0-9._/-]{0,1023}$")
EXTRA_ARGS_MAX = 64
EXTRA_MOUNTS_MAX = 32
EXTRA_ARGS_EXPECTATION = (
    "a mapping of further vllm serve options, each a long option name without its dashes ([a-z0-9-], as vllm serve --help "
    "prints it, such as enable-prefix-caching or kv-cache-dtype) to a boolean, a number or a string of printable ASCII "
    "(at most 1024 characters; a JSON option as its JSON text); at most {} options".format(EXTRA_ARGS_MAX)
)
EXTRA_MOUNTS_EXPECTATION = (
    "a list of bind mounts SOURCE:DESTINATION or SOURCE:DESTINATION:ro, both absolute paths of [A-Za-z0-9._/-] without '..', "
    "each destination once; at most {}".format(EXTRA_MOUNTS_MAX)
)


_SECRET_OPTION_RE = re.compile(r"(?i)token|key|secret|passw|auth|credential")


def shown_extra_args(value):
    """Further options as a message may show them: the value of any option whose name suggests a secret masked."""
    if not isinstance(value, dict):
        return value
    return dict((key, "***" if isinstance(key, str) and _SECRET_OPTION_RE.search(key) and value[key] not in (None, "") else value[key]) for key in value)


def extra_args_problem(value):
    """What is wrong with further ``vllm serve`` options (``vllm_server_extra_args``), or None when they are allowed."""
    if not isinstance(value, dict):
        return EXTRA_ARGS_EXPECTATION
    if len(value) > EXTRA_ARGS_MAX:
        return EXTRA_ARGS_EXPECTATION
    for key in sorted(value, key=str):
        item = value[key]
        if not (isinstance(key, str) and len(key) <= 64 and _OPTION_RE.fullmatch(key)):
            return "{} (got the option name {!r})".format(EXTRA_ARGS_EXPECTATION, key)
        if key in ("api-key", "hf-token"):
            return "no secret in the serve configuration ({}: set vllm_server_{}, kept in Ansible Vault)".format(key, key.replace("-", "_"))
        if key in MANAGED_OPTIONS:
            setting = "vllm_server_model" if key in ("model", "model-tag", "config") else "vllm_server_" + key.replace("-", "_")
            return "no option the collection sets itself ({}: set {})".format(key, setting)
        if key.startswith("spec") or "speculative" in key or key.startswith("ngram"):
            return "no speculation option ({}): the plan writes speculative-config; per-host choices are speculative_decoding_* settings".format(key)
        if isinstance(item, bool) or _is_number(item):
            continue
        if isinstance(item, str) and len(item) <= 1024 and all(" " <= ch <= "~" for ch in item):
            continue
        return "{} (got {!r} for {})".format(EXTRA_ARGS_EXPECTATION, item, key)
    return None


def extra_mounts_problem(value, reserved=()):
    """What is wrong with further bind mounts of the container (``vllm_server_extra_mounts``), or None.

    ``reserved``: destinations the collection mounts itself (the configuration directory, the Hugging Face cache).
    """
    if not isinstance(value, (list, tuple)) or len(value) > EXTRA_MOUNTS_MAX:
        return EXTRA_MOUNTS_EXPECTATION
    seen = set(reserved)
    for item in value:
        parts = item.split(":") if isinstance(item, str) else []
        if not (len(parts) in (2, 3) and (len(parts) == 2 or parts[2] == "ro") and all(_MOUNT_PATH_RE.fullmatch(p) and ".." not in p for p in parts[:2])):
            return "{} (got {!r})".format(EXTRA_MOUNTS_EXPECTATION, item)
        if parts[1].rstrip("/") in seen:
            return "{} (the destination {} is mounted already)".format(EXTRA_MOUNTS_EXPECTATION, parts[1])
        seen.add(parts[1].rstrip("/"))
    return None
