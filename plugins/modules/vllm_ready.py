#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Licensed under the Apache License 2.0, or at your option under the
# GNU General Public License version 3 or later (see https://www.gnu.org/licenses/gpl-3.0.txt).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_ready
short_description: Wait until a vLLM server is really ready, or say why it is not
version_added: 0.1.0
description:
  - Polls C(/health) and C(/v1/models) of a vLLM server until C(/health) answers 200 and the served
    model is listed. A refused connection counts as "still loading", as vLLM only starts listening
    once the engine is up.
  - When O(service) is given, the systemd unit is watched at the same time. If the unit fails or
    its process exits (restarts), the module stops waiting and reads the unit's journal to name the
    cause (out of memory at startup, rejected configuration, missing model, crash) from vLLM's own
    messages.
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
options:
  url:
    description: Base URL of the server.
    type: str
    default: http://127.0.0.1:8000
  served_model_name:
    description: Model id that C(/v1/models) must list. When omitted any listed model is accepted.
    type: str
  api_key:
    description: API key for C(/v1/models) when the server was started with one.
    type: str
  timeout:
    description: Seconds to wait in total.
    type: float
    default: 600
  delay:
    description: Seconds between probes.
    type: float
    default: 2
  service:
    description: Name of the systemd unit running the server (for example C(vllm.service)).
    type: str
  since:
    description:
      - The cause is named from the journal of the unit's runs seen while waiting, selected by their
        systemd invocation ids (so clock differences between the controller and the device do not matter).
      - Only when the unit has no invocation id (it never ran) are the journal lines from this time on
        (seconds since the epoch, the device's clock) read; without it the last 400 lines of the unit.
    type: float
  fail_on_not_ready:
    description: Fail the task when the server is not ready. Set to V(false) to inspect RV(cause) yourself.
    type: bool
    default: true
  journal_lines:
    description: How many of the last journal lines to return in RV(journal_tail).
    type: int
    default: 40
  restarted_from:
    description:
      - The unit's C(ActiveState) just before the restart that this wait follows (the C(status.ActiveState)
        that M(ansible.builtin.systemd_service) returns). With O(service), RV(restart_began_at) then
        counts from the old run's stop (V(active)) or from the new run's start (any other state).
    type: str
notes:
  - Speculative and non-speculative servers are probed the same way; the collection's rollout uses
    the RV(cause) to walk its out-of-memory ladder.
"""

EXAMPLES = r"""
- name: Wait for vLLM after a restart
  jetson_llm.speculative.vllm_ready:
    url: http://127.0.0.1:8000
    served_model_name: meta-llama/Llama-3.1-8B-Instruct
    service: vllm.service
    timeout: 900

- name: Probe without failing, to decide what to do next
  jetson_llm.speculative.vllm_ready:
    service: vllm.service
    timeout: 300
    fail_on_not_ready: false
  register: probe
"""

RETURN = r"""
ready:
  description: Whether the server answered /health with 200 and listed the served model.
  returned: always
  type: bool
state:
  description: Last probe state, or why waiting stopped.
  returned: always
  type: str
  sample: ready
  choices: [ready, loading, unhealthy, wrong_model, failed, timeout]
cause:
  description:
    - Why the server is not ready, from the journal; null when ready.
    - One of C(oom_free_memory), C(oom_weights), C(oom_kv_cache), C(oom_sampler), C(rejected_config),
      C(model_not_found), C(engine_failed), C(crash), C(hang), C(unhealthy), C(wrong_model).
  returned: always
  type: str
  sample: oom_free_memory
out_of_memory:
  description: Whether the cause is one of the out-of-memory causes.
  returned: always
  type: bool
detail:
  description: The vLLM log line or probe result that shows the cause.
  returned: always
  type: str
models:
  description: Model ids listed by /v1/models on the last successful probe.
  returned: always
  type: list
  elements: str
elapsed:
  description: Seconds spent waiting.
  returned: always
  type: float
started_at:
  description: When waiting began, in seconds since the epoch (the wait spans RV(started_at) to RV(started_at) + RV(elapsed)).
  returned: always
  type: float
restart_began_at:
  description:
    - When the restart began by the device's clock, in seconds since the epoch, from systemd's monotonic
      timestamps of the unit; null without O(service) or O(restarted_from), or when systemd has no such time.
    - The restart spans RV(restart_began_at) to RV(started_at) + RV(elapsed), all on the device's clock, so a
      controller whose clock is off does not change it.
  returned: always
  type: float
journal_tail:
  description: Last lines of the journal of the unit's runs while waiting (only when not ready and O(service) is set).
  returned: always
  type: list
  elements: str
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.jetson_llm.speculative.plugins.module_utils._vllm_health import (
    OOM_CAUSES,
    classify_log,
    parse_systemctl_show,
    probe,
    split_url,
)


def note_invocation(invocations, unit):
    """Add the unit's current invocation id (from `systemctl show`) to the list when it is new."""
    inv = (unit or {}).get("InvocationID") or ""
    if inv and inv not in invocations:
        invocations.append(inv)


