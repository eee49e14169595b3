# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""The one renderer of the service's files (serve.yaml and the unit) and its filter, vllm_service_files."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter.vllm_service_files import vllm_service_files
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.unit import service_files, service_unit

UNIT = {
    "unit_path": "/etc/systemd/system/vllm.service",
    "config_path": "/etc/vllm/serve.yaml",
    "env_file": "/etc/vllm/vllm.env",
    "runtime": "native",
    "engine": "/usr/bin/docker",
    "container_name": "vllm",
    "image": "vllm/vllm-openai:v0.20.0",
    "image_flavor": "upstream",
    "runtime_dir": "vllm",
    "start_record": "/run/vllm/config.sha256",
    "start_record_files": ["/etc/vllm/serve.yaml", "/etc/vllm/vllm.env", "/etc/systemd/system/vllm.service"],
    "user": "vllm",
    "user_home": "/var/lib/vllm",
    "sandbox": True,
    "read_write_paths": ["/data/models"],
}
SERVE = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "served_model_name": "llama",
    "gpu_memory_utilization": 0.5,
    "vllm_version": "0.20.0",
    "vllm_bin": "/opt/vllm/bin/vllm",
    "env_file": "/etc/vllm/vllm.env",
    "engine_bin": "/usr/bin/docker",
    "container_name": "vllm",
    "family": "agx_orin",
}
LOCAL = "/opt/models/llama31-8b-eagle3"
PLAN = {
    "decision": "enabled",
    "method": "eagle3",
    "model": LOCAL,
    "num_speculative_tokens": 3,
    "draft_tensor_parallel_size": 1,
    "gpu_memory_utilization": 0.45,
}
DOCKER = dict(UNIT, runtime="docker", user="")


def lines(text):
    return text.splitlines()


def test_a_native_unit_runs_vllm_as_its_user_sandboxed_with_the_start_record():
    unit = lines(service_unit(SERVE, UNIT))
    assert unit[0] == "# Ansible managed"
    assert 'ExecStart="/opt/vllm/bin/vllm" "serve" "--config" "/etc/vllm/serve.yaml"' in unit
    assert "User=vllm" in unit and "Group=vllm" in unit and "EnvironmentFile=/etc/vllm/vllm.env" in unit
    assert "ReadWritePaths=/var/lib/vllm -/data/models" in unit and "ProtectSystem=strict" in unit
    assert "RuntimeDirectory=vllm" in unit
    record = [line for line in unit if line.startswith("ExecStartPre=+")]
    assert record and "sha256sum -- /etc/vllm/serve.yaml /etc/vllm/vllm.env /etc/systemd/system/vllm.service" in record[0]
    assert "$$INVOCATION_ID" in record[0] and "> /run/vllm/config.sha256" in record[0]
    assert not any(line.startswith("ExecStop=") for line in unit)


def test_root_native_unit_has_no_user_and_no_sandbox():
    unit = lines(service_unit(SERVE, dict(UNIT, user="")))
    assert not any(line.startswith(("User=", "ProtectSystem=", "ReadWritePaths=")) for line in unit)


def test_a_container_unit_mounts_a_local_speculator_only_in_the_speculative_configuration():
    mount = '"-v" "%s:%s:ro"' % (LOCAL, LOCAL)
    baseline, speculative = service_files(SERVE, DOCKER), service_files(SERVE, DOCKER, PLAN)
    assert [f["path"] for f in speculative] == ["/etc/vllm/serve.yaml", "/etc/systemd/system/vllm.service"]
    assert mount in speculative[1]["content"] and mount not in baseline[1]["content"]
    assert "speculative-config" in speculative[0]["content"] and "speculative-config" not in baseline[0]["content"]
    unit = lines(speculative[1]["content"])
    assert "Requires=docker.service" in unit
    assert 'ExecStartPre=-"/usr/bin/docker" "rm" "-f" "vllm"' in unit
    assert 'ExecStop="/usr/bin/docker" "stop" "-t" "30" "vllm"' in unit
    assert not any(line.startswith(("User=", "EnvironmentFile=")) for line in unit)


def test_a_plan_that_is_not_enabled_is_the_baseline_and_the_output_is_deterministic():
    skipped = dict(PLAN, decision="skipped")
    assert service_files(SERVE, DOCKER, skipped) == service_files(SERVE, DOCKER) == service_files(SERVE, dict(DOCKER))


