# SPDX-License-Identifier: Apache-2.0
"""The self-contained HTML report: parsed with Python's html.parser, checked element by element."""

import json
import os
import re
from html.parser import HTMLParser

import pytest
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _report as r
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _report_html as h
from test_report_fixtures import HOSTILE_HOST, HOSTILE_REASON, T0, fleet, result

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "source"}
SVG_EMPTY = {"rect", "line", "circle", "path"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children, self.text = tag, dict(attrs), parent, [], []

    def classes(self):
        return (self.attrs.get("class") or "").split()

    def iter(self):
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag=None, cls=None):
        return [n for n in self.iter() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes())]

    def all_text(self):
        return "".join(t if isinstance(t, str) else t.all_text() for t in self.text)


class Tree(HTMLParser):
    """A strict tree builder: every element must be closed in order (a broken escape would unbalance it)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", [], None)
        self.cur = self.root
        self.errors = []
        self.doctype = None

    def handle_decl(self, decl):
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        self.cur.text.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        self.cur.text.append(node)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if self.cur.tag != tag:
            self.errors.append("closing %s while %s is open" % (tag, self.cur.tag))
            return
        self.cur = self.cur.parent

    def handle_data(self, data):
        self.cur.text.append(data)


def parse(page):
    tree = Tree()
    tree.feed(page)
    tree.close()
    assert tree.errors == [], tree.errors[:5]
    assert tree.cur is tree.root, "unclosed element %s" % tree.cur.tag
    assert tree.doctype == "DOCTYPE html"
    return tree.root


def gain_chart(root):
    charts = [s for s in root.find_all("svg") if s.attrs.get("aria-label", "").startswith("Throughput gain")]
    assert len(charts) == 1
    return charts[0]


def _page(results=None, missing=(), index=None, location="latest", started=T0):
    results = fleet() if results is None else results
    doc = r.report(results, missing=list(missing), started=started, now=started + 700, history=index, target_group="specdec_fleet")
    return doc, h.html(doc, index=r.update_index(index, doc), location=location)


@pytest.fixture(scope="module")
def full():
    return _page(missing=["gone-01"])


def test_page_is_balanced_and_self_contained(full):
    _doc, page = full
    root = parse(page)
    tags = {n.tag for n in root.iter()}
    assert {"html", "head", "style", "body", "svg", "table"} <= tags
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "base", "form"}
    for node in root.iter():
        for name, value in node.attrs.items():
            assert not name.startswith("on"), (node.tag, name)
            if name in ("href", "src"):
                assert not re.match(r"^[a-z]+:", value or ""), value  # relative links only
    style = root.find_all("style")[0].all_text()
    assert "url(" not in style and "@import" not in style
    assert 'xmlns="http://www.w3.org/2000/svg"' in page and page.count("http") == page.count("http://www.w3.org/2000/svg")


def test_one_bar_per_host_with_its_interval(full):
    doc, page = full
    chart = gain_chart(parse(page))
    groups = chart.find_all("g", "host")
    assert sorted(g.attrs["data-host"] for g in groups) == sorted(s["host"] for s in doc["summary"])
    by_host = {s["host"]: s for s in doc["summary"]}
    widths = {}
    for g in groups:
        s = by_host[g.attrs["data-host"]]
        bars, cis = g.find_all("rect", "bar"), g.find_all("path", "ci")
        assert g.attrs["data-outcome"] == s["outcome"]
        if s["gain_c1"] is None:
            assert bars == [] and cis == [] and "no trial (skipped)" in g.all_text()
            continue
        assert len(bars) == 1 and len(cis) == 1
        lo, hi = s["gain_c1"]["ci"]
        assert float(cis[0].attrs["data-lo"]) == pytest.approx(lo, abs=1e-4) and float(cis[0].attrs["data-hi"]) == pytest.approx(hi, abs=1e-4)
        # the whisker spans the estimate: M xa y H xb with xa < estimate marker < xb
        xa, xb = [float(v) for v in re.match(r"M([\d.]+) [\d.]+H([\d.]+)", cis[0].attrs["d"]).groups()]
        cx = float(g.find_all("circle")[0].attrs["cx"])
        assert xa < cx < xb
        widths[s["host"]] = float(bars[0].attrs["width"])
        title = g.find_all("title")[0].all_text()
        assert s["host"] in title and s["label"] in title and "CI" in title
        assert r._gain_text(s["gain_c1"]) in g.all_text()
    assert len(widths) == 5
    order = sorted(widths, key=widths.get)
    assert order == sorted(widths, key=lambda h: abs(by_host[h]["gain_c1"]["estimate"]))  # bar length follows the estimate


def test_chart_groups_hosts_by_family(full):
    _doc, page = full
    chart = gain_chart(parse(page))
    texts = [t.all_text() for t in chart.find_all("text")]
    heads = [t.split(" ")[0] for t in texts if "host" in t and "\u00b7" in t]
    assert heads == ["agx_orin", "orin_nano", "thor"]
    hosts = [g.attrs["data-host"] for g in chart.find_all("g", "host")]
    agx = [h for h in hosts if h in ("orin-01", "orin-02", "orin-03")]
    assert agx == ["orin-01", "orin-02", "orin-03"] and hosts.index("nano-01") == 3 and hosts[4:] == ["thor-01", "thor-02"]
    assert "4 hosts" not in "".join(texts) and "3 hosts" in "".join(texts)


def test_keep_threshold_drawn_once_when_shared():
    results = [h for h in fleet() if h["host"] != "thor-02"]  # every host uses min_gain 0.10
    _doc, page = _page(results)
    chart = gain_chart(parse(page))
    lines = chart.find_all("line", "threshold")
    assert len(lines) == 1
    zero = next(n for n in chart.find_all("line") if n.attrs.get("stroke") == "#57606a")
    # +10 % lies right of zero, at a tenth of the way from 0 % to +100 % on the axis labels
    ticks = {t.all_text(): float(t.attrs["x"]) for t in chart.find_all("text") if re.match(r"^[+\u2212]?\d+%$", t.all_text())}
    x10 = ticks["0%"] + 0.1 * (ticks["+100%"] - ticks["0%"])
    assert float(lines[0].attrs["x1"]) == pytest.approx(x10, abs=0.5) and float(zero.attrs["x1"]) == pytest.approx(ticks["0%"], abs=0.5)
    assert any("keep threshold (min_gain) +10%" in t.all_text() for t in chart.find_all("text"))


def test_keep_thresholds_per_host_when_they_differ(full):
    doc, page = full
    chart = gain_chart(parse(page))
    lines = chart.find_all("line", "threshold")
    assert len(lines) == len([s for s in doc["summary"] if s["min_gain"] is not None]) == 5
    assert len({ln.attrs["x1"] for ln in lines}) == 2  # +10 % and thor-02's +20 %


def test_host_table_rows(full):
    doc, page = full
    root = parse(page)
    rows = root.find_all("tr", "host")
    assert len(rows) == len(doc["summary"])
    by_host = {s["host"]: s for s in doc["summary"]}
    for tr in rows:
        cells = tr.find_all("td")
        host = cells[0].find_all("b")[0].all_text()
        s = by_host[host]
        assert len(cells) == 9
        assert s["outcome"] in cells[1].all_text()
        detail = tr.parent.children[tr.parent.children.index(tr) + 1]
        assert "detail" in detail.classes() and s["reason"] in detail.all_text()
        for w in s["warnings"] + s["plan_warnings"] + s["benchmark_warnings"]:
            assert w in detail.all_text()
        if s["method"]:
            assert "k=%d" % s["k"] in cells[2].all_text() and s["speculator"] in cells[2].all_text()
        if s["throughput"]["c1"]["baseline"] is not None:
            assert "%.1f\u00a0\u2192\u00a0%.1f" % (s["throughput"]["c1"]["baseline"], s["throughput"]["c1"]["speculative"]) in cells[3].all_text()
            assert "%.1f\u00a0\u2192\u00a0%.1f" % (s["throughput"]["c8"]["baseline"], s["throughput"]["c8"]["speculative"]) in cells[5].all_text()
            assert "c=1 %.2f" % s["acceptance"]["c1"]["length"] in cells[6].all_text()
            assert "%d requests" % s["requests_spent"] in cells[7].all_text()
            assert "c=1 %.1f" % (100 * s["noise"]["c1"]["residual_sd"]) in cells[8].all_text()
        # the seconds the device did not serve, in the trial cell: its restarts
        plural = "" if s["restarts"] == 1 else "s"
        down = "%.0f s in %d restart%s not serving" % (s["downtime_s"], s["restarts"], plural) if s["restarts"] else "0 s not serving"
        assert down in cells[7].all_text(), (host, cells[7].all_text())
        if s["gain_c1"]:
            assert ("%+.1f" % (100 * s["gain_c1"]["estimate"])).replace("-", "\u2212") in cells[3].all_text()
    orin02 = next(tr for tr in rows if tr.attrs["id"] == "host-orin-02")
    assert "revert" in orin02.find_all("span", "badge")[0].all_text() and "inconclusive" in orin02.all_text()
    assert "gone-01" in root.all_text() and "No result" in root.all_text()
    assert "decided in an earlier run" in next(tr for tr in rows if tr.attrs["id"] == "host-orin-03").all_text()


def test_tuned_k_per_group(full):
    _doc, page = full
    section = page[page.index('<h2 id="groups">') : page.index('<h2 id="timing">')]
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", section)
    assert len(rows) == 4  # agx_orin 32gb, agx_orin 64gb, thor t4000, thor t5000 (the skipped Orin Nano has none)
    orin = next(row for row in rows if row.startswith("agx_orin 64gb"))
    assert "<td>4</td><td>tuned on orin-01</td><td><code>orin-01</code>, <code>orin-02</code></td>" in orin
    assert "on <code>orin-01</code>: k=3 +" in orin and "<b>k=4 +" in orin and "pruned k=6" in orin


def test_hostile_strings_are_escaped():
    hostile = result(HOSTILE_HOST, "<b>agx</b>", '64gb" onmouseover="x', g1=0.9, g8=0.5, reason=HOSTILE_REASON)
    hostile["verdict"]["warnings"] = ["<script>alert(2)</script>"]
    _doc, page = _page([hostile, *fleet()[:2]], missing=["<img src=x>"])
    root = parse(page)
    assert not root.find_all("script") and not root.find_all("img") and not [n for n in root.iter() if n.tag == "b" and n.all_text() == "agx"]
    text = root.all_text()
    assert HOSTILE_HOST in text and "<script>alert(2)</script>" in text and "<img src=x>" in text
    assert 'vLLM said: </td><img src=x onerror=alert(1)> & "quoted" {{ 7 * 6 }} <!-- -->' in text
    assert "\x00" not in page and "\x1b" not in page
    assert [g.attrs["data-host"] for g in gain_chart(root).find_all("g", "host")].count(HOSTILE_HOST) == 1
    for node in root.iter():
        assert not any(name.startswith("on") for name in node.attrs)
    assert "<script" not in page and "<img" not in page and "<b>agx" not in page


def test_timing_section_and_timeline(full):
    doc, page = full
    root = parse(page)
    assert doc["timing"]["text"] in root.all_text()
    assert doc["downtime"]["text"] in root.all_text() and doc["downtime"]["restarts"] > 0
    timeline = next(s for s in root.find_all("svg") if "Timeline" in s.attrs.get("aria-label", ""))
    rects = timeline.find_all("rect")
    expect = sum(len(h["intervals"]) for h in doc["hosts"])
    assert len(rects) == expect
    assert {g.attrs["data-host"] for g in timeline.find_all("g")} == {s["host"] for s in doc["summary"]}


def test_empty_run():
    doc, page = _page([], missing=["a", "b"])
    root = parse(page)
    text = root.all_text()
    assert "No host produced a result in this run." in text and "a" in text and "b" in text
    assert not [s for s in root.find_all("svg") if s.attrs.get("aria-label", "").startswith("Throughput gain")]
    assert not root.find_all("tr", "host")
    history = [tr for tr in root.find_all("tr") if "current" in tr.classes()]
    assert len(history) == 1 and doc["run"]["id"] in json.dumps(r.index_entry(doc))


def test_history_lists_runs_newest_first_with_links():
    index = None
    docs = []
    for n in range(3):
        doc = r.report(fleet()[: n + 2], started=T0 + 3600 * n, now=T0 + 3600 * n + 600)
        index = r.update_index(index, doc)
        docs.append(doc)
    latest = parse(h.html(docs[-1], index=index, location="latest"))
    in_run = parse(h.html(docs[-1], index=json.dumps(index), location="run"))
    for root, prefix in ((latest, ""), (in_run, "../../")):
        section = next(t for t in root.find_all("table") if "Run (UTC)" in t.all_text())
        rows = section.find_all("tbody")[0].find_all("tr")
        assert [tr.find_all("td")[0].all_text().split(" ")[0] for tr in rows] == [d["run"]["started_utc"] for d in reversed(docs)]
        assert "current" in rows[0].classes() and "(this run)" in rows[0].all_text() and "current" not in rows[1].classes()
        hrefs = [a.attrs["href"] for a in section.find_all("a")]
        assert hrefs[:2] == [prefix + "runs/%s/report.html" % docs[-1]["run"]["id"], prefix + "runs/%s/fleet.json" % docs[-1]["run"]["id"]]
        assert [int(td.all_text()) for td in rows[-1].find_all("td")[2:8]] == [2, 1, 1, 0, 0, 0]


def test_every_host_is_counted_once_in_the_cards_and_the_history():
    """Refused, failed and busy hosts are in the column, the bar segment and the card of other outcomes: the history's
    columns add up to the run's hosts and its bar fills its width."""
    results = fleet()[:3]
    results[1] = dict(results[1], outcome="refused", label="refused (a server the collection did not start)")
    results[2] = dict(results[2], outcome="failed", label="failed")
    doc = r.report(results, missing=["gone-01"], started=T0, now=T0 + 60)
    root = parse(h.html(doc, index=r.update_index(None, doc)))
    section = next(t for t in root.find_all("table") if "Run (UTC)" in t.all_text())
    row = section.find_all("tbody")[0].find_all("tr")[0]
    cells = row.find_all("td")
    assert [int(td.all_text()) for td in cells[3:8]] == [1, 0, 0, 2, 1]  # keep, revert, skip, other, no result
    widths = [float(i.attrs["style"].split(":")[1].rstrip("%")) for i in row.find_all("i")]
    assert [i.attrs["class"] for i in row.find_all("i")] == ["keep", "other", "missing"] and abs(sum(widths) - 100.0) < 0.2
    cards = {c.find_all("span")[0].all_text(): c.find_all("b")[0].all_text() for c in root.find_all("div", "card")}
    assert cards["other outcomes"] == "2" and "failed 1, refused 1" in root.all_text()


