# SPDX-License-Identifier: Apache-2.0
"""The one validator of the roles' and playbooks' settings (plugins/plugin_utils/_settings.py)."""

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _settings  # noqa: E402

GOOD = {"vllm_server_model": "Qwen/Qwen3-8B"}


@pytest.mark.parametrize("role", _settings.ROLES)
def test_every_setting_has_a_rule(role):
    """A new setting cannot slip past the validator: it needs a rule, a type that says it all, or a reason."""
    for variable, option in _settings.role_spec(role).items():
        covered = variable in _settings.RULES or variable in _settings.UNCHECKED or option.get("type") == "bool" or option.get("choices")
        assert covered, "%s has no rule in plugins/plugin_utils/_settings.py" % variable


@pytest.mark.parametrize("role", _settings.ROLES)
def test_the_role_defaults_pass(role):
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    defaults = dict((k, v) for k, v in defaults.items() if not (isinstance(v, str) and "{{" in v))
    defaults.update(GOOD if role == "vllm_server" else {})
    assert _settings.check_role(role, defaults, host="h") == []


@pytest.mark.parametrize(
    "value",
    ["a\nb", "a\rb", "a\x00b", "a\x1bb", "a\x7fb", "a\x85b", "a\u2028b", "tail\n"],
)
def test_control_characters_are_refused_everywhere(value):
    for variable in ("vllm_server_hf_token", "vllm_server_api_key", "vllm_server_model", "vllm_server_host"):
        errors = _settings.check_role("vllm_server", dict(GOOD, **{variable: value}), host="h")
        assert any(variable in e and "no control characters" in e for e in errors), (variable, errors)
    nested = {"speculative_decoding_catalog": {"targets": {"org/m": {"notes": [value]}}}}
    errors = _settings.check_role("speculative_decoding", nested, host="h")
    assert errors and "no control characters" in errors[0]
    assert "['targets']['org/m']['notes'][0]" in errors[0]


def test_secrets_are_masked_in_every_message():
    errors = _settings.check_role("vllm_server", dict(GOOD, vllm_server_api_key="s3cr3t with space"), host="h")
    assert errors == [
        "host h: vllm_server_api_key=<secret of 17 characters> is not allowed; expected empty or characters of "
        "[A-Za-z0-9._~+/=:-] only (no spaces or line breaks)"
    ]


def test_unknown_variables_with_the_role_prefix_are_refused():
    errors = _settings.check_role("vllm_server", dict(GOOD, vllm_server_prot=8000), host="h")
    assert errors == ["host h: vllm_server_prot: unknown variable of the vllm_server role; see its meta/argument_specs.yml"]


def test_the_roles_result_given_as_a_setting_is_refused():
    # vllm_server_result is what the role returns; a value from the inventory or -e would shadow the role's own
    errors = _settings.check_role("vllm_server", dict(GOOD, vllm_server_result={"ready": True}), host="h")
    assert errors == [
        "host h: vllm_server_result: is the result the vllm_server role returns (each of its entry points sets it), "
        "not a setting; remove it from the inventory and the extra vars"
    ]
    errors = _settings.check_role("speculative_decoding", {"speculative_decoding_result": {"outcome": "keep"}}, host="h")
    assert errors == [
        "host h: speculative_decoding_result: is the result the speculative_decoding role returns (each of its entry points "
        "sets it), not a setting; remove it from the inventory and the extra vars"
    ]


def test_required_and_typed():
    errors = _settings.check_role("vllm_server", {"vllm_server_port": True}, host="h")
    assert "host h: vllm_server_model='(unset)' is not allowed; expected a value: this setting is required" in errors
    assert any("vllm_server_port=True" in e and "an integer (not a string or a boolean)" in e for e in errors)


