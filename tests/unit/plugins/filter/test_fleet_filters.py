# SPDX-License-Identifier: Apache-2.0
"""The fleet report filters (fleet_table, fleet_report, fleet_report_html, and report_internal's timing and index):
direct calls against the plugin_utils functions, input checks, and Jinja through Ansible's Templar."""

import json
import os
import sys

import pytest
import yaml
from ansible.errors import AnsibleError, AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter import fleet_report, fleet_report_html, fleet_table, report_internal
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _report, _report_html

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugin_utils"))
from test_report_fixtures import T0, fleet  # noqa: E402
from test_report_html import gain_chart, parse  # noqa: E402


def test_filters_are_registered_under_their_names():
    assert fleet_table.FilterModule().filters() == {"fleet_table": fleet_table.fleet_table}
    assert fleet_report.FilterModule().filters() == {"fleet_report": fleet_report.fleet_report}
    assert fleet_report_html.FilterModule().filters() == {"fleet_report_html": fleet_report_html.fleet_report_html}
    assert report_internal.FilterModule().filters() == {"report_internal": report_internal.report_internal}


@pytest.mark.parametrize("plugin", [fleet_table, fleet_report, fleet_report_html, report_internal])
def test_documentation_parses_and_names_the_filter(plugin):
    doc = yaml.safe_load(plugin.DOCUMENTATION)
    name = plugin.__name__.rsplit(".", 1)[1]
    assert doc["name"] == name and doc["author"] == ["Jetson LLM maintainers (@jetson-llm)"] and "_input" in doc["options"]
    assert "_value" in yaml.safe_load(plugin.RETURN)
    examples = yaml.safe_load(plugin.EXAMPLES)
    assert examples and "jetson_llm.speculative." + name in plugin.EXAMPLES


def test_fleet_table_direct():
    results = fleet()
    assert fleet_table.fleet_table(results, missing=["gone"]) == _report.table(results, missing=["gone"])
    narrow = fleet_table.fleet_table(results, width=90, reason_lines=1)
    assert narrow == _report.table(results, width=90, reason_lines=1)
    assert all(len(line) <= 90 for line in narrow if line.startswith("    "))
    assert fleet_table.fleet_table([]) == ["no host produced a result"]


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (({"host": "a"},), {}, "the input must be a list of per-host results"),
        (([1, 2],), {}, "the input must be a list of per-host results"),
        (([],), {"missing": "gone"}, "missing must be a list of host names"),
        (([],), {"width": 5}, "width must be an integer of at least 20"),
        (([],), {"reason_lines": -1}, "reason_lines must be an integer of at least 0"),
        (([],), {"reason_lines": True}, "reason_lines must be an integer"),
    ],
)
def test_fleet_table_rejects_bad_input(args, kwargs, message):
    with pytest.raises(AnsibleFilterError, match="jetson_llm.speculative.fleet_table: " + message):
        fleet_table.fleet_table(*args, **kwargs)


def test_fleet_timing_direct_and_errors():
    results = fleet()
    t = report_internal.report_internal(results, "timing", started=T0)
    assert t["waiting_seconds"] == _report.timing(results, started=T0, now=T0)["waiting_seconds"]
    assert t["wall_s"] > 0  # measured up to now
    assert report_internal.report_internal([], "timing", started=None)["wall_s"] is None
    with pytest.raises(AnsibleFilterError, match=r"report_internal\(timing\): the input must be a list"):
        report_internal.report_internal({"hosts": []}, "timing")
    with pytest.raises(AnsibleFilterError, match=r"report_internal\(timing\): could not convert"):
        report_internal.report_internal([], "timing", started="yesterday")
    with pytest.raises(AnsibleFilterError, match="unknown operation 'bogus'; known: index, timing"):
        report_internal.report_internal([], "bogus")


