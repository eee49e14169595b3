# SPDX-License-Identifier: Apache-2.0
"""playbooks/summary.yml for real: ansible-playbook on localhost with an inventory whose hosts carry
``speculative_decoding_result`` as host variables. The devices are never contacted (the play runs on
localhost only), so the inventory points at nothing."""

import json
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugin_utils"))
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._report import run_id  # noqa: E402
from test_report_fixtures import T0, fleet, result  # noqa: E402
from test_report_html import gain_chart, parse  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
PLAYBOOK = os.path.join(ROOT, "playbooks", "summary.yml")
BIN = os.path.dirname(sys.executable)
ODD_REASON = "vLLM said: </td><script>alert(1)</script> & \"quoted\" 'single'"


def write_inventory(tmp_path, results, without_result=(), group="specdec_fleet", locked_only=()):
    # the role's main entry point set the result last (step main); a host whose run ended after it took its
    # rollout lock (step lock) has no result of the run yet
    hosts = {r["host"]: {"ansible_host": "192.0.2.10", "speculative_decoding_result": dict(r, step="main")} for r in results}
    hosts.update({h: {"ansible_host": "192.0.2.11"} for h in without_result})
    hosts.update({h: {"ansible_host": "192.0.2.13", "speculative_decoding_result": {"step": "lock", "host": h, "outcome": None}} for h in locked_only})
    inv = {"all": {"children": {group: {"hosts": hosts}, "bystanders": {"hosts": {"other-01": {"ansible_host": "192.0.2.12"}}}}}}
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps(inv))
    return str(path)


