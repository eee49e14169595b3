# SPDX-License-Identifier: Apache-2.0
"""Run the parts of `make test` one after the other and time each (docs/devel/testing.md).

    tools/test_times.py run PART [PART ...]   run `make PART` for each, go on after a failure,
                                              write build/test-times.json, print the table, exit 1
                                              when any part failed
    tools/test_times.py show [FILE]           print the table of a times file (default build/test-times.json)

Inside a part, the fleet tests and the unit tests write JUnit XML and the Molecule loop one line per
scenario into .cache/test-times/; the table shows those sub-parts under their part (each fleet test file,
each Molecule scenario, the slowest unit test files). Standard library only.
"""

import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PARTS_DIR = os.path.join(ROOT, ".cache", "test-times")
OUT = os.path.join(ROOT, "build", "test-times.json")
# sub-part files written by the parts themselves (mk/*.mk, Makefile)
JUNIT = {"units": "units-junit.xml", "fleet-test": "fleet-junit.xml", "sim-test": "sim-junit.xml"}
MOLECULE = "molecule.jsonl"
UNIT_FILES_SHOWN = 8


def _module_of(classname):
    """tests.unit.roles.test_x.TestY -> tests/unit/roles/test_x.py (the file of a JUnit class name)."""
    parts = classname.split(".")
    modules = [i for i, part in enumerate(parts) if part.startswith("test_") or part == "conftest"]
    end = modules[-1] + 1 if modules else len(parts)
    return "/".join(parts[:end]) + ".py"


def _junit_files(path):
    """Seconds and test counts per test file from a pytest JUnit XML file (setup and teardown included)."""
    try:
        tree = ET.parse(path)  # noqa: S314 (a file this run's own pytest wrote)
    except (OSError, ET.ParseError):
        return []
    files = {}
    for case in tree.iter("testcase"):
        name = case.get("file") or _module_of(case.get("classname") or "?")
        entry = files.setdefault(name, {"name": name, "seconds": 0.0, "tests": 0, "failed": 0, "skipped": 0})
        entry["seconds"] += float(case.get("time") or 0)
        entry["tests"] += 1
        if case.find("failure") is not None or case.find("error") is not None:
            entry["failed"] += 1
        elif case.find("skipped") is not None:
            entry["skipped"] += 1
    return sorted(files.values(), key=lambda e: -e["seconds"])


def _molecule(path):
    scenarios = []
    try:
        with open(path, encoding="utf-8") as handle:
            for raw in handle:
                if raw.strip():
                    scenarios.append(json.loads(raw))
    except (OSError, ValueError):
        return []
    return scenarios


def _subparts(part):
    if part in JUNIT:
        files = _junit_files(os.path.join(PARTS_DIR, JUNIT[part]))
        for entry in files:
            entry["seconds"] = round(entry["seconds"], 1)
        return files
    if part == "molecule":
        return _molecule(os.path.join(PARTS_DIR, MOLECULE))
    return []


def run(parts):
    os.makedirs(PARTS_DIR, exist_ok=True)
    for name in [*JUNIT.values(), MOLECULE]:
        try:
            os.remove(os.path.join(PARTS_DIR, name))
        except FileNotFoundError:
            pass
    began = time.time()
    results = []
    for part in parts:
        print("\n==== make test: %s" % part, flush=True)
        start = time.monotonic()
        rc = subprocess.call(["make", "--no-print-directory", part], cwd=ROOT)
        seconds = round(time.monotonic() - start, 1)
        results.append({"part": part, "seconds": seconds, "rc": rc, "result": "passed" if rc == 0 else "FAILED", "subparts": _subparts(part)})
        print("==== make test: %s %s in %.1f s" % (part, "passed" if rc == 0 else "FAILED (rc %d)" % rc, seconds), flush=True)
    data = {
        "began_at": began,
        "total_seconds": round(time.time() - began, 1),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "ci": os.environ.get("CI") == "true",
        "parts": results,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    print()
    show(OUT)
    failed = [r["part"] for r in results if r["rc"] != 0]
    if failed:
        print("make test: failed: %s" % " ".join(failed), file=sys.stderr)
        return 1
    print("make test: all gates passed")
    return 0


def table(data):
    lines = ["make test, per part (seconds; %s cores):" % data.get("cores", "?")]
    for part in data["parts"]:
        lines.append("  %-16s %-7s %8.1f" % (part["part"], part["result"], part["seconds"]))
        subparts = part.get("subparts") or []
        shown = subparts[:UNIT_FILES_SHOWN] if part["part"] == "units" else subparts
        for sub in shown:
            if "tests" in sub:
                extra = " (%d tests%s)" % (sub["tests"], ", %d failed" % sub["failed"] if sub.get("failed") else "")
            else:
                extra = " (%s; verifier: %s)" % (sub.get("result", "?"), sub.get("verifier", "?"))
            lines.append("      %-44s %8.1f%s" % (sub["name"], sub["seconds"], extra))
        if len(shown) < len(subparts):
            rest = subparts[len(shown) :]
            lines.append("      %-44s %8.1f" % ("%d other files" % len(rest), sum(s["seconds"] for s in rest)))
    lines.append("  %-24s %8.1f  (%.1f min)" % ("total", data["total_seconds"], data["total_seconds"] / 60.0))
    return "\n".join(lines)


def show(path):
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        print("test_times: no times to show (%s)" % exc, file=sys.stderr)
        return 1
    print(table(data))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "run":
        return run(argv[1:])
    if argv and argv[0] == "show":
        return show(argv[1] if len(argv) > 1 else OUT)
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
