# SPDX-License-Identifier: Apache-2.0
"""The service role's contract: its private names (``__vllm_server_*``) are read only inside it; the
speculative_decoding role and the playbooks read its documented inputs and its one public result
(``vllm_server_result``), and include its entry points by name (``tasks_from``), never by file path.

(The playbooks still read the speculative_decoding role's private results, such as
``__speculative_decoding_result``; that role is the collection's top level and is not yet under this rule.)"""

import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(name for name in os.listdir(os.path.join(ROOT, "roles")) if not name.startswith("."))
# The roles whose private names nobody else reads.
CONTRACT_ROLES = ("vllm_server",)
PRIVATE = re.compile(r"__(%s)_[a-z0-9_]+" % "|".join(CONTRACT_ROLES))


def _yaml_files(*folders):
    for folder in folders:
        for top, dirs, names in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = sorted(dirs)
            for name in sorted(names):
                if name.endswith((".yml", ".yaml", ".j2")):
                    yield os.path.join(top, name)


def _private_reads():
    """(file, line number, name) for every private name of a role used outside that role."""
    found = []
    for path in _yaml_files("roles", "playbooks"):
        rel = os.path.relpath(path, ROOT)
        owner = rel.split(os.sep)[1] if rel.startswith("roles" + os.sep) else None
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                for match in PRIVATE.finditer(line):
                    if match.group(1) != owner:
                        found.append("%s:%d: %s" % (rel, number, match.group(0)))
    return found


def test_the_check_sees_both_roles_and_a_private_name():
    assert {"speculative_decoding", "vllm_server"} <= set(ROLES)
    assert PRIVATE.search("{{ __vllm_server_ready.ready }}")
    assert not PRIVATE.search("{{ vllm_server_result.ready }}")


def test_no_role_or_playbook_reads_another_roles_private_variables():
    assert _private_reads() == []


def test_other_roles_include_vllm_server_by_entry_point_not_by_path():
    by_path = []
    for path in _yaml_files("roles/speculative_decoding", "playbooks"):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if re.search(r"include_tasks:.*vllm_server", text) or "roles/vllm_server/tasks" in text:
            by_path.append(os.path.relpath(path, ROOT))
    assert by_path == []


BINDING_ONLY = {"handlers"}  # entry points that set no result


def _tasks(items):
    for item in items or []:
        if isinstance(item, dict):
            yield item
            for key in ("block", "rescue", "always"):
                yield from _tasks(item.get(key))


def test_every_vllm_server_entry_point_sets_the_public_result():
    tasks_dir = os.path.join(ROOT, "roles", "vllm_server", "tasks")
    with open(os.path.join(ROOT, "roles", "vllm_server", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        entry_points = sorted(yaml.safe_load(handle)["argument_specs"])
    assert {"main", "facts", "configure", "snapshot", "restart", "restore", "live", "verify"} <= set(entry_points)
    missing = []
    for entry in entry_points:
        if entry in BINDING_ONLY:
            continue
        with open(os.path.join(tasks_dir, entry + ".yml"), encoding="utf-8") as handle:
            tasks = list(_tasks(yaml.safe_load(handle)))
        steps = [t["vars"]["__vllm_server_step"] for t in tasks if t.get("ansible.builtin.import_tasks") == "result.yml"]
        if not steps:
            missing.append(entry)
        # the last task of the entry point that returns a result names this entry point ("apply" for main)
        elif steps[-1] != ("apply" if entry == "main" else entry):
            missing.append("%s (last step %s)" % (entry, steps[-1]))
    assert missing == []


def test_the_binding_entry_point_changes_nothing_and_precedes_every_revert_flush():
    """``handlers`` only binds the role's handlers (a no-op), and every flush that may run the revert
    handler comes right after an unconditional include of it: otherwise the restore runs as the handler
    copy of the latest conditional include, under its conditions (the restore skipped, the device left
    serving speculation)."""
    with open(os.path.join(ROOT, "roles", "vllm_server", "tasks", "handlers.yml"), encoding="utf-8") as handle:
        tasks = list(_tasks(yaml.safe_load(handle)))
    assert [t.get("ansible.builtin.meta") for t in tasks] == ["noop"]
    flushes = 0
    for path in _yaml_files(os.path.join("roles", "speculative_decoding", "tasks")):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if "notify: revert speculative decoding" not in text:
            continue
        for items in _task_lists(yaml.safe_load(text)):
            for index, task in enumerate(items):
                if task.get("ansible.builtin.meta") != "flush_handlers":
                    continue
                flushes += 1
                before = items[index - 1] if index else {}
                include = before.get("ansible.builtin.include_role") or {}
                assert include.get("tasks_from") == "handlers.yml" and "when" not in before, (path, task.get("name"))
    assert flushes >= 2


def _task_lists(items):
    if isinstance(items, list):
        yield [item for item in items if isinstance(item, dict)]
        for item in items:
            if isinstance(item, dict):
                for key in ("block", "rescue", "always"):
                    yield from _task_lists(item.get(key))


def test_the_result_is_documented_with_every_field_it_sets():
    with open(os.path.join(ROOT, "roles", "vllm_server", "tasks", "result.yml"), encoding="utf-8") as handle:
        text = handle.read()
    fields = set(re.findall(r"'([a-z_]+)':", text))
    with open(os.path.join(ROOT, "roles", "vllm_server", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        doc = "\n".join(yaml.safe_load(handle)["argument_specs"]["main"]["description"])
    undocumented = sorted(field for field in fields if "C(%s)" % field not in doc)
    assert undocumented == []
