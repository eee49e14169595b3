# SPDX-License-Identifier: Apache-2.0
"""One validator for every setting of the collection's roles and playbooks (controller side).

The roles' ``meta/argument_specs.yml`` stay the documentation and give each setting its type,
default and choices; this module adds what a type cannot say (ranges, safe names and paths, no
control characters) and checks every value once, in Python:

* the preflight play calls it for every device before any device is touched;
* each role calls it again on the device's own values before it renders anything.

Every message names the host, the variable, the value (secrets masked) and what is allowed. A value
with a control character (a newline in a token is an attack on the environment file, not a typo) is
refused wherever it appears, also inside lists and mappings.
"""

import ipaddress
import os
import re

import yaml
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import prompts as _bench_prompts
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import (
    OVERRIDE_KEYS,
    UTIL_MAX,
    UTIL_MIN,
    SpecdecError,
    extra_args_problem,
    extra_mounts_problem,
    shown_extra_args,
    validate_overrides,
)
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._values import plain as _plain

ROLES = ("vllm_server", "speculative_decoding")
_ROLES_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "roles"))

# Control characters (C0, DEL, C1) and the Unicode line and paragraph separators.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SAFE_PATH_RE = re.compile(r"/[A-Za-z0-9._/+-]*")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_UNIT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_HOSTNAME_RE = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
_SERVED_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}")
_VERSION_RE = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?([A-Za-z0-9.+-]{0,32})")
# An OCI image reference: [registry[:port]/]path[:tag][@sha256:digest], lower-case path parts.
_IMAGE_RE = re.compile(
    r"([a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?/)?"
    r"[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?"
)
_SECRET_RE = re.compile(r"[A-Za-z0-9._~+/=:-]*")
_PERCENT_RE = re.compile(r"([1-9][0-9]?|100)%")

MODEL_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
MODEL_EXPECTED = "a Hugging Face repository id ORG/NAME (letters, digits, '.', '_', '-') or an absolute path of [A-Za-z0-9._/+-], without '..'"
UTILIZATION_RANGE = (UTIL_MIN, UTIL_MAX)

SECRETS = frozenset(("vllm_server_hf_token", "vllm_server_api_key"))


class SettingsError(ValueError):
    """Invalid settings; ``errors`` holds one message per offending variable."""

    def __init__(self, errors):
        super().__init__("\n".join(errors))
        self.errors = list(errors)


# ---------------------------------------------------------------- value checks
# Each check takes a value that already has its argument-spec type and returns None when the value
# is allowed, otherwise what is allowed.


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def int_range(low, high=None):
    def check(value):
        if low <= value and (high is None or value <= high):
            return None
        return "an integer from {} to {}".format(low, high) if high is not None else "an integer >= {}".format(low)

    return check


def float_range(low, high):
    def check(value):
        return None if low <= value <= high else "a number from {} to {}".format(low, high)

    return check


def model_id(value):
    if ".." not in value and ((value.startswith("/") and value != "/" and _SAFE_PATH_RE.fullmatch(value)) or MODEL_ID_RE.fullmatch(value)):
        return None
    return MODEL_EXPECTED


def absolute_path(value):
    if value.startswith("/") and value != "/" and ".." not in value.split("/") and _SAFE_PATH_RE.fullmatch(value):
        return None
    return "an absolute path of [A-Za-z0-9._/+-] other than '/', without '..'"


def optional_path(value):
    return None if value == "" else absolute_path(value)


def name(value):
    return None if _NAME_RE.fullmatch(value) else "a name of [A-Za-z0-9_.-] starting with a letter or digit (at most 64)"


def optional_name(value):
    return None if value == "" else name(value)


_USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


def user_name(value):
    return None if _USER_RE.fullmatch(value) else "a Unix user or group name of [a-z0-9_-] starting with a letter or '_' (at most 32)"


def user_names(value):
    if all(isinstance(item, str) and _USER_RE.fullmatch(item) for item in value):
        return None
    return "a list of Unix group names of [a-z0-9_-] starting with a letter or '_'"


def absolute_paths(value):
    if all(isinstance(item, str) and absolute_path(item) is None for item in value):
        return None
    return "a list of absolute paths of [A-Za-z0-9._/+-], each other than '/' and without '..'"


def unit_name(value):
    if _UNIT_RE.fullmatch(value) and not value.endswith((".service", ".")):
        return None
    return "a systemd unit name of [A-Za-z0-9_.@-] without '/' or '.service' (at most 64 characters)"


