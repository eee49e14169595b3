# SPDX-License-Identifier: Apache-2.0
"""Unified-memory budget at startup (vLLM's start-up memory checks on unified memory; README.md, section 6) and optional accounting.

Jetson GPUs share system memory: vLLM reads total memory as ``MemTotal`` and free memory as
``MemAvailable`` (0.11.2+; ``MemFree`` before, where page cache counts as used). It requests
``gpu_memory_utilization x total`` and fails at startup, in this order, when free memory is below
the request, when the weights do not fit in it, when no room is left for the KV cache, or when the
KV cache cannot hold one request of ``max_model_len`` tokens.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os

from .errors import VllmError

GiB = float(1 << 30)
MiB = float(1 << 20)
BLOCK = 16
NON_TORCH_BYTES = 0.45 * GiB  # CUDA context and allocator overhead
DEFAULT_MEMINFO = "/proc/meminfo"


def meminfo_path(env=None) -> str:
    env = os.environ if env is None else env
    return env.get("VLLM_SIM_MEMINFO") or DEFAULT_MEMINFO


def read_meminfo(path: str) -> dict:
    """``{field: kB}`` from a meminfo file."""
    out = {}
    with open(path, encoding="ascii", errors="replace") as handle:
        for line in handle:
            name, _unused, rest = line.partition(":")
            parts = rest.split()
            if parts:
                try:
                    out[name.strip()] = int(parts[0])
                except ValueError:
                    pass
    return out


def device_memory(version, meminfo: dict):
    """(total_bytes, free_bytes) as vLLM sees them on an integrated GPU."""
    total = meminfo.get("MemTotal", 0) * 1024.0
    if version.integrated_gpu_uses_available:
        free = meminfo.get("MemAvailable", meminfo.get("MemFree", 0)) * 1024.0
    else:
        free = meminfo.get("MemFree", meminfo.get("MemAvailable", 0)) * 1024.0
    return total, free


def _engine_error(exc_type, message, frames, log_before=()):
    return VllmError(exc_type, message, "engine", ("engine_core", *frames), log_before)


def check_free(version, total, free, util):
    requested = util * total
    if free < requested:
        raise _engine_error(
            "ValueError",
            f"Free memory on device ({free / GiB:.2f}/{total / GiB:.2f} GiB) on startup is less than desired "
            f"GPU memory utilization ({util}, {requested / GiB:.2f} GiB). Decrease GPU memory utilization or "
            "reduce GPU memory used by other processes.",
            ("free_memory",),
        )
    return requested


def weight_tensors(model, weight_bytes):
    """Approximate tensor sizes in load order: embedding, layers, LM head."""
    embed = min(model.embed_bytes, weight_bytes * 0.4) if not model.is_eagle_head else 0.0
    lm_head = 0.0 if model.tie_word_embeddings else min(model.lm_head_params * 2.0, weight_bytes * 0.3)
    rest = max(weight_bytes - embed - lm_head, 0.0)
    layers = max(1, model.num_layers)
    sizes = []
    if embed:
        sizes.append(embed)
    per_layer = rest / layers
    # each layer loads as its two largest tensors (MLP up/gate and down), roughly 2:1
    for _unused in range(layers):
        sizes.extend([per_layer * 2.0 / 3.0, per_layer / 3.0])
    if lm_head:
        sizes.append(lm_head)
    return sizes


def check_load(version, total, requested, target_bytes, target, spec_bytes, spec_model):
    """Raise the OOM vLLM reports when the weights do not fit; return loaded fraction otherwise."""
    budget = requested - NON_TORCH_BYTES
    allocated = 0.0
    tensors = weight_tensors(target, target_bytes)
    if spec_model is not None and spec_bytes:
        tensors += weight_tensors(spec_model, spec_bytes)
    grand = sum(tensors) or 1.0
    for size in tensors:
        if allocated + size > budget:
            free = max(budget - allocated, 0.0)
            in_use = allocated + NON_TORCH_BYTES
            oom = (
                f"CUDA out of memory. Tried to allocate {size / MiB:.2f} MiB. GPU 0 has a total capacity of "
                f"{total / GiB:.2f} GiB of which {free / MiB:.2f} MiB is free. Including non-PyTorch memory, this "
                f"process has {in_use / GiB:.2f} GiB memory in use. Of the allocated memory {allocated / GiB:.2f} GiB "
                "is allocated by PyTorch, and 2.00 MiB is reserved by PyTorch but unallocated. If reserved but "
                "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
                "fragmentation.  See documentation for Memory Management  "
                "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
            )
            log_before = ()
            if version >= (0, 13, 0):
                log_before = (
                    (
                        "ERROR",
                        "gpu_model_runner.py:2905",
                        "Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization to "
                        "free memory for weights, increasing --tensor-parallel-size, or using --quantization. "
                        f"(original error: {oom})",
                    ),
                )
            err = _engine_error("torch.OutOfMemoryError", oom, ("load_model",), log_before)
            err.loaded_fraction = allocated / grand
            raise err
        allocated += size
    return 1.0


def activation_peak(model, max_num_seqs, max_num_batched_tokens) -> float:
    """Peak activation memory measured by vLLM's profiling run (rough)."""
    tokens = max_num_batched_tokens
    hidden = tokens * model.hidden_size * 2.0 * 6
    mlp = tokens * model.intermediate_size * 2.0 * 2
    logits = max_num_seqs * model.vocab_size * 4.0
    return hidden + mlp + logits


