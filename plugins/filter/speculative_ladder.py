# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: speculative_ladder
short_description: The out-of-memory ladder for a speculative plan
version_added: 0.1.0
author:
  - Jetson LLM maintainers (@jetson-llm)
description:
  - Returns the configurations to try, in order, when vLLM does not start with a speculative plan, following
    the published ladder for Jetson (lower C(--gpu-memory-utilization) by a step, then use a smaller
    speculator, then give up).
  - The first rung is the plan itself; then the plan with the utilization lowered by O(step), O(steps) times
    (never below 0.05); then, for each smaller EAGLE-3 head or draft model the catalog pairs with the target,
    the planner's own plan for it (rungs the planner skips are left out).
options:
  _input:
    description: An enabled plan from P(jetson_llm.speculative.speculative_plan#filter).
    type: dict
    required: true
  facts:
    description: C(ansible_facts.jetson).
    type: dict
    required: true
  target_model:
    description: Served model id.
    type: str
    required: true
  serve:
    description: Serve settings, as for P(jetson_llm.speculative.speculative_plan#filter).
    type: dict
    required: true
  concurrency:
    description: Expected concurrency.
    type: int
    default: 1
  catalog:
    description: Extra catalog entries.
    type: dict
  overrides:
    description: The host's overrides; the speculator model override is replaced on the smaller-speculator rungs.
    type: dict
  step:
    description: Utilization step.
    type: float
    default: 0.05
  steps:
    description: Number of utilization steps.
    type: int
    default: 1
  host:
    description: Host name for messages.
    type: str
"""

EXAMPLES = r"""
- name: Ladder of a plan
  ansible.builtin.set_fact:
    ladder: "{{ plan | jetson_llm.speculative.speculative_ladder(facts=ansible_facts.jetson, target_model=model, serve=serve) }}"
"""

RETURN = r"""
_value:
  description: Plans to try in order; each has C(rung) (C(plan), C(utilization), C(smaller speculator)).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._catalog import (
    CatalogError,
    drafts_for,
    eagle3_heads,
    merged_catalog,
)
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.planner import plan

_FQCN = "jetson_llm.speculative.speculative_ladder"
UTIL_FLOOR = 0.05


def speculative_ladder(
    base,
    facts,
    target_model,
    serve,
    concurrency=1,
    catalog=None,
    overrides=None,
    step=0.05,
    steps=1,
    host="",
):
    if not isinstance(base, dict) or base.get("decision") != "enabled":
        raise AnsibleFilterError("{}: the input must be an enabled plan".format(_FQCN))
    try:
        step = float(step)
        steps = int(steps)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("{}: step and steps must be numbers ({})".format(_FQCN, exc)) from exc
    if not (0 < step < 1 and 0 <= steps <= 20):
        raise AnsibleFilterError("{}: step must be in (0, 1) and steps in 0..20".format(_FQCN))
    rungs = [dict(base, rung="plan")]
    util = float(base["gpu_memory_utilization"])
    for i in range(1, steps + 1):
        lowered = round(util - i * step, 2)
        if lowered < UTIL_FLOOR:
            break
        rungs.append(
            dict(
                base,
                gpu_memory_utilization=lowered,
                rung="utilization",
                reason="{}; utilization lowered to {:.2f} after an out-of-memory start".format(base["reason"], lowered),
            )
        )
    try:
        cat = merged_catalog(dict(catalog) if catalog else None, host=str(host or ""))
    except CatalogError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc
    target = cat.get(target_model)
    current = cat.get(base.get("model"))
    if target is None:
        return rungs
    limit = current["weights_gb"] if current else float("inf")
    seen = set([base.get("model")])
    for alt in eagle3_heads(cat, target["family"]) + drafts_for(cat, target["family"]):
        if alt in seen or cat[alt]["weights_gb"] >= limit:
            continue
        seen.add(alt)
        ov = dict(overrides or {})
        ov["model"] = alt
        ov.pop("method", None)
        ov.pop("num_speculative_tokens", None)
        try:
            alt_plan = plan(
                facts,
                target_model,
                dict(serve, running=True),
                int(concurrency),
                catalog=catalog or None,
                overrides=ov,
                host=str(host or ""),
            )
        except SpecdecError:
            continue  # an incompatible pair (for example a vocabulary mismatch) is not a rung
        if alt_plan.get("decision") == "enabled":
            alt_plan["rung"] = "smaller speculator"
            rungs.append(alt_plan)
    return rungs


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"speculative_ladder": speculative_ladder}