@pytest.mark.parametrize(
    ("variable", "good", "bad"),
    [
        ("vllm_server_host", ["0.0.0.0", "127.0.0.1", "::1", "jetson-01.lan"], ["0.0.0.0 x", "-bad", "a..b", ""]),
        ("vllm_server_service_name", ["vllm", "vllm-2", "vllm@a"], ["a/b", "vllm.service", ".hidden", ""]),
        ("vllm_server_image", ["vllm/vllm-openai:v0.20.0", "reg.lan:5000/a/b@sha256:" + "a" * 64], ["A/B", "a b", ""]),
        ("vllm_server_config_dir", ["/etc/vllm"], ["/", "etc", "/a/../b", "/a b"]),
        ("vllm_server_served_model_name", ["", "qwen3-8b", "org/name"], ["-x", "a b"]),
        ("vllm_server_vllm_version", ["", "0.20.2", "0.11.0rc1", "0.34.0+jetson"], ["latest", "0.20 2"]),
        ("vllm_server_gpu_memory_utilization", [None, 0.05, 0.95], [0.01, 1.0, "0.5"]),
        ("vllm_server_user", ["vllm", "root", "_vllm"], ["Vllm", "a b", "vllm;id", ""]),
        ("vllm_server_gpu_groups", [[], ["video", "render"]], [["video", "a b"], "video"]),
        ("vllm_server_read_write_paths", [[], ["/run/vllm-sim"]], [["/"], ["rel"], ["/a/../b"]]),
        (
            "vllm_server_extra_args",
            [{}, {"enable-prefix-caching": True, "kv-cache-dtype": "fp8", "max-num-batched-tokens": 8192, "no-enable-chunked-prefill": True}],
            [{"model": "x"}, {"gpu-memory-utilization": 0.5}, {"api-key": "x"}, {"spec-tokens": 3}, {"Bad_Name": 1}, {"a": None}, {"a": {}}, []],
        ),
    ],
)
def test_value_rules(variable, good, bad):
    for value in good:
        assert _settings.check_role("vllm_server", dict(GOOD, **{variable: value})) == [], (variable, value)
    for value in bad:
        assert _settings.check_role("vllm_server", dict(GOOD, **{variable: value})), (variable, value)


def test_overrides_use_the_planners_ranges():
    """One definition of each override's range: the planner's (plugin_utils/_planning/checks.py)."""
    errors = _settings.check_role("speculative_decoding", {"speculative_decoding_num_speculative_tokens": 16}, host="h")
    assert errors == ["host h: speculative_decoding_num_speculative_tokens=16 is not allowed; expected an integer from 1 to 15"]


def test_related_settings():
    errors = _settings.check_role("speculative_decoding", {"speculative_decoding_min_rounds": 11}, host="h")
    assert errors == ["host h: speculative_decoding_min_rounds must not exceed speculative_decoding_max_rounds (got 11 and 10)"]
    # the verdict refuses a strong gain under the gain asked for: the preflight says so before any device is touched
    errors = _settings.check_role("speculative_decoding", {"speculative_decoding_min_gain": 0.95}, host="h")
    assert errors == [
        "host h: speculative_decoding_min_gain must not exceed speculative_decoding_strong_gain"
        " (a strong gain is at least the gain asked for) (got 0.95 and 0.3)"
    ]
    assert _settings.check_role("speculative_decoding", {"speculative_decoding_min_gain": 0.95, "speculative_decoding_strong_gain": 0.95}) == []

    # bind mounts are the container's: refused with the native runtime, and named with the host
    errors = _settings.check_role("vllm_server", dict(GOOD, vllm_server_extra_mounts=["/data:/data:ro"]), host="h")
    assert errors == [
        "host h: vllm_server_extra_mounts are bind mounts of the container: they need vllm_server_runtime docker or podman, "
        "not native (got native and ['/data:/data:ro'])"
    ]
    assert _settings.check_role("vllm_server", dict(GOOD, vllm_server_runtime="docker", vllm_server_extra_mounts=["/data:/data:ro"])) == []


def test_a_further_option_names_the_setting_to_use_instead():
    errors = _settings.check_role("vllm_server", dict(GOOD, vllm_server_extra_args={"max-model-len": 4096}), host="h")
    assert errors == [
        "host h: vllm_server_extra_args={'max-model-len': 4096} is not allowed; expected no option the collection sets itself "
        "(max-model-len: set vllm_server_max_model_len)"
    ]
    errors = _settings.check_role("vllm_server", dict(GOOD, vllm_server_extra_args={"hf-token": "hf_secret1", "seed": 1}), host="h")
    assert errors == [
        "host h: vllm_server_extra_args={'hf-token': '***', 'seed': 1} is not allowed; expected no secret in the serve configuration "
        "(hf-token: set vllm_server_hf_token, kept in Ansible Vault)"
    ]


