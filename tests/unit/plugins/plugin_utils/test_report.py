# SPDX-License-Identifier: Apache-2.0
"""Per-host summaries, the console table and the timing of the rollout summary."""

import copy
import json

import pytest
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils import _report as r
from test_report_fixtures import HOSTILE_HOST, HOSTILE_REASON, T0, fleet, result


def _blocks():
    out = []
    for i, (arm, c, tput) in enumerate(
        [("baseline", 1, 20.0), ("baseline", 8, 130.0), ("speculative", 8, 120.0), ("speculative", 1, 30.0),
         ("speculative", 1, 32.0), ("baseline", 1, 22.0)]
    ):  # fmt: skip
        out.append({"arm": arm, "concurrency": c, "index": i, "output_throughput": tput})
    return out


@pytest.fixture(scope="module")
def hosts():
    return {h["host"]: h for h in fleet()}


def test_arm_means_per_concurrency():
    means = r.arm_means(_blocks(), 1)
    assert means == {"baseline": 21.0, "speculative": 31.0}
    assert r.arm_means(_blocks(), 8) == {"baseline": 130.0, "speculative": 120.0}
    assert r.arm_means([], 1) == {"baseline": None, "speculative": None}
    # values that went through templating as strings still count; junk does not
    blocks = [{"arm": "baseline", "concurrency": "1", "output_throughput": "10.5"}, {"arm": "baseline", "concurrency": 1, "output_throughput": "n/a"}]
    assert r.arm_means(blocks, 1)["baseline"] == 10.5


def test_arm_means_of_another_metric(hosts):
    blocks = hosts["orin-01"]["blocks"]
    tpot = r.arm_means(blocks, 1, "median_tpot_ms")
    expect = [b["median_tpot_ms"] for b in blocks if b["arm"] == "speculative" and b["concurrency"] == 1]
    assert tpot["speculative"] == pytest.approx(sum(expect) / len(expect))
    assert tpot["speculative"] < tpot["baseline"]


def test_acceptance_from_the_speculative_blocks_only(hosts):
    blocks = hosts["orin-01"]["blocks"]
    acc = r.acceptance(blocks, 1)
    spec = [b["spec_decode_acceptance_length"] for b in blocks if b["arm"] == "speculative" and b["concurrency"] == 1]
    assert acc["length"] == pytest.approx(sum(spec) / len(spec), abs=1e-3)
    assert acc["blocks"] == len(spec) == 3
    assert acc["rate_percent"] == pytest.approx(40.0, abs=0.01)
    assert r.acceptance(blocks, 8)["blocks"] == 3
    # baseline blocks never carry it; no speculative block with the metric: None
    assert r.acceptance([b for b in blocks if b["arm"] == "baseline"], 1) is None
    assert r.acceptance([], 1) is None


def test_summary_of_a_kept_host(hosts):
    raw = hosts["orin-01"]
    s = r.host_summary(raw)
    v = raw["verdict"]
    assert (s["host"], s["family"], s["variant"], s["outcome"], s["label"]) == ("orin-01", "agx_orin", "64gb", "keep", "keep (strong)")
    assert (s["method"], s["k"], s["speculator"], s["k_source"]) == ("eagle3", 4, "AngelSlim/Qwen3-8B_eagle3", "tuned on orin-01")
    assert s["tuning"]["k"] == 4 and [c["k"] for c in s["tuning"]["candidates"]] == [3, 4, 5] and s["tuning"]["pruned"] == [6]
    assert r.host_summary(hosts["orin-02"])["tuning"] is None
    assert s["gain_c1"]["estimate"] == v["gain_c1"]["estimate"] and s["gain_c1"]["ci"] == v["gain_c1"]["ci"]
    assert s["gain_c1"]["confidence"] == v["gain_c1"]["confidence"] and s["gain_c1"]["status"] == "above"
    assert s["gain_c8"]["ci"] == v["gain_c8"]["ci"] and s["tpot_reduction_c1"]["estimate"] == v["tpot_reduction_c1"]["estimate"]
    assert s["min_gain"] == 0.1 and s["high_concurrency"] == 8
    assert s["requests_spent"] == v["requests_spent"] == 3 * (2 * 8 + 2 * 32)
    assert s["rounds"] == 3 and s["blocks"] == 12 and s["arm_switches"] == v["arm_switches"]
    assert s["throughput"]["c1"] == r.arm_means(raw["blocks"], 1) and s["throughput"]["c8"]["speculative"] > s["throughput"]["c8"]["baseline"]
    assert s["noise"]["c1"]["residual_sd"] == v["noise"]["c1"]["residual_sd"]
    assert s["gpu_memory_utilization"] == {"baseline": 0.70, "speculative": 0.65}
    assert s["plan_warnings"] and "L4T r36" in s["plan_warnings"][0]
    assert s["warnings"] == [] and s["benchmark_warnings"] == []
    json.dumps(s)  # plain data


