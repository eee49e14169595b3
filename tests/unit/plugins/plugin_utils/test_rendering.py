# SPDX-License-Identifier: Apache-2.0
"""Version-dependent --speculative-config keys, the vllm serve --config renderer and the service argv."""

import json

import pytest
import yaml
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning import checks, planner, versions
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering import argv as render_argv
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering import config as render_config
from hypothesis import given
from hypothesis import strategies as st

# Every vLLM release from 0.10.0 to 0.34.0 on PyPI (0.21.0 has no wheel).
VERSIONS = [
    "0.10.0",
    "0.10.1.1",
    "0.10.2",
    "0.11.0",
    "0.11.2",
    "0.12.0",
    "0.13.0",
    "0.14.0",
    "0.15.0",
    "0.16.0",
    "0.17.0",
    "0.18.0",
    "0.19.0",
    "0.20.0",
    "0.22.0",
    "0.23.0",
    "0.24.0",
    "0.25.0",
    "0.26.0",
    "0.27.0",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
    "0.34.0",
]

EAGLE_PLAN = {
    "decision": "enabled",
    "method": "eagle3",
    "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    "num_speculative_tokens": 5,
    "draft_tensor_parallel_size": 1,
    "gpu_memory_utilization": 0.7,
}
DRAFT_PLAN = dict(EAGLE_PLAN, method="draft_model", model="Qwen/Qwen3-0.6B", num_speculative_tokens=3)
SERVE = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "host": "127.0.0.1",
    "port": 8000,
    "served_model_name": "llama-3.1-8b",
    "gpu_memory_utilization": 0.75,
    "max_model_len": 8192,
    "max_num_seqs": 8,
    "tensor_parallel_size": 1,
    "vllm_version": "0.20.2",
}


# ---------------------------------------------------------------- field table (plugin_utils/_planning/versions.py)


@pytest.mark.parametrize(
    ("version", "key", "present"),
    [
        ("0.10.0", "disable_by_batch_size", True),
        ("0.16.0", "disable_by_batch_size", True),
        ("0.17.0", "disable_by_batch_size", False),
        ("0.11.0", "disable_logprobs", True),
        ("0.11.2", "disable_logprobs", False),
        ("0.16.0", "disable_by_batch_size", True),
        ("0.16.1", "disable_by_batch_size", False),
        ("0.14.0", "tensor_parallel_size", False),
        ("0.15.0", "tensor_parallel_size", True),
        ("0.18.0", "synthetic_acceptance_rate", False),
        ("0.19.0", "synthetic_acceptance_rate", True),
        ("0.20.0", "synthetic_acceptance_rate", False),
        ("0.20.0", "speculative_token_tree", True),
        ("0.22.0", "speculative_token_tree", False),
        ("0.23.0", "num_speculative_tokens_per_batch_size", False),
        ("0.24.0", "num_speculative_tokens_per_batch_size", True),
        ("0.25.0", "use_heterogeneous_vocab", True),
        ("0.32.0", "fly_window_size", False),
        ("0.33.0", "fly_window_size", True),
        ("0.10.0", "draft_tensor_parallel_size", True),
        ("0.33.0", "draft_tensor_parallel_size", True),
        ("0.33.0", "speculator_options", False),
        ("0.34.0", "speculator_options", True),
        ("0.34.0", "draft_decode_context_parallel_size", True),
        ("0.34.0", "suffix_decoding_corpus_tokens", True),
        ("0.34.0", "custom_method", True),
        ("0.34.0", "parallel_drafting", True),
        ("0.34.0", "num_speculative_tokens_per_batch_size", True),
        # removed in 0.34.0 (its SpeculativeConfig forbids unknown keys, so a server given them does not start)
        ("0.10.2", "disable_padded_drafter_batch", False),
        ("0.11.0", "disable_padded_drafter_batch", True),
        ("0.33.0", "disable_padded_drafter_batch", True),
        ("0.34.0", "disable_padded_drafter_batch", False),
        ("0.24.0", "use_heterogeneous_vocab", False),
        ("0.33.0", "use_heterogeneous_vocab", True),
        ("0.34.0", "use_heterogeneous_vocab", False),
    ],
)
def test_spec_fields_per_version(version, key, present):
    assert (key in versions.spec_fields(versions.parse_version(version))) is present