def test_history_notes_an_unreadable_index():
    doc = r.report(fleet()[:1], started=T0, now=T0 + 1)
    root = parse(h.html(doc, index=r.update_index("{broken", doc)))
    assert "index.json is not valid JSON" in root.all_text()


def test_a_fleet_json_of_the_first_layout_renders():
    """Only ``hosts`` and ``timing``, as fleet.json was written before the run documents."""
    results = fleet()
    old = {"hosts": results, "timing": r.timing(results, started=T0, now=T0 + 800)}
    root = parse(h.html(json.loads(json.dumps(old))))
    assert len(gain_chart(root).find_all("rect", "bar")) == 5
    assert "No runs recorded yet." in root.all_text()


def test_location_must_be_known():
    with pytest.raises(ValueError, match="location"):
        h.html({"hosts": []}, location="elsewhere")


def test_markup_lives_in_the_template_not_in_python():
    """The page's markup, style and colours are in the Jinja2 template; the Python modules hold no tag or entity."""
    tag = re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*(\s[^<>]*)?/?>|&[a-z]+;|&#[0-9]+;")
    for module in (r, h):
        with open(module.__file__.replace(".pyc", ".py"), encoding="utf-8") as f:
            source = f.read()
        assert [m.group(0) for m in tag.finditer(source) if m.group(0) != "<id>"] == [], module.__name__
    with open(os.path.join(h.TEMPLATES, h.TEMPLATE), encoding="utf-8") as f:
        template = f.read()
    assert "<svg" in template and "--keep:#1a7f37" in template
    env = h.environment()
    assert env.autoescape is True and env.finalize is h._clean


