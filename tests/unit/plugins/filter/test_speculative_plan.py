# SPDX-License-Identifier: Apache-2.0
"""The jetson_llm.speculative.speculative_plan filter: direct calls, Jinja through Templar, and a
real `ansible localhost -m debug` run."""

import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
from ansible_collections.jetson_llm.speculative.plugins.filter import speculative_plan as plugin
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _specdec as specdec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")

FACTS = {
    "family": "thor",
    "variant": "t5000",
    "memory": {"total_mb": 124928, "available_mb": 112640, "total_gib": 122},
    "l4t": {"major": 38},
    "speculation_supported": True,
    "speculation_reason": "",
}
SERVE = {
    "gpu_memory_utilization": 0.75,
    "max_model_len": 8192,
    "max_num_seqs": 8,
    "tensor_parallel_size": 1,
    "vllm_version": "0.20.2",
    "running": True,
}
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _collection_modules():
    return dict((k, v) for k, v in sys.modules.items() if k == "ansible_collections" or k.startswith("ansible_collections."))


@pytest.fixture(scope="module")
def render():
    """Render trusted Jinja with Ansible's Templar, the collection loaded through Ansible's own
    collection finder (as ansible-playbook does); plain imports are restored afterwards."""
    saved = _collection_modules()
    for name in saved:
        del sys.modules[name]
    finder = _AnsibleCollectionFinder(paths=[COLLECTIONS])
    finder._install()

    def _render(expression, variables):
        templar = Templar(loader=DataLoader(), variables=variables)
        return templar.template(trust_as_template(expression))

    try:
        yield _render
    finally:
        _AnsibleCollectionFinder._remove()
        for name in _collection_modules():
            del sys.modules[name]
        sys.modules.update(saved)


def adhoc(msg, extra_vars):
    """Run `ansible localhost -m debug -a msg=...` and return the host's result."""
    env = dict(
        os.environ,
        HOME=os.path.join(ROOT, ".cache", "home"),
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    proc = subprocess.run(
        [
            ANSIBLE,
            "localhost",
            "-c",
            "local",
            "-m",
            "ansible.builtin.debug",
            "-a",
            "msg=" + msg,
            "-e",
            json.dumps(extra_vars),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.stdout, proc.stderr
    out = json.loads(proc.stdout)
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_filter_is_registered_under_its_name():
    assert plugin.FilterModule().filters() == {"speculative_plan": plugin.speculative_plan_filter}


def test_direct_call_equals_the_planner():
    result = plugin.speculative_plan_filter(FACTS, target_model=LLAMA, serve=SERVE, concurrency=1, host="h")
    assert result == specdec.plan(FACTS, LLAMA, SERVE, 1, host="h")
    assert result["decision"] == "enabled"


def test_non_mapping_input_names_the_filter():
    with pytest.raises(AnsibleFilterError, match=r"jetson_llm\.speculative\.speculative_plan filter must be a dictionary"):
        plugin.speculative_plan_filter("thor", target_model=LLAMA, serve=SERVE, concurrency=1)


def test_specdec_errors_become_filter_errors_naming_the_fqcn():
    with pytest.raises(AnsibleFilterError) as excinfo:
        plugin.speculative_plan_filter(FACTS, target_model=LLAMA, serve=SERVE, concurrency=1, overrides={"enabled": "yes"}, host="jetson-003")
    assert str(excinfo.value).startswith(
        "jetson_llm.speculative.speculative_plan: host jetson-003: speculative_decoding_enabled='yes' is not allowed; expected a boolean"
    )


def test_jinja_call_through_templar(render):
    variables = {"jetson": FACTS, "serve": SERVE, "inventory_hostname": "jetson-001"}
    result = render(
        "{{ jetson | jetson_llm.speculative.speculative_plan(target_model='" + LLAMA + "', serve=serve, concurrency=1, host=inventory_hostname) }}",
        variables,
    )
    assert result["decision"] == "enabled"
    assert result["model"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert result["num_speculative_tokens"] == 5
    assert result == specdec.plan(FACTS, LLAMA, SERVE, 1, host="jetson-001")


def test_jinja_overrides_and_catalog(render):
    variables = {"jetson": dict(FACTS, family="agx_orin"), "serve": SERVE}
    skipped = render(
        "{{ jetson | jetson_llm.speculative.speculative_plan(target_model='" + LLAMA + "', serve=serve, concurrency=1, overrides={'enabled': false}) }}",
        variables,
    )
    assert skipped["decision"] == "skipped"
    assert skipped["reason"] == "disabled by speculative_decoding_enabled"
    k2 = render(
        "{{ jetson | jetson_llm.speculative.speculative_plan(target_model='" + LLAMA + "', serve=serve,"
        " concurrency=1, overrides={'num_speculative_tokens': 2, 'model': none}) }}",
        variables,
    )
    assert (k2["decision"], k2["num_speculative_tokens"]) == ("enabled", 2)


def test_jinja_error_names_the_filter(render):
    with pytest.raises(AnsibleError) as excinfo:
        render(
            "{{ jetson | jetson_llm.speculative.speculative_plan(target_model='" + LLAMA + "', serve=serve,"
            " concurrency=1, overrides={'num_speculative_tokens': 0}, host='jetson-003') }}",
            {"jetson": FACTS, "serve": SERVE},
        )
    assert (
        "jetson_llm.speculative.speculative_plan: host jetson-003: speculative_decoding_num_speculative_tokens=0 "
        "is not allowed; expected an integer from 1 to 15" in str(excinfo.value)
    )


def test_real_ansible_run():
    msg = "{{ jetson | jetson_llm.speculative.speculative_plan(target_model=target, serve=serve, concurrency=1, host=inventory_hostname) }}"
    result = adhoc(msg, {"jetson": dict(FACTS, family="agx_orin"), "serve": SERVE, "target": LLAMA})
    assert not result.get("failed"), result
    plan = result["msg"]
    assert plan["decision"] == "enabled"
    assert plan["num_speculative_tokens"] == 3
    assert plan["speculative_config"]["method"] == "eagle3"


def test_real_ansible_run_failure_message():
    msg = (
        "{{ jetson | jetson_llm.speculative.speculative_plan(target_model=target, serve=serve, concurrency=1,"
        " overrides={'force': 'yes'}, host=inventory_hostname) }}"
    )
    result = adhoc(msg, {"jetson": FACTS, "serve": SERVE, "target": LLAMA})
    assert result["failed"] is True
    assert "jetson_llm.speculative.speculative_plan: host localhost: speculative_decoding_force='yes' is not allowed" in result["msg"]
