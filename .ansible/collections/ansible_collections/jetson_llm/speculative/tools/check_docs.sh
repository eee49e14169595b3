#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ansible-doc must render every plugin of the collection (modules and filters).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=0
for f in "$root"/plugins/modules/*.py; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .py)
  "$root/.venv/bin/ansible-doc" -t module "jetson_llm.speculative.$name" > /dev/null
  n=$((n + 1))
done
for f in "$root"/plugins/filter/*.py; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .py)
  case "$name" in _*) continue ;; esac
  "$root/.venv/bin/ansible-doc" -t filter "jetson_llm.speculative.$name" > /dev/null
  n=$((n + 1))
done
listed=$("$root/.venv/bin/ansible-doc" -t module -l jetson_llm.speculative | wc -l)
echo "ansible-doc rendered $n plugins ($listed modules listed)"
[ "$n" -gt 0 ]
