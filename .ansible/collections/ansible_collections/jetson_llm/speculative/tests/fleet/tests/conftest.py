# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the fleet tests: the ci fleet (tests/fleet/ci.yml), brought up once for the module that uses it
and always torn down (one fleet runs at a time; test_rollout.py brings up its own)."""

import json
import os

import pytest
from fleet_helpers import CI_FLEET, RunningFleet, fleet_cmd, ops


@pytest.fixture(scope="module")
def ci_fleet():
    if os.geteuid() != 0:
        pytest.fail("the fleet tests need root (network namespaces, podman)")
    cgroup_before = ops.cgroup_options()
    proc = fleet_cmd("up", CI_FLEET)
    try:
        if proc.returncode != 0:
            pytest.fail("fleet up failed (%d):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
        with open(ops.STATE_JSON) as f:
            fleet = RunningFleet(json.load(f))
        fleet.cgroup_before = cgroup_before
        yield fleet
    finally:
        fleet_cmd("down")