@pytest.mark.parametrize(
    ("serial", "ok"),
    [([1, "25%", "100%"], True), (3, True), ("50%", True), ([-1], False), ("abc", False), ([], False), ([0], False), (["101%"], False), ([True], False)],
)
def test_pacing(serial, ok):
    assert (_settings.check_pacing(serial, 0) == []) is ok


def test_pacing_set_per_host_is_refused():
    run = {"jetson_llm_serial": [1, "100%"], "jetson_llm_max_fail_percentage": 0}
    assert _settings.check_pacing_scope({"jetson_llm_serial": [1, "100%"]}, run, "h") == []
    errors = _settings.check_pacing_scope({"jetson_llm_max_fail_percentage": 50}, run, "h")
    assert errors and errors[0].startswith("host h: jetson_llm_max_fail_percentage=50 differs from the run's value 0")


def test_the_fact_first_contact_sets_is_refused_as_a_setting():
    run = {"jetson_llm_serial": [1, "100%"], "jetson_llm_max_fail_percentage": 0}
    errors = _settings.check_pacing_scope({"jetson_llm_left_alone": True}, run, "h")
    assert errors == [
        "host h: jetson_llm_left_alone: is what first contact sets on a device it skips (playbooks/discover.yml), not a setting; "
        "remove it from the inventory and the extra vars"
    ]


def test_the_role_refuses_a_bad_value_before_it_renders(tmp_path):
    """The vllm_server role's own entry point used by the rollout (tasks_from: facts.yml) validates first."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "facts of the server role",
                            "ansible.builtin.include_role": {"name": "jetson_llm.speculative.vllm_server", "tasks_from": "facts.yml"},
                        }
                    ],
                }
            ]
        )
    )
    env = dict(
        os.environ,
        HOME=os.path.join(ROOT, ".cache", "home"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    extra = '{"vllm_server_model": "Qwen/Qwen3-8B", "vllm_server_hf_token": "hf_abc\\nLD_PRELOAD=/tmp/evil.so"}'
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-c", "local", str(playbook), "-e", extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode != 0
    assert "vllm_server_hf_token=<secret of 30 characters, with a control character>" in proc.stdout, proc.stdout[-3000:]
    assert "LD_PRELOAD" not in proc.stdout
    assert "Gather Jetson facts" not in proc.stdout  # refused before anything else ran


def test_playbook_settings():
    assert _settings.check_playbook({}) == []
    errors = _settings.check_playbook({"jetson_llm_target_group": "a-b", "jetson_llm_tune_on_canaries": "yes", "jetson_llm_serial": [0]})
    assert len(errors) == 3, errors


@pytest.mark.parametrize(("token", "ok"), [("hf_good", True), ("hf_bad\nX=1", False)])
def test_the_server_validation_works_when_included_by_path_from_elsewhere(tmp_path, token, ok):
    """The revert handler of speculative_decoding includes vllm_server's tasks by path (no role_path of its own)."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "validate by path",
                            "ansible.builtin.include_tasks": os.path.join(ROOT, "roles", "vllm_server", "tasks", "validate.yml"),
                        }
                    ],
                }
            ]
        )
    )
    env = dict(
        os.environ,
        HOME=os.path.join(ROOT, ".cache", "home"),
        ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    extra = json.dumps({"vllm_server_model": "Qwen/Qwen3-8B", "vllm_server_hf_token": token})
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-c", "local", str(playbook), "-e", extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (proc.returncode == 0) is ok, proc.stdout[-3000:]
    if not ok:
        assert "vllm_server_hf_token=<secret of 10 characters, with a control character>" in proc.stdout


# ---------------------------------------------------------------- speculative_decoding_prompts_file


def _prompts(tmp_path, text, name="workload.jsonl"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


def _check_prompts(path, **extra):
    return _settings.check_role("speculative_decoding", dict({"speculative_decoding_prompts_file": path}, **extra), host="dev-7")


def test_prompts_file_empty_is_the_shipped_set_and_a_good_file_passes(tmp_path):
    assert _check_prompts("") == []
    path = _prompts(tmp_path, '{"prompt": "a"}\n{"messages": [{"role": "user", "content": "b"}]}\n')
    assert _check_prompts(path) == []


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"prompt": "ok"}\n{"prompt": "ok"\n', "line 2: not JSON"),
        ('{"prompt": "ok"}\n\n{"question": "?"}\n', 'line 3: expected exactly one of the keys "prompt" and "messages", found neither'),
        ('{"prompt": ""}\n', "line 1: prompt is empty"),
        ('{"prompt": "ok"}\n{"prompt": "x\\u001b[2J"}\n', "line 2: prompt holds the control character '\\x1b'"),
        ('{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}\n', "line 1: messages[0].content[0] must be"),
        ("", "the file holds no prompt"),
    ],
)
def test_bad_prompts_files_name_host_variable_file_line_and_format(tmp_path, text, fragment):
    path = _prompts(tmp_path, text)
    errors = _check_prompts(path)
    assert len(errors) == 1, errors
    message = errors[0]
    assert message.startswith("host dev-7: speculative_decoding_prompts_file=%r is not allowed; expected a UTF-8 JSONL file" % path)
    assert fragment in message
    if "line" in fragment:
        assert "%s line " % path in message
    assert "at most 10000 prompts and 16 MiB" in message


