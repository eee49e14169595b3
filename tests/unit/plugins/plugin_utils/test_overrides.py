# SPDX-License-Identifier: Apache-2.0
"""Override validation in plugins/plugin_utils/_planning/checks.py: every invalid value is named."""

import pytest
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning import checks
from hypothesis import given
from hypothesis import strategies as st

GOOD = {
    "enabled": True,
    "force": False,
    "method": "eagle3",
    "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    "num_speculative_tokens": 4,
    "draft_tensor_parallel_size": 1,
    "gpu_memory_utilization": 0.7,
    "min_gain": 0.1,
    "max_concurrency": 8,
}


def test_valid_overrides_come_back_normalised_in_a_fixed_order():
    shuffled = dict(reversed(list(GOOD.items())))
    result = checks.validate_overrides(shuffled, host="jetson-001")
    assert result == GOOD
    assert list(result) == list(checks.OVERRIDE_KEYS)


def test_none_means_unset_and_ints_become_floats_for_float_settings():
    result = checks.validate_overrides({"model": None, "min_gain": 0, "gpu_memory_utilization": None})
    assert result == {"min_gain": 0.0}
    assert isinstance(result["min_gain"], float)


def test_no_overrides():
    assert checks.validate_overrides(None) == {}
    assert checks.validate_overrides({}) == {}


def test_local_model_path_is_accepted():
    assert checks.validate_overrides({"model": "/srv/models/eagle3-head"}) == {"model": "/srv/models/eagle3-head"}


@pytest.mark.parametrize("value", [1, 15])
def test_k_bounds_accepted(value):
    assert checks.validate_overrides({"num_speculative_tokens": value}) == {"num_speculative_tokens": value}


@pytest.mark.parametrize("value", [0.05, 0.95])
def test_utilization_bounds_accepted(value):
    assert checks.validate_overrides({"gpu_memory_utilization": value}) == {"gpu_memory_utilization": value}


INVALID = [
    ("enabled", "yes", "a boolean (true or false, not a string)"),
    ("enabled", "true", "a boolean (true or false, not a string)"),
    ("enabled", 1, "a boolean (true or false, not a string)"),
    ("force", "no", "a boolean (true or false, not a string)"),
    ("force", 0, "a boolean (true or false, not a string)"),
    ("method", "eagle", "one of eagle3, draft_model"),
    ("method", "EAGLE3", "one of eagle3, draft_model"),
    ("method", "ngram", "one of eagle3, draft_model"),
    ("method", True, "one of eagle3, draft_model"),
    ("model", "yuhuili/EAGLE3 head", "a Hugging Face repository id"),
    ("model", "a/b;reboot", "a Hugging Face repository id"),
    ("model", "/opt/../etc/x", "a Hugging Face repository id"),
    ("model", "$(id)/x", "a Hugging Face repository id"),
    ("model", 7, "a Hugging Face repository id"),
    ("num_speculative_tokens", 0, "an integer from 1 to 15"),
    ("num_speculative_tokens", 16, "an integer from 1 to 15"),
    ("num_speculative_tokens", -3, "an integer from 1 to 15"),
    ("num_speculative_tokens", True, "an integer from 1 to 15"),
    ("num_speculative_tokens", 3.0, "an integer from 1 to 15"),
    ("num_speculative_tokens", "3", "an integer from 1 to 15"),
    ("draft_tensor_parallel_size", 0, "an integer, 1 or the target tensor_parallel_size"),
    ("draft_tensor_parallel_size", False, "an integer, 1 or the target tensor_parallel_size"),
    ("gpu_memory_utilization", 0.04, "a number from 0.05 to 0.95"),
    ("gpu_memory_utilization", 0.96, "a number from 0.05 to 0.95"),
    ("gpu_memory_utilization", 1, "a number from 0.05 to 0.95"),
    ("gpu_memory_utilization", True, "a number from 0.05 to 0.95"),
    ("gpu_memory_utilization", "0.7", "a number from 0.05 to 0.95"),
    ("gpu_memory_utilization", float("nan"), "a number from 0.05 to 0.95"),
    ("min_gain", -0.1, "a number from 0 to 1"),
    ("min_gain", 1.5, "a number from 0 to 1"),
    ("min_gain", float("inf"), "a number from 0 to 1"),
    ("min_gain", False, "a number from 0 to 1"),
    ("max_concurrency", 0, "an integer >= 1"),
    ("max_concurrency", 2.5, "an integer >= 1"),
    ("max_concurrency", True, "an integer >= 1"),
]