def test_hostile_run_fields_are_escaped_everywhere():
    """The group, the run's times and an index entry from an edited index.json reach the page as text."""
    evil = "<i>g</i>\x07\"'"
    doc = r.report(fleet()[:2], started=T0, now=T0 + 700, target_group=evil)
    doc["run"]["started_utc"] = evil
    index = r.update_index(None, doc)
    index["runs"][0]["requests_spent"] = "<b>9</b>"
    root = parse(h.html(doc, index=index))
    assert not [n for n in root.iter() if n.tag in ("i", "b") and n.all_text() in ("g", "9")]
    text = root.all_text()
    assert "group <i>g</i> \"'" in text and "<b>9</b>" in text and "\x07" not in text
    title = root.find_all("title")[0].all_text()
    assert title.endswith("\u2013 <i>g</i> \"'")


def test_each_host_shows_its_simulator_lag():
    """The page shows each host's simulator lag, and says when a host ran out of spec."""
    res = result("lagging", "agx_orin", "64gb")
    res["blocks"][0].update(sim_lag_share=0.004, sim_out_of_spec=False)
    res["blocks"][1].update(sim_lag_share=0.031, sim_out_of_spec=True)
    page = h.html(r.report([res], started=T0, now=T0 + 700))
    assert "simulator lag: at most 3.1% of modelled time over 2 blocks; OUT OF SPEC in 1 blocks" in page
    assert '<div class="small warn">simulator lag' in page


