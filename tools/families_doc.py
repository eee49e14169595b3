# SPDX-License-Identifier: Apache-2.0
"""Write the table of docs/families.md from the family table (plugins/module_utils/_families.py).

    python3 tools/families_doc.py          # rewrite the table in docs/families.md
    python3 tools/families_doc.py --check  # exit 1 and show the difference when the page is out of date

The table is the lines starting with "| `" right under its header; the rest of the page is prose.
"""

import argparse
import difflib
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "plugins", "module_utils", "_families.py")
DOC = os.path.join(ROOT, "docs", "families.md")


def load_families(path=SOURCE):
    spec = importlib.util.spec_from_file_location("_families", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _version(value):
    return ".".join(str(part) for part in value) if value else "-"


def row(name, entry):
    serve = entry["serve"]
    return "| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        name,
        entry["generation"] or "-",
        entry["soc"] or "-",
        ", ".join(entry["variants"]) or "-",
        entry["policy"],
        "R%d" % entry["min_l4t"] if entry["min_l4t"] else "-",
        _version(entry["min_vllm"]),
        entry["num_speculative_tokens"] or "-",
        ", ".join(entry["quantizations"]),
        serve["gpu_memory_utilization"],
        serve["max_model_len"],
        serve["max_num_seqs"],
    )


def rows(table):
    return [row(name, entry) for name, entry in table.items()]


def render(text, table):
    """The page with its table rows replaced by the rows of ``table`` (the rows must form one run)."""
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith("| `")]
    if not at or at != list(range(at[0], at[-1] + 1)):
        raise ValueError("the page has no single run of table rows ('| `...') to replace")
    new = lines[: at[0]] + rows(table) + lines[at[-1] + 1 :]
    return "\n".join(new) + ("\n" if text.endswith("\n") else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail when the page is out of date; change nothing")
    ap.add_argument("--doc", default=DOC)
    args = ap.parse_args(argv)
    with open(args.doc) as handle:
        text = handle.read()
    new = render(text, load_families().TABLE)
    if new == text:
        print("%s: the family table is up to date" % os.path.relpath(args.doc, ROOT))
        return 0
    if args.check:
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), args.doc, "from _families.py"))
        print("%s is out of date: run python3 tools/families_doc.py" % os.path.relpath(args.doc, ROOT))
        return 1
    with open(args.doc, "w") as handle:
        handle.write(new)
    print("%s: table rewritten from plugins/module_utils/_families.py" % os.path.relpath(args.doc, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
