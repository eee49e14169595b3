# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""The output proof: a fixed probe set at temperature 0, and the comparison with the baseline's outputs.

Speculative decoding with rejection sampling serves the target model's distribution, so at
temperature 0 a speculative configuration answers with the baseline's text, "lossless up to the
precision limits of hardware numerics" (vLLM documentation, "Lossless guarantees of Speculative
Decoding"): a different batch shape can flip a near-tie between two tokens and change the rest of
that answer. vLLM's own correctness tests of every method (EAGLE, EAGLE-3, MTP, n-gram, suffix, draft
model) therefore compare greedy outputs prompt by prompt and require that more than 66 % of the
prompts match exactly. ``compare`` applies that rule: the outputs agree when
``matches > int(min_match_fraction * total)``. A build that serves wrong text (a broken kernel, a
speculator whose tokens are accepted wrongly) changes almost every answer and fails it; numerics
change one answer now and then and do not.

Standard library only (it runs on the device); Python 3.8 and newer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import http.client as httplib
import json

from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import prompts as prompt_set
from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench.client import MAX_ERROR_BODY, BenchError, _snippet, describe_exception

PROBE_SEED = 20260
PROBE_COUNT = 6
PROBE_MAX_TOKENS = 64
MIN_MATCH_FRACTION = 0.66
RULE = (
    "the outputs agree when more than %d %% of the probe prompts (temperature 0) return exactly the baseline's text, "
    "the rule of vLLM's own speculative-decoding correctness tests (numerics may change an answer now and then)"
)


def probe_prompts(count=PROBE_COUNT, prompts=None):
    """``count`` prompts of the set, one of each kind in turn, in a fixed order (no seed to choose)."""
    ordered = prompt_set.select(len(prompts or prompt_set.PROMPTS), seed=PROBE_SEED, prompts=prompts)
    kinds = []
    for item in ordered:
        if item["kind"] not in kinds:
            kinds.append(item["kind"])
    chosen, taken = [], set()
    while len(chosen) < min(int(count), len(ordered)):
        for kind in kinds:
            for item in ordered:
                if item["kind"] == kind and item["id"] not in taken:
                    chosen.append(item)
                    taken.add(item["id"])
                    break
            if len(chosen) >= int(count):
                break
    return chosen


def _payload(endpoint, model, prompt, max_tokens):
    payload = {"model": model, "max_tokens": int(max_tokens), "temperature": 0.0, "seed": 0, "stream": False}
    if endpoint == "chat":
        payload["messages"] = prompt["messages"]
    elif endpoint == "completions":
        if prompt.get("prompt") is None:
            raise BenchError("prompt %s has chat messages only: probe it with endpoint chat" % prompt["id"])
        payload["prompt"] = prompt["prompt"]
    else:
        raise BenchError("endpoint must be one of chat, completions; got %r" % (endpoint,))
    return payload


def _text(body, endpoint):
    choice = (body.get("choices") or [{}])[0]
    if endpoint == "chat":
        return (choice.get("message") or {}).get("content") or ""
    return choice.get("text") or ""


def probe_one(server, endpoint, model, prompt, max_tokens, timeout):
    """One greedy request, not streamed: ``{"id", "kind", "text", "sha256", "output_tokens", "error"}``."""
    out = {"id": prompt["id"], "kind": prompt["kind"], "text": "", "sha256": "", "output_tokens": None, "error": ""}
    path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    conn = server.connection(timeout=timeout)
    try:
        conn.request(
            "POST",
            server.path(path),
            body=json.dumps(_payload(endpoint, model, prompt, max_tokens)).encode("utf-8"),
            headers=server.headers({"Content-Type": "application/json"}),
        )
        resp = conn.getresponse()
        raw = resp.read(MAX_ERROR_BODY if resp.status != 200 else 4 * 1024 * 1024)
        if resp.status != 200:
            out["error"] = "HTTP %d %s: %s" % (resp.status, resp.reason, _snippet(raw))
            return out
        body = json.loads(raw.decode("utf-8"))
        text = _text(body, endpoint)
        out["text"] = text
        out["sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        usage = body.get("usage") or {}
        if isinstance(usage.get("completion_tokens"), int):
            out["output_tokens"] = usage["completion_tokens"]
        if not text:
            out["error"] = "the answer carried no text"
    except (OSError, httplib.HTTPException, ValueError) as exc:
        out["error"] = describe_exception(exc)
    finally:
        conn.close()
    return out


def run_probes(server, model, endpoint="chat", count=PROBE_COUNT, max_tokens=PROBE_MAX_TOKENS, timeout=120.0, prompts=None):
    """Send the probe set one request at a time (batch size 1, the most reproducible shape)."""
    return [probe_one(server, endpoint, model, p, max_tokens, timeout) for p in probe_prompts(count, prompts)]


def first_difference(a, b):
    """Index of the first character where ``a`` and ``b`` differ (``None`` when equal)."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(reference, outputs, min_match_fraction=MIN_MATCH_FRACTION):
    """Compare probe outputs with the reference (baseline) outputs of the same prompts.

    Returns ``{"matches", "total", "required", "agree", "differing", "rule"}``; ``differing`` lists
    ``{"id", "kind", "at", "expected", "got"}`` (texts cut around the first difference). A probe that
    failed on either side, or that the other side lacks, counts as not matching.
    """
    fraction = float(min_match_fraction)
    if not 0.0 < fraction < 1.0:
        raise ValueError("min_match_fraction must be between 0 and 1 (exclusive), got %r" % (min_match_fraction,))
    ref = dict((r["id"], r) for r in reference or [])
    if not ref:
        raise ValueError("no reference outputs to compare with")
    got = dict((o["id"], o) for o in outputs or [])
    matches, differing = 0, []
    for pid in sorted(ref):
        r, o = ref[pid], got.get(pid)
        if o is None or o.get("error") or r.get("error"):
            differing.append({"id": pid, "kind": r.get("kind"), "at": None, "expected": r.get("error") or "", "got": (o or {}).get("error") or "missing"})
            continue
        if r["text"] == o["text"]:
            matches += 1
            continue
        at = first_difference(r["text"], o["text"])
        lo = max(0, at - 20)
        differing.append({"id": pid, "kind": r.get("kind"), "at": at, "expected": r["text"][lo : at + 40], "got": o["text"][lo : at + 40]})
    total = len(ref)
    required = int(fraction * total) + 1
    return {
        "matches": matches,
        "total": total,
        "required": required,
        "agree": matches >= required,
        "differing": differing,
        "rule": RULE % round(fraction * 100),
    }


def describe(result):
    """One line for a report: ``4 of 6 probe outputs equal the baseline's (first difference ...)``."""
    text = "%d of %d probe outputs at temperature 0 equal the baseline's (at least %d needed)" % (result["matches"], result["total"], result["required"])
    first = next((d for d in result["differing"] if d.get("at") is not None), None)
    if first is not None:
        text += "; %s differs at character %d: expected %r, got %r" % (first["id"], first["at"], first["expected"], first["got"])
    elif result["differing"]:
        d = result["differing"][0]
        text += "; %s failed: %s" % (d["id"], d["got"] or d["expected"])
    return text