def test_summary_of_a_skipped_host_without_blocks(hosts):
    s = r.host_summary(hosts["nano-01"])
    assert s["outcome"] == "skip" and s["label"] == "skip"
    assert s["method"] is None and s["k"] is None and s["speculator"] is None and s["k_source"] is None
    assert s["gain_c1"] is None and s["gain_c8"] is None and s["tpot_reduction_c1"] is None and s["min_gain"] is None
    assert s["throughput"]["c1"] == {"baseline": None, "speculative": None} and s["acceptance"] == {"c1": None, "c8": None}
    assert s["rounds"] is None and s["requests_spent"] is None and s["blocks"] == 0 and s["noise"] == {}


def test_summary_of_a_start_failure_keeps_the_method():
    raw = result("nx-01", "orin_nx", "16gb", outcome="skip")
    raw["fitted"] = {"method": "eagle3", "num_speculative_tokens": 3, "warnings": ["out of memory at 0.60"]}
    raw.update(method="eagle3", num_speculative_tokens=3, reason="vLLM did not start: CUDA out of memory")
    s = r.host_summary(raw)
    assert s["method"] == "eagle3" and s["k"] == 3 and s["plan_warnings"] == ["out of memory at 0.60"]
    assert r.row(raw)[2:4] == ("eagle3", "3")


def test_summary_collects_warnings_once(hosts):
    s = r.host_summary(hosts["orin-02"])
    assert s["label"] == "revert (inconclusive)"
    assert len(s["warnings"]) == 2 and all("over 10 %" in w for w in s["warnings"])
    assert s["benchmark_warnings"] == ["2 requests timed out"]
    raw = copy.deepcopy(hosts["orin-02"])
    raw["verdict"]["warnings"].append(raw["verdict"]["warnings"][0] + "\n")  # the same text, folded
    assert len(r.host_summary(raw)["warnings"]) == 2


def test_summary_of_a_host_decided_earlier(hosts):
    s = r.host_summary(hosts["orin-03"])
    assert s["reused"] and s["blocks"] == 0 and s["throughput"]["c1"]["baseline"] is None
    assert s["gain_c1"]["ci"] and s["label"] == "keep (strong)"


def test_summary_high_concurrency_disabled():
    raw = result("orin-09", "agx_orin", "64gb", g1=0.9, g8=0.5, high_concurrency=None)
    s = r.host_summary(raw)
    assert s["high_concurrency"] is None and s["gain_c8"] is None and s["gain_c1"] is not None
    assert s["throughput"]["c8"] == {"baseline": None, "speculative": None} and s["acceptance"]["c8"] is None


def test_summary_never_raises_on_odd_values():
    odd = {"host": None, "outcome": None, "verdict": {"gain_c1": {"estimate": "x", "ci": "bad"}}, "blocks": ["junk", {"arm": "baseline"}], "reason": 7}
    s = r.host_summary(odd)
    assert s["host"] == "?" and s["outcome"] == "?" and s["gain_c1"] is None and s["reason"] == "7" and s["blocks"] == 1
    ci_odd = {"host": "h", "outcome": "keep", "verdict": {"gain_c1": {"estimate": 0.2, "ci": [0.1, float("nan")]}}}
    assert r.host_summary(ci_odd)["gain_c1"] == {"estimate": 0.2, "ci": None, "confidence": None, "status": None, "threshold": None, "rounds": None}


