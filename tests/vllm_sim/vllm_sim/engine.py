# SPDX-License-Identifier: Apache-2.0
"""Performance model and continuous-batching scheduler (see README.md, "Performance model").

The same :class:`Engine` runs in real time behind the HTTP server (``server.py`` sleeps for each
step's modelled duration times ``time_scale``) and in virtual time in :func:`simulate_run`, which
returns benchmark figures without sockets or sleeping.
"""

from __future__ import annotations

import math
import random
import statistics

from . import models as models_mod
from . import settings as settings_mod
from . import specconfig, textgen, zoo
from .stats import Stats
from .versions import Version

GiB = float(1 << 30)
BLOCK = 16

# --------------------------------------------------------------------------- device calibration
#
# Per device family: memory-bandwidth efficiency (fraction of the datasheet bandwidth a decode
# step achieves), decode/prefill compute efficiency (fraction of the datasheet dense FP16 TFLOPS
# that small-M matmuls (decode, verification) and large-M matmuls (prefill) reach), the fixed
# per-step cost of the engine (scheduling, input preparation, sampling, kernel launches: large on
# Jetson's ARM cores) and the fixed cost of each draft forward. ``quant_cost`` multiplies the
# decode compute time of quantised weights (dequantisation in the GEMM kernels); NVFP4 runs natively
# on Thor (Blackwell) and through a W4A16-style fallback on Orin/Xavier.
FAMILY_PARAMS = {
    "thor": {
        "mem_efficiency": 0.71,
        "decode_efficiency": 0.0078,
        "prefill_efficiency": 0.30,
        "step_overhead_ms": 23.0,
        "draft_overhead_ms": 3.1,
        "quant_cost": {None: 1.0, "w4a16": 1.0, "w8a16": 1.0, "nvfp4": 1.25, "fp8": 0.8},
    },
    "orin": {
        "mem_efficiency": 0.88,
        "decode_efficiency": 0.064,
        "prefill_efficiency": 0.35,
        "step_overhead_ms": 9.4,
        "draft_overhead_ms": 0.49,
        "quant_cost": {None: 0.5, "w4a16": 1.0, "w8a16": 0.8, "nvfp4": 1.2, "fp8": 0.8},
    },
    "orin-small": {
        "mem_efficiency": 0.58,
        "decode_efficiency": 0.15,
        "prefill_efficiency": 0.35,
        "step_overhead_ms": 1.0,
        "draft_overhead_ms": 0.8,
        "quant_cost": {None: 0.5, "w4a16": 1.0, "w8a16": 0.8, "nvfp4": 1.2, "fp8": 0.8},
    },
    "xavier": {
        "mem_efficiency": 0.70,
        "decode_efficiency": 0.064,
        "prefill_efficiency": 0.30,
        "step_overhead_ms": 12.0,
        "draft_overhead_ms": 0.5,
        "quant_cost": {None: 0.5, "w4a16": 1.0, "w8a16": 0.8, "nvfp4": 1.2, "fp8": 0.8},
    },
    "generic": {
        "mem_efficiency": 0.80,
        "decode_efficiency": 0.064,
        "prefill_efficiency": 0.35,
        "step_overhead_ms": 9.4,
        "draft_overhead_ms": 0.36,
        "quant_cost": {None: 0.5, "w4a16": 1.0, "w8a16": 0.8, "nvfp4": 1.0, "fp8": 0.8},
    },
}

# Soft roofline: step = overhead + (t_mem^P + t_compute^P)^(1/P).
ROOFLINE_P = 8.0
ENFORCE_EAGER_OVERHEAD = 1.6


def device_family(name: str) -> str:
    name = (name or "").lower()
    if "thor" in name:
        return "thor"
    if "orin" in name and ("nano" in name or "nx" in name):
        return "orin-small"
    if "orin" in name:
        return "orin"
    if "xavier" in name:
        return "xavier"
    return "generic"


