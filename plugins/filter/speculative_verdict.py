# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: speculative_verdict
short_description: Decide keep, revert or continue from interleaved before/after benchmark blocks
version_added: 0.1.0
author:
  - jetson_llm.speculative contributors
description:
  - Turns benchmark blocks of the baseline server (speculation off) and the speculative server,
    measured in an interleaved order at concurrency 1 and 8, into a decision with confidence
    intervals. The rules are documented in the collection's C(docs/decisions.md).
  - For each concurrency and metric the effect of speculation is the drift-corrected ratio of the
    arms (a regression of the log block values on the arm and the measurement order) with a
    Student t interval, cross-checked by a seeded paired bootstrap.
  - C(keep) needs, at concurrency 1, a throughput gain whose lower bound is at least O(min_gain)
    and a median TPOT reduction whose lower bound is above 0, and at concurrency 8 a throughput
    change whose lower bound is at least -O(c8_tolerance). The keep is labelled "keep (strong)"
    when the lower bounds also meet NVIDIA's published accept rule (O(strong_gain) throughput and
    O(strong_tpot_drop) lower TPOT), else "keep (marginal)".
  - C(revert) as soon as an interval lies entirely on the wrong side (no gain, TPOT higher, or a
    regression at concurrency 8), when the speculative server failed more than O(max_failed)
    requests, or when the budget is spent without a conclusion ("revert (inconclusive)").
  - C(continue) otherwise, with RV(next_blocks) naming what to measure next. The error of the
    repeated looks is spent over at most O(max_rounds) - O(min_rounds) + 1 looks, so feeding the
    growing list back after every round keeps the overall error within 1 - O(confidence).
  - Bad input fails with a message that starts with the filter's name.
