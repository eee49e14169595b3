# SPDX-License-Identifier: Apache-2.0
"""The released collection: what the Galaxy tarball holds, and the README's account of its plugins."""

import os
import re
import subprocess
import sys
import tarfile

import pytest
import tomllib
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GALAXY = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
DEVELOPMENT_ONLY = ("tests/vllm_sim/", "tests/fleet/", "tests/bench/", "mk/", "tools/", "docs/devel/", "molecule/")


def _plugins(kind):
    folder = os.path.join(ROOT, "plugins", kind)
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_"))


@pytest.fixture(scope="module")
def tarball_members(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    env = dict(os.environ, HOME=os.path.join(ROOT, ".cache", "home"))
    proc = subprocess.run(
        [GALAXY, "collection", "build", "--output-path", str(out), ROOT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (path,) = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".tar.gz")]
    with tarfile.open(path) as tar:
        return tar.getnames()


def test_tarball_leaves_out_development_files(tarball_members):
    leaked = [m for m in tarball_members if m.startswith(DEVELOPMENT_ONLY)]
    assert leaked == []
    for needed in ("plugins/modules/vllm_benchmark.py", "roles/vllm_server/tasks/main.yml", "playbooks/enable_speculation.yml"):
        assert needed in tarball_members


def test_readme_lists_every_public_plugin():
    with open(os.path.join(ROOT, "README.md")) as handle:
        readme = handle.read()
    table = "\n".join(line for line in readme.splitlines() if re.match(r"^\| (module|filter|role|playbook) \|", line))
    internal = "\n".join(line for line in readme.split("\n\n") if line.startswith("Internal (not an API"))
    for kind in ("modules", "filter"):
        for name in _plugins(kind):
            if name.endswith("_internal"):
                # role plumbing: listed as internal, documented as such, never in the content table
                assert "`%s`" % name in internal and "`%s`" % name not in table, name
                with open(os.path.join(ROOT, "plugins", kind, name + ".py")) as handle:
                    doc = yaml.safe_load(handle.read().split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
                assert doc["short_description"].endswith("(not an API)"), name
            else:
                assert "`%s`" % name in table, "README's content table does not list the %s %s" % (kind, name)


def test_the_public_filters_are_few_and_the_plumbing_is_internal():
    filters = set(_plugins("filter"))
    assert {f for f in filters if f.endswith("_internal")} == {"trial_internal", "report_internal"}
    assert len(filters) <= 14


def test_every_module_is_in_an_action_group():
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as handle:
        runtime = yaml.safe_load(handle)
    grouped = set(m for members in runtime["action_groups"].values() for m in members)
    assert set(_plugins("modules")) <= grouped, sorted(set(_plugins("modules")) - grouped)


def _python_files():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "__pycache__")]
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(top, name)


def test_simulator_and_fleet_are_packages_not_path_edits():
    """tests/vllm_sim and tests/fleet are Python packages with console scripts (`vllm`, `jlfleet`);
    code that uses them imports the installed package and never edits sys.path to find it."""
    for project, name, script in (("tests/vllm_sim", "jetson-llm-vllm-sim", "vllm"), ("tests/fleet", "jetson-llm-fleet", "jlfleet")):
        with open(os.path.join(ROOT, project, "pyproject.toml"), "rb") as handle:
            meta = tomllib.load(handle)
        assert meta["project"]["name"] == name
        assert script in meta["project"]["scripts"]
    users = 0
    for path in _python_files():
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if re.search(r"^\s*(from|import) (vllm_sim|jlfleet)\b", text, re.M):
            users += 1
            assert not re.search(r"sys\.path\.(insert|append)", text), os.path.relpath(path, ROOT)
    assert users >= 10


def test_no_file_points_at_reference_files_outside_the_repository():
    """Comments, messages and docs state a fact or cite a file of the repository, never a reference file that
    readers of the repository do not have."""
    outside = re.compile("shared" + "/reference|" + r"\b(vllm|jetson|test-fleet)\.md\b")  # split so that this line does not match
    kinds = (".py", ".md", ".yml", ".yaml", ".mk", ".sh", ".j2", ".toml", ".cfg", ".ini")
    checked, found = 0, []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "__pycache__")]
        for name in files:
            if name.endswith(kinds) or name == "Makefile":
                path = os.path.join(top, name)
                with open(path, encoding="utf-8", errors="replace") as handle:
                    for number, line in enumerate(handle, 1):
                        if outside.search(line):
                            found.append("%s:%d" % (os.path.relpath(path, ROOT), number))
                checked += 1
    assert checked > 200
    assert found == []
