# SPDX-License-Identifier: Apache-2.0
"""Extract selected collections from the PyPI `ansible` wheel into a collections path."""

import sys
import zipfile


def main(argv):
    if len(argv) < 4:
        print("usage: extract_collections.py WHEEL DEST NAMESPACE/NAME...", file=sys.stderr)
        return 2
    wheel, dest, wanted = argv[1], argv[2], argv[3:]
    prefixes = tuple("ansible_collections/%s/" % w.strip("/") for w in wanted)
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if m.startswith(prefixes)]
        missing = [p for p in prefixes if not any(m.startswith(p) for m in members)]
        if missing:
            print("not in %s: %s" % (wheel, ", ".join(missing)), file=sys.stderr)
            return 1
        zf.extractall(dest, members)
    print("extracted %d files for %s" % (len(members), ", ".join(wanted)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