def restart_began(unit, restarted_from, now, monotonic_now):
    """When the restart began, by the device's clock (seconds since the epoch), or None.

    A unit that was active began its restart when it left the active state (the old run's stop); any
    other unit when it left the inactive state (the new run's start). systemd's monotonic timestamps
    (microseconds since boot) are turned into the epoch with this process's own two clocks.
    """
    if not unit or not restarted_from:
        return None
    key = "ActiveExitTimestampMonotonic" if restarted_from in ("active", "reloading", "deactivating") else "InactiveExitTimestampMonotonic"
    value = str(unit.get(key) or "")
    if not value.isdigit() or int(value) <= 0:
        return None
    ago = monotonic_now - int(value) / 1e6
    if ago < 0:
        return None
    return round(now - ago, 3)


def journal_command(journalctl, service, invocations, since=None):
    """journalctl argv for the lines of the given runs of the unit.

    By invocation id: the unit's own output (_SYSTEMD_INVOCATION_ID) and what systemd logged about
    those runs (INVOCATION_ID, for example the exit status). Matches of one field are alternatives,
    "+" joins the two groups. Without an id (a unit that never ran): lines since O(since) when given,
    else the last 400 lines of the unit.
    """
    cmd = [journalctl, "--no-pager", "-o", "cat"]
    if invocations:
        return cmd + ["_SYSTEMD_INVOCATION_ID=%s" % i for i in invocations] + ["+"] + ["INVOCATION_ID=%s" % i for i in invocations]
    cmd += ["-u", service]
    if since is not None:
        return [*cmd, "--since", "@%d" % int(since)]
    return [*cmd, "-n", "400"]


class Waiter:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.systemctl = module.get_bin_path("systemctl") if self.params["service"] else None
        self.journalctl = module.get_bin_path("journalctl") if self.params["service"] else None

    def unit_state(self):
        if not self.systemctl:
            return {}
        rc, out, _err = self.module.run_command(
            [
                self.systemctl,
                "show",
                "-p",
                "ActiveState,SubState,NRestarts,Result,ExecMainStatus,ActiveEnterTimestamp,InvocationID,"
                "ActiveExitTimestampMonotonic,InactiveExitTimestampMonotonic",
                self.params["service"],
            ]
        )
        return parse_systemctl_show(out) if rc == 0 else {}

    def journal(self, invocations=()):
        if not self.journalctl:
            return ""
        rc, out, _err = self.module.run_command(journal_command(self.journalctl, self.params["service"], invocations, self.params["since"]))
        return out if rc == 0 else ""

    def run(self):
        p = self.params
        start = time.time()
        deadline = start + p["timeout"]
        first = self.unit_state()
        began = restart_began(first, p["restarted_from"], time.time(), time.monotonic())
        restarts0 = first.get("NRestarts")
        # Every run of the unit seen while waiting (systemd restarts it on failure): the journal is
        # read by these invocation ids, so the device's clock and the controller's never matter.
        invocations = []
        note_invocation(invocations, first)
        last = {"state": "loading", "detail": "", "models": []}
        stop_state = None
        while True:
            last = probe(p["url"], p["served_model_name"], p["api_key"], timeout=min(5.0, p["timeout"]))
            if last["state"] == "ready":
                break
            unit = self.unit_state()
            note_invocation(invocations, unit)
            if unit:
                if unit.get("ActiveState") in ("failed", "inactive") or (restarts0 is not None and unit.get("NRestarts") not in (None, restarts0)):
                    stop_state = "failed"
                    break
            if time.time() >= deadline:
                stop_state = "timeout"
                break
            time.sleep(max(0.05, min(p["delay"], deadline - time.time())))
        elapsed = round(time.time() - start, 3)
        result = {
            "started_at": round(start, 3),
            "restart_began_at": began,
            "ready": last["state"] == "ready",
            "state": "ready" if last["state"] == "ready" else (stop_state or last["state"]),
            "cause": None,
            "out_of_memory": False,
            "detail": last["detail"],
            "models": last["models"],
            "elapsed": elapsed,
            "journal_tail": [],
            "changed": False,
        }
        if result["ready"]:
            return result
        note_invocation(invocations, self.unit_state())
        text = self.journal(invocations)
        cause, description, evidence = classify_log(text)
        if cause is None:
            if stop_state == "failed":
                cause, description = "crash", "the vLLM process exited"
            elif last["state"] in ("unhealthy", "wrong_model"):
                cause, description = last["state"], last["detail"]
            else:
                cause, description = "hang", "no answer within %s s" % p["timeout"]
        result["cause"] = cause
        result["out_of_memory"] = cause in OOM_CAUSES
        result["detail"] = evidence or last["detail"] or description
        tail = [line for line in text.splitlines() if line.strip()]
        result["journal_tail"] = tail[-p["journal_lines"] :] if p["journal_lines"] > 0 else []
        result["msg"] = "vLLM at %s is not ready: %s (%s)" % (p["url"], description, result["detail"])
        return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:8000"),
            served_model_name=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            timeout=dict(type="float", default=600),
            delay=dict(type="float", default=2),
            service=dict(type="str"),
            since=dict(type="float"),
            fail_on_not_ready=dict(type="bool", default=True),
            journal_lines=dict(type="int", default=40),
            restarted_from=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    try:
        split_url(module.params["url"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    if module.params["timeout"] <= 0:
        module.fail_json(msg="timeout must be greater than 0, got %s" % module.params["timeout"])
    result = Waiter(module).run()
    if not result["ready"] and module.params["fail_on_not_ready"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