@pytest.mark.parametrize(
    ("version", "key", "emitted"),
    [
        ("0.33.0", "parallel_drafting", True),
        ("0.34.0", "parallel_drafting", False),  # accepted by 0.34.0, but without effect
        ("0.33.0", "suffix_decoding_max_spec_factor", True),
        ("0.34.0", "suffix_decoding_max_spec_factor", False),
        ("0.34.0", "suffix_decoding_min_token_prob", False),
        ("0.34.0", "suffix_decoding_max_tree_depth", True),
        ("0.34.0", "speculator_options", True),
        ("0.16.0", "disable_by_batch_size", False),  # a no-op up to 0.16, fatal from 0.17
        ("0.20.0", "tensor_parallel_size", False),  # only accepted to raise an error
        ("0.20.0", "num_speculative_tokens", True),
    ],
)
def test_emitted_fields_leave_out_no_ops_and_fatal_keys(version, key, emitted):
    parsed = versions.parse_version(version)
    assert (key in versions.emitted_fields(parsed)) is emitted
    assert versions.emitted_fields(parsed) <= versions.spec_fields(parsed)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("plan", [EAGLE_PLAN, DRAFT_PLAN])
def test_speculative_config_only_has_keys_the_version_knows(version, plan):
    parsed = versions.parse_version(version)
    if plan["method"] == "draft_model" and parsed < (0, 15, 0):
        with pytest.raises(checks.SpecdecError, match=r"draft_model needs 0\.15"):
            planner.speculative_config(plan, version, host="h")
        return
    config = planner.speculative_config(plan, version)
    assert config["method"] == plan["method"]  # always explicit: vLLM infers it from the model name, differently per release
    assert set(config) <= versions.emitted_fields(parsed) <= versions.spec_fields(parsed)
    assert not set(config) & {"disable_by_batch_size", "tensor_parallel_size"}
    assert not any("-" in key for key in config)
    assert config == {
        "method": plan["method"],
        "model": plan["model"],
        "num_speculative_tokens": plan["num_speculative_tokens"],
        "draft_tensor_parallel_size": 1,
    }


@pytest.mark.parametrize(
    ("plan", "version", "fragment"),
    [
        ({"decision": "skipped", "method": None}, "0.20.2", "plan.method=None is not allowed"),
        (dict(EAGLE_PLAN, method="ngram"), "0.20.2", "plan.method='ngram' is not allowed"),
        (dict(EAGLE_PLAN, model="a/b c"), "0.20.2", "plan.model='a/b c' is not allowed"),
        (dict(EAGLE_PLAN, num_speculative_tokens=0), "0.20.2", "plan.num_speculative_tokens=0 is not allowed"),
        (dict(EAGLE_PLAN, num_speculative_tokens=True), "0.20.2", "plan.num_speculative_tokens=True is not allowed"),
        (dict(EAGLE_PLAN, draft_tensor_parallel_size=0), "0.20.2", "plan.draft_tensor_parallel_size=0 is not allowed"),
        (EAGLE_PLAN, "unknown", "vllm_version='unknown' is not allowed"),
        (DRAFT_PLAN, "0.14.1", "plan.method='draft_model' is not allowed; expected eagle3 with vLLM 0.14.1"),
        ("plan", "0.20.2", "plan='plan' is not allowed"),
    ],
)
def test_speculative_config_errors(plan, version, fragment):
    with pytest.raises(checks.SpecdecError) as excinfo:
        planner.speculative_config(plan, version, host="jetson-002")
    assert str(excinfo.value).startswith("host jetson-002: " + fragment)