options:
  _input:
    description:
      - The benchmark blocks measured so far, in any order. Each block is a dictionary with
        C(arm) (C(baseline) or C(speculative)), C(concurrency), C(index) (the global measurement
        order, unique), C(output_throughput) (tokens/s), C(median_tpot_ms), C(completed) (at least
        1) and C(failed); C(samples.output_tokens) is used to warn when the arms generated
        different lengths. An empty list asks for the first round.
      - A block with a non-empty C(discard) (the reason, set by
        the role's benchmark step for a block whose measurement cannot be trusted,
        for example one measured while the vLLM simulator ran late) does not enter the verdict, and
        RV(next_blocks) asks for it again. At most two blocks of a trial are discarded; later ones
        count, with a warning, so that a device that cannot be measured cleanly still ends its trial.
        A block that failed its arm proof (C(arm_proof) set, so it measured another server than its arm's)
        never counts, whatever their number; the role ends a trial whose server keeps failing the proof.
    type: list
    elements: dict
    required: true
  min_gain:
    description: Smallest throughput gain at concurrency 1 worth keeping (a fraction, 0.10 = +10 %).
    type: float
    default: 0.10
  strong_gain:
    description: Throughput gain lower bound for the "keep (strong)" label.
    type: float
    default: 0.30
  strong_tpot_drop:
    description: Median TPOT reduction lower bound for the "keep (strong)" label.
    type: float
    default: 0.20
  c8_tolerance:
    description:
      - Largest throughput loss at concurrency 8 that still counts as no regression (0.05 = 5 %).
        Keeping needs the lower bound at or above -O(c8_tolerance).
    type: float
    default: 0.05
  confidence:
    description: Overall two-sided confidence; 1 - O(confidence) is spent over the looks.
    type: float
    default: 0.95
  spending:
    description:
      - How the error is split over the looks. C(bonferroni) gives every look the same share;
        C(pocock) and C(obrien_fleming) follow the Lan-DeMets spending functions of those names.
    type: str
    default: bonferroni
    choices: [bonferroni, pocock, obrien_fleming]
  min_rounds:
    description: Complete baseline/speculative pairs per concurrency before the first look.
    type: int
    default: 3
  max_rounds:
    description: Pairs per concurrency after which an open question is resolved as a revert.
    type: int
    default: 10
  max_requests:
    description: Optional total request budget; no new round starts when it would exceed it.
    type: int
  requests_c1:
    description: Requests per block at concurrency 1.
    type: int
    default: 8
  requests_c8:
    description: Requests per block at the high concurrency.
    type: int
    default: 16
  high_concurrency:
    description: The concurrency of the regression check; null disables the check.
    type: int
    default: 8
  max_failed:
    description: Failed requests of the speculative arm tolerated before reverting.
    type: int
    default: 0
  bootstrap_resamples:
    description: Resamples of the paired bootstrap cross-check; 0 disables the cross-check.
    type: int
    default: 2000
  seed:
    description: Seed of the bootstrap (the verdict is deterministic for a given seed).
    type: raw
    default: 0
"""

EXAMPLES = r"""
- name: Decide from the blocks measured so far
  ansible.builtin.set_fact:
    __verdict: "{{ bench_blocks | jetson_llm.speculative.speculative_verdict }}"

- name: Stricter thresholds and a request budget
  ansible.builtin.set_fact:
    __verdict: >-
      {{ bench_blocks | jetson_llm.speculative.speculative_verdict(min_gain=0.15,
         c8_tolerance=0.02, max_requests=480) }}

- name: Single-stream hosts only, no concurrency-8 check
  ansible.builtin.debug:
    msg: "{{ (bench_blocks | jetson_llm.speculative.speculative_verdict(high_concurrency=none)).label }}"

- name: Revert where the gain is not shown
  ansible.builtin.include_tasks: rollback.yml
  when: (bench_blocks | jetson_llm.speculative.speculative_verdict).decision == 'revert'
"""

RETURN = r"""
_value:
  description: The verdict.
  type: dict
  contains:
    decision:
      description: C(keep), C(revert) or C(continue).
      type: str
    label:
      description:
        - One of "keep (strong)", "keep (marginal)", "revert (no gain)", "revert (TPOT not reduced)",
          "revert (regression at c=8)", "revert (failed requests)", "revert (inconclusive)" or
          C(continue).
        - Built from C(cause) for display; read C(cause) rather than parsing the label.
      type: str
    cause:
      description:
        - Why the verdict is what it is, as data. C(code) is one of C(strong), C(marginal), C(no_gain),
          C(tpot_not_reduced), C(regression), C(failed_requests), C(inconclusive) or C(continue); C(text) is
          the words in the label's parentheses; C(concurrency) is set for C(regression).
      type: dict
    reason:
      description: One sentence with the estimates and intervals that decided.
      type: str
    gain_c1:
      description:
        - Throughput gain at concurrency 1 (speculative / baseline - 1). Keys C(estimate), C(ci)
          (C([low, high]), null before the first look), C(confidence) (the level of this look),
          C(nominal_confidence), C(status) (C(above), C(below), C(inconclusive), C(insufficient)
          or C(not measured)) against C(threshold), C(df), C(rounds), C(look), C(looks),
          C(method), C(trend), C(ratio_of_means) (the plain ratio, for reference) and C(bootstrap)
          (the cross-check interval when it was needed, else null).
      type: dict
    tpot_reduction_c1:
      description: Median TPOT reduction at concurrency 1 (1 - speculative / baseline), same keys.
      type: dict
    gain_c8:
      description: Throughput change at the high concurrency, same keys; C(status) C(disabled) without the check.
      type: dict
    requests_spent:
      description: Requests measured (completed plus failed) over all blocks, discarded ones included.
      type: int
    discarded:
      description: The blocks left out of the verdict, each C({index, arm, concurrency, reason}).
      type: list
      elements: dict
    rounds:
      description: Complete pairs at the concurrency with the most of them.
      type: int
    arm_switches:
      description: Changes of arm in measurement order (each is a restart of vLLM).
      type: int
    budget_reached:
      description: Whether the budget ended the trial.
      type: bool
    next_blocks:
      description:
        - With C(continue), the blocks that complete the current round, in order, each
          C({arm, concurrency, n_requests}); empty otherwise.
      type: list
      elements: dict
    warnings:
      description: Drift, noise, ordering, output-length and failure warnings.
      type: list
      elements: str
    noise:
      description:
        - Per concurrency (C(c1), C(c8)) the coefficient of variation of the block throughputs per
          arm (C(baseline_cv), C(speculative_cv)), the drift-corrected residual SD on the log scale
          (C(residual_sd)) and the baseline C(drift) between its first and last block (C(estimate),
          C(ci), C(significant)).
      type: dict
    thresholds:
      description: The thresholds used, defaults filled in.
      type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import StatsError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.sequential import verdict
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._values import plain as _plain

_FQCN = "jetson_llm.speculative.speculative_verdict"


# A trial discards at most this many blocks; the loop of the role leaves room for as many extra segments.
MAX_DISCARDED = 2


def _requests(block):
    try:
        return int(block.get("completed") or 0) + int(block.get("failed") or 0)
    except (TypeError, ValueError):
        return 0


def split_discarded(blocks):
    """The blocks that enter the verdict, those left out (the first MAX_DISCARDED with a ``discard``
    reason) and those that carry a reason but count because the limit was reached."""
    kept, discarded, counted = [], [], []
    for block in blocks:
        reason = block.get("discard") if isinstance(block, dict) else None
        if reason and block.get("arm_proof"):
            # measured another server than its arm's: never counts, however many there are
            discarded.append(block)
            continue
        if reason and len([b for b in discarded if not b.get("arm_proof")]) < MAX_DISCARDED:
            discarded.append(block)
            continue
        if reason:
            counted.append(block)
        kept.append(block)
    return kept, discarded, counted


def speculative_verdict_filter(blocks, **thresholds):
    if not isinstance(blocks, (list, tuple)):
        raise AnsibleFilterError("The input of the {} filter must be a list of benchmark blocks; got {}".format(_FQCN, type(blocks).__name__))
    kept, discarded, counted = split_discarded(_plain(blocks))
    try:
        result = verdict(kept, **_plain(thresholds))
    except StatsError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc
    result["discarded"] = [{"index": b.get("index"), "arm": b.get("arm"), "concurrency": b.get("concurrency"), "reason": str(b["discard"])} for b in discarded]
    result["requests_spent"] += sum(_requests(b) for b in discarded)
    for b in discarded:
        result["warnings"].append("block %s (%s, c=%s) discarded and measured again: %s" % (b.get("index"), b.get("arm"), b.get("concurrency"), b["discard"]))
    for b in counted:
        result["warnings"].append(
            "block %s (%s, c=%s) counts although %s: %d blocks were discarded already"
            % (b.get("index"), b.get("arm"), b.get("concurrency"), b["discard"], MAX_DISCARDED)
        )
    return result


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"speculative_verdict": speculative_verdict_filter}