@pytest.mark.parametrize(("key", "value", "allowed"), INVALID)
def test_invalid_override_names_host_variable_value_and_allowed(key, value, allowed):
    with pytest.raises(checks.SpecdecError) as excinfo:
        checks.validate_overrides({key: value}, host="jetson-003")
    message = str(excinfo.value)
    expected = "host jetson-003: speculative_decoding_{}={!r} is not allowed; expected {}".format(key, value, allowed)
    assert message.startswith(expected), message


def test_the_documented_example_message():
    with pytest.raises(checks.SpecdecError) as excinfo:
        checks.validate_overrides({"num_speculative_tokens": 0}, host="jetson-003")
    assert str(excinfo.value) == ("host jetson-003: speculative_decoding_num_speculative_tokens=0 is not allowed; expected an integer from 1 to 15")


def test_string_numbers_get_a_hint():
    with pytest.raises(checks.SpecdecError, match="a string is never converted"):
        checks.validate_overrides({"num_speculative_tokens": "3"}, host="h")


def test_unknown_key_is_an_error_listing_the_known_ones():
    with pytest.raises(checks.SpecdecError) as excinfo:
        checks.validate_overrides({"num_spec_tokens": 3}, host="jetson-009")
    message = str(excinfo.value)
    assert message.startswith("host jetson-009: speculative_decoding_num_spec_tokens=3 is not allowed; expected one of")
    for key in checks.OVERRIDE_KEYS:
        assert "speculative_decoding_" + key in message


def test_unknown_key_is_an_error_even_with_a_null_value():
    with pytest.raises(checks.SpecdecError, match="speculative_decoding_colour=None is not allowed"):
        checks.validate_overrides({"colour": None}, host="h")


def test_custom_variable_prefix():
    with pytest.raises(checks.SpecdecError, match=r"^host h: specdec_method='x' is not allowed"):
        checks.validate_overrides({"method": "x"}, host="h", var_prefix="specdec_")


def test_overrides_must_be_a_mapping():
    with pytest.raises(checks.SpecdecError, match=r"host h: speculative_decoding_\*=\['x'\] is not allowed; expected a mapping"):
        checks.validate_overrides(["x"], host="h")


def test_message_without_host():
    with pytest.raises(checks.SpecdecError) as excinfo:
        checks.validate_overrides({"enabled": "yes"})
    assert str(excinfo.value).startswith("speculative_decoding_enabled='yes' is not allowed")


def test_specdec_error_is_a_value_error():
    assert issubclass(checks.SpecdecError, ValueError)


# ---------------------------------------------------------------- properties

SHELL_OR_SYSTEMD_META = set(" \t\r\n\x0b\x0c\"'`$%;&|<>()[]{}*?!#~\\=,:@^\x00")


@given(st.text(max_size=60))
def test_no_model_id_with_a_metacharacter_is_ever_accepted(text):
    try:
        result = checks.validate_overrides({"model": text}, host="h")
    except checks.SpecdecError as exc:
        assert "speculative_decoding_model={!r}".format(text) in str(exc)
        return
    accepted = result["model"]
    assert not (set(accepted) & SHELL_OR_SYSTEMD_META)
    assert ".." not in accepted
    assert accepted.isascii()


@given(
    st.text(alphabet="abcXYZ019._-/", min_size=1, max_size=20),
    st.sampled_from(sorted(SHELL_OR_SYSTEMD_META)),
    st.integers(min_value=0, max_value=20),
)
def test_inserting_any_metacharacter_into_an_id_is_refused(base, meta, position):
    position = min(position, len(base))
    candidate = base[:position] + meta + base[position:]
    with pytest.raises(checks.SpecdecError):
        checks.validate_overrides({"model": candidate}, host="h")


@given(st.integers())
def test_k_accepted_exactly_in_range(value):
    try:
        checks.validate_overrides({"num_speculative_tokens": value})
    except checks.SpecdecError:
        assert not 1 <= value <= 15
    else:
        assert 1 <= value <= 15


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_utilization_accepted_exactly_in_range(value):
    try:
        checks.validate_overrides({"gpu_memory_utilization": value})
    except checks.SpecdecError:
        assert not 0.05 <= value <= 0.95
    else:
        assert 0.05 <= value <= 0.95


@given(
    st.one_of(
        st.booleans(),
        st.sampled_from(["yes", "no", "true", "false", "True", "on", "1", "0"]),
        st.text(max_size=8),
        st.integers(),
        st.floats(),
        st.none(),
        st.lists(st.booleans(), max_size=2),
    )
)
def test_enabled_accepts_only_real_booleans(value):
    try:
        result = checks.validate_overrides({"enabled": value})
    except checks.SpecdecError:
        assert value is not None and not isinstance(value, bool)
    else:
        assert result == ({} if value is None else {"enabled": value})
        assert value is None or isinstance(value, bool)
