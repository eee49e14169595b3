# SPDX-License-Identifier: Apache-2.0
"""The jetson_llm.speculative.speculative_plan filter: direct calls, Jinja through Templar, and a
real `ansible localhost -m debug` run."""

import pytest
from ansible.errors import AnsibleError, AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter import speculative_plan as plugin
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning import planner

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


def test_filter_is_registered_under_its_name():
    assert plugin.FilterModule().filters() == {"speculative_plan": plugin.speculative_plan_filter}


def test_direct_call_equals_the_planner():
    result = plugin.speculative_plan_filter(FACTS, target_model=LLAMA, serve=SERVE, concurrency=1, host="h")
    assert result == planner.plan(FACTS, LLAMA, SERVE, 1, host="h")
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
    assert result == planner.plan(FACTS, LLAMA, SERVE, 1, host="jetson-001")


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


def test_real_ansible_run(adhoc):
    msg = "{{ jetson | jetson_llm.speculative.speculative_plan(target_model=target, serve=serve, concurrency=1, host=inventory_hostname) }}"
    result = adhoc(msg, {"jetson": dict(FACTS, family="agx_orin"), "serve": SERVE, "target": LLAMA})
    assert not result.get("failed"), result
    plan = result["msg"]
    assert plan["decision"] == "enabled"
    assert plan["num_speculative_tokens"] == 3
    assert plan["speculative_config"]["method"] == "eagle3"


def test_real_ansible_run_failure_message(adhoc):
    msg = (
        "{{ jetson | jetson_llm.speculative.speculative_plan(target_model=target, serve=serve, concurrency=1,"
        " overrides={'force': 'yes'}, host=inventory_hostname) }}"
    )
    result = adhoc(msg, {"jetson": FACTS, "serve": SERVE, "target": LLAMA})
    assert result["failed"] is True
    assert "jetson_llm.speculative.speculative_plan: host localhost: speculative_decoding_force='yes' is not allowed" in result["msg"]