class Device:
    def __init__(self, cfg: dict):
        cfg = dict(cfg or {})
        self.name = str(cfg.get("name") or "")
        self.family = cfg.get("family") or device_family(self.name)
        params = FAMILY_PARAMS.get(self.family, FAMILY_PARAMS["generic"])
        self.bandwidth = float(cfg.get("bandwidth_gbs", 204.8)) * 1e9
        self.flops = float(cfg.get("tflops", 42.6)) * 1e12
        self.mem_eff = float(cfg.get("mem_efficiency", params["mem_efficiency"]))
        self.dec_eff = float(cfg.get("decode_efficiency", params["decode_efficiency"]))
        self.pre_eff = float(cfg.get("prefill_efficiency", params["prefill_efficiency"]))
        self.overhead = float(cfg.get("step_overhead_ms", params["step_overhead_ms"])) / 1000.0
        self.draft_overhead = float(cfg.get("draft_overhead_ms", params["draft_overhead_ms"])) / 1000.0
        self.quant_cost = dict(params["quant_cost"])

    def qcost(self, quant) -> float:
        return self.quant_cost.get(quant, 1.0)


# --------------------------------------------------------------------------- acceptance model

# Per-position acceptance probability alpha (chain drafting, chat prompts, temperature 0) per
# (target family, speculator kind). EAGLE-3 on Llama-3.1-8B reaches acceptance lengths near 3 at
# k = 3-4 (vLLM issue #20780: 2.79 at k=3, 3.08 at k=4 on H100); Qwen3 EAGLE-3 heads about 2.0 (AngelSlim); same-family drafts ~0.7.
PAIR_ALPHA = {
    ("llama3-8b", "eagle3"): 0.75,
    ("llama3-8b", "eagle"): 0.68,
    ("llama3-8b", "llama3.2-1b"): 0.70,
    ("llama3-70b", "eagle3"): 0.72,
    ("llama3-70b", "llama3.2-1b"): 0.66,
    ("qwen3-8b", "eagle3"): 0.60,
    ("qwen3-8b", "qwen3-0.6b"): 0.70,
    ("qwen3-8b", "qwen3-1.7b"): 0.74,
    ("qwen3-4b", "eagle3"): 0.62,
    ("qwen3-4b", "qwen3-0.6b"): 0.72,
    ("qwen3-4b", "qwen3-1.7b"): 0.76,
    ("qwen3-1.7b", "eagle3"): 0.64,
    ("qwen3-1.7b", "qwen3-0.6b"): 0.74,
    ("qwen2.5-7b", "qwen2.5-0.5b"): 0.68,
}
DEFAULT_ALPHA = {"eagle3": 0.62, "eagle": 0.55, "draft_model": 0.55}
MISMATCHED_ALPHA = 0.03
# Speculators-format heads (RedHatAI) report slightly higher acceptance than research heads.
SPECULATORS_BONUS = 0.02
# Prompt kind multipliers (heads are trained on chat; code and structured text are more
# predictable; random-token prompts, as `vllm bench --dataset-name random`, are not).
KIND_FACTOR = {"code": 1.15, "structured": 1.10, "chat": 1.0, "random": 0.30}
# n-gram proposals only hit when the continuation repeats the prompt.
NGRAM_ALPHA = {"code": 0.55, "structured": 0.50, "chat": 0.25, "random": 0.02}
MAX_ALPHA = 0.97


