# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures of the filter tests: Jinja through Ansible's Templar, and real ad-hoc runs."""

import json
import os
import subprocess
import sys

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")


def _collection_modules():
    return dict((k, v) for k, v in sys.modules.items() if k == "ansible_collections" or k.startswith("ansible_collections."))


@pytest.fixture(scope="module")
def render():
    """Render trusted Jinja with Ansible's Templar, the collection loaded through Ansible's own
    collection finder (as ansible-playbook does); plain imports are restored afterwards."""
    saved = _collection_modules()
    for name in saved:
        del sys.modules[name]
    finder = _AnsibleCollectionFinder(paths=[COLLECTIONS])
    finder._install()

    def _render(expression, variables):
        templar = Templar(loader=DataLoader(), variables=variables)
        return templar.template(trust_as_template(expression))

    try:
        yield _render
    finally:
        _AnsibleCollectionFinder._remove()
        for name in _collection_modules():
            del sys.modules[name]
        sys.modules.update(saved)


def _adhoc(msg, extra_vars):
    """Run `ansible localhost -m debug -a msg=...` and return the host's result."""
    env = dict(
        os.environ,
        HOME=os.path.join(ROOT, ".cache", "home"),
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )
    cmd = [ANSIBLE, "localhost", "-c", "local", "-m", "ansible.builtin.debug", "-a", "msg=" + msg, "-e", json.dumps(extra_vars)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert proc.stdout, proc.stderr
    out = json.loads(proc.stdout)
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.fixture
def adhoc():
    """`adhoc(msg, extra_vars)`: a real `ansible localhost -m debug` run; returns the host's result."""
    return _adhoc
