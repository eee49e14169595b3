#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Licensed under the Apache License 2.0, or at your option under the
# GNU General Public License version 3 or later (see https://www.gnu.org/licenses/gpl-3.0.txt).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_server_info
short_description: Report what the running vLLM server actually serves
version_added: 0.1.0
description:
  - Reads the live state of a vLLM server instead of the files that configure it, so that a rollout can
    compare what runs with what it recorded.
  - From the systemd unit (O(service), C(systemctl show)) it reports the C(InvocationID), C(MainPID),
    C(ActiveState) and the time the unit became active (seconds since the epoch, sub-second precision).
    A different RV(invocation_id) or RV(main_pid) before and after a benchmark block means the server
    restarted during the block.
  - From the server it reports the served model and its C(max_model_len) (C(GET /v1/models)) and whether a
    speculative configuration is loaded (C(GET /metrics) carries the C(vllm:spec_decode_*) counters only
    then).
  - It tells whether the server was started from the configuration files as they are now (RV(config_current)).
    The strong evidence is a start record (O(start_record)) that the unit writes when it starts, the
    SHA-256 of each configuration file and the unit's invocation id. Without a record for the current
    invocation it falls back to the files' modification times against the start time of the unit
    (RV(started_after_config)).
  - "The unit writes the record with these lines in its C([Service]) section (paths as in the O(config_files)
    option, the service name as in O(service)):
    C(RuntimeDirectory=vllm),
    C(ExecStartPre=/bin/sh -c 'umask 022; { echo \"# invocation $$INVOCATION_ID\";
    sha256sum -- /etc/vllm/serve.yaml /etc/vllm/vllm.env; } > /run/vllm/config.sha256'),
    then O(start_record=/run/vllm/config.sha256). systemd empties the runtime directory when the unit stops,
    so a record never outlives its server; C($$) hands C($INVOCATION_ID) to the shell, which systemd sets
    for every process of the unit."
  - The module never changes anything.
author:
  - Jetson LLM maintainers (@jetson-llm)
extends_documentation_fragment:
  - jetson_llm.speculative._attributes
  - jetson_llm.speculative._attributes.info_module
attributes:
  platform:
    support: full
    platforms: posix
  action_group:
    description: Use C(group/jetson_llm.speculative.vllm) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - jetson_llm.speculative.vllm