class AcceptanceModel:
    def __init__(self, target, spec, version, acceptance_scale=1.0):
        self.target = target
        self.spec = spec
        self.version = version
        self.scale = float(acceptance_scale)
        self.base = self._base_alpha() if spec is not None else 0.0
        rates = None
        opts = spec.options if spec is not None else {}
        if opts.get("rejection_sample_method") == "synthetic":
            if opts.get("synthetic_acceptance_rates"):
                rates = [float(x) for x in opts["synthetic_acceptance_rates"]]
            elif opts.get("synthetic_acceptance_rate") is not None:
                rate = float(opts["synthetic_acceptance_rate"])
                rates = [rate ** (i + 1) for i in range(spec.num_speculative_tokens)]
        self.synthetic = rates
        # Before 0.27 an EAGLE draft is limited to its own max_position_embeddings (issue #21986):
        # beyond it the head's positions are out of range and its proposals are rarely accepted.
        self.draft_ctx_limit = None
        if spec is not None and spec.method in ("eagle", "eagle3") and version < (0, 27, 0):
            self.draft_ctx_limit = spec.model_info.max_position_embeddings

    def _base_alpha(self) -> float:
        spec = self.spec
        if spec.method == "ngram":
            return 1.0  # replaced per prompt kind
        draft = spec.model_info
        tfam = self.target.family
        if spec.method in ("eagle", "eagle3"):
            if draft.hidden_size != self.target.hidden_size or draft.vocab_size != self.target.vocab_size:
                return MISMATCHED_ALPHA
            if spec.method == "eagle" and draft.is_eagle3_head:
                return MISMATCHED_ALPHA  # an EAGLE-3 head driven as EAGLE-1 (0.10.0-0.10.1 name trap)
            alpha = PAIR_ALPHA.get((tfam, spec.method), DEFAULT_ALPHA[spec.method])
            if draft.speculators:
                alpha += SPECULATORS_BONUS
        else:
            if draft.vocab_size != self.target.vocab_size and not spec.options.get("use_heterogeneous_vocab"):
                return MISMATCHED_ALPHA
            alpha = PAIR_ALPHA.get((tfam, draft.family))
            if alpha is None:
                same = draft.layer_model_type == self.target.layer_model_type
                alpha = DEFAULT_ALPHA["draft_model"] if same else 0.2
        return alpha

    def alpha(self, kind: str, temperature: float) -> float:
        if self.spec is None:
            return 0.0
        if self.spec.method == "ngram":
            alpha = NGRAM_ALPHA.get(kind, 0.25)
        else:
            alpha = self.base * KIND_FACTOR.get(kind, 1.0)
        temperature = max(0.0, min(float(temperature or 0.0), 2.0))
        if temperature > 0 and self.spec.method in ("eagle", "eagle3"):
            probabilistic = self.spec.options.get("draft_sample_method") == "probabilistic"
            alpha *= 1.0 - (0.12 if probabilistic else 0.25) * min(temperature, 1.0)
        elif temperature > 0:
            alpha *= 1.0 - 0.12 * min(temperature, 1.0)
        return max(0.0, min(alpha * self.scale, MAX_ALPHA))

    def sample(self, alpha: float, k: int, ctx: int, rng: random.Random) -> int:
        """Number of accepted draft tokens in one step (chain: stop at the first rejection)."""
        if self.synthetic is not None:
            accepted = 0
            prev = 1.0
            for i in range(k):
                rate = self.synthetic[i] if i < len(self.synthetic) else self.synthetic[-1] ** (i + 1)
                cond = rate / prev if prev > 0 else 0.0
                if rng.random() >= cond:
                    break
                accepted += 1
                prev = rate
            return accepted
        if self.draft_ctx_limit is not None and ctx > self.draft_ctx_limit:
            alpha *= 0.1
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        return accepted


# --------------------------------------------------------------------------- noise


class Noise:
    """Multiplicative step-time noise: AR(1) drift (time constant TAU modelled seconds) + jitter."""

    TAU = 60.0

    def __init__(self, sd: float, rng: random.Random):
        self.sd = float(sd)
        self.rng = rng
        self.drift = rng.gauss(0.0, self.sd) if self.sd > 0 else 0.0
        self.t = 0.0

    def factor(self, now: float) -> float:
        if self.sd <= 0:
            return 1.0
        dt = max(0.0, now - self.t)
        if dt > 0:
            rho = math.exp(-dt / self.TAU)
            self.drift = rho * self.drift + math.sqrt(1.0 - rho * rho) * self.rng.gauss(0.0, self.sd)
            self.t = now
        jitter = self.rng.gauss(0.0, self.sd / 2.0)
        return max(0.5, (1.0 + self.drift) * (1.0 + jitter))