def listen_address(value):
    try:
        ipaddress.ip_address(value)
        return None
    except ValueError:
        pass
    return None if _HOSTNAME_RE.fullmatch(value) else "an IP address or a host name"


def served_name(value):
    return None if value == "" or _SERVED_NAME_RE.fullmatch(value) else "empty or a name of [A-Za-z0-9._/:-] (at most 128)"


def version(value):
    return None if value == "" or _VERSION_RE.fullmatch(value) else "empty (detect) or a vLLM version such as 0.20.2"


def image(value):
    return None if len(value) <= 255 and _IMAGE_RE.fullmatch(value) else "an OCI image reference such as vllm/vllm-openai:v0.20.0"


def secret(value):
    return None if _SECRET_RE.fullmatch(value) else "empty or characters of [A-Za-z0-9._~+/=:-] only (no spaces or line breaks)"


def positive_number(value):
    return None if value > 0 else "a number > 0"


def fraction(value):
    return None if 0 <= value <= 1 else "a number from 0 to 1 (a fraction: 0.1 = 10 %)"


def open_fraction(value):
    return None if 0 < value < 1 else "a number between 0 and 1 (exclusive)"


def k_candidates(value):
    if value and all(1 <= k <= 15 for k in value) and len(set(value)) == len(value):
        return None
    return "a non-empty list of distinct integers from 1 to 15"


# The workload's prompts file (speculative_decoding_prompts_file): read and parsed here, on the
# controller, with the parser the benchmark module uses on the device (module_utils/_bench/prompts.py).
# The result is kept per file version, so the preflight play reads a file once for the whole fleet.
_PROMPTS_FILES = {}


def prompts_file_check(path):
    """``(problem, first messages line)`` of a prompts file on the controller; problem None when allowed."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        return "an existing file on the controller ({})".format(exc.strerror or exc), None
    if not os.path.isfile(path):
        return "a regular file on the controller (this is not one)", None
    key = (os.path.realpath(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key not in _PROMPTS_FILES:
        try:
            prompts = _bench_prompts.read_prompts_file(path)[0]
        except OSError as exc:
            result = ("a file the controller can read ({})".format(exc.strerror or exc), None)
        except _bench_prompts.PromptsFileError as exc:
            where = "{} line {}".format(path, exc.line) if exc.line else path
            result = ("{} ({}: {})".format(_bench_prompts.PROMPTS_FILE_FORMAT, where, exc.problem), None)
        else:
            chat_only = [p["id"] for p in prompts if p["prompt"] is None]
            result = (None, int(chat_only[0].split("-")[1]) if chat_only else None)
        _PROMPTS_FILES[key] = result
    return _PROMPTS_FILES[key]


def prompts_file(value):
    if value == "":
        return None
    if not value.startswith("/") or value.endswith("/"):
        return "empty (the shipped prompt set) or the absolute path of a file on the controller"
    return prompts_file_check(value)[0]


def _prompts_endpoint(host, effective):
    """A file with messages lines needs the chat endpoint: /v1/completions takes no chat messages."""
    path = effective.get("speculative_decoding_prompts_file")
    endpoint = effective.get("speculative_decoding_endpoint")
    if not path or endpoint != "completions":
        return []
    line = prompts_file_check(path)[1]
    if line is None:
        return []
    return [
        "{}speculative_decoding_prompts_file={} has a messages line ({} line {}), which only "
        "speculative_decoding_endpoint=chat can send; got completions: use chat, or prompt lines only".format(
            "host {}: ".format(host) if host else "", shown("", path), path, line
        )
    ]


def _override(key):
    """The planner's own check of a per-host override (one definition of its range)."""

    def check(value):
        try:
            validate_overrides({key: value})
        except SpecdecError as exc:
            return str(exc).split("expected ", 1)[-1]
        return None

    return check


def _nullable(check):
    def wrapped(value):
        return None if value is None else check(value)

    return wrapped


