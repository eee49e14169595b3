# SPDX-License-Identifier: Apache-2.0
"""Day two: the speculative_textfile filter (Prometheus text exposition format, parsed back with an
independent parser written from the format's grammar) and the speculative_recheck filter."""

import copy
import re

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.filter import speculative_recheck as recheck_plugin
from ansible_collections.jetson_llm.speculative.plugins.filter import speculative_textfile as textfile_plugin
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _dayafter

STATE = {
    "decision": "keep",
    "label": "keep (strong)",
    "model": "Qwen/Qwen3-8B",
    "method": "eagle3",
    "speculator": "RedHatAI/Qwen3-8B-speculator.eagle3",
    "num_speculative_tokens": 3,
    "vllm_version": "0.20.2",
    "decided_at": 1764000000.25,
    "verdict": {"gain_c1": {"estimate": 0.42}},
    "blocks": [
        {"arm": "baseline", "concurrency": 1, "output_throughput": 10.0},
        {"arm": "baseline", "concurrency": 1, "output_throughput": 10.4},
        {"arm": "baseline", "concurrency": 1, "output_throughput": 9.8},
        {"arm": "baseline", "concurrency": 8, "output_throughput": 60.0},
        {
            "arm": "speculative",
            "concurrency": 1,
            "output_throughput": 15.0,
            "spec_decode_acceptance_rate": 70.0,
            "spec_decode_acceptance_length": 3.1,
            "spec_decode_draft_tokens": 300,
            "spec_decode_accepted_tokens": 210,
            "spec_decode_num_drafts": 100,
        },
        {
            "arm": "speculative",
            "concurrency": 1,
            "output_throughput": 14.0,
            "spec_decode_acceptance_rate": 50.0,
            "spec_decode_acceptance_length": 2.5,
            "spec_decode_draft_tokens": 300,
            "spec_decode_accepted_tokens": 150,
            "spec_decode_num_drafts": 100,
        },
    ],
}


def run(tok_s, accepted=None, drafted=300, drafts=100):
    out = {"concurrency": 1, "output_throughput": tok_s}
    if accepted is not None:
        out.update(
            spec_decode_draft_tokens=drafted,
            spec_decode_accepted_tokens=accepted,
            spec_decode_num_drafts=drafts,
            spec_decode_acceptance_rate=accepted / drafted * 100,
            spec_decode_acceptance_length=1 + accepted / drafts,
        )
    return out


# ---- an independent parser of the text exposition format 0.0.4 ---------------------------------
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")


def _parse_labels(body):
    labels, i = {}, 0
    while i < len(body):
        m = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="').match(body, i)
        assert m, "bad label at %r" % body[i:]
        name, i, value = m.group(1), m.end(), []
        while body[i] != '"':
            if body[i] == "\\":
                value.append({"\\": "\\", '"': '"', "n": "\n"}[body[i + 1]])
                i += 2
            else:
                assert body[i] != "\n"
                value.append(body[i])
                i += 1
        labels[name] = "".join(value)
        i += 1
        if i < len(body):
            assert body[i] == ",", body[i:]
            i += 1
    return labels


def parse(text):
    """{name: {"help", "type", "samples": [(labels, value)]}}; asserts the grammar on the way."""
    assert text.endswith("\n")
    families = {}
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, name, rest = line[2:6], line.split(" ")[2], line.split(" ", 3)[3]
            fam = families.setdefault(name, {"samples": []})
            assert kind.lower() not in fam, "duplicate %s for %s" % (kind, name)
            fam[kind.lower()] = rest.replace("\\n", "\n").replace("\\\\", "\\") if kind == "HELP" else rest
            continue
        m = _SAMPLE.match(line)
        assert m, "bad sample line %r" % line
        name = m.group(1)
        assert name in families and "type" in families[name], "sample before its TYPE: %s" % name
        families[name]["samples"].append((_parse_labels(m.group(3) or ""), float(m.group(4))))
    return families


def test_filters_are_registered():
    assert textfile_plugin.FilterModule().filters() == {"speculative_textfile": textfile_plugin.speculative_textfile}
    assert recheck_plugin.FilterModule().filters() == {"speculative_recheck": recheck_plugin.speculative_recheck}