# --------------------------------------------------------------------------- performance model


class PerfModel:
    """Step durations (modelled seconds) for a target model, optional speculator and a device."""

    def __init__(self, device: Device, target, spec=None, kv_dtype_bytes=2.0, enforce_eager=False, quant=None):
        self.device = device
        self.target = target
        self.spec = spec
        self.quant = quant if quant is not None else target.quant
        self.kvb = target.kv_bytes_per_token(kv_dtype_bytes)
        self.overhead = device.overhead * (ENFORCE_EAGER_OVERHEAD if enforce_eager else 1.0)
        self.draft_overhead = device.draft_overhead * (ENFORCE_EAGER_OVERHEAD if enforce_eager else 1.0)
        self.target_read = target.decode_read_bytes
        if quant == "fp8" and target.quant is None:
            self.target_read = target.decode_read_bytes * 0.55
        self.draft = spec.model_info if spec is not None and spec.model_info is not None else None
        self.draft_kvb = self.draft.kv_bytes_per_token(kv_dtype_bytes) if self.draft is not None else 0.0

    def _forward(self, read_bytes, kvb, flops_per_token, quant, dec_tokens, pre_tokens, ctx_sum, pre_attn_flops, overhead):
        dev = self.device
        t_mem = (read_bytes + ctx_sum * kvb) / (dev.bandwidth * dev.mem_eff)
        t_dec = dec_tokens * flops_per_token * dev.qcost(quant) / (dev.flops * dev.dec_eff)
        t_pre = (pre_tokens * flops_per_token + pre_attn_flops) / (dev.flops * dev.pre_eff)
        t_cmp = t_dec + t_pre
        return overhead + (t_mem**ROOFLINE_P + t_cmp**ROOFLINE_P) ** (1.0 / ROOFLINE_P)

    def _attn_flops(self, model, tokens, ctx_start):
        # QK^T and AV over the context seen by each prefill token.
        mean_ctx = ctx_start + tokens / 2.0
        return 4.0 * model.num_layers * model.num_heads * model.head_dim * mean_ctx * tokens

    def step(self, decode, prefill, k):
        """Duration of one engine step.

        ``decode``: list of context lengths of requests in their decode phase; ``prefill``: list of
        ``(chunk_tokens, ctx_start)``; ``k``: draft tokens per decode request (0 without
        speculation). Returns ``(target_seconds, draft_seconds)``.
        """
        t = self.target
        n_dec = len(decode)
        ctx_sum = float(sum(decode)) + sum(c + n for n, c in prefill)
        pre_tokens = sum(n for n, _c in prefill)
        pre_attn = sum(self._attn_flops(t, n, c) for n, c in prefill)
        dec_tokens = n_dec * (k + 1)
        target_time = self._forward(
            self.target_read,
            self.kvb,
            t.flops_per_token,
            self.quant,
            dec_tokens,
            pre_tokens,
            ctx_sum,
            pre_attn,
            self.overhead,
        )
        draft_time = 0.0
        spec = self.spec
        if spec is not None and ((n_dec and k > 0) or pre_tokens):
            if spec.method == "ngram":
                draft_time = 0.0002 * n_dec
            else:
                d = self.draft
                rounds = k if n_dec and k > 0 else 1
                for r in range(rounds):
                    first = r == 0
                    draft_time += self._forward(
                        d.decode_read_bytes,
                        self.draft_kvb,
                        d.flops_per_token,
                        d.quant,
                        n_dec,
                        pre_tokens if first else 0,
                        ctx_sum,
                        self._attn_flops_sum(d, prefill) if first else 0.0,
                        self.draft_overhead,
                    )
        return target_time, draft_time

    def _attn_flops_sum(self, model, prefill):
        return sum(self._attn_flops(model, n, c) for n, c in prefill)

    def decode_step(self, batch: int, ctx: int, k: int = 0) -> float:
        """Convenience: one decode step of ``batch`` requests at context ``ctx``."""
        target, draft = self.step([ctx] * batch, [], k)
        return target + draft


