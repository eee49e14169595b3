# SPDX-License-Identifier: Apache-2.0
"""``vllm`` argument handling: version, argparse errors, --config YAML, aliases per version."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
from conftest import SIM_ROOT, run_vllm

import vllm_sim
from vllm_sim import cli
from vllm_sim.cli import ConfigFileError, parse_serve_args
from vllm_sim.versions import Version

V20 = Version("0.20.0")


def test_version_default_and_configured(sim_env):
    proc = run_vllm(["--version"], sim_env())
    assert (proc.returncode, proc.stdout) == (0, "0.20.0\n")
    proc = run_vllm(["--version"], sim_env({"version": "0.14.0"}))
    assert proc.stdout == "0.14.0\n"


def test_console_script_is_this_trees_simulator():
    """`make venv` installs tests/vllm_sim in editable mode: the `vllm` command runs this tree's code."""
    (script,) = [ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name == "vllm"]
    assert script.value == "vllm_sim.cli:main"
    assert script.dist.name == "jetson-llm-vllm-sim"
    assert os.path.dirname(os.path.abspath(vllm_sim.__file__)) == os.path.join(SIM_ROOT, "vllm_sim")


def test_console_script_runs_without_pythonpath(sim_env):
    env = sim_env({"version": "0.33.0"})
    assert "PYTHONPATH" not in env
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "vllm"), "--version"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, "0.33.0\n")


def test_settings_errors_are_reported(sim_env, tmp_path):
    env = sim_env()
    (tmp_path / "bad.json").write_text('{"versoin": "0.20.0"}')
    env["VLLM_SIM_SETTINGS"] = str(tmp_path / "bad.json")
    proc = run_vllm(["--version"], env)
    assert proc.returncode == 1 and "unknown setting 'versoin'" in proc.stderr
    (tmp_path / "old.json").write_text('{"version": "0.9.2"}')
    env["VLLM_SIM_SETTINGS"] = str(tmp_path / "old.json")
    assert "older than the oldest simulated release" in run_vllm(["--version"], env).stderr


def test_unknown_flag_is_an_argparse_error(sim_env):
    proc = run_vllm(["serve", "Qwen/Qwen3-8B", "--gpu-memory-utilisation", "0.8"], sim_env())
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "usage: vllm serve [model_tag] [options]",
        "vllm serve: error: unrecognized arguments: --gpu-memory-utilisation 0.8",
    ]


def test_bad_values_are_argparse_errors(sim_env):
    proc = run_vllm(["serve", "m", "--port", "eighty"], sim_env())
    assert proc.returncode == 2 and "vllm serve: error: argument --port: invalid int value: 'eighty'" in proc.stderr
    proc = run_vllm(["serve", "m", "--kv-cache-dtype", "int3"], sim_env())
    assert "argument --kv-cache-dtype: invalid choice: 'int3'" in proc.stderr


def test_invalid_speculative_json(sim_env):
    proc = run_vllm(["serve", "m", "--speculative-config", "{method: eagle3}"], sim_env({"version": "0.10.0"}))
    assert proc.returncode == 2
    assert "argument --speculative-config: invalid loads value: '{method: eagle3}'" in proc.stderr
    proc = run_vllm(["serve", "m", "-sc", "{"], sim_env({"version": "0.20.0"}))
    assert "argument --speculative-config/-sc: invalid _optional_type value: '{'" in proc.stderr


def test_defaults():
    args = parse_serve_args(["Qwen/Qwen3-8B"], V20)
    assert (args.port, args.gpu_memory_utilization, args.max_num_seqs, args.tensor_parallel_size) == (
        8000,
        0.9,
        None,
        1,
    )
    assert args.speculative_config is None and args.api_key is None and args.served_model_name is None


def test_short_alias_sc_from_0_19():
    raw = '{"method": "eagle3", "model": "m", "num_speculative_tokens": 3}'
    assert parse_serve_args(["m", "-sc", raw], Version("0.19.0")).speculative_config["method"] == "eagle3"
    with pytest.raises(SystemExit) as info:
        parse_serve_args(["m", "-sc", raw], Version("0.18.0"))
    assert info.value.code == 2


def test_tp_alias_underscores_and_equals():
    args = parse_serve_args(["m", "-tp", "2", "--max_model_len=4096", "--gpu_memory_utilization", "0.7"], V20)
    assert (args.tensor_parallel_size, args.max_model_len, args.gpu_memory_utilization) == (2, 4096, 0.7)


def test_human_readable_max_model_len():
    assert parse_serve_args(["m", "--max-model-len", "32k"], V20).max_model_len == 32000
    assert parse_serve_args(["m", "--max-model-len", "32K"], V20).max_model_len == 32768
    assert parse_serve_args(["m", "--max-model-len", "auto"], Version("0.14.0")).max_model_len == -1
    with pytest.raises(SystemExit):
        parse_serve_args(["m", "--max-model-len", "auto"], Version("0.13.0"))


def test_served_model_name_takes_several_values():
    args = parse_serve_args(["m", "--served-model-name", "a", "b", "--api-key", "k"], V20)
    assert args.served_model_name == ["a", "b"] and args.api_key == "k"


def test_dotted_speculative_config_is_folded():
    args = parse_serve_args(
        [
            "m",
            "--speculative-config.method",
            "eagle3",
            "--speculative-config.num_speculative_tokens=3",
            "--speculative-config.model",
            "x/y",
        ],
        V20,
    )
    assert args.speculative_config == {"method": "eagle3", "num_speculative_tokens": 3, "model": "x/y"}


