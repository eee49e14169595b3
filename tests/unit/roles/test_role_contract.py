# SPDX-License-Identifier: Apache-2.0
"""The roles' contract: each role's private names (``__vllm_server_*``, ``__speculative_decoding_*``) are read only
inside it; other roles and the playbooks read its documented inputs and its one public result
(``vllm_server_result``, ``speculative_decoding_result``), set by every entry point, and include its entry points by
name (``tasks_from``), never by file path."""

import os
import re

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(name for name in os.listdir(os.path.join(ROOT, "roles")) if not name.startswith("."))
# The roles whose private names nobody else reads.
CONTRACT_ROLES = ("vllm_server", "speculative_decoding")
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
    assert PRIVATE.search("{{ hostvars['localhost'].__speculative_decoding_run_id }}")
    assert not PRIVATE.search("{{ vllm_server_result.ready }}")
    assert not PRIVATE.search("{{ speculative_decoding_result.lock.busy }}")


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


def _imported(tasks_dir, name):
    """The tasks of a task file in order, with the tasks of the files it imports statically (not result.yml) in place."""
    with open(os.path.join(tasks_dir, name), encoding="utf-8") as handle:
        tasks = list(_tasks(yaml.safe_load(handle)))
    for task in tasks:
        yield task
        imported = task.get("ansible.builtin.import_tasks")
        if imported and imported != "result.yml":
            yield from _imported(tasks_dir, imported)


# role -> (entry points it must have, the step name its main entry point gives)
ENTRY_POINTS = {
    "vllm_server": ({"main", "serve", "facts", "configure", "snapshot", "restart", "restore", "live", "verify"}, "apply"),
    "speculative_decoding": ({"main", "verify", "lock", "unlock"}, "main"),
}


@pytest.mark.parametrize("role", sorted(ENTRY_POINTS))
def test_every_entry_point_sets_the_public_result(role):
    tasks_dir = os.path.join(ROOT, "roles", role, "tasks")
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        entry_points = sorted(yaml.safe_load(handle)["argument_specs"])
    required, main_step = ENTRY_POINTS[role]
    assert required <= set(entry_points)
    missing = []
    for entry in entry_points:
        if entry in BINDING_ONLY:
            continue
        steps = [t["vars"]["__%s_step" % role] for t in _imported(tasks_dir, entry + ".yml") if t.get("ansible.builtin.import_tasks") == "result.yml"]
        if not steps:
            missing.append(entry)
        # the last task of the entry point that returns a result names this entry point ("apply" for vllm_server's main)
        elif steps[-1] != (main_step if entry == "main" else entry):
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


def test_the_speculative_decoding_result_is_documented_with_every_field_it_sets():
    """Every field of speculative_decoding_result: the record of main (record.yml), the lock of lock and unlock, the
    check of verify and result.yml's own, each named in the main entry point's description."""
    tasks_dir = os.path.join(ROOT, "roles", "speculative_decoding", "tasks")
    fields = set()
    with open(os.path.join(tasks_dir, "record.yml"), encoding="utf-8") as handle:
        for task in _tasks(yaml.safe_load(handle)):
            fields |= set((task.get("ansible.builtin.set_fact") or {}).get("__speculative_decoding_result") or {})
    assert {"outcome", "verdict", "elapsed_s", "cause", "num_speculative_tokens"} <= fields
    for name in ("result.yml", "lock.yml", "unlock.yml"):
        with open(os.path.join(tasks_dir, name), encoding="utf-8") as handle:
            fields |= set(re.findall(r"'([a-z_]+)':", handle.read()))
    fields |= {"check", "lock"}
    with open(os.path.join(ROOT, "roles", "speculative_decoding", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        doc = "\n".join(yaml.safe_load(handle)["argument_specs"]["main"]["description"])
    undocumented = sorted(field for field in fields if "C(%s)" % field not in doc)
    assert undocumented == []


def _includes(role, name):
    """(role, file) of every task file ``name`` of ``role`` includes or imports (include_role/import_role: tasks_from)."""
    with open(os.path.join(ROOT, "roles", role, "tasks", name), encoding="utf-8") as handle:
        tasks = list(_tasks(yaml.safe_load(handle)))
    found = []
    for task in tasks:
        for key in ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks"):
            if key in task:
                found.append((role, task[key]))
        for key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
            if key in task:
                found.append((task[key]["name"].rsplit(".", 1)[-1], task[key].get("tasks_from", "main.yml")))
    return found


def _depth(role, name, seen=()):
    """The longest include chain from a task file (0: it includes nothing)."""
    assert (role, name) not in seen, "include cycle through %s/%s" % (role, name)
    children = _includes(role, name)
    return max((1 + _depth(r, n, (*seen, (role, name))) for r, n in children), default=0)


def test_one_writer_of_the_service_files_and_a_role_that_stays_small():
    """The trial's role has at most 14 task files and no include chain deeper than 4 from any entry point; the
    baseline and the decided configuration are served by vllm_server's serve entry point (no switch.yml), and
    only vllm_server's configure.yml writes the service's files (with the one renderer, vllm_service_files)."""
    tasks_dir = os.path.join(ROOT, "roles", "speculative_decoding", "tasks")
    names = sorted(os.listdir(tasks_dir))
    assert len(names) <= 14 and "switch.yml" not in names, names
    with open(os.path.join(ROOT, "roles", "speculative_decoding", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        entry_points = sorted(yaml.safe_load(handle)["argument_specs"])
    depths = {entry: _depth("speculative_decoding", entry + ".yml") for entry in entry_points}
    assert max(depths.values()) <= 4, depths
    serves = [n for n in names if ("vllm_server", "serve.yml") in _includes("speculative_decoding", n)]
    assert {"trial.yml", "settle.yml"} <= set(serves), serves
    writers = []
    for path in _yaml_files("roles"):
        with open(path, encoding="utf-8") as handle:
            if "jetson_llm.speculative.vllm_service_files(" in handle.read():
                writers.append(os.path.relpath(path, ROOT))
    assert writers == [os.path.join("roles", "vllm_server", "tasks", "configure.yml")], writers
    # no template renders the unit or the configuration beside the renderer (the environment file is the one template)
    assert os.listdir(os.path.join(ROOT, "roles", "vllm_server", "templates")) == ["vllm.env.j2"]