options:
  url:
    description: Base URL of the server, without C(/v1).
    type: str
    default: http://127.0.0.1:8000
  api_key:
    description: API key for C(/v1/models) when the server was started with one.
    type: str
  model:
    description: Served model id whose C(max_model_len) is reported. Defaults to the first id C(/v1/models) lists.
    type: str
  service:
    description: systemd unit that runs the server (for example C(vllm.service)). Without it the unit fields are null.
    type: str
  config_files:
    description: The configuration files the server is started from (for example C(serve.yaml) and C(vllm.env)).
    type: list
    elements: path
    default: []
  start_record:
    description:
      - File the unit writes when it starts, in the format of C(sha256sum) with an optional first line
        C(# invocation <InvocationID>) (see the description for the unit lines).
    type: path
  timeout:
    description: Seconds to wait for each HTTP answer. A server that does not answer in time is reported with RV(responding=false).
    type: float
    default: 5
  want_speculative:
    description:
      - Whether the configuration the caller wants served speculates. With it the module also answers whether the
        live server is that configuration (RV(wanted)); without it RV(wanted) is null.
    type: bool
  want_label:
    description: How RV(wanted.gaps) names the wanted configuration (for example C(the decision is keep)).
    type: str
    default: the wanted configuration
notes:
  - Compare RV(invocation_id) (or, without systemd, RV(main_pid)) taken before and after a measurement to
    prove that no restart happened in between, and RV(speculative) with the arm that should be running.
"""

EXAMPLES = r"""
- name: What does the device serve right now?
  jetson_llm.speculative.vllm_server_info:
    service: vllm.service
    config_files:
      - /etc/vllm/serve.yaml
      - /etc/vllm/vllm.env
    start_record: /run/vllm/config.sha256
  register: live

- name: Restart when the server does not run the files as they are
  ansible.builtin.debug:
    msg: "reconcile: {{ live.differences | join('; ') }}"
  when: live.config_current is false
"""

RETURN = r"""
wanted:
  description:
    - Whether the live server is the configuration the caller wants (O(want_speculative)); the one rule every
      caller reads (the roles' reconcile and arm switches, the trial's action plugin). Null without O(want_speculative).
  returned: always
  type: dict
  contains:
    speculative:
      description: O(want_speculative).
      type: bool
    serves:
      description: True when the server runs, was started from the configuration files as they are now, and loads
        speculation exactly when the wanted configuration does (unknown speculation counts as served).
      type: bool
    gaps:
      description: Why not, one reason each (C(vLLM does not run), RV(differences), C(speculation is loaded where ...)); empty when it serves.
      type: list
      elements: str
running:
  description: Whether the server runs (the unit is active, or without O(service), the server answers).
  returned: always
  type: bool
responding:
  description: Whether C(/health) answered within O(timeout) (with any HTTP status).
  returned: always
  type: bool
healthy:
  description: Whether C(/health) answered 200.
  returned: always
  type: bool
detail:
  description: Why the server is not healthy or a part could not be read; empty when all was read.
  returned: always
  type: str
active_state:
  description: C(ActiveState) of the unit (C(active), C(activating), C(failed), ...); null without O(service).
  returned: always
  type: str
  sample: active
sub_state:
  description: C(SubState) of the unit; null without O(service).
  returned: always
  type: str
  sample: running
invocation_id:
  description: C(InvocationID) of the unit's current run; changes at every start. Null when not started or without O(service).
  returned: always
  type: str
  sample: 0f5b0c8e2d1d4e0f9b1b7b2f3a4c5d6e
main_pid:
  description: C(MainPID) of the unit; null when it has no process or without O(service).
  returned: always
  type: int
  sample: 4242
n_restarts:
  description: C(NRestarts) of the unit (automatic restarts since it was started by hand); null when unknown.
  returned: always
  type: int
started_at:
  description: When the unit last became active (C(ActiveEnterTimestamp)), in seconds since the epoch; null when never.
  returned: always
  type: float
  sample: 1796279491.123
speculative:
  description:
    - True when C(/metrics) shows the C(vllm:spec_decode_*) counters (a speculative configuration is loaded),
      false when it shows vLLM metrics without them, null when it shows no vLLM metric (C(--disable-log-stats))
      or could not be read.
  returned: always
  type: bool
model:
  description: The served model id reported (O(model), or the first listed); null when not listed.
  returned: always
  type: str
  sample: Qwen/Qwen3-8B
models:
  description: Every model id C(/v1/models) lists.
  returned: always
  type: list
  elements: str
max_model_len:
  description: C(max_model_len) of RV(model) from C(/v1/models); null when not reported.
  returned: always
  type: int
  sample: 8192
root:
  description: C(root) of RV(model) from C(/v1/models) (the path or repository loaded); null when not reported.
  returned: always
  type: str
config_files:
  description: The files of O(config_files) as they are now.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The file.
      type: str
      returned: always
    exists:
      description: Whether it exists.
      type: bool
      returned: always
    sha256:
      description: SHA-256 of its content; null when missing.
      type: str
      returned: always
    mtime:
      description: Modification time, seconds since the epoch; null when missing.
      type: float
      returned: always
    started_sha256:
      description: SHA-256 recorded for it at start; null without a record for it.
      type: str
      returned: always
config_sha256:
  description:
    - SHA-256 of the text C(sha256sum) prints for the files of O(config_files) as they are now, in the given
      order (a single value to store with a decision); null when a file is missing or none is given.
  returned: always
  type: str
started_config_sha256:
  description: The same digest computed from the start record; null without a current record covering every file.
  returned: always
  type: str
start_record:
  description:
    - State of the start record. C(current) (written by the unit's current invocation), C(unverified) (no
      O(service) or no invocation line to check it against), C(stale) (written by another invocation),
      C(missing), C(unreadable); null without O(start_record).
  returned: always
  type: str
  sample: current
started_after_config:
  description:
    - Whether every file of O(config_files) was last modified before the unit became active; null without
      O(service), files, or a start time.
  returned: always
  type: bool
config_current:
  description:
    - Whether the running server was started from the configuration files as they are now. Decided by the
      start record when it is current (or unverified) and covers every file, else by RV(started_after_config).
      Null when the server does not run or neither evidence is available.
  returned: always
  type: bool
config_evidence:
  description: What decided RV(config_current) (C(record) or C(mtime)); null when undecided.
  returned: always
  type: str
differences:
  description: Human-readable reasons why RV(config_current) is false (or why the record was not used).
  returned: always
  type: list
  elements: str
"""

import hashlib
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.jetson_llm.speculative.plugins.module_utils._vllm_health import (
    http_get,
    parse_start_record,
    parse_systemctl_show,
    serving_gaps,
    speculation_from_metrics,
    split_url,
    systemd_epoch,
)

UNIT_PROPS = "LoadState,ActiveState,SubState,InvocationID,MainPID,NRestarts,ActiveEnterTimestamp,ActiveEnterTimestampMonotonic"


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def combined_sha256(pairs):
    """SHA-256 of ``sha256sum``'s output for ``[(path, sha256)]``; None when a digest is missing."""
    if not pairs or any(sha is None for _path, sha in pairs):
        return None
    return hashlib.sha256("".join("%s  %s\n" % (sha, path) for path, sha in pairs).encode("utf-8")).hexdigest()


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def unit_info(show, monotonic_now, realtime_now):
    """Unit fields from a ``systemctl show`` dict."""
    if not show or show.get("LoadState") in (None, "not-found"):
        return {"active_state": None, "sub_state": None, "invocation_id": None, "main_pid": None, "n_restarts": None, "started_at": None}
    pid = _int(show.get("MainPID"))
    return {
        "active_state": show.get("ActiveState") or None,
        "sub_state": show.get("SubState") or None,
        "invocation_id": show.get("InvocationID") or None,
        "main_pid": pid if pid else None,
        "n_restarts": _int(show.get("NRestarts")),
        "started_at": systemd_epoch(show, "ActiveEnterTimestamp", monotonic_now, realtime_now),
    }


def server_info(url, api_key=None, model=None, timeout=5.0):
    """HTTP part: health, served model, max_model_len, speculation."""
    out = {
        "responding": False,
        "healthy": False,
        "model": None,
        "models": [],
        "max_model_len": None,
        "root": None,
        "speculative": None,
        "detail": "",
    }
    problems = []
    try:
        status, _body = http_get(url, "/health", timeout=timeout)
    except (OSError, ValueError) as exc:
        out["detail"] = "GET %s/health: %s" % (url, exc)
        return out
    out["responding"] = True
    out["healthy"] = status == 200
    if status != 200:
        problems.append("GET /health returned HTTP %d" % status)
    try:
        status, body = http_get(url, "/v1/models", api_key=api_key, timeout=timeout)
        if status != 200:
            problems.append("GET /v1/models returned HTTP %d" % status)
        else:
            entries = [e for e in (json.loads(body).get("data") or []) if isinstance(e, dict) and e.get("id")]
            out["models"] = [e["id"] for e in entries]
            wanted = model or (out["models"][0] if out["models"] else None)
            for entry in entries:
                if entry["id"] == wanted:
                    out["model"] = wanted
                    out["max_model_len"] = _int(entry.get("max_model_len"))
                    out["root"] = entry.get("root")
            if wanted and out["model"] is None:
                problems.append("%s is not served (serving: %s)" % (wanted, ", ".join(out["models"]) or "nothing"))
    except (OSError, ValueError, AttributeError) as exc:
        problems.append("GET /v1/models: %s" % exc)
    try:
        status, body = http_get(url, "/metrics", timeout=timeout)
        if status == 200:
            out["speculative"] = speculation_from_metrics(body)
            if out["speculative"] is None:
                problems.append("/metrics shows no vLLM metric (--disable-log-stats?): speculation unknown")
        else:
            problems.append("GET /metrics returned HTTP %d" % status)
    except (OSError, ValueError) as exc:
        problems.append("GET /metrics: %s" % exc)
    out["detail"] = "; ".join(problems)
    return out


def config_info(config_files, record_path, record_text, record_error, unit, running):
    """Compare the configuration files with the start record and the unit's start time."""
    files = []
    for path in config_files:
        entry = {"path": path, "exists": False, "sha256": None, "mtime": None, "started_sha256": None}
        try:
            entry["mtime"] = os.stat(path).st_mtime
            entry["sha256"] = file_sha256(path)
            entry["exists"] = True
        except OSError:
            entry["mtime"] = None
        files.append(entry)
    differences = []
    record_state = None
    record = None
    if record_path:
        if record_error is not None:
            record_state = "missing" if record_error == "missing" else "unreadable"
            differences.append("start record %s is %s" % (record_path, record_error))
        else:
            try:
                record = parse_start_record(record_text)
            except ValueError as exc:
                record_state = "unreadable"
                differences.append("start record %s is unreadable: %s" % (record_path, exc))
        if record is not None:
            live_id = unit["invocation_id"]
            if record["invocation_id"] and live_id:
                record_state = "current" if record["invocation_id"] == live_id else "stale"
                if record_state == "stale":
                    differences.append("start record %s was written by invocation %s, the unit runs %s" % (record_path, record["invocation_id"], live_id))
            else:
                record_state = "unverified"
            for entry in files:
                entry["started_sha256"] = record["files"].get(entry["path"])
    result = {
        "config_files": files,
        "config_sha256": combined_sha256([(f["path"], f["sha256"]) for f in files]),
        "started_config_sha256": None,
        "start_record": record_state,
        "started_after_config": None,
        "config_current": None,
        "config_evidence": None,
    }
    for entry in files:
        if not entry["exists"]:
            differences.append("%s does not exist" % entry["path"])
    started = unit["started_at"]
    if files and started is not None and all(f["exists"] for f in files):
        late = [f for f in files if f["mtime"] > started]
        result["started_after_config"] = not late
        for entry in late:
            differences.append("%s was written %.1f s after the server started" % (entry["path"], entry["mtime"] - started))
    usable = record_state in ("current", "unverified") and files and all(f["started_sha256"] for f in files)
    if usable:
        result["started_config_sha256"] = combined_sha256([(f["path"], f["started_sha256"]) for f in files])
        for entry in files:
            if entry["sha256"] != entry["started_sha256"]:
                differences.append(
                    "%s changed since the server started (sha256 %s at start, %s now)"
                    % (entry["path"], entry["started_sha256"][:12], (entry["sha256"] or "missing")[:12])
                )
    elif record is not None and record_state in ("current", "unverified"):
        differences.append("start record %s does not cover %s" % (record_path, ", ".join(f["path"] for f in files if not f["started_sha256"])))
    if running:
        if usable:
            result["config_current"] = result["config_sha256"] is not None and result["config_sha256"] == result["started_config_sha256"]
            result["config_evidence"] = "record"
        elif result["started_after_config"] is not None:
            result["config_current"] = result["started_after_config"]
            result["config_evidence"] = "mtime"
    result["differences"] = differences
    return result


def read_record(path):
    """``(text, None)`` or ``(None, "missing" | reason)``."""
    try:
        with open(path) as handle:
            return handle.read(1 << 20), None
    except OSError as exc:
        if not os.path.exists(path):
            return None, "missing"
        return None, "unreadable (%s)" % exc


def gather(module):
    p = module.params
    unit = unit_info({}, 0, 0)
    if p["service"]:
        systemctl = module.get_bin_path("systemctl", required=True)
        rc, out, err = module.run_command([systemctl, "show", "-p", UNIT_PROPS, p["service"]])
        if rc != 0:
            module.fail_json(msg="systemctl show %s failed (rc %d): %s" % (p["service"], rc, (err or out).strip()))
        unit = unit_info(parse_systemctl_show(out), time.monotonic(), time.time())
    http = server_info(p["url"], p["api_key"], p["model"], p["timeout"])
    running = unit["active_state"] == "active" if p["service"] else http["responding"]
    record_text, record_error = (None, None)
    if p["start_record"]:
        record_text, record_error = read_record(p["start_record"])
    config = config_info(p["config_files"], p["start_record"], record_text, record_error, unit, running)
    result = {"changed": False, "running": running}
    result.update(unit)
    if result["started_at"] is not None:
        result["started_at"] = round(result["started_at"], 3)
    result.update(http)
    result.update(config)
    result["wanted"] = None
    if p["want_speculative"] is not None:
        gaps = serving_gaps(result, p["want_speculative"], p["want_label"])
        result["wanted"] = {"speculative": p["want_speculative"], "serves": not gaps, "gaps": gaps}
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:8000"),
            api_key=dict(type="str", no_log=True),
            model=dict(type="str"),
            service=dict(type="str"),
            config_files=dict(type="list", elements="path", default=[]),
            start_record=dict(type="path"),
            timeout=dict(type="float", default=5.0),
            want_speculative=dict(type="bool"),
            want_label=dict(type="str", default="the wanted configuration"),
        ),
        supports_check_mode=True,
    )
    try:
        split_url(module.params["url"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    if module.params["timeout"] <= 0:
        module.fail_json(msg="timeout must be greater than 0, got %s" % module.params["timeout"])
    module.exit_json(**gather(module))


if __name__ == "__main__":
    main()