class KvPlan:
    def __init__(self, available, per_token, tokens, max_model_len):
        self.available = available
        self.per_token = per_token
        self.tokens = tokens
        self.max_model_len = max_model_len

    @property
    def concurrency(self) -> float:
        return self.tokens / float(self.max_model_len)


def kv_plan(
    version,
    requested,
    weights,
    target,
    spec_model,
    max_model_len,
    derived_max,
    max_num_seqs,
    max_batched,
    kv_dtype_bytes,
):
    """KV cache size after loading and profiling; raises vLLM's KV errors."""
    peak = activation_peak(target, max_num_seqs, max_batched)
    if spec_model is not None:
        peak += activation_peak(spec_model, max_num_seqs, max_batched) * 0.25
    available = requested - weights - peak - NON_TORCH_BYTES
    frames = ("kv_cache",)
    if available <= 0:
        raise _engine_error(
            "ValueError",
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
            frames,
        )
    per_token = target.kv_bytes_per_token(kv_dtype_bytes)
    if spec_model is not None:
        per_token += spec_model.kv_bytes_per_token(kv_dtype_bytes)
    blocks = int(available // (per_token * BLOCK))
    tokens = blocks * BLOCK
    estimated = tokens
    if max_model_len is None:  # --max-model-len auto / -1 (0.14+)
        if estimated < 1:
            raise _engine_error(
                "ValueError",
                "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. Try increasing `gpu_memory_utilization`.",
                frames,
            )
        max_model_len = min(derived_max, estimated)
    needed = -(-max_model_len // BLOCK) * BLOCK * per_token
    if needed > available:
        est = ""
        if estimated > 0:
            est = f"Based on the available memory, the estimated maximum model length is {estimated}."
        raise _engine_error(
            "ValueError",
            f"To serve at least one request with the model's max seq len ({max_model_len}), "
            f"({needed / GiB:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({available / GiB:.2f} GiB). {est} Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine.",
            frames,
        )
    return KvPlan(available, per_token, tokens, max_model_len)


# --------------------------------------------------------------------------- accounting


def _proc_start(pid: int):
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


class MemoryAccount:
    """Lower ``MemAvailable``/``MemFree`` in a writable meminfo file while the server runs.

    Reservations are recorded in ``state_dir/reservations.json`` (pid, process start time, kB,
    file); a later start releases the reservations of processes that are gone.
    """

    def __init__(self, path: str, state_dir: str, pid=None):
        self.path = os.path.realpath(path)
        self.state_dir = state_dir
        self.pid = pid or os.getpid()
        self.start = _proc_start(self.pid)
        self.kib = 0

    @staticmethod
    def writable(path: str) -> bool:
        return os.access(path, os.W_OK) and not os.path.realpath(path).startswith("/proc/")

    @contextlib.contextmanager
    def _locked(self):
        os.makedirs(self.state_dir, exist_ok=True)
        with open(os.path.join(self.state_dir, "meminfo.lock"), "a+", encoding="ascii") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _state_file(self):
        return os.path.join(self.state_dir, "reservations.json")

    def _load(self):
        try:
            with open(self._state_file(), encoding="utf-8") as handle:
                data = json.load(handle)
            return data if isinstance(data, list) else []
        except (OSError, ValueError):
            return []

    def _save(self, entries):
        tmp = self._state_file() + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(entries, handle)
        os.replace(tmp, self._state_file())

    def _adjust(self, delta_kib: int) -> None:
        """Add ``delta_kib`` to MemAvailable and MemFree, rewriting the file in place."""
        with open(self.path, "r+", encoding="ascii") as handle:
            lines = handle.read().splitlines()
            out = []
            for line in lines:
                name, _unused, rest = line.partition(":")
                if name in ("MemAvailable", "MemFree"):
                    value = max(0, int(rest.split()[0]) + delta_kib)
                    out.append(f"{name + ':':<16}{value:>8} kB")
                else:
                    out.append(line)
            handle.seek(0)
            handle.write("\n".join(out) + "\n")
            handle.truncate()

    def reconcile(self) -> int:
        """Release reservations of processes that no longer run. Returns kB released."""
        released = 0
        with self._locked():
            keep = []
            for entry in self._load():
                alive = _proc_start(int(entry.get("pid", 0))) == entry.get("start") and entry.get("start") is not None
                if entry.get("meminfo") == self.path and not alive:
                    try:
                        self._adjust(int(entry.get("kib", 0)))
                        released += int(entry.get("kib", 0))
                    except OSError:
                        keep.append(entry)
                else:
                    keep.append(entry)
            self._save(keep)
        return released

    def reserve(self, nbytes: float) -> None:
        kib = int(nbytes // 1024)
        with self._locked():
            self._adjust(-kib)
            entries = [e for e in self._load() if not (e.get("pid") == self.pid and e.get("meminfo") == self.path)]
            entries.append({"pid": self.pid, "start": self.start, "kib": kib, "meminfo": self.path})
            self._save(entries)
        self.kib = kib

    def release(self) -> None:
        if not self.kib:
            return
        with self._locked():
            self._adjust(self.kib)
            entries = [e for e in self._load() if not (e.get("pid") == self.pid and e.get("meminfo") == self.path)]
            self._save(entries)
        self.kib = 0