# --------------------------------------------------------------------------- requests and engine


class Request:
    __slots__ = (
        "accepted_total",
        "alpha",
        "arrival",
        "ctx_prefilled",
        "drafts",
        "finish_reason",
        "finish_time",
        "first_token_time",
        "gen",
        "generated",
        "id",
        "ignore_eos",
        "kind",
        "max_tokens",
        "on_tokens",
        "prompt_tokens",
        "stop_at",
        "temperature",
        "token_events",
        "user",
    )

    def __init__(
        self,
        rid,
        prompt_tokens,
        max_tokens,
        kind="chat",
        temperature=0.0,
        ignore_eos=True,
        eos_at=None,
        arrival=0.0,
        gen=None,
        on_tokens=None,
        user=None,
    ):
        self.id = rid
        self.prompt_tokens = max(1, int(prompt_tokens))
        self.max_tokens = max(1, int(max_tokens))
        self.kind = kind
        self.temperature = float(temperature or 0.0)
        self.ignore_eos = ignore_eos
        self.stop_at = None if ignore_eos or eos_at is None else int(eos_at)
        self.arrival = arrival
        self.gen = gen
        self.on_tokens = on_tokens
        self.user = user
        self.ctx_prefilled = 0
        self.generated = 0
        self.first_token_time = None
        self.finish_time = None
        self.finish_reason = None
        self.token_events = []  # (time, n_tokens)
        self.alpha = 0.0
        self.drafts = 0
        self.accepted_total = 0

    @property
    def in_prefill(self) -> bool:
        return self.ctx_prefilled < self.prompt_tokens

    @property
    def context(self) -> int:
        return self.ctx_prefilled + self.generated

    def limit(self) -> tuple:
        """(tokens still allowed, finish reason when reached)."""
        if self.stop_at is not None and self.stop_at < self.max_tokens:
            return self.stop_at - self.generated, "stop"
        return self.max_tokens - self.generated, "length"


class Step:
    __slots__ = ("decode", "draft_time", "duration", "k", "prefill", "start", "target_time")

    def __init__(self, start, decode, prefill, k, target_time, draft_time, duration):
        self.start = start
        self.decode = decode
        self.prefill = prefill
        self.k = k
        self.target_time = target_time
        self.draft_time = draft_time
        self.duration = duration


