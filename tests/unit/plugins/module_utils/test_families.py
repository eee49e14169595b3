# SPDX-License-Identifier: Apache-2.0
"""The family table is the one definition: role defaults and docs agree with it; module_utils stay stdlib-only."""

import ast
import importlib.util
import os
import sys

import pytest
import yaml
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _families, _jetson
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning import planner
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering import argv as render_argv

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
OWN = "ansible_collections.jetson_llm.speculative.plugins.module_utils"


def _families_doc():
    spec = importlib.util.spec_from_file_location("families_doc", os.path.join(ROOT, "tools", "families_doc.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_show_the_table():
    with open(os.path.join(ROOT, "docs", "families.md")) as handle:
        rows = [line for line in handle.read().splitlines() if line.startswith("| `")]
    assert rows == _families_doc().rows(_families.TABLE)
    assert len(rows) == len(_families.TABLE)


def test_the_docs_check_fails_on_a_stale_page(tmp_path):
    doc = tmp_path / "families.md"
    with open(os.path.join(ROOT, "docs", "families.md")) as handle:
        doc.write_text(handle.read().replace("| `thor` | thor |", "| `thor` | orin |"))
    tool = _families_doc()
    assert tool.main(["--check", "--doc", str(doc)]) == 1
    assert tool.main(["--doc", str(doc)]) == 0
    assert tool.main(["--check", "--doc", str(doc)]) == 0


def test_the_role_reads_its_baseline_from_the_facts_not_from_a_copy():
    with open(os.path.join(ROOT, "roles", "vllm_server", "vars", "main.yml")) as handle:
        role_vars = yaml.safe_load(handle)
    assert not [k for k in role_vars if "family" in k], "a per-family table in the role's vars duplicates _families.TABLE"
    for name, entry in _families.TABLE.items():
        assert _families.serve_defaults(name) == entry["serve"]
    assert _families.serve_defaults("no-such-family") == _families.DEFAULT_SERVE
    with open(os.path.join(ROOT, "roles", "vllm_server", "tasks", "facts.yml")) as handle:
        assert "ansible_facts.jetson.serve_defaults" in handle.read()


def test_detection_and_planner_read_the_table():
    assert _jetson.FAMILIES == tuple(_families.TABLE)
    assert _jetson.THOR_FAMILIES == ("thor", "igx_thor")
    assert set(planner.FAMILY_K) == set(_families.with_policy("plan", "force"))
    assert planner.FORCE_FAMILIES == ("orin_nx", "orin_nano")
    for name, entry in _families.TABLE.items():
        assert _jetson.VARIANTS[name] == (*tuple(entry["variants"]), "unknown")
        if entry["policy"] == "never":
            assert _families.speculation(name, 36) == (False, entry["reason"])


@pytest.mark.parametrize(
    ("family", "l4t", "supported"),
    [("thor", 38, True), ("thor", 36, False), ("agx_orin", 36, True), ("agx_orin", 35, False), ("orin_nano", 36, False), ("xavier", 35, False)],
)
def test_speculation_policy(family, l4t, supported):
    assert _families.speculation(family, l4t)[0] is supported


def test_runtime_choices_are_the_renderers():
    with open(os.path.join(ROOT, "roles", "vllm_server", "meta", "argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    assert tuple(options["vllm_server_runtime"]["choices"]) == render_argv.RUNTIMES
    assert tuple(options["vllm_server_image_flavor"]["choices"]) == render_argv.IMAGE_FLAVORS


MODULE_UTILS = sorted(f for f in os.listdir(os.path.join(ROOT, "plugins", "module_utils")) if f.endswith(".py"))


@pytest.mark.parametrize("name", MODULE_UTILS)
def test_module_utils_are_python38_and_stdlib_only(name):
    """module_utils run on the devices: Python 3.8 syntax, the standard library and each other only."""
    with open(os.path.join(ROOT, "plugins", "module_utils", name)) as handle:
        tree = ast.parse(handle.read(), feature_version=(3, 8))
    stdlib = sys.stdlib_module_names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name.split(".")[0] in stdlib, (name, alias.name)
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            assert node.module.split(".")[0] in stdlib or node.module.startswith(OWN), (name, node.module)


def test_role_override_keys_are_the_planners():
    from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning import checks

    with open(os.path.join(ROOT, "roles", "speculative_decoding", "vars", "main.yml")) as handle:
        keys = yaml.safe_load(handle)["__speculative_decoding_override_keys"]
    assert tuple(keys) == checks.OVERRIDE_KEYS