def test_the_prompt_set_of_each_host_is_shown():
    user = result("dev-user", "orin", "agx-64gb")
    user["prompt_set"] = {"name": "ops<b>chat</b>.jsonl", "source": "file", "count": 240, "sha256": "ab12" * 16, "kinds": ["messages"]}
    shipped = result("dev-shipped", "orin", "agx-64gb")
    assert r.host_summary(user)["prompts"] == "prompts ops<b>chat</b>.jsonl (240, sha256 ab12ab12ab12)"
    assert r.host_summary(shipped)["prompts"] == "shipped prompts"
    assert r.prompts_line(None) is None
    _doc, page = _page([user, shipped])
    text = parse(page).all_text()
    assert "prompts ops<b>chat</b>.jsonl (240, sha256 ab12ab12ab12)" in text and "shipped prompts" in text
    assert "<b>chat" not in page


def test_a_reconciled_host_is_marked_in_the_page():
    results = fleet()
    results[0] = dict(results[0], reconciled=["speculation was loaded where the decision is revert <b>"])
    _doc, text = _page(results)
    assert "reconciled: speculation was loaded where the decision is revert &lt;b&gt;" in text
    parse(text)  # still a balanced page


def test_a_host_that_stepped_down_the_memory_ladder_says_so_in_the_page():
    results = fleet()
    results[0] = dict(results[0], ladder=["head at 0.45: oom_free_memory (<free memory> too low)"])
    _doc, text = _page(results)
    assert "did not start (stepped down): head at 0.45: oom_free_memory (&lt;free memory&gt; too low)" in text
    parse(text)
    _doc, plain = _page(fleet())
    assert "did not start" not in plain


