# SPDX-License-Identifier: Apache-2.0
"""Virtual time against the served timing: the same calibration rows, measured twice.

``python3 -m vllm_sim.agreement [--time-scale 0.1] [--rows N]`` runs each calibration row
(``calibration.ROWS``) once in virtual time (``simulate_run``) and once through a real simulator
server on 127.0.0.1, measured by the role's own benchmark client (``plugins/module_utils/_bench/``,
the same prompts, streaming chat requests, ``ignore_eos``, fixed ``max_tokens``). It prints the
speculative/baseline output-throughput ratio of both side by side and exits 1 when they differ by
more than ``--limit`` points (default 2) or a server reports itself out of spec (lag share above
its ``lag_limit``).

Needs the collection importable (``ansible_collections.jetson_llm.speculative``): run it through
``make sim-calibration``, which puts the project's collection tree on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from . import calibration, zoo
from .engine import simulate_run

# Fewer and shorter requests than the published-figure table: enough steps for a stable ratio at
# noise 0, short enough for make test. Both sides use the same counts.
OUTPUT_LEN = 128
PROMPTS_C1 = 6
PROMPTS_PER_CLIENT = 4
SEED = 0


def _bench_modules():
    from ansible_collections.jetson_llm.speculative.plugins.module_utils._bench import client, prompts, runner

    return client, runner, prompts


def num_prompts(concurrency: int) -> int:
    return PROMPTS_C1 if concurrency == 1 else PROMPTS_PER_CLIENT * concurrency


def virtual_ratio(device, target, head, k, concurrency) -> tuple:
    """(baseline tok/s, speculative tok/s) in virtual time with the role's prompts and request shape."""
    _client, _runner, prompts = _bench_modules()
    n = num_prompts(concurrency)
    chat = [{"messages": p["messages"]} for p in prompts.select(n, SEED)]
    settings = {"device": calibration.DEVICES[device], "noise": 0.0, "seed": 11}
    out = []
    for spec in (None, {"method": "eagle3", "model": head, "num_speculative_tokens": k}):
        res = simulate_run(settings, target, spec, chat, concurrency, OUTPUT_LEN, seed=11, num_prompts=n)
        out.append(res["output_throughput"])
    return tuple(out)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _metrics(port) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode("utf-8")
    finally:
        conn.close()
    values = {}
    for line in text.splitlines():
        if line.startswith("vllm_sim:"):
            name, _sep, value = line.partition(" ")
            values[name] = float(value)
    return values


