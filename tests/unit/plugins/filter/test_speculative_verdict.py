# SPDX-License-Identifier: Apache-2.0
"""The jetson_llm.speculative.speculative_verdict filter: direct calls, Jinja through Templar, and
a real `ansible localhost -m debug` run."""

import math
import random

import pytest
from ansible.errors import AnsibleError, AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter import speculative_verdict as plugin
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.sequential import verdict

FQCN = "jetson_llm.speculative.speculative_verdict"


def blocks(rounds=3, g1=0.6, q1=0.4, g8=0.05, noise=0.01, seed=0):
    rng = random.Random(seed)
    order = {
        1: [("baseline", 1), ("baseline", 8), ("speculative", 8), ("speculative", 1)],
        0: [("speculative", 1), ("speculative", 8), ("baseline", 8), ("baseline", 1)],
    }
    out = []
    for r in range(1, rounds + 1):
        for arm, c in order[r % 2]:
            spec = arm == "speculative"
            base_thr, base_tpot = (30.0, 33.0) if c == 1 else (140.0, 50.0)
            gain, drop = (g1, q1) if c == 1 else (g8, 0.0)
            out.append(
                {
                    "arm": arm,
                    "concurrency": c,
                    "index": len(out),
                    "output_throughput": base_thr * ((1 + gain) if spec else 1.0) * math.exp(rng.gauss(0, noise)),
                    "median_tpot_ms": base_tpot * ((1 - drop) if spec else 1.0) * math.exp(rng.gauss(0, noise)),
                    "completed": 8 if c == 1 else 16,
                    "failed": 0,
                }
            )
    return out


def test_filter_is_registered_under_its_name():
    assert plugin.FilterModule().filters() == {"speculative_verdict": plugin.speculative_verdict_filter}


def test_direct_call_equals_the_statistics():
    data = blocks()
    result = plugin.speculative_verdict_filter(data, min_gain=0.15)
    assert result.pop("discarded") == []
    assert result == verdict(data, min_gain=0.15)
    assert result["decision"] == "keep"


def _late(block, share=0.067):
    late = dict(block, discard="measured while the vLLM simulator ran late (%.1f %% of modelled time lost, over its limit)" % (100 * share))
    late["output_throughput"] *= 0.5  # skewed figures, which must not reach the verdict
    return late


def test_a_discarded_block_is_left_out_and_measured_again():
    data = blocks(rounds=3)
    clean = plugin.speculative_verdict_filter(data[:-1])
    assert clean["decision"] == "continue" and clean["next_blocks"][0]["arm"] == data[-1]["arm"]
    got = plugin.speculative_verdict_filter([*data[:-1], _late(data[-1])])
    # the same verdict as without the block, the same block asked for again, its requests counted
    assert got["decision"] == "continue" and got["next_blocks"] == clean["next_blocks"]
    last = data[-1]
    assert got["discarded"] == [{"index": last["index"], "arm": last["arm"], "concurrency": last["concurrency"], "reason": _late(last)["discard"]}]
    assert got["requests_spent"] == clean["requests_spent"] + data[-1]["completed"]
    assert any("discarded and measured again" in w and "ran late (6.7 %" in w for w in got["warnings"])
    # measured again (a new index): the verdict is the one of the clean trial
    again = dict(data[-1], index=len(data))
    final = plugin.speculative_verdict_filter([*data[:-1], _late(data[-1]), again])
    reference = verdict([*data[:-1], again])
    assert final["decision"] == reference["decision"] == "keep"
    assert final["gain_c1"] == reference["gain_c1"]


def test_at_most_two_blocks_are_discarded_later_ones_count_with_a_warning():
    data = blocks(rounds=3)
    late = [_late(b) for b in data[:3]] + data[3:]
    got = plugin.speculative_verdict_filter(late)
    assert [d["index"] for d in got["discarded"]] == [0, 1]
    assert got == dict(got, requests_spent=verdict(late[2:])["requests_spent"] + data[0]["completed"] + data[1]["completed"])
    assert any(w.startswith("block 2 (") and "counts although" in w for w in got["warnings"])


def test_non_list_input_names_the_filter():
    with pytest.raises(AnsibleFilterError, match=r"jetson_llm\.speculative\.speculative_verdict filter must be a list"):
        plugin.speculative_verdict_filter({"arm": "baseline"})


@pytest.mark.parametrize(
    ("data", "thresholds", "message"),
    [
        ([{"arm": "control"}], {}, "block 0: arm must be one of baseline, speculative, got 'control'"),
        ([], {"min_gian": 0.1}, "unknown threshold(s) min_gian"),
        ([], {"confidence": 1.5}, "confidence must be in (0.5, 1)"),
    ],
)
def test_statistics_errors_become_filter_errors_naming_the_fqcn(data, thresholds, message):
    with pytest.raises(AnsibleFilterError) as excinfo:
        plugin.speculative_verdict_filter(data, **thresholds)
    assert str(excinfo.value).startswith(FQCN + ": " + message)


def test_jinja_call_through_templar(render):
    data = blocks(g1=0.0, q1=0.0)
    result = render("{{ bench | jetson_llm.speculative.speculative_verdict }}", {"bench": data})
    assert result["label"] == "revert (no gain)"
    assert result == dict(verdict(data), discarded=[])


def test_jinja_thresholds_and_null_high_concurrency(render):
    data = [b for b in blocks() if b["concurrency"] == 1]
    result = render(
        "{{ bench | jetson_llm.speculative.speculative_verdict(high_concurrency=none, min_gain=0.2) }}",
        {"bench": data},
    )
    assert result["decision"] == "keep"
    assert result["gain_c8"]["status"] == "disabled"
    assert result["thresholds"]["min_gain"] == 0.2
    waiting = render("{{ (bench | jetson_llm.speculative.speculative_verdict).next_blocks }}", {"bench": data})
    assert waiting == [
        {"arm": "baseline", "concurrency": 8, "n_requests": 8},
        {"arm": "speculative", "concurrency": 8, "n_requests": 8},
    ]


def test_jinja_error_names_the_filter(render):
    with pytest.raises(AnsibleError) as excinfo:
        render("{{ bench | jetson_llm.speculative.speculative_verdict(spending='haybittle') }}", {"bench": []})
    assert FQCN + ": spending must be one of bonferroni, pocock, obrien_fleming" in str(excinfo.value)


def test_real_ansible_run(adhoc):
    result = adhoc("{{ bench | jetson_llm.speculative.speculative_verdict }}", {"bench": blocks()})
    assert not result.get("failed"), result
    verdict = result["msg"]
    assert verdict["decision"] == "keep" and verdict["label"] == "keep (strong)"
    assert verdict["requests_spent"] == 144
    assert verdict["gain_c1"]["ci"][0] >= 0.30


def test_real_ansible_run_failure_message(adhoc):
    bad = blocks()
    bad[0]["completed"] = 0
    result = adhoc("{{ bench | jetson_llm.speculative.speculative_verdict }}", {"bench": bad})
    assert result["failed"] is True
    assert FQCN + ": block 0: completed must be >= 1" in result["msg"]