def _badge_and_detail(text, host):
    root = parse(text)
    tr = next(n for n in root.find_all("tr") if n.attrs.get("id") == "host-" + host)
    cell = tr.find_all("td")[1]
    small = cell.find_all("span", "small")
    return cell.find_all("span", "badge")[0].all_text(), small[0].all_text() if small else ""


def test_the_verdict_cell_reads_the_recorded_cause_not_the_label():
    results = fleet()
    # the cause is data: the label is not parsed (a label that disagrees shows the cause)
    results[1] = dict(results[1], label="revert (something else)", cause={"code": "regression", "text": "regression at c=8", "concurrency": 8})
    _doc, text = _page(results)
    assert _badge_and_detail(text, "thor-01") == ("revert", "regression at c=8")
    assert _badge_and_detail(text, "orin-01") == ("keep", "strong")


def test_a_revert_by_verify_shows_its_own_cause():
    results = fleet()
    results[0] = dict(results[0], outcome="revert", decision="revert", label="revert (verify)", cause={"code": "verify", "text": "verify"})
    _doc, text = _page(results)
    assert _badge_and_detail(text, "orin-01") == ("revert", "verify")


def test_a_record_without_a_cause_shows_its_label_whole():
    results = fleet()
    results[0] = {k: v for k, v in results[0].items() if k != "cause"}
    _doc, text = _page(results)
    assert _badge_and_detail(text, "orin-01") == ("keep (strong)", "")


def test_the_output_proof_is_shown_under_the_verdict():
    results = fleet()
    differ = "1 of 6 probe outputs at temperature 0 equal the baseline's (at least 4 needed); chat-03 differs at character 12"
    results[0] = dict(results[0], outcome="revert", output_proof={"agree": False, "summary": differ, "matches": 1})
    results[1] = dict(results[1], output_proof={"agree": "True", "summary": "6 of 6 probe outputs at temperature 0 equal the baseline's (at least 4 needed)"})
    _doc, text = _page(results)
    root = parse(text)
    spans = [n for n in root.find_all("span") if n.all_text().startswith("output proof: ")]
    assert [(n.all_text(), "warn" in n.attrs.get("class", "")) for n in spans] == [
        ("output proof: " + differ, True),
        ("output proof: 6 of 6 probe outputs at temperature 0 equal the baseline's (at least 4 needed)", False),
    ]
    _doc, plain = _page(fleet())
    assert "output proof" not in plain
