# SPDX-License-Identifier: Apache-2.0
"""Fleet table and timing of the rollout summary."""

from ansible_collections.jetson_llm.speculative.plugins.module_utils import _report as r


def _blocks():
    out = []
    for i, (arm, c, tput) in enumerate(
        [("baseline", 1, 20.0), ("baseline", 8, 130.0), ("speculative", 8, 120.0), ("speculative", 1, 30.0),
         ("speculative", 1, 32.0), ("baseline", 1, 22.0)]
    ):  # fmt: skip
        out.append({"arm": arm, "concurrency": c, "index": i, "output_throughput": tput})
    return out


def test_arm_means_per_concurrency():
    means = r.arm_means(_blocks(), 1)
    assert means == {"baseline": 21.0, "speculative": 31.0}
    assert r.arm_means(_blocks(), 8) == {"baseline": 130.0, "speculative": 120.0}
    assert r.arm_means([], 1) == {"baseline": None, "speculative": None}


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
            "verdict": {"gain_c1": {"estimate": 0.476, "ci": [0.31, 0.66]}, "thresholds": {"high_concurrency": 8}},
            "reason": "throughput at c=1\n gains",
        },
        {"host": "a-nano", "family": "orin_nano", "variant": "8gb", "outcome": "skip", "reason": "Orin Nano: no"},
    ]
    lines = r.table(results, missing=["c-gone"])
    assert lines[0].split()[:3] == ["host", "family", "method"]
    assert lines[1].startswith("a-nano") and "skip" in lines[1] and "Orin Nano: no" in lines[1]
    thor = lines[2]
    assert thor.startswith("b-thor") and "eagle3" in thor and " 5 " in thor
    assert "21.0 -> 31.0" in thor and "130.0 -> 120.0" in thor
    assert "+47.6% [+31.0%, +66.0%]" in thor and "keep (strong)" in thor
    assert "throughput at c=1 gains" in thor  # whitespace folded
    assert lines[3] == "hosts: 2; keep 1, skip 1"
    assert lines[4].startswith("c-gone: no result")


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


def test_timing_without_data():
    t = r.timing([], started=None, now=5.0)
    assert t["wall_s"] is None and t["waiting_share"] is None
