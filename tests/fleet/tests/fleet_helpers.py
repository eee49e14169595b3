# SPDX-License-Identifier: Apache-2.0
"""Helpers of the fleet tests: running jlfleet, ssh and HTTP to fleet hosts, Ansible environment."""

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

from jlfleet import config, ops

HERE = os.path.dirname(os.path.abspath(__file__))
FLEET_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(FLEET_DIR))


__all__ = ["config", "ops"]

CI_FLEET = os.path.join(FLEET_DIR, "ci.yml")
BIN = os.path.dirname(sys.executable)
# The fleet's console script (tests/fleet/pyproject.toml), installed in this virtual environment.
FLEET_PY = [os.path.join(BIN, "jlfleet")]


def fleet_cmd(*args, timeout=900):
    return subprocess.run([*FLEET_PY, *args], capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def ansible_env():
    env = dict(os.environ)
    env.setdefault("HOME", os.path.join(REPO, ".cache", "home"))
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(REPO, ".cache", "collections"))
    env["ANSIBLE_DEPRECATION_WARNINGS"] = "false"
    env["ANSIBLE_HOST_KEY_CHECKING"] = "false"
    return env


class RunningFleet:
    """The running ci fleet: its state (state.json) plus ssh and HTTP helpers."""

    def __init__(self, state):
        self.state = state
        self.hosts = {h["name"]: h for h in state["hosts"]}

    def address(self, name):
        return self.hosts[name]["address"]

    def ssh(self, name, command, timeout=120, check=False):
        proc = subprocess.run(
            ["ssh", "-F", self.state["ssh_config"], name, command],
            # never the test run's stdin: ssh (its ControlMaster staying in the background) leaves a shared stdin
            # non-blocking, and ansible-playbook refuses to start on one
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError("%s: %r failed (%d):\n%s%s" % (name, command, proc.returncode, proc.stdout, proc.stderr))
        return proc

    def http_get(self, name, path, port=8000, timeout=5):
        url = "http://%s:%d%s" % (self.address(name), port, path)
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - fleet address, http only
            return resp.status, resp.read().decode()

    def wait_healthy(self, name, is_alive, port=8000, deadline_s=300):
        """Poll /health until 200; is_alive() is asked between polls so a dead server fails fast."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                status, _unused = self.http_get(name, "/health", port=port, timeout=2)
                if status == 200:
                    return
            except (urllib.error.URLError, OSError):
                pass
            alive, detail = is_alive()
            if not alive:
                raise AssertionError("%s: server exited before it was ready:\n%s" % (name, detail))
            time.sleep(0.5)
        raise AssertionError("%s: /health not ready within %d s" % (name, deadline_s))