@pytest.mark.parametrize(
    "raw,escaped",
    [("plain", "plain"), ('say "hi"', 'say \\"hi\\"'), ("back\\slash", "back\\\\slash"), ("two\nlines", "two\\nlines"), ('\\"\n', '\\\\\\"\\n')],
)
def test_label_value_escaping(raw, escaped):
    assert _dayafter.escape_label_value(raw) == escaped


def test_help_escaping_keeps_quotes():
    assert _dayafter.escape_help('a "b" \\ c\nd') == 'a "b" \\\\ c\\nd'


def test_textfile_parses_back_with_every_name_prefixed_and_typed():
    families = parse(textfile_plugin.speculative_textfile(STATE, host="orin-01"))
    assert all(name.startswith("jetson_llm_speculative_") for name in families)
    assert all(fam["type"] == "gauge" and fam["help"] for fam in families.values())
    decision = {labels["decision"]: value for labels, value in families["jetson_llm_speculative_decision"]["samples"]}
    assert decision == {"keep": 1, "revert": 0, "skip": 0, "failed": 0, "none": 0}
    ((labels, value),) = families["jetson_llm_speculative_acceptance_rate"]["samples"]
    # token-weighted over the speculative c=1 blocks: (210 + 150) / (300 + 300)
    assert labels == {"host": "orin-01", "source": "trial"} and value == pytest.approx(0.6)
    assert families["jetson_llm_speculative_num_speculative_tokens"]["samples"] == [({"host": "orin-01"}, 3.0)]
    assert families["jetson_llm_speculative_decided_timestamp_seconds"]["samples"][0][1] == 1764000000.25
    assert families["jetson_llm_speculative_gain_ratio"]["samples"] == [({"host": "orin-01", "source": "trial"}, 0.42)]


def test_textfile_round_trips_hostile_label_values():
    state = dict(STATE, model='m"odel\\x', speculator="line1\nline2", label='keep \\ ("strong")')
    host = 'jet"son\\01\n'
    families = parse(textfile_plugin.speculative_textfile(state, host=host))
    ((labels, value),) = families["jetson_llm_speculative_info"]["samples"]
    assert value == 1
    assert labels["host"] == host and labels["model"] == state["model"]
    assert labels["speculator"] == state["speculator"] and labels["label"] == state["label"]
    for fam in families.values():
        assert all(sample_labels["host"] == host for sample_labels, _value in fam["samples"])


def test_textfile_prefers_the_verify_acceptance_and_reports_a_revert():
    state = copy.deepcopy(STATE)
    state.update(
        decision="revert",
        label="revert (verify)",
        verify={"action": "revert", "acceptance_rate": 0.05, "acceptance_length": 1.15, "gain": -0.2, "checked_at": 1764100000},
    )
    families = parse(_dayafter.textfile(state, "h"))
    assert families["jetson_llm_speculative_acceptance_rate"]["samples"] == [({"host": "h", "source": "verify"}, 0.05)]
    assert families["jetson_llm_speculative_acceptance_timestamp_seconds"]["samples"] == [({"host": "h"}, 1764100000.0)]
    decision = {labels["decision"]: value for labels, value in families["jetson_llm_speculative_decision"]["samples"]}
    assert decision["revert"] == 1 and decision["keep"] == 0
    assert "jetson_llm_speculative_num_speculative_tokens" not in families
    assert dict((lb["source"], v) for lb, v in families["jetson_llm_speculative_gain_ratio"]["samples"]) == {"trial": 0.42, "verify": -0.2}
    assert families["jetson_llm_speculative_verify_timestamp_seconds"]["samples"] == [({"action": "revert", "host": "h"}, 1764100000.0)]


def test_textfile_of_a_device_without_decision():
    families = parse(_dayafter.textfile({}, "h"))
    decision = {labels["decision"]: value for labels, value in families["jetson_llm_speculative_decision"]["samples"]}
    assert decision["none"] == 1 and sum(decision.values()) == 1
    assert "jetson_llm_speculative_acceptance_rate" not in families