def test_counts_per_outcome():
    assert r.counts(fleet(), ["x", "y"]) == {"keep": 3, "revert": 2, "skip": 1, "missing": 2}
    assert r.counts([]) == {"keep": 0, "revert": 0, "skip": 0, "missing": 0}


def test_table_rows_and_counts():
    results = [
        {
            "host": "b-thor",
            "family": "thor",
            "variant": "t5000",
            "outcome": "keep",
            "label": "keep (strong)",
            "method": "eagle3",
            "num_speculative_tokens": 5,
            "blocks": _blocks(),
            "verdict": {"gain_c1": {"estimate": 0.476, "ci": [0.31, 0.66]}, "requests_spent": 144, "thresholds": {"high_concurrency": 8}},
            "reason": "throughput at c=1\n gains",
            # two restarts (40 s and 25 s, the second overlapping a benchmark), and a benchmark that is not downtime
            "intervals": [["restart", 100.0, 140.0], ["benchmark", 140.0, 200.0], ["restart", 200.0, 225.0]],
        },
        {"host": "a-nano", "family": "orin_nano", "variant": "8gb", "outcome": "skip", "reason": "Orin Nano: no"},
    ]
    lines = r.table(results, missing=["c-gone"])
    header = "host family method k c=1 tok/s B->S gain c=1 [CI] c=8 tok/s B->S gain c=8 [CI] req down s verdict"
    assert lines[0].split() == header.split()
    assert lines[1].startswith("a-nano") and lines[1].endswith("skip")
    assert lines[2] == "    Orin Nano: no"
    thor = lines[3]
    assert thor.startswith("b-thor") and " eagle3 " in thor and " 5 " in thor
    assert "21.0 -> 31.0" in thor and "130.0 -> 120.0" in thor
    assert "+47.6% [+31.0, +66.0]" in thor and " 144 " in thor and thor.endswith("keep (strong)")
    assert lines[4] == "    throughput at c=1 gains"  # whitespace folded
    assert lines[5] == "num_speculative_tokens per group (family variant, target model, speculator):"
    assert lines[6] == "  thor t5000: k=5 (source not recorded); 1 host"
    assert lines[7] == "hosts: 2; keep 1, skip 1"
    assert lines[8] == "downtime: 65 s in all, on 1 of 2 hosts (2 restarts); longest: b-thor, 65 s in 2 restarts"
    assert lines[9].startswith("c-gone: no result")
    assert lines[10].startswith("gain: drift-corrected") and "down s: seconds the device did not serve" in lines[10]
    # columns line up: every host line has the verdict where the header has it, and its downtime right-aligned before it
    col = lines[0].index("verdict")
    assert lines[1][col:] == "skip" and thor[col:] == "keep (strong)"
    down = lines[0].index("down s") + len("down s")
    assert lines[1][:down].endswith(" 0") and thor[:down].endswith(" 65")


def test_downtime_is_the_union_of_a_hosts_restart_windows():
    def result(host, intervals):
        return {"host": host, "outcome": "keep", "intervals": intervals}

    s = r.host_summary(result("a", [["restart", 10, 30], ["restart", 25, 40], ["benchmark", 40, 90], ["restart", 90, 91.5]]))
    assert (s["restarts"], s["downtime_s"]) == (3, 31.5)  # 10-40 counted once, plus 1.5 s
    # malformed entries (a hostile or truncated result file) count nothing rather than fail the report
    s = r.host_summary(result("b", [["restart", "x", 3], ["restart", 5], ["restart", 9, 2], "restart", None]))
    assert (s["restarts"], s["downtime_s"]) == (0, 0.0)
    d = r.downtime(
        [
            r.host_summary(result("a", [["restart", 0, 20]])),
            r.host_summary(result("b", [["restart", 0, 30], ["restart", 40, 45]])),
            r.host_summary(result("c", [])),
        ]
    )
    assert d["total_s"] == 55.0 and d["hosts"] == 2 and d["restarts"] == 3
    assert d["longest"] == {"host": "b", "downtime_s": 35.0, "restarts": 2}
    assert d["text"] == "downtime: 55 s in all, on 2 of 3 hosts (3 restarts); longest: b, 35 s in 2 restarts"
    assert r.downtime([r.host_summary(result("c", []))])["text"] == "downtime: none (no device restarted vLLM)"
    doc = r.report([result("a", [["restart", 0, 20]])], started=0, now=100)
    assert doc["summary"][0]["downtime_s"] == 20.0 and doc["downtime"]["total_s"] == 20.0


