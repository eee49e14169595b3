# SPDX-License-Identifier: Apache-2.0
"""vllm_ready module: the journal is read by the unit's invocation ids, not by a clock; the restart is timed on the device."""

import time

from ansible_collections.jetson_llm.speculative.plugins.modules import vllm_ready as mod

JOURNALCTL = "/usr/bin/journalctl"


def test_journal_by_invocation_ids_ignores_since():
    cmd = mod.journal_command(JOURNALCTL, "vllm.service", ["aaa", "bbb"], since=1700000000)
    assert cmd == [
        JOURNALCTL,
        "--no-pager",
        "-o",
        "cat",
        "_SYSTEMD_INVOCATION_ID=aaa",
        "_SYSTEMD_INVOCATION_ID=bbb",
        "+",
        "INVOCATION_ID=aaa",
        "INVOCATION_ID=bbb",
    ]
    assert "--since" not in cmd


def test_journal_without_invocation_falls_back_to_since_then_tail():
    assert mod.journal_command(JOURNALCTL, "vllm.service", [], since=1700000000.7)[-3:] == ["vllm.service", "--since", "@1700000000"]
    assert mod.journal_command(JOURNALCTL, "vllm.service", [])[-4:] == ["-u", "vllm.service", "-n", "400"]


def test_note_invocation_keeps_each_run_once_in_order():
    seen = []
    for unit in ({"InvocationID": "a"}, {}, {"InvocationID": ""}, {"InvocationID": "b"}, {"InvocationID": "a"}, None):
        mod.note_invocation(seen, unit)
    assert seen == ["a", "b"]


def waiter_params(**overrides):
    """The module's parameters as AnsibleModule gives them (every option present), for a Waiter."""
    params = {
        "url": "http://127.0.0.1:8000",
        "served_model_name": None,
        "api_key": None,
        "timeout": 5.0,
        "delay": 0.01,
        "service": "vllm.service",
        "since": None,
        "fail_on_not_ready": False,
        "journal_lines": 5,
        "restarted_from": None,
    }
    params.update(overrides)
    return params


class FakeModule:
    """Answers `systemctl show` with a unit that crashed and was restarted (a new invocation id)."""

    def __init__(self, params, shows):
        self.params = params
        self.shows = list(shows)
        self.commands = []

    def get_bin_path(self, name):
        return "/usr/bin/" + name

    def run_command(self, cmd):
        self.commands.append(cmd)
        if cmd[1] == "show":
            text = self.shows.pop(0) if len(self.shows) > 1 else self.shows[0]
            return 0, text, ""
        return 0, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", ""


def test_waiter_reads_the_journal_of_every_run_it_saw(monkeypatch):
    monkeypatch.setattr(mod, "probe", lambda *a, **k: {"state": "loading", "detail": "connection refused", "models": []})
    shows = [
        "ActiveState=activating\nNRestarts=0\nInvocationID=first\n",
        "ActiveState=activating\nNRestarts=1\nInvocationID=second\n",
    ]
    params = waiter_params(since=12345.0)
    module = FakeModule(params, shows)
    result = mod.Waiter(module).run()
    assert result["state"] == "failed"
    journal = [c for c in module.commands if c[0].endswith("journalctl")]
    assert journal == [mod.journal_command("/usr/bin/journalctl", "vllm.service", ["first", "second"])]
    assert result["journal_tail"]


def test_restart_began_counts_from_the_old_runs_stop_or_the_new_runs_start():
    unit = {"ActiveExitTimestampMonotonic": "100000000", "InactiveExitTimestampMonotonic": "104000000"}
    # now = 1,800,000,000 s on the device's clock, 110 s since boot
    assert mod.restart_began(unit, "active", 1800000000.0, 110.0) == 1799999990.0
    assert mod.restart_began(unit, "failed", 1800000000.0, 110.0) == 1799999994.0
    assert mod.restart_began(unit, "inactive", 1800000000.0, 110.0) == 1799999994.0


def test_restart_began_is_none_without_a_usable_timestamp():
    assert mod.restart_began({"ActiveExitTimestampMonotonic": "100000000"}, None, 1800000000.0, 110.0) is None
    assert mod.restart_began({}, "active", 1800000000.0, 110.0) is None
    assert mod.restart_began({"ActiveExitTimestampMonotonic": "0"}, "active", 1800000000.0, 110.0) is None
    assert mod.restart_began({"ActiveExitTimestampMonotonic": "n/a"}, "active", 1800000000.0, 110.0) is None
    # a timestamp after now is not a restart of this wait
    assert mod.restart_began({"ActiveExitTimestampMonotonic": "200000000"}, "active", 1800000000.0, 110.0) is None


def test_waiter_times_the_restart_on_the_devices_clock(monkeypatch):
    """The restart began 5 s before the wait by the device's monotonic clock: the result says so in epoch seconds."""
    monkeypatch.setattr(mod, "probe", lambda *a, **k: {"state": "ready", "detail": "", "models": ["m"]})
    stop_began = int((time.monotonic() - 5.0) * 1e6)
    show = "ActiveState=activating\nNRestarts=0\nInvocationID=new\nActiveExitTimestampMonotonic=%d\nInactiveExitTimestampMonotonic=%d\n"
    shows = [show % (stop_began, stop_began + 2000000)]
    params = waiter_params(restarted_from="active")
    module = FakeModule(params, shows)
    result = mod.Waiter(module).run()
    assert result["ready"]
    assert abs(result["restart_began_at"] - (result["started_at"] - 5.0)) < 0.5
    command = next(c for c in module.commands if c[1] == "show")
    assert "ActiveExitTimestampMonotonic" in command[3] and "InactiveExitTimestampMonotonic" in command[3]
    params["restarted_from"] = "failed"
    result = mod.Waiter(FakeModule(params, shows)).run()
    assert abs(result["restart_began_at"] - (result["started_at"] - 3.0)) < 0.5
