# SPDX-License-Identifier: Apache-2.0
"""The jetson_llm.speculative.systemd_quote filter: direct calls, Jinja through Templar, and a
real `ansible localhost -m debug` run."""

import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
from ansible_collections.jetson_llm.speculative.plugins.filter import systemd_quote as plugin

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


def adhoc(msg, extra_vars):
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
    proc = subprocess.run(
        [
            ANSIBLE,
            "localhost",
            "-c",
            "local",
            "-m",
            "ansible.builtin.debug",
            "-a",
            "msg=" + msg,
            "-e",
            json.dumps(extra_vars),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.stdout, proc.stderr
    out = json.loads(proc.stdout)
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]


ARGV = ["/usr/bin/docker", "run", "--name", "vllm", "vllm/vllm-openai:v0.20.2", "--config", "/etc/vllm/serve.yaml"]
TRICKY = ["/bin/echo", "100%", "$HOME", 'say "hi"', "back\\slash", ";", 8000]


def test_filter_is_registered_under_its_name():
    assert plugin.FilterModule().filters() == {"systemd_quote": plugin.systemd_quote_filter}


def test_direct_call():
    assert plugin.systemd_quote_filter(ARGV) == " ".join('"{}"'.format(word) for word in ARGV)
    assert plugin.systemd_quote_filter(TRICKY) == ('"/bin/echo" "100%%" "$$HOME" "say \\"hi\\"" "back\\\\slash" ";" "8000"')


def test_non_list_input_names_the_filter():
    with pytest.raises(AnsibleFilterError, match=r"jetson_llm\.speculative\.systemd_quote filter must be a list"):
        plugin.systemd_quote_filter("vllm serve")


def test_specdec_errors_become_filter_errors_naming_the_fqcn():
    with pytest.raises(AnsibleFilterError) as excinfo:
        plugin.systemd_quote_filter(["/bin/echo", "a\nb"], host="jetson-008")
    assert str(excinfo.value).startswith(
        "jetson_llm.speculative.systemd_quote: host jetson-008: argv[1]='a\\nb' is not allowed; expected a string without control characters"
    )


def test_jinja_call_through_templar(render):
    assert render("{{ argv | jetson_llm.speculative.systemd_quote }}", {"argv": TRICKY}) == plugin.systemd_quote_filter(TRICKY)
    # words built in Jinja (tagged strings, integers) are quoted the same way
    assert render("{{ ['/bin/sleep', 5, 'x' ~ '%'] | jetson_llm.speculative.systemd_quote }}", {}) == ('"/bin/sleep" "5" "x%%"')


def test_jinja_error_names_the_filter(render):
    with pytest.raises(AnsibleError) as excinfo:
        render("{{ ['-/bin/true'] | jetson_llm.speculative.systemd_quote(host='jetson-009') }}", {})
    assert "jetson_llm.speculative.systemd_quote: host jetson-009: argv[0]='-/bin/true' is not allowed" in str(excinfo.value)


def test_real_ansible_run():
    result = adhoc("{{ argv | jetson_llm.speculative.systemd_quote }}", {"argv": TRICKY})
    assert not result.get("failed"), result
    assert result["msg"] == plugin.systemd_quote_filter(TRICKY)


def test_real_ansible_run_failure_message():
    result = adhoc("{{ argv | jetson_llm.speculative.systemd_quote(host=inventory_hostname) }}", {"argv": ["/bin/echo", ""]})
    assert result["failed"] is True
    assert "jetson_llm.speculative.systemd_quote: host localhost: argv[1]='' is not allowed" in result["msg"]