def test_table_on_the_realistic_fleet():
    lines = r.table(fleet(), missing=["gone-01"])
    text = "\n".join(lines)
    # the tuned k per group: the canary's choice, used by the other host of its group, and its sweep
    group = "  agx_orin 64gb, Qwen/Qwen3-8B, AngelSlim/Qwen3-8B_eagle3: k=4 (tuned on orin-01); 2 hosts"
    assert group in lines
    sweep_line = lines[lines.index(group) + 1]
    assert sweep_line.startswith("    sweep on orin-01 at c=1: k=3 +") and "; k=4 +" in sweep_line
    assert "pruned k=6" in text
    assert "  thor t5000, Qwen/Qwen3-8B, AngelSlim/Qwen3-8B_eagle3: k=5 (family default); 1 host" in lines
    by_host = {line.split()[0]: line for line in lines if not line.startswith(" ")}
    assert set(by_host) >= {"orin-01", "orin-02", "orin-03", "thor-01", "thor-02", "nano-01"}
    assert by_host["thor-01"].endswith("revert (regression at c=8)")
    assert by_host["orin-03"].endswith("keep (strong) (decided earlier)")
    reused = r.host_summary(next(h for h in fleet() if h["host"] == "orin-03"))
    assert " - " in by_host["orin-03"]  # no blocks measured in this run: no throughput
    assert r._gain_text(reused["gain_c1"]) in by_host["orin-03"]  # but the gains from the earlier verdict
    assert "    warning: c=1: block-to-block throughput variation is" in text
    assert "warning: 2 requests timed out" in text
    assert "hosts: 6; keep 3, revert 2, skip 1" in lines
    assert lines.index("hosts: 6; keep 3, revert 2, skip 1") == len(lines) - 4
    assert lines[-3].startswith("downtime: ")


def test_table_wraps_and_shortens_reasons():
    long = result("orin-05", "agx_orin", "64gb", g1=0.2, g8=0.05, noise=0.12, seed=3)  # an inconclusive revert: a long reason
    lines = r.table([long], width=80, reason_lines=2)
    reason = [line for line in lines if line.startswith("    ") and not line.startswith("    warning")]
    assert len(reason) == 2 and all(len(line) <= 80 for line in reason)
    assert reason[-1].endswith(" ...") and reason[0].startswith("    no conclusion within the budget")
    assert all(len(line) <= 80 for line in lines if line.startswith("    warning"))
    assert not [line for line in r.table([long], reason_lines=0) if line.startswith("    no conclusion")]
    default = r.table([long])
    assert all(len(line) <= 160 for line in default if line.startswith("    "))


def test_table_hostile_strings_stay_on_their_line():
    raw = result(HOSTILE_HOST, "agx_orin", "64gb", g1=0.9, g8=0.5, reason=HOSTILE_REASON)
    lines = r.table([raw])
    assert lines[1].startswith(HOSTILE_HOST)
    assert "\x00" not in "".join(lines) and "\x1b" not in "".join(lines)
    assert lines[2].startswith("    vLLM said: </td><img")


def test_table_of_an_empty_run():
    assert r.table([]) == ["no host produced a result"]
    assert r.table([], missing=["b", "a"]) == [
        "no host produced a result",
        "a: no result (unreachable, failed, or stopped by the rollout)",
        "b: no result (unreachable, failed, or stopped by the rollout)",
    ]


