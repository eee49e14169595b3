# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""The ``vllm serve --config`` file of a host.

Private controller-side module. Deterministic: the same input gives the same output, byte for byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import (
    SERVE_CONFIG_KEYS,
    UTIL_MIN,
    SpecdecError,
    _bad,
    _check_mapping,
    _is_int,
    _is_number,
    _serve_value,
    extra_args_problem,
    shown_extra_args,
)
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.planner import (
    speculative_config,
)

# ---------------------------------------------------------------- renderer

CONFIG_HEADER = "# vllm serve --config file rendered by jetson_llm.speculative; local changes are overwritten.\n"


def spec_config_json(config):
    """Deterministic JSON text: sorted keys, no spaces."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def serve_config(serve, plan=None, host=""):
    """Mapping for vLLM's ``--config`` YAML file (long option names as keys, insertion-ordered).

    Secrets never appear: vLLM reads ``VLLM_API_KEY`` and ``HF_TOKEN`` from its environment. The further options
    of ``serve.extra_args`` follow the collection's own, sorted by name (none of them is one of those).
    With an enabled ``plan`` the plan's utilization and ``speculative-config`` (a JSON string,
    which every vLLM release parses) are written; otherwise the baseline settings.
    """
    _check_mapping(serve, "serve", host, "a mapping of serve settings")
    out = {}
    for key, option in SERVE_CONFIG_KEYS:
        value = _serve_value(serve, key, host, required=key in ("model", "gpu_memory_utilization"))
        if value is None:
            continue
        out[option] = float(value) if key == "gpu_memory_utilization" else value
    # further vllm serve options of the server (vllm_server_extra_args), after the collection's own, sorted
    extra = serve.get("extra_args") or {}
    problem = extra_args_problem(extra)
    if problem:
        raise _bad(host, "serve.extra_args", shown_extra_args(extra), problem)
    for option in sorted(extra):
        out[option] = extra[option]
    if plan is None:
        return out
    _check_mapping(plan, "plan", host, "a plan mapping from speculative_plan")
    decision = plan.get("decision")
    if decision not in ("enabled", "skipped"):
        raise _bad(host, "plan.decision", decision, "enabled or skipped")
    if decision == "skipped":
        return out
    util = plan.get("gpu_memory_utilization")
    if not (_is_number(util) and UTIL_MIN <= util <= 1.0):
        raise _bad(host, "plan.gpu_memory_utilization", util, "a number from {} to 1.0".format(UTIL_MIN))
    out["gpu-memory-utilization"] = float(util)
    version = _serve_value(serve, "vllm_version", host, required=True)
    out["speculative-config"] = spec_config_json(speculative_config(plan, version, host=host))
    return out


_YAML_FLOAT_RE = re.compile(r"^-?[0-9]+\.[0-9]+$")


def _yaml_scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_int(value):
        return str(value)
    if isinstance(value, float):
        if not _is_number(value):
            raise SpecdecError("{!r} cannot be written to the vLLM configuration".format(value))
        text = repr(value)
        return text if _YAML_FLOAT_RE.fullmatch(text) else "{:.6f}".format(value)
    if isinstance(value, str):
        # Every value reaching the file is validated printable ASCII; a JSON string of printable
        # ASCII only escapes '"' and '\\', and is then a valid YAML double-quoted scalar.
        if not all(" " <= ch <= "~" for ch in value):
            raise SpecdecError("{!r} cannot be written to the vLLM configuration (printable ASCII only)".format(value))
        return json.dumps(value, ensure_ascii=True)
    raise SpecdecError("{!r} cannot be written to the vLLM configuration".format(value))


def serve_config_yaml(serve, plan=None, host=""):
    """``serve_config`` as deterministic YAML text (no PyYAML needed; every string quoted)."""
    lines = [CONFIG_HEADER.rstrip("\n")]
    for key, value in serve_config(serve, plan, host=host).items():
        lines.append("{}: {}".format(key, _yaml_scalar(value)))
    return "\n".join(lines) + "\n"