def test_spec_config_json_is_sorted_and_compact():
    text = render_config.spec_config_json(planner.speculative_config(EAGLE_PLAN, "0.20.2"))
    assert text == ('{"draft_tensor_parallel_size":1,"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B","num_speculative_tokens":5}')


# ---------------------------------------------------------------- serve_config


def test_serve_config_without_plan_is_the_baseline_in_option_order():
    config = render_config.serve_config(SERVE)
    assert list(config) == [
        "model",
        "host",
        "port",
        "served-model-name",
        "gpu-memory-utilization",
        "max-model-len",
        "max-num-seqs",
        "tensor-parallel-size",
    ]
    assert config["gpu-memory-utilization"] == 0.75
    assert config["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_serve_config_with_an_enabled_plan():
    config = render_config.serve_config(SERVE, EAGLE_PLAN)
    assert list(config)[-1] == "speculative-config"
    assert config["gpu-memory-utilization"] == 0.7
    assert isinstance(config["speculative-config"], str)
    assert json.loads(config["speculative-config"]) == planner.speculative_config(EAGLE_PLAN, "0.20.2")


def test_serve_config_with_a_skipped_plan_is_the_baseline():
    skipped = {"decision": "skipped", "reason": "x", "gpu_memory_utilization": 0.75}
    assert render_config.serve_config(SERVE, skipped) == render_config.serve_config(SERVE)


def test_a_real_plan_renders():
    facts = {
        "family": "thor",
        "memory": {"total_mb": 124928, "available_mb": 112640},
        "speculation_supported": True,
        "speculation_reason": "",
    }
    plan = planner.plan(facts, SERVE["model"], SERVE, 1, host="h")
    text = render_config.serve_config_yaml(SERVE, plan)
    loaded = yaml.safe_load(text)
    assert loaded["gpu-memory-utilization"] == plan["gpu_memory_utilization"]
    assert json.loads(loaded["speculative-config"]) == plan["speculative_config"]


def test_optional_settings_are_left_out():
    config = render_config.serve_config({"model": "/srv/models/llama", "gpu_memory_utilization": 0.5})
    assert config == {"model": "/srv/models/llama", "gpu-memory-utilization": 0.5}


def test_secrets_in_serve_never_reach_the_config():
    # test data, not real credentials
    secret_serve = dict(SERVE, api_key="sk-SECRET-1", hf_token="hf_SECRET_2", env={"HF_TOKEN": "hf_SECRET_3"})
    text = render_config.serve_config_yaml(secret_serve, EAGLE_PLAN)
    assert "SECRET" not in text
    assert "api-key" not in text and "hf_token" not in text and "hf-token" not in text


@pytest.mark.parametrize(
    ("serve", "plan", "fragment"),
    [
        ({"gpu_memory_utilization": 0.7}, None, "serve.model is missing"),
        (dict(SERVE, model="a/b $(reboot)"), None, "serve.model='a/b $(reboot)' is not allowed"),
        (dict(SERVE, host="0.0.0.0; rm"), None, "serve.host='0.0.0.0; rm' is not allowed"),
        (dict(SERVE, port=0), None, "serve.port=0 is not allowed"),
        (dict(SERVE, port="8000"), None, "serve.port='8000' is not allowed"),
        (dict(SERVE, served_model_name="my model"), None, "serve.served_model_name='my model' is not allowed"),
        (dict(SERVE, gpu_memory_utilization=1.5), None, "serve.gpu_memory_utilization=1.5 is not allowed"),
        (dict(SERVE, max_num_seqs=True), None, "serve.max_num_seqs=True is not allowed"),
        (SERVE, {"decision": "maybe"}, "plan.decision='maybe' is not allowed; expected enabled or skipped"),
        (SERVE, dict(EAGLE_PLAN, gpu_memory_utilization=2), "plan.gpu_memory_utilization=2 is not allowed"),
        (dict(SERVE, vllm_version=None), EAGLE_PLAN, "serve.vllm_version is missing"),
        (SERVE, "enabled", "plan='enabled' is not allowed"),
        ("serve", None, "serve='serve' is not allowed"),
    ],
)
def test_serve_config_errors(serve, plan, fragment):
    with pytest.raises(checks.SpecdecError) as excinfo:
        render_config.serve_config_yaml(serve, plan, host="jetson-010")
    assert str(excinfo.value).startswith("host jetson-010: " + fragment), str(excinfo.value)


# ---------------------------------------------------------------- YAML text


def test_yaml_text_exactly():
    assert render_config.serve_config_yaml(SERVE, EAGLE_PLAN) == (
        "# vllm serve --config file rendered by jetson_llm.speculative; local changes are overwritten.\n"
        'model: "meta-llama/Llama-3.1-8B-Instruct"\n'
        'host: "127.0.0.1"\n'
        "port: 8000\n"
        'served-model-name: "llama-3.1-8b"\n'
        "gpu-memory-utilization: 0.7\n"
        "max-model-len: 8192\n"
        "max-num-seqs: 8\n"
        "tensor-parallel-size: 1\n"
        'speculative-config: "{\\"draft_tensor_parallel_size\\":1,\\"method\\":\\"eagle3\\",'
        '\\"model\\":\\"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\\",\\"num_speculative_tokens\\":5}"\n'
    )


@pytest.mark.parametrize("plan", [None, EAGLE_PLAN, dict(DRAFT_PLAN)])
def test_yaml_parses_back_to_the_mapping(plan):
    text = render_config.serve_config_yaml(SERVE, plan)
    assert yaml.safe_load(text) == render_config.serve_config(SERVE, plan)
    assert text.isascii() and text.endswith("\n")


def test_yaml_is_deterministic():
    assert render_config.serve_config_yaml(dict(SERVE), dict(EAGLE_PLAN)) == render_config.serve_config_yaml(
        dict(reversed(list(SERVE.items()))), dict(reversed(list(EAGLE_PLAN.items())))
    )


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60))
def test_any_printable_ascii_string_round_trips_through_yaml(text):
    assert yaml.safe_load("k: " + render_config._yaml_scalar(text)) == {"k": text}