def test_union_counts_overlaps_once():
    assert r.union_seconds([["a", 0, 10], ["b", 5, 12], ["c", 20, 25], ["d", 21, 22], ["e", 30, 30]]) == 17.0
    assert r.union_seconds([]) == 0.0


def test_timing_from_intervals_across_hosts():
    results = [
        {"intervals": [["restart", 1000, 1010], ["benchmark", 1010, 1050]]},
        {"intervals": [["restart", 1005, 1020], ["benchmark", 1060, 1080]]},
    ]
    t = r.timing(results, started=1000.0, now=1100.0)
    assert t["wall_s"] == 100.0
    assert t["waiting_seconds"] == 70.0  # 1000-1050 and 1060-1080
    assert t["restart_seconds"] == 20.0 and t["benchmark_seconds"] == 60.0
    assert t["waiting_share"] == 0.7 and t["ansible_overhead_share"] == 0.3
    assert "70%" in t["text"] and "30% Ansible" in t["text"]


def test_timing_of_the_realistic_fleet():
    results = fleet()
    t = r.timing(results, started=T0, now=T0 + 1000)
    ivs = [i for h in results for i in h["intervals"]]
    assert 0 < t["waiting_seconds"] <= sum(i[2] - i[1] for i in ivs)
    assert t["waiting_seconds"] <= t["wall_s"] == 1000.0
    assert t["restart_seconds"] + t["benchmark_seconds"] >= t["waiting_seconds"]


def test_timing_without_data():
    t = r.timing([], started=None, now=5.0)
    assert t["wall_s"] is None and t["waiting_share"] is None
    assert t["text"].startswith("wall time ? s")


def test_simulator_lag_per_host_in_the_table():
    blocks = [{"sim_lag_share": 0.004, "sim_out_of_spec": False}, {"sim_lag_share": 0.031, "sim_out_of_spec": True}, {"arm": "baseline"}]
    lag = r.sim_lag(blocks)
    assert lag == {"max_share": 0.031, "out_of_spec": 1, "discarded": 0, "blocks": 2}
    assert r.sim_lag_line(lag) == "simulator lag: at most 3.1% of modelled time over 2 blocks; OUT OF SPEC in 1 blocks (the host ran late, figures skewed)"
    # a late block the verdict discarded (and measured again) is no longer out of spec
    indexed = [dict(b, index=i) for i, b in enumerate(blocks)]
    lag = r.sim_lag(indexed, discarded={1})
    assert lag == {"max_share": 0.031, "out_of_spec": 0, "discarded": 1, "blocks": 2}
    assert r.sim_lag_line(lag) == "simulator lag: at most 3.1% of modelled time over 2 blocks; 1 blocks measured late were discarded and measured again"
    assert r.sim_lag([{"arm": "baseline"}]) is None and r.sim_lag_line(None) is None


def test_a_reconciled_host_says_what_differed_in_the_summary_and_table(hosts):
    raw = copy.deepcopy(hosts["orin-03"])
    raw["reconciled"] = ["speculation was loaded where the decision is revert", "serve.yaml changed since the server started"]
    s = r.host_summary(raw)
    assert s["reconciled"] == raw["reconciled"]
    lines = r.table([raw])
    assert "(decided earlier) (reconciled)" in lines[1]
    assert any(line.strip().startswith("reconciled: speculation was loaded where the decision is revert;") for line in lines)
    assert r.host_summary(hosts["orin-03"])["reconciled"] == []


def test_a_host_whose_speculative_configuration_ran_out_of_memory_says_so_under_its_row(hosts):
    raw = copy.deepcopy(hosts["orin-03"])
    raw["ladder"] = ["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B at 0.45: oom_free_memory (Free memory on device ... is less than desired)"]
    s = r.host_summary(raw)
    assert s["ladder"] == raw["ladder"]
    lines = r.table([raw])
    assert any(line.strip().startswith("did not start (stepped down): yuhuili/EAGLE3-LLaMA3.1-Instruct-8B at 0.45: oom_free_memory") for line in lines)
    assert r.host_summary(hosts["orin-03"])["ladder"] == []
    assert not any("did not start" in line for line in r.table([hosts["orin-03"]]))
