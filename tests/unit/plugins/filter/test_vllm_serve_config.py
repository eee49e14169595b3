# SPDX-License-Identifier: Apache-2.0
"""The jetson_llm.speculative.vllm_serve_config filter: direct calls, Jinja through Templar, and a
real `ansible localhost -m debug` run."""

import json

import pytest
import yaml
from ansible.errors import AnsibleError, AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter import vllm_serve_config as plugin
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering import config as render_config

SERVE = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "host": "127.0.0.1",
    "port": 8000,
    "served_model_name": "llama",
    "gpu_memory_utilization": 0.75,
    "max_model_len": 8192,
    "max_num_seqs": 8,
    "tensor_parallel_size": 1,
    "vllm_version": "0.20.2",
    "api_key": "not-a-real-key",
}
PLAN = {
    "decision": "enabled",
    "reason": "test",
    "method": "eagle3",
    "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    "num_speculative_tokens": 5,
    "draft_tensor_parallel_size": 1,
    "gpu_memory_utilization": 0.7,
    "baseline_gpu_memory_utilization": 0.75,
}


def test_filter_is_registered_under_its_name():
    assert plugin.FilterModule().filters() == {"vllm_serve_config": plugin.vllm_serve_config_filter}


def test_direct_call_equals_the_renderer():
    assert plugin.vllm_serve_config_filter(SERVE, plan=PLAN) == render_config.serve_config_yaml(SERVE, PLAN)
    assert plugin.vllm_serve_config_filter(SERVE) == render_config.serve_config_yaml(SERVE)


def test_non_mapping_input_names_the_filter():
    with pytest.raises(AnsibleFilterError, match=r"jetson_llm\.speculative\.vllm_serve_config filter must be a dictionary"):
        plugin.vllm_serve_config_filter(["model"])


def test_specdec_errors_become_filter_errors_naming_the_fqcn():
    with pytest.raises(AnsibleFilterError) as excinfo:
        plugin.vllm_serve_config_filter(dict(SERVE, port="8000"), host="jetson-006")
    assert str(excinfo.value).startswith("jetson_llm.speculative.vllm_serve_config: host jetson-006: serve.port='8000' is not allowed")


def test_jinja_call_through_templar(render):
    text = render(
        "{{ serve | jetson_llm.speculative.vllm_serve_config(plan=plan, host=inventory_hostname) }}",
        {"serve": SERVE, "plan": PLAN, "inventory_hostname": "jetson-001"},
    )
    assert text == render_config.serve_config_yaml(SERVE, PLAN)
    loaded = yaml.safe_load(text)
    assert json.loads(loaded["speculative-config"])["num_speculative_tokens"] == 5
    assert "not-a-real-key" not in text


def test_jinja_plan_from_the_planner_filter(render):
    facts = {
        "family": "agx_orin",
        "memory": {"total_mb": 62841, "available_mb": 57344},
        "speculation_supported": True,
        "speculation_reason": "",
    }
    text = render(
        "{{ serve | jetson_llm.speculative.vllm_serve_config(plan=(facts"
        " | jetson_llm.speculative.speculative_plan(target_model=serve.model, serve=serve, concurrency=1))) }}",
        {"serve": SERVE, "facts": facts},
    )
    loaded = yaml.safe_load(text)
    assert loaded["gpu-memory-utilization"] == 0.7
    assert json.loads(loaded["speculative-config"]) == {
        "draft_tensor_parallel_size": 1,
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
    }


def test_jinja_error_names_the_filter(render):
    with pytest.raises(AnsibleError) as excinfo:
        render(
            "{{ serve | jetson_llm.speculative.vllm_serve_config(plan=plan, host='jetson-007') }}",
            {"serve": dict(SERVE, vllm_version=None), "plan": PLAN},
        )
    assert "jetson_llm.speculative.vllm_serve_config: host jetson-007: serve.vllm_version is missing" in str(excinfo.value)


def test_real_ansible_run(adhoc):
    result = adhoc("{{ serve | jetson_llm.speculative.vllm_serve_config(plan=plan) }}", {"serve": SERVE, "plan": PLAN})
    assert not result.get("failed"), result
    assert result["msg"] == render_config.serve_config_yaml(SERVE, PLAN)


def test_real_ansible_run_failure_message(adhoc):
    result = adhoc(
        "{{ serve | jetson_llm.speculative.vllm_serve_config(host=inventory_hostname) }}",
        {"serve": dict(SERVE, model="meta-llama/x; reboot")},
    )
    assert result["failed"] is True
    assert "jetson_llm.speculative.vllm_serve_config: host localhost: serve.model='meta-llama/x; reboot' is not allowed" in result["msg"]
