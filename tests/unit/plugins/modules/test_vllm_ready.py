# SPDX-License-Identifier: Apache-2.0
"""vllm_ready module: the journal is read by the unit's invocation ids, not by a clock."""

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
    params = {
        "url": "http://127.0.0.1:8000",
        "served_model_name": None,
        "api_key": None,
        "timeout": 5.0,
        "delay": 0.01,
        "service": "vllm.service",
        "since": 12345.0,
        "fail_on_not_ready": False,
        "journal_lines": 5,
    }
    module = FakeModule(params, shows)
    result = mod.Waiter(module).run()
    assert result["state"] == "failed"
    journal = [c for c in module.commands if c[0].endswith("journalctl")]
    assert journal == [mod.journal_command("/usr/bin/journalctl", "vllm.service", ["first", "second"])]
    assert result["journal_tail"]