def test_special_values_and_bad_names():
    assert [_dayafter.format_value(v) for v in (3, 0.5, float("nan"), float("inf"), float("-inf"))] == ["3", "0.5", "NaN", "+Inf", "-Inf"]
    with pytest.raises(_dayafter.DayTwoError):
        _dayafter.format_metric_family("bad-name", "gauge", "x", [])
    with pytest.raises(_dayafter.DayTwoError):
        _dayafter.format_metric_family("ok", "gauge", "x", [({"bad-label": "v"}, 1)])
    with pytest.raises(AnsibleFilterError, match="speculative_textfile"):
        textfile_plugin.speculative_textfile(["not", "a", "dict"], host="h")


def test_textfile_through_templar(render):
    text = render("{{ state | jetson_llm.speculative.speculative_textfile(host='h') }}", {"state": STATE})
    assert text == _dayafter.textfile(STATE, "h")


# ---- speculative_recheck ------------------------------------------------------------------------


def test_recheck_keeps_a_device_that_still_pays():
    out = recheck_plugin.speculative_recheck(STATE, [run(14.5, 200), run(14.0, 190), run(14.8, 205)])
    assert out["action"] == "keep"
    assert out["acceptance_rate"] == pytest.approx(595 / 900)
    assert out["baseline_tok_s"] == 10.0 and out["live_tok_s"] == 14.5
    assert out["gain"] == pytest.approx(0.45)


def test_recheck_reverts_under_the_acceptance_floor():
    out = recheck_plugin.speculative_recheck(STATE, [run(14.5, 30), run(14.0, 20)], min_acceptance=0.3)
    assert out["action"] == "revert"
    assert "under the floor 30.0 %" in out["reason"] and "recorded 60.0 %" in out["reason"]
    assert recheck_plugin.speculative_recheck(STATE, [run(14.5, 30), run(14.0, 20)], min_acceptance=0.05)["action"] == "keep"


def test_recheck_reverts_when_the_gain_disappeared_beyond_the_noise():
    # recorded baseline 9.8 / 10.0 / 10.4: half-range 4 %; live 8.5 / 8.6 / 8.7: half-range ~1.2 %
    out = recheck_plugin.speculative_recheck(STATE, [run(8.5, 200), run(8.6, 200), run(8.7, 200)])
    assert out["action"] == "revert" and "even allowing" in out["reason"]
    assert out["gain"] == pytest.approx(-0.14)
    assert out["noise"] == pytest.approx(0.04 + 0.1 / 8.6)
    # the same 4 % loss that the noise could explain is not a revert
    assert recheck_plugin.speculative_recheck(STATE, [run(9.5, 200), run(9.6, 200), run(9.7, 200)])["action"] == "keep"


def test_recheck_gives_a_small_loss_within_the_noise_the_benefit_of_the_doubt():
    out = recheck_plugin.speculative_recheck(STATE, [run(9.9, 200), run(9.8, 200), run(9.9, 200)])
    assert out["gain"] < 0 and out["action"] == "keep"
    assert recheck_plugin.speculative_recheck(STATE, [run(9.9, 200)], min_gain=0.2)["action"] == "revert"


def test_recheck_reverts_a_server_that_does_not_speculate():
    metrics = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 0\n'
    out = recheck_plugin.speculative_recheck(STATE, [run(15.0)], metrics=metrics)
    assert out["action"] == "revert" and "does not speculate" in out["reason"]


def test_recheck_reads_lifetime_counters_summed_over_engines():
    metrics = (
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 1000\n'
        'vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 1000\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 500\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 700\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 400\n'
    )
    out = recheck_plugin.speculative_recheck(STATE, [run(15.0, 200)], metrics=metrics)
    assert out["lifetime_acceptance_rate"] == pytest.approx(0.6)


@pytest.mark.parametrize(
    "state,reason", [({}, "no recorded decision"), (dict(STATE, decision="revert"), "is revert"), (dict(STATE, decision="skip", label="skip"), "is skip")]
)
def test_recheck_leaves_devices_without_a_kept_decision(state, reason):
    out = recheck_plugin.speculative_recheck(state, [])
    assert out["action"] == "leave" and reason in out["reason"]


def test_recheck_needs_runs_for_a_kept_decision():
    with pytest.raises(AnsibleFilterError, match="speculative_recheck: the live benchmark returned no runs"):
        recheck_plugin.speculative_recheck(STATE, [])