# Extra rules per setting, on top of the argument spec's type and choices. A setting of the specs
# without a rule here must be a bool, a choice, or listed in UNCHECKED with the reason.
RULES = {
    "vllm_server_model": model_id,
    "vllm_server_served_model_name": served_name,
    "vllm_server_host": listen_address,
    "vllm_server_port": int_range(1, 65535),
    "vllm_server_gpu_memory_utilization": _nullable(float_range(*UTILIZATION_RANGE)),
    "vllm_server_max_model_len": _nullable(int_range(1, 10000000)),
    "vllm_server_max_num_seqs": _nullable(int_range(1, 65536)),
    "vllm_server_tensor_parallel_size": int_range(1, 64),
    "vllm_server_vllm_version": version,
    "vllm_server_vllm_bin": absolute_path,
    "vllm_server_engine_bin": optional_path,
    "vllm_server_image": image,
    "vllm_server_container_name": name,
    "vllm_server_oci_runtime": optional_name,
    "vllm_server_service_name": unit_name,
    "vllm_server_config_dir": absolute_path,
    "vllm_server_state_dir": absolute_path,
    "vllm_server_hf_cache_dir": absolute_path,
    "vllm_server_user": user_name,
    "vllm_server_user_home": absolute_path,
    "vllm_server_gpu_groups": user_names,
    "vllm_server_read_write_paths": absolute_paths,
    # the renderer's own rules (plugins/plugin_utils/_planning/checks.py)
    "vllm_server_extra_args": extra_args_problem,
    "vllm_server_extra_mounts": extra_mounts_problem,
    "vllm_server_hf_token": secret,
    "vllm_server_api_key": secret,
    "vllm_server_ready_timeout": int_range(0, 86400),
    "vllm_server_ready_delay": float_range(0.1, 600),
    "speculative_decoding_expected_concurrency": int_range(1),
    "speculative_decoding_min_headroom_gb": float_range(0, 1024),
    "speculative_decoding_high_concurrency": int_range(0, 1024),
    "speculative_decoding_c8_tolerance": fraction,
    "speculative_decoding_strong_gain": fraction,
    "speculative_decoding_strong_tpot_drop": fraction,
    "speculative_decoding_confidence": open_fraction,
    "speculative_decoding_min_rounds": int_range(1, 100),
    "speculative_decoding_max_rounds": int_range(1, 100),
    "speculative_decoding_requests_c1": int_range(1, 1000),
    "speculative_decoding_requests_c8": int_range(1, 1000),
    "speculative_decoding_output_len": int_range(1, 32768),
    "speculative_decoding_num_warmups": int_range(0, 100),
    "speculative_decoding_seed": int_range(0, 2**31 - 1),
    "speculative_decoding_output_probes": int_range(3, 24),
    "speculative_decoding_output_min_match": open_fraction,
    "speculative_decoding_min_acceptance": fraction,
    "speculative_decoding_benchmark_timeout": int_range(10, 86400),
    "speculative_decoding_lock_ttl": int_range(60, 604800),
    "speculative_decoding_k_candidates": k_candidates,
    "speculative_decoding_tune_rounds": int_range(2, 20),
    "speculative_decoding_ladder_step": float_range(0.01, 0.5),
    "speculative_decoding_ladder_steps": int_range(0, 10),
    "speculative_decoding_state_dir": absolute_path,
    "speculative_decoding_verdict_max_age_days": int_range(0, 3650),
    "speculative_decoding_report_dir": absolute_path,
    "speculative_decoding_verify_min_acceptance": fraction,
    "speculative_decoding_verify_min_gain": float_range(-1, 10),
    "speculative_decoding_verify_noise_floor": fraction,
    "speculative_decoding_verify_blocks": int_range(1, 20),
    "speculative_decoding_verify_requests": int_range(1, 1000),
    "speculative_decoding_textfile_path": optional_path,
    "speculative_decoding_prompts_file": prompts_file,
}

# The per-host overrides are checked by the planner's own rules (plugin_utils/_planning/checks.py).
RULES.update(("speculative_decoding_" + key, _override(key)) for key in OVERRIDE_KEYS)

# Settings whose content another validator owns (checked there, control characters here).
UNCHECKED = {
    "vllm_server_speculative_plan": "computed by the speculative_plan filter, validated by the renderer",
    "speculative_decoding_catalog": "validated entry by entry by the catalog (speculative_plan filter)",
}

# Relations between settings of one host.
_PAIRS = (
    (
        "vllm_server_runtime",
        "vllm_server_extra_mounts",
        lambda runtime, mounts: runtime != "native" or not mounts,
        "vllm_server_extra_mounts are bind mounts of the container: they need vllm_server_runtime docker or podman, not native",
    ),
    (
        "speculative_decoding_min_rounds",
        "speculative_decoding_max_rounds",
        lambda a, b: a <= b,
        "speculative_decoding_min_rounds must not exceed speculative_decoding_max_rounds",
    ),
    # the verdict's own rule (plugins/module_utils/_stats/base.py), checked before any device is touched
    (
        "speculative_decoding_min_gain",
        "speculative_decoding_strong_gain",
        lambda a, b: a is None or b is None or b >= a,
        "speculative_decoding_min_gain must not exceed speculative_decoding_strong_gain (a strong gain is at least the gain asked for)",
    ),
)


