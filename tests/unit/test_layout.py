# SPDX-License-Identifier: Apache-2.0
"""The layout of the shared code: no file under plugins/module_utils or plugins/plugin_utils grows past
MAX_LINES; a file that does is split by concern (see docs/devel/architecture.md, "Where to change what")."""

import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FOLDERS = ("plugins/module_utils", "plugins/plugin_utils")
# Aim for at most about 600 lines a file; this is the hard limit.
MAX_LINES = 800


def _files():
    for folder in FOLDERS:
        for top, dirs, names in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    yield os.path.join(top, name)


def _lines(path):
    with open(path, "rb") as handle:
        return sum(1 for _line in handle)


def test_the_size_check_sees_the_shared_code():
    found = [os.path.relpath(p, ROOT) for p in _files()]
    assert "plugins/module_utils/_stats/sequential.py" in found
    assert "plugins/module_utils/_bench/runner.py" in found
    assert "plugins/plugin_utils/_planning/planner.py" in found


def test_no_shared_code_file_is_over_the_line_limit():
    too_long = ["%s: %d lines" % (os.path.relpath(p, ROOT), n) for p, n in ((p, _lines(p)) for p in _files()) if n > MAX_LINES]
    assert too_long == [], "over %d lines, split these by concern: %s" % (MAX_LINES, ", ".join(too_long))
