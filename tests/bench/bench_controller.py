# SPDX-License-Identifier: Apache-2.0
"""Controller time of a rollout on 20 simulated devices, per connection setting (``make bench-controller``).

Brings up ``tests/fleet/bench.yml`` (20 native hosts), runs ``enable_speculation.yml`` once to decide every
device (with the fleet inventory's settings), then, for each connection setting, times what the controller
does on a fleet that is already decided:

* ``check``: ``enable_speculation.yml --check --diff`` (validation, facts, plan, the configuration diff; no
  device changes),
* ``rerun``: ``enable_speculation.yml`` again (facts, plan, the recorded decision reused, the live server
  reconciled, records and report written): the run an operator repeats,

with the settings:

* ``ssh-default``: Ansible's defaults (no pipelining; ``ssh_args`` ``-C -o ControlMaster=auto -o ControlPersist=60s``),
* ``ssh-tuned``: pipelining on and ``ControlPersist=600s``,
* ``mitogen``: Mitogen for Ansible (PyPI ``mitogen``), strategy ``mitogen_linear``, with pipelining.

Each run must end with rc 0 and every host's record unchanged; the table gives seconds and tasks per second.
Writes ``build/bench/controller.json`` and tears the fleet down.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import yaml

# bench_faults.py is next to this script, so on sys.path when it runs as a script.
from bench_faults import BIN, ENABLE, REPO, STATE, Fleet, log

OUT_DIR = os.path.join(REPO, "build", "bench")
WORK = os.path.join(OUT_DIR, "controller")
FLEET_FILE = os.path.join(REPO, "tests", "fleet", "bench.yml")
RUN_TIMEOUT = 5400
TASK_LINE = re.compile(r"^TASK \[", re.M)


# tests/fleet/bench.yml describes the 20 devices only (for `make bench-fleet-up`); a rollout needs what the
# demo gives its devices: the simulator's time scale, a served model per profile and the inventory groups.
MODELS = {
    "thor-t5000": "meta-llama/Llama-3.1-8B-Instruct",
    "thor-t4000": "nvidia/Llama-3.1-8B-Instruct-FP4",
    "agx-orin-64gb": "meta-llama/Llama-3.1-8B-Instruct",
    "agx-orin-32gb": "Qwen/Qwen3-8B",
    "agx-orin-industrial": "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
    "igx-orin": "Qwen/Qwen3-8B",
    "orin-nx-16gb": "Qwen/Qwen3-4B",
    "orin-nx-8gb": "Qwen/Qwen3-1.7B",
    "orin-nano-8gb": "Qwen/Qwen3-1.7B",
    "orin-nano-8gb-super": "Qwen/Qwen3-1.7B",
}
# Orin Nano and Orin NX 8GB: the role's default utilization (0.50) leaves no KV cache for a 1.7B BF16 model.
SMALL = ("orin-nx-8gb", "orin-nano-8gb", "orin-nano-8gb-super")
# Canaries run one at a time: two of them (a Thor and an AGX Orin) keep the deciding run short; the other groups
# start from their planned k.
CANARY_PROFILES = ("thor-t5000", "agx-orin-64gb")


def rollout_description(description):
    """The bench fleet with the demo's simulator settings, a model per profile, the canaries of CANARY_PROFILES."""
    out = dict(description)
    out["defaults"] = {"variant": "native", "sim": {"version": "0.20.0", "noise": 0.03, "time_scale": 0.1}, "vars": {"vllm_server_runtime": "native"}}
    hosts, canaries = [], {}
    for host in description["hosts"]:
        h = dict(host)
        h["vars"] = dict(h.get("vars") or {})
        h["vars"]["vllm_server_model"] = MODELS[h["profile"]]
        if h["profile"] in SMALL:
            h["vars"]["vllm_server_gpu_memory_utilization"] = 0.65
        if h["profile"] in CANARY_PROFILES:
            canaries.setdefault(h["profile"], h["name"])
        hosts.append(h)
    out["hosts"] = hosts
    out["groups"] = {"specdec_canary": sorted(canaries.values()), "specdec_fleet": [h["name"] for h in hosts]}
    return out