@given(st.text(min_size=1, max_size=10).filter(lambda t: any(not " " <= ch <= "~" for ch in t)))
def test_non_ascii_or_control_strings_are_refused(text):
    with pytest.raises(checks.SpecdecError, match="printable ASCII only"):
        render_config._yaml_scalar(text)


@given(st.floats(min_value=1e-9, max_value=1e9, allow_nan=False, allow_infinity=False))
def test_floats_stay_floats_in_yaml(value):
    loaded = yaml.safe_load("k: " + render_config._yaml_scalar(value))["k"]
    assert isinstance(loaded, float)
    assert loaded == pytest.approx(value, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), None, [1], {"a": 1}])
def test_unwritable_scalars(value):
    with pytest.raises(checks.SpecdecError):
        render_config._yaml_scalar(value)


def test_yaml_booleans_and_ints():
    assert render_config._yaml_scalar(True) == "true"
    assert render_config._yaml_scalar(False) == "false"
    assert render_config._yaml_scalar(8192) == "8192"


# ---------------------------------------------------------------- argv


def test_native_argv():
    assert render_argv.serve_argv(SERVE, "/etc/vllm/serve.yaml", "native") == [
        "vllm",
        "serve",
        "--config",
        "/etc/vllm/serve.yaml",
    ]
    assert render_argv.serve_argv(dict(SERVE, vllm_bin="/opt/vllm/bin/vllm"), "/etc/vllm/serve.yml", "native")[0] == ("/opt/vllm/bin/vllm")