class Engine:
    """Continuous batching as vLLM's V1 scheduler does it, at the level of token counts.

    Each step serves every running request: decode requests one token (or k + 1 to verify with
    speculation), then prefill chunks within ``max_num_batched_tokens``; new requests are admitted
    while ``max_num_seqs`` and the KV cache (blocks reserved for prompt + max_tokens) allow.
    """

    def __init__(
        self,
        perf: PerfModel,
        acceptance: AcceptanceModel,
        stats: Stats,
        rng: random.Random,
        noise: Noise,
        max_num_seqs=256,
        max_num_batched_tokens=2048,
        kv_tokens=None,
    ):
        self.perf = perf
        self.acceptance = acceptance
        self.spec = perf.spec
        self.stats = stats
        self.rng = rng
        self.noise = noise
        self.max_num_seqs = int(max_num_seqs)
        self.max_batched = int(max_num_batched_tokens)
        self.kv_blocks = None if kv_tokens is None else max(1, int(kv_tokens) // BLOCK)
        self.used_blocks = 0
        self.waiting = []
        self.running = []
        self.finished_count = 0
        self.now = 0.0

    # ------------------------------------------------------------------------- requests
    def add(self, req: Request, now: float) -> None:
        req.arrival = now if req.arrival is None else req.arrival
        req.alpha = self.acceptance.alpha(req.kind, req.temperature)
        if req.alpha > 0:
            req.alpha = min(MAX_ALPHA, req.alpha * math.exp(self.rng.gauss(0.0, 0.04)))
        self.waiting.append(req)
        self._gauges()

    def abort(self, req: Request, reason: str = "abort") -> None:
        if req in self.waiting:
            self.waiting.remove(req)
        elif req in self.running:
            self.running.remove(req)
            self.used_blocks -= self._blocks(req)
        else:
            return
        req.finish_reason = reason
        self.stats.request_success[reason] += 1
        self._gauges()

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def _blocks(self, req) -> int:
        k = self.spec.num_speculative_tokens if self.spec is not None else 0
        return -(-(req.prompt_tokens + req.max_tokens + k) // BLOCK)

    def _gauges(self) -> None:
        self.stats.running = len(self.running)
        self.stats.waiting = len(self.waiting)
        if self.kv_blocks:
            used = sum(-(-r.context // BLOCK) for r in self.running)
            self.stats.kv_usage = min(1.0, used / self.kv_blocks)

    # ------------------------------------------------------------------------- one step
    def plan(self, now: float):
        """Choose the batch of the next step; None when there is nothing to do."""
        budget = self.max_batched
        decode = [r for r in self.running if not r.in_prefill]
        n_dec = len(decode)
        k = self.spec.k_for_batch(len(self.running) or 1) if self.spec is not None else 0
        budget -= n_dec * (k + 1)
        prefill = []
        for req in self.running:
            if req.in_prefill and budget > 0:
                chunk = min(req.prompt_tokens - req.ctx_prefilled, budget)
                prefill.append((req, chunk))
                budget -= chunk
        while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
            req = self.waiting[0]
            need = self._blocks(req)
            if self.kv_blocks is not None and self.used_blocks + need > self.kv_blocks and self.running:
                break
            self.waiting.pop(0)
            self.running.append(req)
            self.used_blocks += need
            chunk = min(req.prompt_tokens, budget)
            prefill.append((req, chunk))
            budget -= chunk
        if not decode and not prefill:
            self._gauges()
            return None
        target_t, draft_t = self.perf.step([r.context for r in decode], [(n, r.ctx_prefilled) for r, n in prefill], k if decode else 0)
        factor = self.noise.factor(now)
        duration = (target_t + draft_t) * factor
        self._gauges()
        return Step(now, decode, prefill, k if decode else 0, target_t * factor, draft_t * factor, duration)

    def finish(self, step: Step) -> list:
        """Apply a step's results at ``step.start + step.duration``; returns updates.

        Each update is ``(request, new_tokens, finished)``.
        """
        end = step.start + step.duration
        self.now = end
        updates = []
        for req in step.decode:
            if req.finish_reason is not None:
                continue
            accepted = 0
            if step.k > 0:
                accepted = self.acceptance.sample(req.alpha, step.k, req.context, self.rng)
                self.stats.record_draft(step.k, accepted)
                req.drafts += 1
                req.accepted_total += accepted
            updates.append(self._emit(req, 1 + accepted, end))
        for req, chunk in step.prefill:
            if req.finish_reason is not None:
                continue
            req.ctx_prefilled += chunk
            self.stats.record_prompt(chunk)
            if not req.in_prefill:
                updates.append(self._emit(req, 1, end))
        self._gauges()
        return [u for u in updates if u is not None]

    def _emit(self, req: Request, n: int, when: float):
        allowed, _reason = req.limit()
        n = max(0, min(n, allowed))
        if n == 0:
            return None
        if req.first_token_time is None:
            req.first_token_time = when
        req.generated += n
        req.token_events.append((when, n))
        self.stats.record_generation(n)
        finished = False
        if req.stop_at is not None and req.stop_at <= req.max_tokens and req.generated >= req.stop_at:
            finished, req.finish_reason = True, "stop"
        elif req.generated >= req.max_tokens:
            finished, req.finish_reason = True, "length"
        if finished:
            req.finish_time = when
            self.running.remove(req)
            self.used_blocks -= self._blocks(req)
            self.stats.request_success[req.finish_reason] += 1
            self.finished_count += 1
        return (req, n, finished)


# --------------------------------------------------------------------------- building blocks


def model_from_zoo(model_id: str, env=None):
    """ModelInfo for ``model_id`` from the in-memory zoo, else from the local/HF cache."""
    if model_id in zoo.MODELS:
        spec = zoo.MODELS[model_id]
        return models_mod.ModelInfo(model_id, "", spec["config"], spec["total_size"], spec.get("generation_config"), spec.get("tokenizer"))
    return models_mod.load(model_id, env)


def make_engine(
    settings,
    target,
    spec_plan=None,
    seed=None,
    max_num_seqs=256,
    max_num_batched_tokens=2048,
    kv_tokens=None,
    kv_dtype_bytes=2.0,
    enforce_eager=False,
    quant=None,
    served_name=None,
    log_stats=True,
):
    version = Version(settings["version"])
    rng = random.Random(seed if seed is not None else settings.get("seed"))
    device = Device(settings["device"])
    perf = PerfModel(device, target, spec_plan, kv_dtype_bytes, enforce_eager, quant)
    acceptance = AcceptanceModel(target, spec_plan, version, settings.get("acceptance_scale", 1.0))
    k = spec_plan.num_speculative_tokens if spec_plan is not None else 0
    stats = Stats(served_name or target.name, k, log_stats)
    noise = Noise(settings.get("noise", 0.0), random.Random(rng.random()))
    return Engine(perf, acceptance, stats, rng, noise, max_num_seqs, max_num_batched_tokens, kv_tokens)


def _percentile(values, q):
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _prompt_text(prompt, target):
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, dict):
        if "messages" in prompt:
            return textgen.render_chat(prompt["messages"], target.tokenizer_config)
        return str(prompt.get("prompt", ""))
    if isinstance(prompt, list):
        return textgen.render_chat(prompt, target.tokenizer_config)
    return str(prompt)


def simulate_run(
    settings,
    target,
    speculative_config,
    prompts,
    concurrency,
    max_tokens,
    rng=None,
    seed=None,
    num_prompts=None,
    ignore_eos=True,
    temperature=0.0,
    max_num_seqs=256,
    max_num_batched_tokens=2048,
    kv_tokens=None,
    tensor_parallel_size=1,
):
    """Run a closed-loop benchmark in virtual time (no sockets, no sleeping).

    ``settings``: a settings dict (partial is fine; defaults fill the rest); ``target``: a model
    id (zoo or HF cache) or a ModelInfo; ``speculative_config``: the ``--speculative-config`` dict
    (validated with the same rules as the CLI) or None; ``prompts``: strings, ``{"prompt": ...}``
    or ``{"messages": [...]}`` items, cycled up to ``num_prompts``; ``concurrency``: clients, each
    sending its next request when the previous one finishes (``vllm bench serve
    --max-concurrency``); ``max_tokens`` per request. Returns per-request latencies (seconds), the
    aggregate figures with ``vllm bench serve`` key names, and the spec-decode counter deltas.
    """
    settings = settings_mod.from_dict(settings or {})
    version = Version(settings["version"])
    if isinstance(rng, random.Random):
        seed = rng.random()
    target_info = model_from_zoo(target) if isinstance(target, str) else target
    plan = None
    if speculative_config:
        plan = specconfig.build(dict(speculative_config), version, target_info, tensor_parallel_size, lambda name, rev: model_from_zoo(name))
    engine = make_engine(
        settings,
        target_info,
        plan,
        seed=seed,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        kv_tokens=kv_tokens,
    )
    before = engine.stats.snapshot()
    prompts = list(prompts)
    if not prompts:
        raise ValueError("prompts must not be empty")
    total = int(num_prompts) if num_prompts is not None else len(prompts)
    texts = [_prompt_text(p, target_info) for p in prompts]
    lengths = [textgen.count_tokens(t) for t in texts]
    kinds = [textgen.classify(t) for t in texts]
    issued = 0
    done = []

    def issue(now):
        nonlocal issued
        if issued >= total:
            return
        i = issued % len(texts)
        issued += 1
        gen = textgen.Generation(target_info.name, texts[i], temperature, seed=issued)
        req = Request(
            issued,
            lengths[i],
            max_tokens,
            kinds[i],
            temperature,
            ignore_eos,
            gen.eos_at,
            arrival=now,
        )
        engine.add(req, now)

    now = 0.0
    for _unused in range(min(int(concurrency), total)):
        issue(now)
    while engine.has_work():
        step = engine.plan(now)
        if step is None:
            break
        now = step.start + step.duration
        for req, _n, finished in engine.finish(step):
            if finished:
                done.append(req)
                issue(now)
    duration = now
    return _summarise(done, duration, engine, before, plan)


def _summarise(done, duration, engine, before, plan):
    ms = 1000.0
    per_request = []
    ttfts, tpots, itls, e2els = [], [], [], []
    total_in = total_out = 0
    for req in done:
        ttft = req.first_token_time - req.arrival
        e2e = req.finish_time - req.arrival
        n = req.generated
        tpot = (e2e - ttft) / (n - 1) if n > 1 else 0.0
        gaps = []
        prev = req.first_token_time
        for when, _count in req.token_events[1:]:
            gaps.append(when - prev)
            prev = when
        per_request.append(
            {
                "prompt_tokens": req.prompt_tokens,
                "output_tokens": n,
                "kind": req.kind,
                "ttft": ttft,
                "tpot": tpot,
                "itls": gaps,
                "e2e": e2e,
                "finish_reason": req.finish_reason,
            }
        )
        ttfts.append(ttft)
        if n > 1:
            tpots.append(tpot)
        itls.extend(gaps)
        e2els.append(e2e)
        total_in += req.prompt_tokens
        total_out += n
    after = engine.stats.snapshot()
    result = {
        "completed": len(done),
        "failed": 0,
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(done) / duration if duration else 0.0,
        "output_throughput": total_out / duration if duration else 0.0,
        "total_token_throughput": (total_in + total_out) / duration if duration else 0.0,
        "requests": per_request,
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        result[f"mean_{name}_ms"] = statistics.fmean(values) * ms if values else 0.0
        result[f"median_{name}_ms"] = _percentile(values, 50) * ms
        result[f"p99_{name}_ms"] = _percentile(values, 99) * ms
        result[f"std_{name}_ms"] = statistics.pstdev(values) * ms if len(values) > 1 else 0.0
    delta = {
        "num_drafts": after["num_drafts"] - before["num_drafts"],
        "num_draft_tokens": after["num_draft_tokens"] - before["num_draft_tokens"],
        "num_accepted_tokens": after["num_accepted_tokens"] - before["num_accepted_tokens"],
        "accepted_per_pos": [a - b for a, b in zip(after["accepted_per_pos"], before["accepted_per_pos"], strict=True)],
    }
    result["spec_decode"] = delta
    if plan is not None and delta["num_drafts"]:
        drafts = delta["num_drafts"]
        result["spec_decode_acceptance_rate"] = 100.0 * delta["num_accepted_tokens"] / max(1, delta["num_draft_tokens"])
        result["spec_decode_acceptance_length"] = 1.0 + delta["num_accepted_tokens"] / drafts
        result["spec_decode_num_drafts"] = drafts
        result["spec_decode_draft_tokens"] = delta["num_draft_tokens"]
        result["spec_decode_accepted_tokens"] = delta["num_accepted_tokens"]
        result["spec_decode_per_position_acceptance_rates"] = [v / drafts for v in delta["accepted_per_pos"]]
    return result
