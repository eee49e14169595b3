# SPDX-License-Identifier: Apache-2.0
"""The machine-readable run document (fleet.json) and the index of runs (index.json)."""

import json

from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _report as r
from test_report_fixtures import T0, fleet


def test_run_id_is_the_utc_time_and_unique():
    assert r.run_id(T0) == "20261202T132640Z"
    assert r.run_id(T0, taken=["20261202T132640Z"]) == "20261202T132640Z-2"
    assert r.run_id(T0, taken=["20261202T132640Z", "20261202T132640Z-2"]) == "20261202T132640Z-3"
    assert r.iso(T0) == "2026-12-02T13:26:40Z" and r.iso(None) is None


def test_report_document():
    results = fleet()
    doc = r.report(list(reversed(results)), missing=["gone-02", "gone-01"], started=T0, now=T0 + 700.5, target_group="specdec_fleet")
    assert doc["schema"] == 1
    assert doc["run"] == {
        "id": "20261202T132640Z",
        "started": T0,
        "started_utc": "2026-12-02T13:26:40Z",
        "finished": T0 + 700.5,
        "finished_utc": "2026-12-02T13:38:20Z",
        "target_group": "specdec_fleet",
    }
    assert doc["counts"] == {"keep": 3, "revert": 2, "skip": 1, "missing": 2}
    assert doc["missing"] == ["gone-01", "gone-02"]
    names = [h["host"] for h in doc["hosts"]]
    assert names == sorted(names) and [s["host"] for s in doc["summary"]] == names
    assert doc["hosts"][0] == next(h for h in results if h["host"] == names[0])  # raw results kept as they are
    assert doc["summary"] == [r.host_summary(h) for h in doc["hosts"]]
    assert doc["timing"] == r.timing(results, started=T0, now=T0 + 700.5)
    orin = next(g for g in doc["groups"] if g["family"] == "agx_orin" and g["variant"] == "64gb")
    assert (orin["hosts"], orin["k"], orin["sources"], orin["canary"]) == (["orin-01", "orin-02"], [4], ["tuned on orin-01"], "orin-01")
    assert orin["tuning"]["k"] == 4 and orin["tuning"]["pruned"] == [6]
    assert json.loads(json.dumps(doc)) == doc  # plain JSON data, nothing lost


def test_report_started_as_text_and_without_start():
    doc = r.report(fleet()[:1], started="%.3f" % T0, now=T0 + 10)
    assert doc["run"]["started"] == T0 and doc["timing"]["wall_s"] == 10.0
    doc = r.report([], now=T0 + 10)
    assert doc["run"]["id"] == "20261202T132650Z" and doc["run"]["started"] is None and doc["timing"]["wall_s"] is None


def test_report_of_an_empty_run():
    doc = r.report([], missing=["a", "b"], started=T0, now=T0 + 60)
    assert doc["hosts"] == [] and doc["summary"] == [] and doc["counts"] == {"keep": 0, "revert": 0, "skip": 0, "missing": 2}
    assert doc["timing"]["waiting_seconds"] == 0.0 and doc["timing"]["wall_s"] == 60.0


def test_report_id_unique_against_history():
    first = r.report(fleet(), started=T0, now=T0 + 1)
    index = r.update_index(None, first)
    again = r.report(fleet(), started=T0, now=T0 + 2, history=json.dumps(index))
    assert again["run"]["id"] == "20261202T132640Z-2"
    index = r.update_index(json.dumps(index), again)
    assert [e["id"] for e in index["runs"]] == ["20261202T132640Z", "20261202T132640Z-2"]


def test_index_entry():
    doc = r.report(fleet(), missing=["gone"], started=T0, now=T0 + 700, target_group="g")
    entry = r.index_entry(doc)
    assert entry == {
        "id": "20261202T132640Z",
        "started_utc": "2026-12-02T13:26:40Z",
        "finished_utc": "2026-12-02T13:38:20Z",
        "target_group": "g",
        "hosts": 6,
        "counts": {"keep": 3, "revert": 2, "skip": 1, "missing": 1},
        "requests_spent": sum(s["requests_spent"] or 0 for s in doc["summary"]),
        "wall_s": 700.0,
        "path": "runs/20261202T132640Z",
    }


def test_index_keeps_every_run_oldest_first():
    index = None
    ids = []
    for n, started in enumerate([T0 + 3600, T0, T0 + 7200]):
        doc = r.report(fleet()[: n + 1], started=started, now=started + 100)
        index = r.update_index(index if n != 1 else json.dumps(index), doc)
        ids.append(doc["run"]["id"])
    assert [e["id"] for e in index["runs"]] == sorted(ids)
    assert [e["hosts"] for e in index["runs"]] == [2, 1, 3]
    # the same run again replaces its entry
    doc = r.report(fleet(), started=T0, now=T0 + 100)
    doc["run"]["id"] = ids[1]
    index = r.update_index(index, doc)
    assert len(index["runs"]) == 3 and next(e for e in index["runs"] if e["id"] == ids[1])["hosts"] == 6


def test_load_index_tolerates_what_it_cannot_use():
    assert r.load_index(None) == {"schema": 1, "runs": []}
    assert r.load_index("") == {"schema": 1, "runs": []}
    assert r.load_index(b"  \n") == {"schema": 1, "runs": []}
    bad = r.load_index("{not json")
    assert bad["runs"] == [] and "not valid JSON" in bad["error"]
    assert "no list of runs" in r.load_index('{"runs": 3}')["error"]
    good = {"id": "20261202T132640Z", "hosts": 1}
    mixed = [good, {"id": "../../etc"}, {"id": 5}, "junk", {"hosts": 2}]
    assert r.load_index({"runs": mixed})["runs"] == [good]
    assert r.load_index(mixed)["runs"] == [good]  # a bare list of runs too


def test_update_index_reports_an_unreadable_previous_index_once():
    doc = r.report(fleet()[:1], started=T0, now=T0 + 1)
    index = r.update_index("{broken", doc)
    assert [e["id"] for e in index["runs"]] == [doc["run"]["id"]] and "not valid JSON" in index["error"]
    later = r.report(fleet()[:1], started=T0 + 60, now=T0 + 61)
    index = r.update_index(json.dumps(index), later)
    assert "error" not in index and len(index["runs"]) == 2