class _Served:
    """One simulator server on 127.0.0.1 (a subprocess, stopped by its PID)."""

    def __init__(self, workdir, hf_home, device, target, head, k, time_scale):
        self.port = _free_port()
        state = os.path.join(workdir, f"state-{self.port}")
        settings_path = os.path.join(workdir, f"settings-{self.port}.json")
        with open(settings_path, "w", encoding="utf-8") as handle:
            json.dump(
                {
                    "device": calibration.DEVICES[device],
                    "noise": 0.0,
                    "seed": 11,
                    "time_scale": time_scale,
                    "init_s": 0.0,
                    "load_gbps": 1000.0,
                    "state_dir": state,
                },
                handle,
            )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": workdir,
            "HF_HOME": hf_home,
            "HF_HUB_OFFLINE": "1",
            "VLLM_SIM_SETTINGS": settings_path,
        }
        args = [sys.executable, "-m", "vllm_sim", "serve", target, "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["--max-model-len", "4096", "--gpu-memory-utilization", "0.8"]
        if head:
            args += ["--speculative-config", json.dumps({"method": "eagle3", "model": head, "num_speculative_tokens": k})]
        self.log_path = os.path.join(workdir, f"server-{self.port}.log")
        self.log = open(self.log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen(args, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=120.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                with open(self.log_path, encoding="utf-8") as handle:
                    raise RuntimeError(f"simulator exited with {self.proc.returncode}:\n{handle.read()[-3000:]}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            finally:
                conn.close()
            time.sleep(0.05)
        raise RuntimeError(f"simulator on port {self.port} not ready after {timeout}s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()


def served_throughput(workdir, hf_home, device, target, head, k, concurrency, time_scale) -> tuple:
    """(modelled tok/s, lag share) of one arm measured through the server with the role's client."""
    client, runner, _prompts = _bench_modules()
    served = _Served(workdir, hf_home, device, target, head, k, time_scale)
    try:
        served.wait_ready()
        server = client.Server(f"http://127.0.0.1:{served.port}")
        run = runner.run_level(
            server,
            target,
            concurrency,
            num_prompts(concurrency),
            num_warmups=0,
            output_len=OUTPUT_LEN,
            seed=SEED,
            timeout=600.0,
            metrics=False,
        )
        lag = _metrics(served.port)
    finally:
        served.stop()
    # The client measures wall seconds; the model's seconds are wall / time_scale.
    return run["output_throughput"] * time_scale, lag.get("vllm_sim:lag_share", 0.0)


def table(time_scale=0.1, rows=None) -> list:
    out = []
    with tempfile.TemporaryDirectory(prefix="vllm-sim-agreement-") as workdir:
        hf_home = os.path.join(workdir, "hf")
        zoo.install(os.path.join(hf_home, "hub"))
        for label, device, target, head, k, conc, *_rest in calibration.ROWS[:rows]:
            vb, vs = virtual_ratio(device, target, head, k, conc)
            sb, lag_b = served_throughput(workdir, hf_home, device, target, None, k, conc, time_scale)
            ss, lag_s = served_throughput(workdir, hf_home, device, target, head, k, conc, time_scale)
            out.append(
                {
                    "label": label,
                    "concurrency": conc,
                    "virtual": (vb, vs, vs / vb),
                    "served": (sb, ss, ss / sb),
                    "lag_share": max(lag_b, lag_s),
                }
            )
    return out


def markdown(rows, time_scale) -> str:
    lines = [
        f"| Setup | Virtual tok/s (ratio) | Server at time_scale {time_scale:g} tok/s (ratio) | Difference | Max lag share |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        vb, vs, vr = row["virtual"]
        sb, ss, sr = row["served"]
        lines.append(
            f"| {row['label']} | {vb:.1f} -> {vs:.1f} ({vr:.3f}x) | {sb:.1f} -> {ss:.1f} ({sr:.3f}x) | "
            f"{100 * (sr - vr):+.1f} pt | {100 * row['lag_share']:.2f} % |"
        )
    return "\n".join(lines)


def failures(rows, limit_points, lag_limit=0.02) -> list:
    bad = []
    for row in rows:
        diff = 100 * (row["served"][2] - row["virtual"][2])
        if abs(diff) > limit_points:
            bad.append(f"{row['label']}: served ratio differs from virtual time by {diff:+.1f} points (limit {limit_points:g})")
        if row["lag_share"] > lag_limit:
            bad.append(f"{row['label']}: server out of spec (lag share {100 * row['lag_share']:.2f} %)")
    return bad


def load(hosts: int, time_scale: float, row: int = 0) -> list:
    """Size a fleet for this machine: ``hosts`` servers of one calibration row benchmarking at once
    (each its baseline arm, the arm with the most engine steps). Returns per host
    ``(served tok/s / virtual tok/s, lag share)``."""
    import concurrent.futures

    _label, device, target, _head, k, conc, *_rest = calibration.ROWS[row]
    virtual = virtual_ratio(device, target, _head, k, conc)[0]
    with tempfile.TemporaryDirectory(prefix="vllm-sim-load-") as workdir:
        hf_home = os.path.join(workdir, "hf")
        zoo.install(os.path.join(hf_home, "hub"))
        with concurrent.futures.ThreadPoolExecutor(hosts) as pool:
            futures = [pool.submit(served_throughput, workdir, hf_home, device, target, None, k, conc, time_scale) for _unused in range(hosts)]
            return [(tok / virtual, lag) for tok, lag in (f.result() for f in futures)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m vllm_sim.agreement", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--limit", type=float, default=2.0, help="largest allowed ratio difference in points")
    parser.add_argument("--rows", type=int, default=None, help="only the first N calibration rows")
    parser.add_argument("--load", type=int, default=0, metavar="HOSTS", help="instead: HOSTS servers of one row benchmarking at once (sizing)")
    parser.add_argument("--row", type=int, default=0, help="the calibration row of --load")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.load:
        hosts = load(args.load, args.time_scale, args.row)
        for i, (rel, lag) in enumerate(hosts):
            print(f"host {i}: served/virtual throughput {rel:.3f}, lag share {100 * lag:.2f} %")
        worst = max(lag for _rel, lag in hosts)
        print(f"{args.load} hosts at time_scale {args.time_scale:g}: worst lag share {100 * worst:.2f} % ({time.monotonic() - started:.0f} s)")
        return 1 if worst > 0.02 else 0
    rows = table(args.time_scale, args.rows)
    print(markdown(rows, args.time_scale))
    bad = failures(rows, args.limit)
    print(f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s")
    for line in bad:
        print("FAIL: " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
