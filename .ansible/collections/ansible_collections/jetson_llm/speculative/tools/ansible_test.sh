#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run ansible-test on a copy of the collection laid out as ansible_collections/jetson_llm/speculative,
# which ansible-test requires. Only files git knows (tracked or untracked-not-ignored) are copied.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/.cache/ansible-test/ansible_collections/jetson_llm/speculative
rm -rf "$work" && mkdir -p "$work"
cd "$root"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] || continue
  mkdir -p "$work/$(dirname "$f")" && cp -p "$f" "$work/$f"
done
cd "$work"
# the copy needs to be a git tree for ansible-test to list files the same way
git init -q . && git add -A >/dev/null
case "${1:-sanity}" in
  sanity)
    exec "$root/.venv/bin/ansible-test" sanity --color no --venv --python "${ANSIBLE_TEST_PYTHON:-3.11}" "${@:2}" ;;
  *) exec "$root/.venv/bin/ansible-test" "$@" ;;
esac
