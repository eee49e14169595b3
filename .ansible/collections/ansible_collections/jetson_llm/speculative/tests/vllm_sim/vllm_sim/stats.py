# SPDX-License-Identifier: Apache-2.0
"""Engine counters and their Prometheus exposition with vLLM's metric names and labels."""

from __future__ import annotations

import math
import time

FINISH_REASONS = ("stop", "length", "abort")


class Stats:
    def __init__(self, model_name: str, spec_k: int = 0, log_stats: bool = True):
        self.model_name = model_name
        self.spec_k = spec_k
        self.log_stats = log_stats
        self.created = time.time()
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.request_success = dict.fromkeys(FINISH_REASONS, 0)
        self.num_drafts = 0
        self.num_draft_tokens = 0
        self.num_accepted = 0
        self.accepted_per_pos = [0] * spec_k
        # window for the periodic log line
        self.win = {"prompt": 0, "gen": 0, "drafts": 0, "draft_tokens": 0, "accepted": 0, "pos": [0] * spec_k}

    def record_draft(self, k: int, accepted: int) -> None:
        self.num_drafts += 1
        self.num_draft_tokens += k
        self.num_accepted += accepted
        self.win["drafts"] += 1
        self.win["draft_tokens"] += k
        self.win["accepted"] += accepted
        for i in range(min(accepted, len(self.accepted_per_pos))):
            self.accepted_per_pos[i] += 1
            self.win["pos"][i] += 1

    def record_prompt(self, n: int) -> None:
        self.prompt_tokens += n
        self.win["prompt"] += n

    def record_generation(self, n: int) -> None:
        self.generation_tokens += n
        self.win["gen"] += n

    def snapshot(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "generation_tokens": self.generation_tokens,
            "num_drafts": self.num_drafts,
            "num_draft_tokens": self.num_draft_tokens,
            "num_accepted_tokens": self.num_accepted,
            "accepted_per_pos": list(self.accepted_per_pos),
            "request_success": dict(self.request_success),
        }

    def take_window(self) -> dict:
        win = self.win
        self.win = {"prompt": 0, "gen": 0, "drafts": 0, "draft_tokens": 0, "accepted": 0, "pos": [0] * self.spec_k}
        return win

    # ------------------------------------------------------------------------------ exposition
    def prometheus(self, version=None) -> str:
        out = []
        created = go_float(self.created)
        base = f'model_name="{_esc(self.model_name)}",engine="0"'
        out += _process_metrics()
        if not self.log_stats:
            return "".join(line + "\n" for line in out)

        def gauge(name, helptext, value):
            out.append(f"# HELP {name} {helptext}")
            out.append(f"# TYPE {name} gauge")
            out.append(f"{name}{{{base}}} {go_float(value)}")

        def counter(name, helptext, samples):
            out.append(f"# HELP {name}_total {helptext}")
            out.append(f"# TYPE {name}_total counter")
            for labels, value in samples:
                out.append(f"{name}_total{{{labels}}} {go_float(value)}")
            out.append(f"# HELP {name}_created {helptext}")
            out.append(f"# TYPE {name}_created gauge")
            for labels, _value in samples:
                out.append(f"{name}_created{{{labels}}} {created}")

        gauge("vllm:num_requests_running", "Number of requests in model execution batches.", self.running)
        gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", self.waiting)
        gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", self.kv_usage)
        counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(base, self.prompt_tokens)])
        counter("vllm:generation_tokens", "Number of generation tokens processed.", [(base, self.generation_tokens)])
        counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [(f'{base},finished_reason="{r}"', self.request_success[r]) for r in FINISH_REASONS],
        )
        if self.spec_k:
            counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", [(base, self.num_drafts)])
            counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", [(base, self.num_draft_tokens)])
            counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", [(base, self.num_accepted)])
            counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                [(f'{base},position="{i}"', v) for i, v in enumerate(self.accepted_per_pos)],
            )
        return "".join(line + "\n" for line in out)


def go_float(value) -> str:
    """Number formatting of prometheus_client (``floatToGoString``)."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _esc(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _process_metrics() -> list:
    lines = [
        "# HELP python_info Python platform information",
        "# TYPE python_info gauge",
        'python_info{implementation="CPython",major="3",minor="12",patchlevel="3",version="3.12.3"} 1.0',
    ]
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        rss = int(fields[21]) * 4096
        lines += [
            "# HELP process_resident_memory_bytes Resident memory size in bytes.",
            "# TYPE process_resident_memory_bytes gauge",
            f"process_resident_memory_bytes {go_float(rss)}",
        ]
    except (OSError, IndexError, ValueError):
        pass
    return lines