def test_upstream_image_on_thor_gets_ipc_host_and_only_the_serve_arguments():
    serve = dict(SERVE, family="thor", env_file="/etc/vllm/vllm.env")
    argv = render_argv.serve_argv(serve, "/etc/vllm/serve.yaml", "docker", image="vllm/vllm-openai:v0.20.2")
    assert argv == [
        "docker",
        "run",
        "--rm",
        "--name",
        "vllm",
        "--runtime",
        "nvidia",
        "--network",
        "host",
        "--ipc",
        "host",
        "-v",
        "/etc/vllm:/etc/vllm:ro",
        "-v",
        "/root/.cache/huggingface:/root/.cache/huggingface",
        "--env-file",
        "/etc/vllm/vllm.env",
        "vllm/vllm-openai:v0.20.2",
        "--config",
        "/etc/vllm/serve.yaml",
    ]
    # ENTRYPOINT ["vllm","serve"]: nothing after the image may repeat "vllm serve" (it would run `vllm serve vllm serve ...`)
    after = argv[argv.index("vllm/vllm-openai:v0.20.2") + 1 :]
    assert "vllm" not in after and "serve" not in after


def test_jetson_image_on_orin_sets_the_entrypoint_and_has_no_ipc_host():
    serve = dict(SERVE, family="agx_orin", container_name="vllm-main", hf_cache_dir="/data/hf")
    image = "ghcr.io/nvidia-ai-iot/vllm:latest-jetson-orin"
    argv = render_argv.serve_argv(serve, "/etc/vllm/serve.yaml", "podman", image=image, image_flavor="jetson")
    assert argv[:5] == ["podman", "run", "--rm", "--name", "vllm-main"]
    assert "--ipc" not in argv
    assert "--env-file" not in argv
    assert argv[argv.index("--entrypoint") + 1] == "vllm"
    assert argv.index("--entrypoint") < argv.index(image)
    assert argv[argv.index(image) :] == [image, "serve", "--config", "/etc/vllm/serve.yaml"]
    assert "/data/hf:/root/.cache/huggingface" in argv


def test_oci_runtime_can_be_changed_or_left_out():
    for unset in ("", None):
        base = dict(SERVE, oci_runtime=unset)
        assert "--runtime" not in render_argv.serve_argv(base, "/etc/vllm/a.yaml", "docker", image="vllm/vllm-openai:v1")
    argv = render_argv.serve_argv(dict(SERVE, oci_runtime="runc"), "/etc/vllm/a.yaml", "docker", image="vllm/vllm-openai:v1")
    assert argv[argv.index("--runtime") + 1] == "runc"


def test_local_models_are_mounted_read_only():
    serve = dict(SERVE, model="/srv/models/llama")
    plan = dict(EAGLE_PLAN, model="/srv/models/head")
    argv = render_argv.serve_argv(serve, "/etc/vllm/a.yaml", "docker", image="vllm/vllm-openai:v1", plan=plan)
    assert "/srv/models/head:/srv/models/head:ro" in argv
    assert "/srv/models/llama:/srv/models/llama:ro" in argv


def test_hub_models_are_not_mounted():
    argv = render_argv.serve_argv(SERVE, "/etc/vllm/a.yaml", "docker", image="vllm/vllm-openai:v1", plan=EAGLE_PLAN)
    assert [argv[i + 1] for i, word in enumerate(argv) if word == "-v"] == [
        "/etc/vllm:/etc/vllm:ro",
        "/root/.cache/huggingface:/root/.cache/huggingface",
    ]


def test_pinned_digest_image_is_accepted():
    image = "vllm/vllm-openai:v0.20.2@sha256:" + "a" * 64
    assert image in render_argv.serve_argv(SERVE, "/etc/vllm/a.yaml", "docker", image=image)
    local = "localhost:5000/local/vllm-sim:1"
    assert local in render_argv.serve_argv(SERVE, "/etc/vllm/a.yaml", "podman", image=local)


