# SPDX-License-Identifier: Apache-2.0
"""The family table is the one definition: role defaults and docs agree with it; module_utils stay stdlib-only."""

import ast
import os
import sys

import pytest
import yaml
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _families, _jetson
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning import planner
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering import argv as render_argv

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
OWN = "ansible_collections.jetson_llm.speculative.plugins.module_utils"


def _version(value):
    return ".".join(str(part) for part in value) if value else "-"


def _docs_row(name, entry):
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


def test_docs_show_the_table():
    with open(os.path.join(ROOT, "docs", "families.md")) as handle:
        rows = [line for line in handle.read().splitlines() if line.startswith("| `")]
    assert rows == [_docs_row(name, entry) for name, entry in _families.TABLE.items()]


def test_role_baseline_defaults_are_the_tables():
    with open(os.path.join(ROOT, "roles", "vllm_server", "vars", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)["__vllm_server_family_defaults"]
    planned = dict((name, entry["serve"]) for name, entry in _families.TABLE.items() if entry["policy"] != "never")
    assert dict((k, v) for k, v in defaults.items() if k != "default") == planned
    assert defaults["default"] == _families.DEFAULT_SERVE


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