def test_prompts_file_limits(tmp_path, monkeypatch):
    monkeypatch.setattr(_settings._bench_prompts, "MAX_PROMPTS", 2)
    path = _prompts(tmp_path, '{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "c"}\n')
    assert "line 3: more than 2 prompts" in _check_prompts(path)[0]
    monkeypatch.setattr(_settings._bench_prompts, "MAX_FILE_BYTES", 10)
    path = _prompts(tmp_path, '{"prompt": "abcdefgh"}\n', name="big.jsonl")
    assert "more than the limit of 10" in _check_prompts(path)[0]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("/tmp/prompts\n.jsonl", "no control characters"),
        ("/tmp/prompts\x1b.jsonl", "no control characters"),
        ("prompts.jsonl", "the absolute path of a file on the controller"),
        ("/nonexistent/prompts.jsonl", "an existing file on the controller"),
        ("/tmp/", "the absolute path of a file"),
    ],
)
def test_prompts_file_paths(value, fragment):
    errors = _check_prompts(value)
    assert len(errors) == 1 and errors[0].startswith("host dev-7: speculative_decoding_prompts_file=") and fragment in errors[0], errors


def test_prompts_file_must_be_a_regular_file(tmp_path):
    assert "a regular file" in _check_prompts(str(tmp_path))[0]


def test_messages_lines_need_the_chat_endpoint(tmp_path):
    path = _prompts(tmp_path, '{"prompt": "a"}\n{"messages": [{"role": "user", "content": "b"}]}\n')
    assert _check_prompts(path, speculative_decoding_endpoint="chat") == []
    errors = _check_prompts(path, speculative_decoding_endpoint="completions")
    assert errors == [
        "host dev-7: speculative_decoding_prompts_file=%r has a messages line (%s line 2), which only "
        "speculative_decoding_endpoint=chat can send; got completions: use chat, or prompt lines only" % (path, path)
    ]
    only_prompts = _prompts(tmp_path, '{"prompt": "a"}\n', name="p.jsonl")
    assert _check_prompts(only_prompts, speculative_decoding_endpoint="completions") == []


def test_a_prompts_file_is_read_once_per_version(tmp_path, monkeypatch):
    path = _prompts(tmp_path, '{"prompt": "a"}\n')
    reads = []
    real = _settings._bench_prompts.read_prompts_file
    monkeypatch.setattr(_settings._bench_prompts, "read_prompts_file", lambda p: reads.append(p) or real(p))
    for host in range(5):
        assert _settings.check_role("speculative_decoding", {"speculative_decoding_prompts_file": path}, host="h%d" % host) == []
    assert reads == [path]
    with open(path, "a") as handle:
        handle.write('{"prompt": ""}\n')  # a new version (size) is read again
    assert "line 2: prompt is empty" in _check_prompts(path)[0]
    assert len(reads) == 2


def test_the_canary_sweep_needs_two_rounds():
    """The trial controller's k sweep chooses from two mirrored rounds at least (four blocks per k with the
    baseline): one round is refused in the preflight, naming the variable, before any device is touched."""
    assert _settings.check_role("speculative_decoding", {"speculative_decoding_tune_rounds": 2}, host="h") == []
    errors = _settings.check_role("speculative_decoding", {"speculative_decoding_tune_rounds": 1}, host="h")
    assert errors and "speculative_decoding_tune_rounds" in errors[0], errors
