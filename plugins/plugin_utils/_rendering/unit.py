# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""Every file of the vLLM service that depends on the configuration served: ``serve.yaml`` and the unit.

Private controller-side module, the one renderer of these files: the ``vllm_server`` role writes what
``service_files`` returns (filter ``vllm_service_files``), and the trial's action plugin writes the same
for each arm it applies, so an arm always carries what its configuration needs (the container's mount
of a speculator at a local path, say). The environment file (secrets) does not depend on the
configuration and stays with the role. Deterministic: the same input gives the same output, byte for byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import _bad
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.argv import RUNTIMES, serve_argv
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.config import serve_config_yaml
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.systemd import systemd_quote
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._settings import absolute_path, name, unit_name, user_name

# The header the unit had when Ansible templated it (ansible_managed's default), so that the same settings
# give the same bytes and an upgrade of the collection restarts nothing.
HEADER = "# Ansible managed\n"

# What the unit needs to know besides the serve settings; vllm_server_result.server.unit carries it.
UNIT_KEYS = (
    "unit_path",
    "config_path",
    "env_file",
    "runtime",
    "engine",
    "container_name",
    "image",
    "image_flavor",
    "runtime_dir",
    "start_record",
    "start_record_files",
    "user",
    "user_home",
    "sandbox",
    "read_write_paths",
)

_SANDBOX = """\
# Sandboxing vLLM tolerates: no device restrictions (CUDA needs /dev/nvhost-*, /dev/nvmap, /dev/nvidia*)
# and no MemoryDenyWriteExecute (CUDA and Triton generate code).
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths={paths}
ProtectHome=yes
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
UMask=0027
"""


def _unit_settings(unit, host):
    """``unit`` checked key by key (it comes from the role's validated settings, but is checked again here)."""
    if not isinstance(unit, dict):
        raise _bad(host, "unit", unit, "a mapping of the unit's settings (vllm_server_result.server.unit)")
    missing = [key for key in UNIT_KEYS if key not in unit]
    if missing:
        raise _bad(host, "unit." + missing[0], None, "set (one of the keys " + ", ".join(UNIT_KEYS) + ")")
    unknown = sorted(set(unit) - set(UNIT_KEYS))
    if unknown:
        raise _bad(host, "unit." + unknown[0], unit[unknown[0]], "one of " + ", ".join(UNIT_KEYS) + " (unknown key)")

    def check(key, rule, value=None):
        value = unit[key] if value is None else value
        allowed = rule(value) if isinstance(value, str) else "a string"
        if allowed:
            raise _bad(host, "unit." + key, value, allowed)
        return value

    for key in ("unit_path", "config_path", "env_file", "engine", "start_record", "user_home"):
        check(key, absolute_path)
    check("runtime_dir", unit_name)
    check("container_name", name)
    if unit["runtime"] not in RUNTIMES:
        raise _bad(host, "unit.runtime", unit["runtime"], "one of " + ", ".join(RUNTIMES))
    if unit["user"] not in ("", None):
        check("user", user_name)
    for key in ("start_record_files", "read_write_paths"):
        if not isinstance(unit[key], (list, tuple)):
            raise _bad(host, "unit." + key, unit[key], "a list of absolute paths")
        for path in unit[key]:
            check(key, absolute_path, path)
    if not isinstance(unit["sandbox"], bool):
        raise _bad(host, "unit.sandbox", unit["sandbox"], "true or false")
    return unit


def service_unit(serve, unit, plan=None, host=""):
    """Text of the systemd unit that serves ``serve`` (plus ``plan`` when it is an enabled plan)."""
    return _unit_text(serve, _unit_settings(unit, host), plan, host)


def _unit_text(serve, unit, plan, host):
    """The unit's text from settings ``_unit_settings`` has checked."""
    runtime = unit["runtime"]
    model = serve.get("served_model_name") or serve.get("model")
    record = 'umask 022; { echo "# invocation $INVOCATION_ID"; sha256sum -- %s; } > %s' % (
        " ".join(shlex.quote(path) for path in unit["start_record_files"]),
        shlex.quote(unit["start_record"]),
    )
    lines = [
        HEADER.rstrip("\n"),
        "[Unit]",
        "Description=vLLM OpenAI-compatible server (%s)" % model,
        "Wants=network-online.target",
        "After=network-online.target" + (" docker.service" if runtime == "docker" else ""),
    ]
    if runtime == "docker":
        lines.append("Requires=docker.service")
    lines += [
        "StartLimitIntervalSec=600",
        "StartLimitBurst=5",
        "",
        "[Service]",
        "Type=simple",
        "# Start record: what this invocation was started from (checked by vllm_server_info before any decision",
        "# is trusted). systemd empties the runtime directory when the unit stops; `+` runs it as root.",
        "RuntimeDirectory=" + unit["runtime_dir"],
        "RuntimeDirectoryMode=0755",
        "ExecStartPre=+" + systemd_quote(["/bin/sh", "-c", record], host),
    ]
    if runtime == "native":
        lines.append("EnvironmentFile=" + unit["env_file"])
        if unit["user"]:
            lines += [
                "User=" + unit["user"],
                "Group=" + unit["user"],
                "WorkingDirectory=" + unit["user_home"],
                "Environment=HOME=" + unit["user_home"],
            ]
            if unit["sandbox"]:
                paths = [unit["user_home"]] + ["-" + path for path in unit["read_write_paths"]]
                lines += _SANDBOX.format(paths=" ".join(paths)).rstrip("\n").split("\n")
    else:
        lines.append("ExecStartPre=-" + systemd_quote([unit["engine"], "rm", "-f", unit["container_name"]], host))
    argv = serve_argv(serve, unit["config_path"], runtime, image=unit["image"], image_flavor=unit["image_flavor"], plan=plan, host=host)
    lines.append("ExecStart=" + systemd_quote(argv, host))
    if runtime != "native":
        lines.append("ExecStop=" + systemd_quote([unit["engine"], "stop", "-t", "30", unit["container_name"]], host))
    lines += [
        "Restart=on-failure",
        "RestartSec=10",
        "TimeoutStopSec=60",
        "SyslogIdentifier=vllm",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"


def service_files(serve, unit, plan=None, host=""):
    """The files that serve ``serve`` with ``plan``: ``[{path, content, mode}]``, the configuration first.

    ``plan`` is a plan (only an enabled one adds speculation) or None for the baseline.
    """
    plan = plan if isinstance(plan, dict) and plan.get("decision") == "enabled" else None
    unit = _unit_settings(unit, host)
    return [
        {"path": unit["config_path"], "content": serve_config_yaml(serve, plan, host=host), "mode": "0644"},
        {"path": unit["unit_path"], "content": _unit_text(serve, unit, plan, host), "mode": "0644"},
    ]
