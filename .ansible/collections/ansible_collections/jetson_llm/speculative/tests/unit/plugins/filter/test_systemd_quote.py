# SPDX-License-Identifier: Apache-2.0
"""The jetson_llm.speculative.systemd_quote filter: direct calls, Jinja through Templar, and a
real `ansible localhost -m debug` run."""

import pytest
from ansible.errors import AnsibleError, AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter import systemd_quote as plugin

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


def test_real_ansible_run(adhoc):
    result = adhoc("{{ argv | jetson_llm.speculative.systemd_quote }}", {"argv": TRICKY})
    assert not result.get("failed"), result
    assert result["msg"] == plugin.systemd_quote_filter(TRICKY)


def test_real_ansible_run_failure_message(adhoc):
    result = adhoc("{{ argv | jetson_llm.speculative.systemd_quote(host=inventory_hostname) }}", {"argv": ["/bin/echo", ""]})
    assert result["failed"] is True
    assert "jetson_llm.speculative.systemd_quote: host localhost: argv[1]='' is not allowed" in result["msg"]