def test_spec_shortcut_flags_exist_from_0_22():
    assert parse_serve_args(["m", "--spec-method", "eagle3", "--spec-tokens", "3"], Version("0.22.0")).spec_tokens == 3
    with pytest.raises(SystemExit):
        parse_serve_args(["m", "--spec-method", "eagle3"], Version("0.20.0"))


def test_boolean_optional_flags():
    assert parse_serve_args(["m", "--no-enable-prefix-caching"], V20).enable_prefix_caching is False
    assert parse_serve_args(["m", "--enable-prefix-caching"], V20).enable_prefix_caching is True
    args = parse_serve_args(["m", "--enforce-eager", "--disable-log-stats", "--trust-remote-code"], V20)
    assert args.enforce_eager and args.disable_log_stats and args.trust_remote_code


# --------------------------------------------------------------------------- --config YAML


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_config_yaml_nested_mapping_becomes_json(tmp_path):
    path = write(
        tmp_path,
        "serve.yaml",
        "max-model-len: 4096\n"
        "gpu-memory-utilization: 0.7\n"
        "enforce-eager: true\n"
        "enable-prefix-caching: false\n"
        "served-model-name: [a, b]\n"
        "speculative-config:\n"
        "  method: eagle3\n"
        "  model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\n"
        "  num_speculative_tokens: 5\n",
    )
    args = parse_serve_args(["meta-llama/Llama-3.1-8B-Instruct", "--config", path], V20)
    assert args.model_tag == "meta-llama/Llama-3.1-8B-Instruct"
    assert (args.max_model_len, args.gpu_memory_utilization, args.enforce_eager) == (4096, 0.7, True)
    assert args.enable_prefix_caching is False  # false -> --no-enable-prefix-caching
    assert args.served_model_name == ["a", "b"]
    assert args.speculative_config == {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 5,
    }


def test_config_yaml_json_string_and_false_without_no_flag(tmp_path):
    path = write(
        tmp_path,
        "s.yml",
        'speculative-config: \'{"method": "ngram", "num_speculative_tokens": 2}\'\nenforce-eager: false\n',
    )
    args = parse_serve_args(["m", "--config", path], V20)
    assert args.speculative_config == {"method": "ngram", "num_speculative_tokens": 2}
    assert args.enforce_eager is False


def test_command_line_beats_config_file(tmp_path):
    path = write(tmp_path, "s.yaml", "max-model-len: 4096\nport: 9000\n")
    args = parse_serve_args(["m", "--max-model-len", "2048", "--config", path], V20)
    assert (args.max_model_len, args.port) == (2048, 9000)


def test_model_from_config_file(tmp_path):
    path = write(tmp_path, "s.yaml", "model: Qwen/Qwen3-8B\n")
    args = parse_serve_args(["--config", path], V20)
    assert args.model_tag is None and args.model == "Qwen/Qwen3-8B"


def test_config_file_errors(tmp_path):
    with pytest.raises(ConfigFileError, match=r"^Config file must be of a yaml/yml type\. json supplied$"):
        parse_serve_args(["m", "--config", write(tmp_path, "s.json", "{}")], V20)
    no_model = write(tmp_path, "n.yaml", "port: 9000\n")
    with pytest.raises(ConfigFileError) as info:
        parse_serve_args(["--config", no_model], V20)
    assert str(info.value) == "No model specified! Please specify model either as a positional argument or in a config file."
    with pytest.raises(ConfigFileError, match="More than one config file specified!"):
        parse_serve_args(["m", "--config", no_model, "--config", no_model], V20)
    with pytest.raises(ConfigFileError, match="No config file specified!"):
        parse_serve_args(["m", "--config"], V20)


def test_config_unknown_key_is_an_argparse_error(tmp_path):
    path = write(tmp_path, "s.yaml", "max-modle-len: 4096\n")
    with pytest.raises(SystemExit) as info:
        parse_serve_args(["m", "--config", path], V20)
    assert info.value.code == 2


def test_config_errors_from_the_command(sim_env, tmp_path):
    proc = run_vllm(["serve", "m", "--config", write(tmp_path, "c.toml", "")], sim_env())
    assert proc.returncode == 1
    assert proc.stderr.rstrip().splitlines()[-1] == "(APIServer pid=%d) ValueError: Config file must be of a yaml/yml type. toml supplied" % _pid(proc)
    proc = run_vllm(["serve", "m", "--config", str(tmp_path / "missing.yaml")], sim_env())
    assert proc.returncode == 1
    assert "Unable to read the config file at" in proc.stdout
    assert "FileNotFoundError: [Errno 2] No such file or directory" in proc.stderr


def _pid(proc) -> int:
    line = proc.stderr.splitlines()[0]
    return int(line.split("pid=")[1].split(")")[0])


def test_non_default_args_are_logged(sim_env, tmp_path):
    """vLLM logs the non-default arguments first; a failing start still shows them."""
    proc = run_vllm(["serve", "no/such-model", "--max-model-len", "4096"], sim_env())
    assert "non-default args: {'model_tag': 'no/such-model'" in proc.stdout
    assert "'max_model_len': 4096" in proc.stdout


def test_cli_module_main_handles_top_level(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("VLLM_SIM_SETTINGS", str(tmp_path / "absent.json"))
    assert cli.main(["--help"]) == 0
    assert "vLLM CLI" in capsys.readouterr().out


def test_json_args_round_trip():
    args = parse_serve_args(["m", "--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 3})], V20)
    assert args.speculative_config["num_speculative_tokens"] == 3
