# SPDX-License-Identifier: Apache-2.0
"""tools/test_times.py: the per-part times of `make test` (docs/devel/testing.md)."""

import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_spec = importlib.util.spec_from_file_location("test_times_tool", os.path.join(ROOT, "tools", "test_times.py"))
tt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tt)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.fleet.tests.test_rollout" name="test_a" time="640.5"/>
<testcase classname="tests.fleet.tests.test_rollout" name="test_b" time="10.0"><failure message="x"/></testcase>
<testcase classname="tests.unit.test_x.TestGroup" name="test_c" time="1.25"/>
<testcase classname="tests.unit.test_x.TestGroup" name="test_d" time="0.75"><skipped message="y"/></testcase>
</testsuite></testsuites>
"""


def test_a_junit_class_name_maps_to_its_file():
    assert tt._module_of("tests.fleet.tests.test_rollout") == "tests/fleet/tests/test_rollout.py"
    assert tt._module_of("tests.unit.test_x.TestGroup") == "tests/unit/test_x.py"
    assert tt._module_of("molecule.conftest") == "molecule/conftest.py"


def test_junit_times_are_summed_per_file_slowest_first(tmp_path):
    path = tmp_path / "j.xml"
    path.write_text(JUNIT)
    files = tt._junit_files(str(path))
    assert [(f["name"], f["seconds"], f["tests"], f["failed"], f["skipped"]) for f in files] == [
        ("tests/fleet/tests/test_rollout.py", 650.5, 2, 1, 0),
        ("tests/unit/test_x.py", 2.0, 2, 0, 1),
    ]


def test_a_missing_or_broken_junit_file_gives_no_subparts(tmp_path):
    assert tt._junit_files(str(tmp_path / "absent.xml")) == []
    broken = tmp_path / "b.xml"
    broken.write_text("<testsuites><testcase")
    assert tt._junit_files(str(broken)) == []


def test_the_table_shows_parts_subparts_and_the_total():
    data = {
        "cores": 2,
        "total_seconds": 125.0,
        "parts": [
            {"part": "lint", "seconds": 20.0, "result": "passed", "subparts": []},
            {
                "part": "molecule",
                "seconds": 100.0,
                "result": "FAILED",
                "subparts": [{"name": "molecule container", "seconds": 99, "result": "FAILED", "verifier": "no verifier run"}],
            },
            {
                "part": "units",
                "seconds": 5.0,
                "result": "passed",
                "subparts": [{"name": "f%d.py" % i, "seconds": 10 - i, "tests": 1, "failed": 0} for i in range(10)],
            },
        ],
    }
    text = tt.table(data)
    assert "lint             passed      20.0" in text
    assert "molecule         FAILED     100.0" in text
    assert "molecule container" in text and "(FAILED; verifier: no verifier run)" in text
    # the units show their slowest files and sum up the rest
    assert "f7.py" in text and "f8.py" not in text and "2 other files" in text
    assert text.rstrip().endswith("total                       125.0  (2.1 min)")


def test_run_times_each_part_goes_on_after_a_failure_and_fails_at_the_end(tmp_path, monkeypatch):
    calls = []

    def fake_call(argv, cwd):
        calls.append(argv[-1])
        return 2 if argv[-1] == "bad" else 0

    out = tmp_path / "build" / "test-times.json"
    monkeypatch.setattr(tt.subprocess, "call", fake_call)
    monkeypatch.setattr(tt, "OUT", str(out))
    monkeypatch.setattr(tt, "PARTS_DIR", str(tmp_path / "parts"))
    assert tt.run(["good", "bad", "after"]) == 1
    assert calls == ["good", "bad", "after"]
    data = json.loads(out.read_text())
    assert [(p["part"], p["rc"], p["result"]) for p in data["parts"]] == [("good", 0, "passed"), ("bad", 2, "FAILED"), ("after", 0, "passed")]
    assert data["cores"] == os.cpu_count() and data["total_seconds"] >= 0


def test_show_without_a_times_file_says_so(tmp_path):
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "test_times.py"), "show", str(tmp_path / "none.json")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1 and "no times to show" in proc.stderr