def test_fleet_report_direct():
    results = fleet()
    doc = fleet_report.fleet_report(results, missing=["gone"], started=str(T0), target_group="specdec_fleet")
    assert doc["run"]["id"] == "20261202T132640Z" and doc["run"]["target_group"] == "specdec_fleet"
    assert doc["counts"] == {"keep": 3, "revert": 2, "skip": 1, "missing": 1}
    assert doc["summary"] == [_report.host_summary(h) for h in doc["hosts"]]
    again = fleet_report.fleet_report(results, started=T0, history=json.dumps(_report.update_index(None, doc)))
    assert again["run"]["id"] == "20261202T132640Z-2"
    assert fleet_report.fleet_report([], started="")["run"]["started"] is None


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("hosts",), {}, "the input must be a list of per-host results"),
        (([],), {"missing": {"a": 1}}, "missing must be a list of host names"),
        (([],), {"started": "noon"}, "started must be seconds since the epoch"),
    ],
)
def test_fleet_report_rejects_bad_input(args, kwargs, message):
    with pytest.raises(AnsibleFilterError, match="jetson_llm.speculative.fleet_report: " + message):
        fleet_report.fleet_report(*args, **kwargs)


def test_report_index_direct_and_errors():
    doc = _report.report(fleet(), started=T0, now=T0 + 10)
    index = report_internal.report_internal("", "index", report=doc)
    assert index == {"schema": 1, "runs": [_report.index_entry(doc)]}
    later = _report.report(fleet()[:2], started=T0 + 60, now=T0 + 70)
    index = report_internal.report_internal(json.dumps(index), "index", report=later)
    assert [e["hosts"] for e in index["runs"]] == [6, 2]
    with pytest.raises(AnsibleFilterError, match=r"report_internal\(index\): report must be a run document"):
        report_internal.report_internal("", "index", report={"hosts": []})


def test_fleet_report_html_direct_and_errors():
    doc = _report.report(fleet(), started=T0, now=T0 + 10)
    index = _report.update_index(None, doc)
    page = fleet_report_html.fleet_report_html(doc, index=index, location="run")
    assert page == _report_html.html(doc, index=index, location="run")
    assert len(gain_chart(parse(page)).find_all("rect", "bar")) == 5
    with pytest.raises(AnsibleFilterError, match="fleet_report_html: location must be 'latest' or 'run'"):
        fleet_report_html.fleet_report_html(doc, location="index")
    with pytest.raises(AnsibleFilterError, match="fleet_report_html: the input must be a run document"):
        fleet_report_html.fleet_report_html([doc])


def test_jinja_chain_through_templar(render):
    variables = {"results": fleet(), "previous": "", "started": T0}
    doc = render(
        "{{ results | jetson_llm.speculative.fleet_report(missing=['gone'], started=started, history=previous, target_group='g') }}",
        variables,
    )
    assert doc["run"]["id"] == "20261202T132640Z" and doc["counts"]["missing"] == 1
    variables["doc"] = doc
    index = render("{{ previous | jetson_llm.speculative.report_internal('index', report=doc) }}", variables)
    assert [e["id"] for e in index["runs"]] == ["20261202T132640Z"]
    variables["index"] = index
    page = render("{{ doc | jetson_llm.speculative.fleet_report_html(index=index, location='latest') }}", variables)
    root = parse(page)
    assert len(gain_chart(root).find_all("g", "host")) == 6
    lines = render("{{ results | jetson_llm.speculative.fleet_table(missing=['gone'], width=120) }}", variables)
    assert lines == _report.table(fleet(), missing=["gone"], width=120)
    text = render("{{ (results | jetson_llm.speculative.report_internal('timing', started=started)).text }}", variables)
    assert text.startswith("wall time ")


def test_jinja_error_names_the_filter(render):
    with pytest.raises(AnsibleError) as excinfo:
        render("{{ {} | jetson_llm.speculative.fleet_report_html(location='nowhere') }}", {})
    assert "jetson_llm.speculative.fleet_report_html: location must be 'latest' or 'run'" in str(excinfo.value)