def mitogen_strategy_dir():
    out = subprocess.run(
        [os.path.join(BIN, "python"), "-c", "import ansible_mitogen, os; print(os.path.dirname(ansible_mitogen.__file__))"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        return None
    return os.path.join(out.stdout.strip(), "plugins", "strategy")


def settings():
    strategy = mitogen_strategy_dir()
    rows = {
        "ssh-default": ({"ansible_ssh_pipelining": False}, {"ANSIBLE_SSH_ARGS": "-C -o ControlMaster=auto -o ControlPersist=60s"}),
        "ssh-tuned": ({"ansible_ssh_pipelining": True}, {"ANSIBLE_SSH_ARGS": "-C -o ControlMaster=auto -o ControlPersist=600s"}),
    }
    if strategy:
        rows["mitogen"] = (
            {"ansible_ssh_pipelining": True},
            {"ANSIBLE_STRATEGY_PLUGINS": strategy, "ANSIBLE_STRATEGY": "mitogen_linear", "ANSIBLE_SSH_ARGS": "-C -o ControlMaster=auto -o ControlPersist=600s"},
        )
    return rows


def records(fleet):
    out = {}
    for name in sorted(fleet.hosts):
        p = fleet.ssh(name, "cat %s" % STATE)
        try:
            doc = json.loads(p.stdout) if p.returncode == 0 else {}
        except ValueError:
            doc = {}
        out[name] = (doc.get("decision"), doc.get("key"), doc.get("decided_at"))
    return out


def run_playbook(label, extra, env, args=()):
    """One ansible-playbook run with extra command-line arguments (e.g. --check --diff)."""
    log_path = os.path.join(WORK, "%s.log" % label)
    full_env = dict(os.environ)
    full_env.setdefault("HOME", os.path.join(REPO, ".cache", "home"))
    full_env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(REPO, ".cache", "collections"))
    full_env.update({"ANSIBLE_DEPRECATION_WARNINGS": "false", "ANSIBLE_HOST_KEY_CHECKING": "false", "ANSIBLE_FORKS": "10"})
    full_env.update(env or {})
    evars = {"speculative_decoding_report_dir": os.path.join(WORK, "report-bench")}
    evars.update(extra or {})
    cmd = [os.path.join(BIN, "ansible-playbook"), "-i", os.path.join(WORK, "hosts.yml"), ENABLE, "-e", json.dumps(evars), *args]
    started = time.monotonic()
    with open(log_path, "w") as out:
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env, timeout=RUN_TIMEOUT, check=False)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    duration = round(time.monotonic() - started, 1)
    with open(log_path, errors="replace") as f:
        text = f.read()
    tasks = len(TASK_LINE.findall(text))
    log("  %s: rc=%s in %s s (%d tasks)" % (label, rc, duration, tasks))
    return {"rc": rc, "seconds": duration, "tasks": tasks, "log": os.path.relpath(log_path, REPO)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--only", nargs="*", help="connection settings to time (default: all)")
    parser.add_argument("--keep", action="store_true", help="leave the fleet up")
    args = parser.parse_args(argv)
    os.makedirs(WORK, exist_ok=True)
    fleet = Fleet(WORK)
    with open(FLEET_FILE) as f:
        description = rollout_description(yaml.safe_load(f))
    result = {"fleet": os.path.relpath(FLEET_FILE, REPO), "hosts": len(description["hosts"]), "rows": []}
    started = time.monotonic()
    try:
        log("fleet up (%d hosts)" % len(description["hosts"]))
        fleet.up(description)
        first = run_playbook("first", {}, {})
        result["first_run"] = first
        before = records(fleet)
        result["decisions"] = {}
        for decision, _key, _at in before.values():
            result["decisions"][str(decision)] = result["decisions"].get(str(decision), 0) + 1
        for name, (extra, env) in settings().items():
            if args.only and name not in args.only:
                continue
            row = {"setting": name}
            row["check"] = run_playbook("%s-check" % name, extra, env, ("--check", "--diff"))
            row["rerun"] = run_playbook("%s-rerun" % name, extra, env)
            after = records(fleet)
            row["records_unchanged"] = after == before
            result["rows"].append(row)
    finally:
        if not args.keep:
            log("fleet down")
            Fleet.down()
    result["seconds"] = round(time.monotonic() - started, 1)
    with open(os.path.join(OUT_DIR, "controller.json"), "w") as f:
        json.dump(result, f, indent=1)
    print()
    print(
        "first run (decides every device, ssh with the fleet inventory's pipelining): rc=%s in %s s, %d tasks"
        % (result["first_run"]["rc"], result["first_run"]["seconds"], result["first_run"]["tasks"])
    )
    print("decisions: %s" % ", ".join("%s %d" % kv for kv in sorted(result["decisions"].items())))
    print("| setting | check --diff: s (rc) | re-run: s (rc) | tasks (re-run) | records unchanged |")
    print("|---|---|---|---|---|")
    for row in result["rows"]:
        print(
            "| %s | %s (%s) | %s (%s) | %d | %s |"
            % (
                row["setting"],
                row["check"]["seconds"],
                row["check"]["rc"],
                row["rerun"]["seconds"],
                row["rerun"]["rc"],
                row["rerun"]["tasks"],
                row["records_unchanged"],
            )
        )
    ok = result["first_run"]["rc"] == 0 and all(r["check"]["rc"] == 0 and r["rerun"]["rc"] == 0 and r["records_unchanged"] for r in result["rows"])
    print("(%s; %.0f s; build/bench/controller.json)" % ("all runs ok" if ok else "NOT all runs ok", result["seconds"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