@pytest.mark.parametrize(
    "change, key, allowed",
    [
        ({"unit_path": "etc/vllm.service"}, "unit.unit_path", "an absolute path"),
        ({"user": "root; rm -rf /"}, "unit.user", "a Unix user"),
        ({"runtime_dir": "vllm/run"}, "unit.runtime_dir", "a systemd unit name"),
        ({"runtime": "lxc"}, "unit.runtime", "one of native, docker, podman"),
        ({"sandbox": "yes"}, "unit.sandbox", "true or false"),
        ({"read_write_paths": ["/data", "relative"]}, "unit.read_write_paths", "an absolute path"),
        ({"colour": "red"}, "unit.colour", "unknown key"),
    ],
)
def test_a_bad_unit_setting_names_the_host_the_key_and_what_is_allowed(change, key, allowed):
    with pytest.raises(SpecdecError) as err:
        service_files(SERVE, dict(UNIT, **change), host="dev-1")
    msg = str(err.value)
    assert msg.startswith("host dev-1: %s=" % key) and allowed in msg, msg


def test_a_missing_unit_setting_is_named():
    unit = dict(UNIT)
    del unit["start_record"]
    with pytest.raises(SpecdecError, match=r"unit\.start_record"):
        service_files(SERVE, unit, host="dev-1")


def test_the_filter_returns_the_renderers_files_and_wraps_its_errors():
    assert vllm_service_files(SERVE, unit=DOCKER, plan=PLAN, host="dev-1") == service_files(SERVE, DOCKER, PLAN, host="dev-1")
    with pytest.raises(AnsibleFilterError, match=r"jetson_llm\.speculative\.vllm_service_files: host dev-1: unit\.runtime"):
        vllm_service_files(SERVE, unit=dict(UNIT, runtime="lxc"), host="dev-1")
    with pytest.raises(AnsibleFilterError, match="must be a dict"):
        vllm_service_files("model: m", unit=UNIT)


def test_the_servers_further_options_and_mounts_are_served_with_and_without_speculation():
    serve = dict(
        SERVE,
        extra_args={"kv-cache-dtype": "fp8", "enable-prefix-caching": True, "max-num-batched-tokens": 4096, "compilation-config": '{"level": 3}'},
        extra_mounts=["/data/prompts:/data/prompts:ro", "/srv/cache:/cache"],
    )
    extras = [
        'compilation-config: "{\\"level\\": 3}"',
        "enable-prefix-caching: true",
        'kv-cache-dtype: "fp8"',
        "max-num-batched-tokens: 4096",
    ]
    for plan in (None, PLAN):
        config, unit = (f["content"] for f in service_files(serve, DOCKER, plan))
        keys = config.splitlines()[1:]
        # after the collection's own keys (the speculative configuration last), sorted, quoted as the rest of the file
        at = keys.index(extras[0])
        assert keys[at : at + 4] == extras and keys[at - 1].startswith("gpu-memory-utilization: ")
        assert keys[at + 4 :] == (['speculative-config: "' + keys[-1].split('"', 1)[1]] if plan else [])
        # the mounts follow the collection's own (the configuration directory, the cache, a local speculator), in order
        start = unit.index('"-v" "/data/prompts:/data/prompts:ro" "-v" "/srv/cache:/cache"')
        assert unit.index('"-v" "/etc/vllm:/etc/vllm:ro"') < start
        if plan:
            assert unit.index('"-v" "%s:%s:ro"' % (LOCAL, LOCAL)) < start
    # none of it without the settings: the files are those of before, byte for byte
    assert service_files(dict(SERVE, extra_args={}, extra_mounts=[]), DOCKER) == service_files(SERVE, DOCKER)


@pytest.mark.parametrize(
    "change, key, allowed",
    [
        ({"extra_args": {"max-model-len": 4096}}, "serve.extra_args", "set vllm_server_max_model_len"),
        ({"extra_args": {"api-key": "sk-1"}}, "serve.extra_args", "no secret in the serve configuration"),
        ({"extra_args": {"speculative-config": "{}"}}, "serve.extra_args", "no speculation option"),
        ({"extra_args": {"x": "a\nb"}}, "serve.extra_args", "printable ASCII"),
        ({"extra_mounts": ["/etc/x:/etc/vllm"]}, "serve.extra_mounts", "mounted already"),
        ({"extra_mounts": ["/a:/b:rw"]}, "serve.extra_mounts", "SOURCE:DESTINATION:ro"),
        ({"extra_mounts": ["/a/../etc:/b"]}, "serve.extra_mounts", "without '..'"),
    ],
)
def test_a_bad_further_option_or_mount_is_refused_by_the_renderer(change, key, allowed):
    with pytest.raises(SpecdecError) as err:
        service_files(dict(SERVE, **change), DOCKER)
    assert key + "=" in str(err.value) and allowed in str(err.value)


def test_a_refused_secret_option_is_masked_in_the_message():
    with pytest.raises(SpecdecError) as err:
        service_files(dict(SERVE, extra_args={"api-key": "sk-secret-1"}), DOCKER)
    assert "sk-secret-1" not in str(err.value) and "{'api-key': '***'}" in str(err.value)


def test_the_native_runtime_has_no_bind_mounts():
    with pytest.raises(SpecdecError, match="no bind mounts for the native runtime"):
        service_files(dict(SERVE, extra_mounts=["/a:/b"]), UNIT)
