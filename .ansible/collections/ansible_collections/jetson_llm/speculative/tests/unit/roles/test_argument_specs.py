# SPDX-License-Identifier: Apache-2.0
"""Role defaults and meta/argument_specs.yml are mirrored one to one, with the same defaults."""

import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = sorted(d for d in os.listdir(os.path.join(ROOT, "roles")) if not d.startswith("."))


def _load(role, *parts):
    with open(os.path.join(ROOT, "roles", role, *parts)) as fh:
        return yaml.safe_load(fh)


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_specs_have_the_same_keys(role):
    defaults = _load(role, "defaults", "main.yml")
    options = _load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options), "only in defaults: %s; only in argument_specs: %s" % (
        sorted(set(defaults) - set(options)),
        sorted(set(options) - set(defaults)),
    )


@pytest.mark.parametrize("role", ROLES)
def test_defaults_match_spec_defaults(role):
    defaults = _load(role, "defaults", "main.yml")
    options = _load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for name, spec in options.items():
        if spec.get("required"):
            continue
        want = spec.get("default")
        got = defaults[name]
        if spec.get("type") == "float" and got is not None and want is not None:
            assert float(got) == float(want), name
        else:
            assert got == want, name


@pytest.mark.parametrize("role", ROLES)
def test_every_variable_is_role_prefixed_and_documented(role):
    options = _load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for name, spec in options.items():
        assert name.startswith(role + "_"), name
        assert spec.get("description"), name
        assert spec.get("type"), name