def test_secrets_never_reach_argv():
    # test data, not real credentials
    serve = dict(SERVE, api_key="sk-SECRET", hf_token="hf_SECRET", env_file="/etc/vllm/vllm.env")
    for runtime, image in (("native", None), ("docker", "vllm/vllm-openai:v1")):
        argv = render_argv.serve_argv(serve, "/etc/vllm/a.yaml", runtime, image=image)
        assert not any("SECRET" in word for word in argv)


@pytest.mark.parametrize(
    ("serve", "path", "runtime", "image", "flavor", "fragment"),
    [
        (SERVE, "etc/vllm/a.yaml", "native", None, "upstream", "config_path='etc/vllm/a.yaml' is not allowed"),
        (SERVE, "/etc/vllm/a.json", "native", None, "upstream", "ending in .yaml or .yml"),
        (SERVE, "/etc/vllm/my config.yaml", "native", None, "upstream", "config_path='/etc/vllm/my config.yaml'"),
        (SERVE, "/etc/../tmp/a.yaml", "native", None, "upstream", "config_path='/etc/../tmp/a.yaml'"),
        (SERVE, "/etc/vllm/a.yaml", "systemd-nspawn", None, "upstream", "runtime='systemd-nspawn' is not allowed"),
        (SERVE, "/etc/vllm/a.yaml", "docker", None, "upstream", "image=None is not allowed"),
        (
            SERVE,
            "/etc/vllm/a.yaml",
            "docker",
            "vllm/vllm-openai:latest;id",
            "upstream",
            "image='vllm/vllm-openai:latest;id'",
        ),
        (SERVE, "/etc/vllm/a.yaml", "docker", "vllm/vllm-openai:v1", "dusty", "image_flavor='dusty' is not allowed"),
        (
            dict(SERVE, vllm_bin="vllm serve"),
            "/etc/vllm/a.yaml",
            "native",
            None,
            "upstream",
            "serve.vllm_bin='vllm serve'",
        ),
        (dict(SERVE, vllm_bin="-vllm"), "/etc/vllm/a.yaml", "native", None, "upstream", "serve.vllm_bin='-vllm'"),
        (
            dict(SERVE, container_name="a b"),
            "/etc/vllm/a.yaml",
            "docker",
            "x/y:1",
            "upstream",
            "serve.container_name='a b'",
        ),
        (
            dict(SERVE, env_file="vllm.env"),
            "/etc/vllm/a.yaml",
            "docker",
            "x/y:1",
            "upstream",
            "serve.env_file='vllm.env'",
        ),
        (
            dict(SERVE, hf_cache_dir="~/.cache"),
            "/etc/vllm/a.yaml",
            "docker",
            "x/y:1",
            "upstream",
            "serve.hf_cache_dir='~/.cache'",
        ),
        (
            dict(SERVE, oci_runtime="nv idia"),
            "/etc/vllm/a.yaml",
            "docker",
            "x/y:1",
            "upstream",
            "serve.oci_runtime='nv idia'",
        ),
        (
            dict(SERVE, engine_bin="docker$x"),
            "/etc/vllm/a.yaml",
            "docker",
            "x/y:1",
            "upstream",
            "serve.engine_bin='docker$x'",
        ),
        ("x", "/etc/vllm/a.yaml", "native", None, "upstream", "serve='x' is not allowed"),
    ],
)
def test_serve_argv_errors(serve, path, runtime, image, flavor, fragment):
    with pytest.raises(checks.SpecdecError) as excinfo:
        render_argv.serve_argv(serve, path, runtime, image=image, image_flavor=flavor, host="jetson-011")
    message = str(excinfo.value)
    assert message.startswith("host jetson-011: ") and fragment in message, message


def test_argv_of_an_enabled_plan_with_an_unsafe_model_is_refused():
    with pytest.raises(checks.SpecdecError, match=r"plan\.model="):
        render_argv.serve_argv(SERVE, "/etc/vllm/a.yaml", "docker", image="x/y:1", plan=dict(EAGLE_PLAN, model="a b"))