# ---------------------------------------------------------------- argument specs

_SPECS = {}

# Facts a role returns (set by its entry points; documented in its argument specs): never a setting.
RESULTS = {"vllm_server": ("vllm_server_result",), "speculative_decoding": ("speculative_decoding_result",)}


def role_spec(role):
    """The options of a role's ``main`` entry point, read from its argument specs."""
    if role not in ROLES:
        raise ValueError("unknown role {!r}; known: {}".format(role, ", ".join(ROLES)))
    if role not in _SPECS:
        with open(os.path.join(_ROLES_DIR, role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
            _SPECS[role] = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    return _SPECS[role]


def role_of(variable):
    for role in ROLES:
        if variable.startswith(role + "_"):
            return role
    return None


# ---------------------------------------------------------------- messages


def shown(variable, value):
    """The value as a message may show it: secrets masked, long values cut."""
    if variable in SECRETS and value not in (None, ""):
        text = "<secret of {} characters{}>".format(len(str(value)), ", with a control character" if _CONTROL_RE.search(str(value)) else "")
        return text
    if variable == "vllm_server_extra_args":
        value = shown_extra_args(value)
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _message(host, variable, value, allowed):
    where = "host {}: ".format(host) if host else ""
    return "{}{}={} is not allowed; expected {}".format(where, variable, shown(variable, value), allowed)


def _control_path(value, path=""):
    """The place of the first control character in a value (a string, list or mapping), or None."""
    if isinstance(value, str):
        match = _CONTROL_RE.search(value)
        return None if match is None else (path, match.group(0))
    if isinstance(value, dict):
        for key, item in value.items():
            found = _control_path(str(key), path) or _control_path(item, "{}[{!r}]".format(path, key))
            if found:
                return found
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _control_path(item, "{}[{}]".format(path, index))
            if found:
                return found
    return None


_TYPES = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "path": (lambda v: isinstance(v, str), "a path (a string)"),
    "int": (_is_int, "an integer (not a string or a boolean)"),
    "float": (_is_number, "a number (not a string or a boolean)"),
    "bool": (lambda v: isinstance(v, bool), "a boolean (true or false, not a string)"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "dict": (lambda v: isinstance(v, dict), "a mapping"),
}


def check_value(variable, value, option):
    """What is wrong with one value (None when it is allowed)."""
    found = _control_path(value)
    if found is not None:
        place, char = found
        return "no control characters (found {!r}{})".format(char, " in " + place if place else "")
    kind = option.get("type", "str")
    if value is None:
        # Options without a default are nullable ("let the planner decide"); required ones are not.
        if option.get("required") or ("default" in option and option["default"] is not None):
            return _TYPES[kind][1]
        return None
    type_ok, type_text = _TYPES[kind]
    if not type_ok(value):
        return type_text
    if kind == "list" and option.get("elements"):
        elem_ok, elem_text = _TYPES[option["elements"]]
        if not all(elem_ok(item) for item in value):
            return "a list whose elements are each " + elem_text
    if option.get("choices") and value not in option["choices"]:
        return "one of " + ", ".join(str(choice) for choice in option["choices"])
    rule = RULES.get(variable)
    return rule(value) if rule else None


def check_role(role, values, host=""):
    """Every error of one host's settings of ``role`` (a list of messages, empty when all is well).

    ``values`` maps variable names to values; missing settings take the argument spec's default,
    except required ones. Variables with the role's prefix that the role does not know are refused
    (a typo silently does nothing otherwise).
    """
    spec = role_spec(role)
    values = dict((str(key), _plain(value)) for key, value in dict(values).items())
    errors = []
    for variable in sorted(values):
        if variable in RESULTS.get(role, ()):
            errors.append(
                "{}{}: is the result the {} role returns (each of its entry points sets it), not a setting; "
                "remove it from the inventory and the extra vars".format("host {}: ".format(host) if host else "", variable, role)
            )
            continue
        if role_of(variable) == role and variable not in spec:
            close = [known for known in sorted(spec) if known.split("_")[-1] == variable.split("_")[-1]]
            errors.append(
                "{}{}: unknown variable of the {} role{}".format(
                    "host {}: ".format(host) if host else "",
                    variable,
                    role,
                    "; did you mean " + ", ".join(close) if close else "; see its meta/argument_specs.yml",
                )
            )
    effective = {}
    for variable, option in sorted(spec.items()):
        if variable in values:
            value = values[variable]
        elif option.get("required"):
            errors.append(_message(host, variable, "(unset)", "a value: this setting is required"))
            continue
        else:
            default = option.get("default")
            if isinstance(default, str) and "{{" in default:
                continue  # templated defaults are resolved by Ansible, then checked in the role
            value = default
        problem = check_value(variable, value, option)
        if problem:
            errors.append(_message(host, variable, value, problem))
        else:
            effective[variable] = value
    for first, second, related, text in _PAIRS:
        if first in effective and second in effective and not related(effective[first], effective[second]):
            errors.append("{}{} (got {} and {})".format("host {}: ".format(host) if host else "", text, effective[first], effective[second]))
    errors.extend(_prompts_endpoint(host, effective))
    return errors


# ---------------------------------------------------------------- playbook settings


def _batch(value):
    return (_is_int(value) and value >= 1) or (isinstance(value, str) and _PERCENT_RE.fullmatch(value) is not None)


def check_pacing(serial, max_fail_percentage):
    """Errors of the rollout pacing (``jetson_llm_serial``, ``jetson_llm_max_fail_percentage``)."""
    serial = _plain(serial)
    max_fail_percentage = _plain(max_fail_percentage)
    errors = []
    batches = serial if isinstance(serial, list) else [serial]
    if not batches or not all(_batch(item) for item in batches):
        errors.append(
            "jetson_llm_serial={} is not allowed; expected a batch size or a non-empty list of them, each an "
            "integer >= 1 or a percentage from '1%' to '100%' (for example [1, '25%', '100%'])".format(shown("", serial))
        )
    if not _is_number(max_fail_percentage) or not 0 <= max_fail_percentage <= 100:
        errors.append(
            "jetson_llm_max_fail_percentage={} is not allowed; expected a number from 0 to 100 (0: any failed device stops the rollout)".format(
                shown("", max_fail_percentage)
            )
        )
    return errors


PLAYBOOK_SETTINGS = ("jetson_llm_serial", "jetson_llm_max_fail_percentage")
# Facts the playbooks set on a device: never a setting.
PLAYBOOK_FACTS = ("jetson_llm_left_alone",)
_GROUP_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def check_playbook(variables):
    """Errors of the playbooks' own settings: the pacing, the group names and the canary tuning switch."""
    variables = dict((str(key), _plain(value)) for key, value in dict(variables).items())
    errors = check_pacing(variables.get("jetson_llm_serial", [1, "25%", "100%"]), variables.get("jetson_llm_max_fail_percentage", 0))
    for setting in ("jetson_llm_target_group", "jetson_llm_canary_group"):
        value = variables.get(setting)
        if value is not None and not (isinstance(value, str) and _GROUP_RE.fullmatch(value)):
            errors.append("{}={} is not allowed; expected an inventory group name of [A-Za-z0-9_] not starting with a digit".format(setting, shown("", value)))
    tune = variables.get("jetson_llm_tune_on_canaries")
    if tune is not None and not isinstance(tune, bool):
        errors.append("jetson_llm_tune_on_canaries={} is not allowed; expected a boolean (true or false, not a string)".format(shown("", tune)))
    return errors


def check_pacing_scope(variables, run, host):
    """Pacing is a property of the run: a device or group that sets a different value is refused.

    ``variables`` are the device's variables; ``run`` maps the playbook settings to the values the
    run uses (extra vars or ``group_vars/all``).
    """
    errors = []
    variables = dict(variables)
    effective = dict(run)
    for fact in PLAYBOOK_FACTS:
        if fact in variables:
            errors.append(
                "host {}: {}: is what first contact sets on a device it skips (playbooks/discover.yml), not a setting; "
                "remove it from the inventory and the extra vars".format(host, fact)
            )
    for setting in PLAYBOOK_SETTINGS:
        if setting in variables and _plain(variables[setting]) != _plain(effective.get(setting)):
            errors.append(
                "host {}: {}={} differs from the run's value {}; rollout pacing applies to the whole run: set it "
                "in group_vars/all or with -e, not per host or group".format(host, setting, shown("", variables[setting]), shown("", effective.get(setting)))
            )
    return errors
