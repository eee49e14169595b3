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


def test_timing_shares():
    results = [{"elapsed_s": 100, "wait_s": 85}, {"elapsed_s": 50, "wait_s": 40}]
    t = r.timing(results, started=1000.0, now=1130.0)
    assert t["wall_s"] == 130.0
    assert t["host_seconds"] == 150.0 and t["waiting_seconds"] == 125.0
    assert t["waiting_share"] == round(125 / 150, 3)
    assert t["ansible_overhead_share"] == round(1 - 125 / 150, 3)
    assert "83%" in t["text"] and "17% Ansible" in t["text"]


def test_timing_without_data():
    t = r.timing([], started=None, now=5.0)
    assert t["wall_s"] is None and t["waiting_share"] is None