def run(inventory, report_dir, *extra, rc=0):
    env = dict(
        os.environ,
        HOME=os.path.join(ROOT, ".cache", "home"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_DEPRECATION_WARNINGS="false",
        ANSIBLE_LOCALHOST_WARNING="0",
    )
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", inventory, PLAYBOOK, "-e", json.dumps({"speculative_decoding_report_dir": str(report_dir)}), *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        pytest.fail("no JSON from ansible-playbook: %s %s" % (proc.stdout[-2000:], proc.stderr[-2000:]))
    assert proc.returncode == rc, (proc.returncode, proc.stdout[-3000:], proc.stderr[-2000:])
    assert set(doc["stats"]) == {"localhost"}, doc["stats"]  # no device was contacted
    return doc


def task_result(doc, name):
    for play in doc["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == name:
                return task["hosts"]["localhost"]
    raise AssertionError("no task %r" % name)


def files(report_dir):
    return sorted(str(p.relative_to(report_dir)) for p in report_dir.rglob("*") if p.is_file())


def test_two_runs_keep_the_history(tmp_path):
    results = fleet()
    results[0]["reason"] = ODD_REASON
    inventory = write_inventory(tmp_path, results, without_result=["gone-01"], locked_only=["locked-01"])
    report = tmp_path / "report"

    # two rollouts that started two hours and one hour ago
    started1, started2 = time.time() - 7200, time.time() - 3600
    id1, id2 = run_id(started1), run_id(started2)
    first = run(inventory, report, "-e", json.dumps({"jetson_llm_run_started": started1}))
    table = task_result(first, "Per-host table")["msg"]
    assert table[0].split()[:4] == ["host", "family", "method", "k"]
    assert any(line.startswith("orin-01 ") and line.endswith("keep (strong)") for line in table)
    assert "hosts: 6; keep 3, revert 2, skip 1" in table and "gone-01: no result (unreachable, failed, or stopped by the rollout)" in table
    # a host whose run ended after it took its lock has no result of the run: missing, like an unreachable one
    assert "locked-01: no result (unreachable, failed, or stopped by the rollout)" in table
    assert task_result(first, "Where the time went")["msg"].startswith("wall time ")
    run1 = "runs/" + id1
    assert files(report) == ["index.json", "latest.html", "latest.json", run1 + "/fleet.json", run1 + "/report.html"]
    fleet_json = json.loads((report / run1 / "fleet.json").read_text())
    assert fleet_json["run"]["id"] == id1 and fleet_json["run"]["target_group"] == "specdec_fleet"
    assert fleet_json["counts"] == {"keep": 3, "revert": 2, "skip": 1, "missing": 2} and fleet_json["missing"] == ["gone-01", "locked-01"]
    assert sorted(h["host"] for h in fleet_json["hosts"]) == sorted(r["host"] for r in results)
    assert (report / "latest.json").read_text() == (report / run1 / "fleet.json").read_text()
    assert not (report / "latest.html").is_symlink() and not (report / "latest.json").is_symlink()
    first_html = (report / run1 / "report.html").read_text()
    root = parse(first_html)
    assert len(gain_chart(root).find_all("rect", "bar")) == 5 and len(gain_chart(root).find_all("path", "ci")) == 5
    assert ODD_REASON in root.all_text() and "<script>" not in first_html

    second = run(inventory, report, "-e", json.dumps({"jetson_llm_run_started": started2}))
    assert task_result(second, "Where the report is")["msg"].startswith("report: %s/latest.html" % report)
    index = json.loads((report / "index.json").read_text())
    assert [e["id"] for e in index["runs"]] == [id1, id2]
    assert [e["counts"] for e in index["runs"]] == [{"keep": 3, "revert": 2, "skip": 1, "missing": 2}] * 2
    assert all(e["wall_s"] > 0 and e["hosts"] == 6 for e in index["runs"])
    assert json.loads((report / "latest.json").read_text())["run"]["id"] == id2
    assert (report / run1 / "report.html").read_text() == first_html  # an earlier run is never rewritten
    latest = parse((report / "latest.html").read_text())
    history = next(t for t in latest.find_all("table") if "Run (UTC)" in t.all_text())
    links = [a.attrs["href"] for a in history.find_all("a")]
    assert links == ["runs/%s/report.html" % id2, "runs/%s/fleet.json" % id2, "runs/%s/report.html" % id1, "runs/%s/fleet.json" % id1]
    in_run = parse((report / "runs" / id2 / "report.html").read_text())
    assert "../../runs/%s/report.html" % id1 in [a.attrs["href"] for a in in_run.find_all("a")]

    # the same start again (summary.yml run on its own after a rollout): a new run, not an overwrite
    run(inventory, report, "-e", json.dumps({"jetson_llm_run_started": started2}))
    index = json.loads((report / "index.json").read_text())
    assert [e["id"] for e in index["runs"]] == [id1, id2, id2 + "-2"]


def test_check_mode_writes_nothing(tmp_path):
    inventory = write_inventory(tmp_path, fleet()[:2])
    report = tmp_path / "report"
    doc = run(inventory, report, "--check")
    assert not report.exists()
    assert task_result(doc, "Check mode writes no report")["msg"].startswith("check mode: the report of run ")
    assert any(line.startswith("orin-01 ") for line in task_result(doc, "Per-host table")["msg"])


def test_no_host_with_a_result(tmp_path):
    inventory = write_inventory(tmp_path, [], without_result=["dev-1", "dev-2"])
    report = tmp_path / "report"
    doc = run(inventory, report)
    assert task_result(doc, "Per-host table")["msg"] == [
        "no host produced a result",
        "dev-1: no result (unreachable, failed, or stopped by the rollout)",
        "dev-2: no result (unreachable, failed, or stopped by the rollout)",
    ]
    latest = json.loads((report / "latest.json").read_text())
    assert latest["hosts"] == [] and latest["counts"] == {"keep": 0, "revert": 0, "skip": 0, "missing": 2}
    assert "No host produced a result in this run." in parse((report / "latest.html").read_text()).all_text()
    assert len(json.loads((report / "index.json").read_text())["runs"]) == 1


def test_other_target_group_and_a_skip_only_fleet(tmp_path):
    results = [result("nano-0%d" % n, "orin_nano", "8gb", outcome="skip", start=T0 + n) for n in range(3)]
    inventory = write_inventory(tmp_path, results, group="lab")
    report = tmp_path / "report"
    run(inventory, report, "-e", json.dumps({"jetson_llm_target_group": "lab"}))
    latest = json.loads((report / "latest.json").read_text())
    assert latest["counts"]["skip"] == 3 and latest["run"]["target_group"] == "lab"
    chart = gain_chart(parse((report / "latest.html").read_text()))
    assert len(chart.find_all("g", "host")) == 3 and not chart.find_all("rect", "bar")


def test_failed_hosts_and_a_stopped_rollout_fail_the_run_after_the_report(tmp_path):
    results = fleet()[:2]
    failed = result("orin-09", "agx_orin", "64gb", outcome="skip", start=T0 + 500)
    failed.update(outcome="failed", decision="failed", label="failed", reason="host orin-09: the decided configuration does not serve")
    inventory = write_inventory(tmp_path, [*results, failed], without_result=["later-01"])
    report = tmp_path / "report"
    stopped = "1 of 2 hosts of a batch failed (orin-09), more than jetson_llm_max_fail_percentage 0 % allows"
    doc = run(inventory, report, "-e", json.dumps({"jetson_llm_rollout_stopped": stopped}), rc=2)
    # the report is complete first
    latest = json.loads((report / "latest.json").read_text())
    assert latest["counts"] == {"keep": 1, "revert": 1, "skip": 0, "failed": 1, "missing": 1}
    assert any(line.startswith("orin-09 ") and line.endswith("failed") for line in task_result(doc, "Per-host table")["msg"])
    # then the run fails, saying why
    end = task_result(doc, "Fail the run when a host failed or the rollout was stopped (after the report is written)")
    assert end["failed"] is True
    assert end["msg"] == [
        "the rollout stopped: " + stopped,
        "failed: orin-09 - host orin-09: the decided configuration does not serve",
        "not reached: later-01",
    ]


def test_a_run_without_failures_passes_the_last_check(tmp_path):
    doc = run(write_inventory(tmp_path, fleet()), tmp_path / "report")
    assert task_result(doc, "Fail the run when a host failed or the rollout was stopped (after the report is written)").get("skipped") is True
