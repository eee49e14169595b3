# SPDX-License-Identifier: Apache-2.0
"""The fault matrix (docs/devel/faults.md): playbooks/enable_speculation.yml against the simulated fleet
under one fault per row, measured on the live servers.

For every row: a fresh fleet (tests/fleet/faults.yml, the hosts the row needs), every device brought to a
serving baseline (playbooks/disable_speculation.yml), the faulted run, the fault cleared, then two plain
re-runs. Columns:

- not_serving_after: devices without a serving vLLM (/health 200, the model in /v1/models, an active unit
  with a main process) at the end of the faulted run, after the readiness grace a restore needs;
- configs_lost: after the plain re-run, devices whose live server does not serve what their record says
  (speculation loaded, i.e. vllm:spec_decode_* in /metrics, iff the recorded decision is keep) or whose
  record or known-good configuration is missing or unreadable;
- rerun_converged: the plain re-run exits 0 and a second one changes nothing on any device;
- message: what the faulted run said about the faulted device, and whether it names the device and the
  cause.

Run as root, one fleet at a time: ``flock /tmp/jl-heavy.lock make bench-faults FAULTS="crash hang"``.
Rows are merged into build/bench/faults.json by fault name, so rows can be run one at a time.
"""

import argparse
import copy
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml
from jlfleet import ops

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FLEET_DIR = os.path.join(REPO, "tests", "fleet")
BIN = os.path.dirname(sys.executable)
FLEET_PY = [os.path.join(BIN, "jlfleet")]
BASE = os.path.join(FLEET_DIR, "faults.yml")
OUT_DIR = os.path.join(REPO, "build", "bench")
OUT = os.path.join(OUT_DIR, "faults.json")
ENABLE = os.path.join(REPO, "playbooks", "enable_speculation.yml")
DISABLE = os.path.join(REPO, "playbooks", "disable_speculation.yml")
VERIFY = os.path.join(REPO, "playbooks", "verify_speculation.yml")
STATE = "/var/lib/jetson_llm/speculative/state.json"
KNOWN_GOOD = "/var/lib/jetson_llm/vllm/known-good"
SERVE_YAML = "/etc/vllm/serve.yaml"
FAULTED = "f-orin-1"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
DRAFTS = re.compile(r"^vllm:spec_decode_num_drafts(?:_total)?(?:\{[^}]*\})?\s+([0-9.eE+]+)", re.M)
RUN_TIMEOUT = 900  # bound of one playbook run, seconds
GRACE_S = 90  # readiness grace a restore needs before a device counts as not serving


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


# ------------------------------------------------------------------ fleet and live servers


class Fleet:
    def __init__(self, work):
        self.work = work
        self.state = None
        self.inventory = os.path.join(work, "hosts.yml")
        self.hosts = {}

    def up(self, description):
        path = os.path.join(self.work, "fleet.yml")
        with open(path, "w") as f:
            yaml.safe_dump(description, f, sort_keys=False)
        proc = subprocess.run([*FLEET_PY, "up", path, "--inventory", self.inventory], capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise RuntimeError("fleet up failed (%d): %s%s" % (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:]))
        with open(ops.STATE_JSON) as f:
            self.state = json.load(f)
        self.hosts = {h["name"]: h for h in self.state["hosts"]}

    @staticmethod
    def down():
        subprocess.run([*FLEET_PY, "down"], capture_output=True, text=True, timeout=300, check=False)

    def ssh(self, name, command, timeout=30):
        try:
            return subprocess.run(
                ["ssh", "-o", "ConnectTimeout=5", "-F", self.state["ssh_config"], name, command],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(command, 255, "", "ssh timed out after %d s" % timeout)

    def http(self, name, path, timeout=5):
        url = "http://%s:8000%s" % (self.hosts[name]["address"], path)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - fleet address, http only
                return resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, ""
        except (urllib.error.URLError, OSError):
            return None, ""

    def settings_path(self, name):
        return os.path.join(os.path.dirname(ops.STATE_JSON), "hosts", name, "settings.json")

    def edit_settings(self, name, change):
        """Change a host's simulator settings in place (the file is bind-mounted; read at each start)."""
        path = self.settings_path(name)
        with open(path) as f:
            settings = json.load(f)
        change(settings)
        with open(path, "r+") as f:  # same inode: the bind mount sees it
            f.seek(0)
            f.truncate()
            f.write(json.dumps(settings, indent=2, sort_keys=True) + "\n")

    def live(self, name):
        """What the device serves right now, seen from outside."""
        unit = self.ssh(name, "systemctl show -p ActiveState -p MainPID vllm.service").stdout
        props = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line)
        health, _unused = self.http(name, "/health")
        models_status, models = self.http(name, "/v1/models")
        _unused, metrics = self.http(name, "/metrics")
        model = self.hosts[name]["vars"].get("vllm_server_model", "")
        return {
            "active": props.get("ActiveState"),
            "main_pid": int(props.get("MainPID") or 0),
            "health": health,
            "model_served": models_status == 200 and model in models,
            "spec_loaded": "vllm:spec_decode" in metrics,
        }

    def serving(self, name, grace_s):
        end = time.monotonic() + grace_s
        while True:
            live = self.live(name)
            if live["health"] == 200 and live["model_served"] and live["active"] == "active" and live["main_pid"] > 0:
                return True, live
            if time.monotonic() > end:
                return False, live
            time.sleep(3)

    def record(self, name):
        """The device's record and known-good configuration: (decision or None, problem or None)."""
        p = self.ssh(name, "cat %s" % STATE)
        if p.returncode != 0:
            return None, "state.json missing"
        try:
            decision = json.loads(p.stdout).get("decision")
        except ValueError:
            return None, "state.json unreadable"
        kg = self.ssh(name, "ls -A %s" % KNOWN_GOOD)
        if kg.returncode != 0 or not kg.stdout.strip():
            return decision, "known-good missing"
        return decision, None


# ------------------------------------------------------------------ playbook runs


class Run:
    """One ansible-playbook run in its own process group, output to a file, bounded by a timeout."""

    def __init__(self, work, label, playbook, extra=None, prefix=(), env_extra=None, report=None):
        self.label = label
        self.log_path = os.path.join(work, "%s.log" % label)
        # runs that a user would make one after another share a report directory (report=...)
        self.report_dir = os.path.join(work, "report-%s" % (report or label))
        env = dict(os.environ)
        env.setdefault("HOME", os.path.join(REPO, ".cache", "home"))
        env.setdefault("ANSIBLE_COLLECTIONS_PATH", os.path.join(REPO, ".cache", "collections"))
        env["ANSIBLE_DEPRECATION_WARNINGS"] = "false"
        env["ANSIBLE_HOST_KEY_CHECKING"] = "false"
        env["ANSIBLE_FORKS"] = "10"
        env.update(env_extra or {})
        evars = {"speculative_decoding_report_dir": self.report_dir}
        evars.update(extra or {})
        self.cmd = [*prefix, os.path.join(BIN, "ansible-playbook"), "-i", os.path.join(work, "hosts.yml"), playbook, "-e", json.dumps(evars)]
        self.started = time.monotonic()
        self.started_wall = time.time()
        self._out = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self._out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.rc = None
        self.duration = None

    def running(self):
        return self.proc.poll() is None

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self, timeout=RUN_TIMEOUT):
        try:
            self.rc = self.proc.wait(timeout=max(1, timeout - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
            self.rc = "timeout"
        self.duration = round(time.monotonic() - self.started, 1)
        self._out.close()
        return self.rc

    @property
    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def recap(self):
        keys = ("ok", "changed", "unreachable", "failed")
        return {m.group(1): dict(zip(keys, (int(g) for g in m.groups()[1:]))) for m in RECAP.finditer(self.output)}


def run(work, label, playbook=ENABLE, timeout=RUN_TIMEOUT, **kw):
    r = Run(work, label, playbook, **kw)
    r.wait(timeout)
    log("  %s: rc=%s in %s s" % (label, r.rc, r.duration))
    return r


def message_for(run_, host):
    """The run's message about the host: its report entry, else its failure lines in the output."""
    latest = os.path.join(run_.report_dir, "latest.json")
    parts = []
    if os.path.exists(latest) and os.path.getmtime(latest) >= run_.started_wall:
        try:
            with open(latest) as f:
                for h in json.load(f).get("hosts", []):
                    if h.get("host") == host:
                        parts.append("report: %s: %s (%s)" % (host, h.get("outcome"), h.get("reason") or h.get("label")))
                        if h.get("ladder"):
                            # what the console table prints under the host: the configurations that did not start
                            parts.append("did not start (stepped down): %s" % "; ".join(str(x) for x in h["ladder"]))
        except ValueError:
            parts.append("report unreadable")
    out = run_.output
    for line in out.splitlines():
        if "RETRYING" in line:
            continue
        if ("[%s]" % host in line and ("fatal" in line or "FAILED" in line or "UNREACHABLE" in line)) or (
            host in line and re.search(r"revert|restor|stopped|busy|failed|reconcil", line, re.I) and "TASK" not in line
        ):
            parts.append(line.strip()[:400])
    return " | ".join(parts[:4])[:1200]


# ------------------------------------------------------------------ triggers


def wait_spec_benchmarking(fleet, host, timeout_s=600):
    """Until the host serves the speculative arm and has finished drafts (the arm is benchmarking)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        _status, metrics = fleet.http(host, "/metrics", timeout=3)
        m = DRAFTS.search(metrics)
        if m and float(m.group(1)) > 0:
            return True
        time.sleep(1)
    return False


def veth_of(fleet, host):
    return fleet.hosts[host]["veth"]


# ------------------------------------------------------------------ rows

ROWS = {}


def row(name, hosts, overrides=None, grace=GRACE_S, cause=r".", note=""):
    def deco(fn):
        ROWS[name] = {"fn": fn, "hosts": hosts, "overrides": overrides or {}, "grace": grace, "cause": cause, "note": note}
        return fn

    return deco


@row(
    "oom",
    ["f-orin-1", "f-orin-2"],
    {"f-orin-1": {"mem_available_kib": 36700160, "sim": {"version": "0.11.0", "account_memory": True},
                  "vars": {"vllm_server_gpu_memory_utilization": 0.4, "speculative_decoding_gpu_memory_utilization": 0.45}}},
    cause=r"memory|oom",
)  # fmt: skip
def row_oom(fleet, work, ctx):
    return run(work, "faulted")


@row("crash", ["f-orin-1", "f-orin-2"], cause=r"crash|exit|died|killed|signal|stopped")
def row_crash(fleet, work, ctx):
    r = Run(work, "faulted", ENABLE)
    if wait_spec_benchmarking(fleet, FAULTED):
        pid = fleet.live(FAULTED)["main_pid"]
        fleet.ssh(FAULTED, "kill -9 %d" % pid)
        ctx["detail"]["killed_pid"] = pid
    else:
        ctx["detail"]["trigger"] = "speculative arm never benchmarked"
    r.wait()
    return r


@row("hang", ["f-orin-1", "f-orin-2"], cause=r"answer|hang|respond|timed? ?out|stopped")
def row_hang(fleet, work, ctx):
    r = Run(work, "faulted", ENABLE)
    if wait_spec_benchmarking(fleet, FAULTED):
        pid = fleet.live(FAULTED)["main_pid"]
        fleet.ssh(FAULTED, "kill -STOP %d" % pid)
        stopped = time.monotonic()
        ctx["detail"]["stopped_pid"] = pid
        ctx["detail"]["stopped_at_s"] = round(stopped - r.started, 1)
        # how long until the run says so: the first line of its output that names the device and the hang
        said = re.compile(r"%s.*stopped answering|stopped answering.*%s" % (FAULTED, FAULTED))
        while r.running() and time.monotonic() - stopped < 600:
            if said.search(r.output):
                ctx["detail"]["reported_after_s"] = round(time.monotonic() - stopped, 1)
                break
            time.sleep(0.5)
    else:
        ctx["detail"]["trigger"] = "speculative arm never benchmarked"
    r.wait()
    return r


@row("slow-start", ["f-orin-1", "f-orin-2"], grace=240, cause=r"ready|readiness|timed? ?out|start")
def row_slow_start(fleet, work, ctx):
    # every start after the baseline is up takes 150 s more (modelled 1500 s at time_scale 0.1);
    # the readiness timeout is 45 s
    fleet.edit_settings(FAULTED, lambda s: s.setdefault("faults", {}).update({"slow_start_s": 1500}))
    ctx["extra"] = {"vllm_server_ready_timeout": 45}
    r = run(work, "faulted", extra=ctx["extra"])
    ctx["clear"] = lambda: fleet.edit_settings(FAULTED, lambda s: s["faults"].pop("slow_start_s", None))
    return r


@row("unreachable", ["f-orin-1", "f-orin-2"], cause=r"unreachable|ssh|connect")
def row_unreachable(fleet, work, ctx):
    r = Run(work, "faulted", ENABLE)
    veth = veth_of(fleet, FAULTED)
    if wait_spec_benchmarking(fleet, FAULTED):
        subprocess.run(["ip", "link", "set", veth, "down"], check=False)
        ctx["detail"]["link_down_at_s"] = round(time.monotonic() - r.started, 1)
        try:
            r.wait()
        finally:
            subprocess.run(["ip", "link", "set", veth, "up"], check=False)
    else:
        ctx["detail"]["trigger"] = "speculative arm never benchmarked"
        r.wait()
    return r


@row("controller-kill", ["f-orin-1", "f-orin-2"], cause=r".")
def row_controller_kill(fleet, work, ctx):
    rng = random.Random(int(os.environ.get("BENCH_FAULTS_SEED", "11")))
    kills = []
    for i in range(3):
        r = Run(work, "killed-%d" % i, ENABLE)
        at = rng.uniform(10, 90)
        while r.running() and time.monotonic() - r.started < at:
            time.sleep(0.5)
        alive = r.running()
        r.kill()
        r.wait(60)
        kills.append({"at_s": round(at, 1), "was_running": alive})
    ctx["detail"]["kills"] = kills
    return run(work, "faulted")  # the run after the kills: its message is the row's


@row("concurrent", ["f-orin-1", "f-orin-2"], cause=r"busy|lock|another")
def row_concurrent(fleet, work, ctx):
    a = Run(work, "faulted", ENABLE)
    b = Run(work, "concurrent", ENABLE)
    a.wait()
    b.wait()
    ctx["detail"]["rc"] = [a.rc, b.rc]
    ctx["detail"]["second_message"] = message_for(b, FAULTED)
    return a


@row("disk-full", ["f-orin-1", "f-orin-2"], cause=r"space|disk|full|write")
def row_disk_full(fleet, work, ctx):
    # /etc/vllm on f-orin-1 is a 4 MiB tmpfs (tests/fleet/faults.yml); fill it, never the machine's disk
    mounted = fleet.ssh(FAULTED, "findmnt -no FSTYPE,SIZE /etc/vllm").stdout.strip()
    ctx["detail"]["mount"] = mounted
    if not mounted.startswith("tmpfs"):
        raise RuntimeError("/etc/vllm on %s is not a tmpfs (%r): refusing to fill it" % (FAULTED, mounted))
    fleet.ssh(FAULTED, "dd if=/dev/zero of=/etc/vllm/.fill bs=64k 2>/dev/null; df -k /etc/vllm | tail -1")
    r = run(work, "faulted")
    ctx["clear"] = lambda: fleet.ssh(FAULTED, "rm -f /etc/vllm/.fill")
    return r


@row("corrupt-state", ["f-orin-1", "f-orin-2"], cause=r"state|corrupt|json")
def row_corrupt_state(fleet, work, ctx):
    fleet.ssh(FAULTED, "mkdir -p %s && printf '{\"decision\": kee' > %s" % (os.path.dirname(STATE), STATE))
    return run(work, "faulted")


@row("clock-skew", ["f-orin-1", "f-orin-2"], cause=r"keep|revert")
def row_clock_skew(fleet, work, ctx):
    """The devices' clocks 3 h behind the controller's for the faulted run, 3 h ahead for the re-runs.

    The hosts share the kernel's clock, so the skew is put on the controller (this machine's clock is
    never touched): ansible-playbook and everything it starts, ssh included, run under libfaketime.
    Monotonic time is faked along with the wall clock (libfaketime's default); with
    FAKETIME_DONT_FAKE_MONOTONIC=1, libfaketime 0.9.10 shifts the deadline of clock_nanosleep anyway and
    Python's time.sleep fails with EINVAL. Handled when the run decides the device as without the skew
    (keep or revert, recorded and served), the report's restart windows are timed on the device's clock
    (none negative or hours long) and the re-runs under the opposite skew change nothing.
    """
    if not shutil.which("faketime"):
        raise RuntimeError("faketime is not installed (apt-get install faketime)")
    ahead, behind = ("faketime", "-f", "+3h"), ("faketime", "-f", "-3h")
    probe = [sys.executable, "-c", "import time; time.sleep(0.01); print(time.time())"]
    skews = []
    for prefix in (ahead, behind):
        seen = subprocess.run([*prefix, *probe], capture_output=True, text=True, check=False)
        skews.append(round(float(seen.stdout) - time.time()) if seen.returncode == 0 else seen.stderr.strip()[-200:])
    ctx["detail"]["controller_clock_offset_s"] = {"faulted run": skews[0], "re-runs": skews[1]}
    if not all(isinstance(x, int) and abs(abs(x) - 10800) < 60 for x in skews):
        raise RuntimeError("faketime does not shift the controller's clock by 3 h: %r" % (skews,))
    ctx["rerun_kw"] = {"prefix": behind}
    r = run(work, "faulted", prefix=ahead)
    decision, problem = fleet.record(FAULTED)
    ctx["detail"]["decision"] = decision
    # the report's restart windows: both ends on the device's clock, so none may run backwards or last hours
    restarts = []
    try:
        with open(os.path.join(r.report_dir, "latest.json")) as f:
            for h in json.load(f).get("hosts", []):
                restarts += [end - start for kind, start, end in h.get("intervals") or [] if kind == "restart"]
    except (OSError, ValueError) as exc:
        ctx["detail"]["report"] = str(exc)
    bad = [round(d, 1) for d in restarts if not 0 < d < RUN_TIMEOUT]
    ctx["detail"]["restart_windows"] = {"count": len(restarts), "seconds": round(sum(restarts), 1), "out_of_range": bad}
    ctx["handled"] = r.rc == 0 and problem is None and decision in ("keep", "revert") and bool(restarts) and not bad
    return r


@row("missing-image", ["f-orin-1", "f-docker"], cause=r"image|manifest|not found|pull|v0\.99")
def row_missing_image(fleet, work, ctx):
    ctx["faulted"] = "f-docker"
    return run(work, "faulted", extra={"vllm_server_image": "vllm/vllm-openai:v0.99.9-missing"})


@row(
    "wrong-answers",
    ["f-orin-1", "f-orin-2"],
    {"f-orin-1": {"sim": {"faults": {"wrong_answers": True}}}},
    cause=r"outputs differ",
    note="the faulted device must end reverted (output proof)",
)
def row_wrong_answers(fleet, work, ctx):
    r = run(work, "faulted")
    # handled only when the build that serves wrong text is not kept (the output proof reverts it)
    decision = fleet.record(FAULTED)[0]
    ctx["detail"]["decision"] = decision
    ctx["handled"] = decision == "revert"
    return r


@row("acceptance-collapse", ["f-orin-1", "f-orin-2"], cause=r"accept|gain|regress", note="needs playbooks/verify_speculation.yml")
def row_acceptance_collapse(fleet, work, ctx):
    first = run(work, "keep")
    ctx["detail"]["first"] = {"rc": first.rc, "duration_s": first.duration, "decision": fleet.record(FAULTED)[0]}
    fleet.edit_settings(FAULTED, lambda s: s.update({"acceptance_scale": 0.05}))
    fleet.ssh(FAULTED, "systemctl restart vllm.service", timeout=60)
    fleet.serving(FAULTED, GRACE_S)
    r = run(work, "faulted")
    if os.path.exists(VERIFY):
        v = run(work, "verify", playbook=VERIFY)
        ctx["detail"]["verify_rc"] = v.rc
        ctx["message_run"] = v
        ctx["handled"] = True
    else:
        ctx["handled"] = False
    return r


def description_for(spec):
    with open(BASE) as f:
        base = yaml.safe_load(f)
    hosts = []
    for original in base["hosts"]:
        if original["name"] not in spec["hosts"]:
            continue
        h = copy.deepcopy(original)
        o = spec["overrides"].get(h["name"], {})
        for key in ("sim", "vars"):
            if key in o:
                merged = dict(h.get(key) or {})
                merged.update(o[key])
                h[key] = merged
        for key, value in o.items():
            if key not in ("sim", "vars"):
                h[key] = value
        hosts.append(h)
    base["hosts"] = hosts
    base["groups"] = {g: [n for n in members if n in spec["hosts"]] for g, members in base["groups"].items()}
    return base


def run_row(name, work_root):
    spec = ROWS[name]
    work = os.path.join(work_root, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fleet = Fleet(work)
    ctx = {"detail": {}, "faulted": FAULTED, "extra": {}}
    result = {"fault": name, "hosts": spec["hosts"], "faulted_host": None, "not_serving_after": None, "configs_lost": None,
              "rerun_converged": False, "message": "", "message_names_device": False, "message_names_cause": False}  # fmt: skip
    t0 = time.monotonic()
    try:
        log("%s: fleet up (%s)" % (name, ", ".join(spec["hosts"])))
        fleet.down()
        fleet.up(description_for(spec))
        setup = run(work, "setup", playbook=DISABLE, timeout=600)
        if setup.rc != 0:
            raise RuntimeError("setup (disable_speculation.yml) failed rc=%s: %s" % (setup.rc, setup.output[-1500:]))
        faulted_run = spec["fn"](fleet, work, ctx)
        host = ctx["faulted"]
        result["faulted_host"] = host
        result["faulted_rc"] = faulted_run.rc
        result["faulted_duration_s"] = faulted_run.duration
        msg_run = ctx.get("message_run", faulted_run)
        result["message"] = message_for(msg_run, host)
        result["message_names_device"] = host in result["message"]
        result["message_names_cause"] = bool(re.search(spec["cause"], result["message"].replace(host, ""), re.I))
        # live servers at the end of the faulted run (with the fault still in place)
        not_serving = {}
        for h in spec["hosts"]:
            ok, live = fleet.serving(h, spec["grace"])
            if not ok:
                not_serving[h] = live
        result["not_serving_after"] = len(not_serving)
        result["not_serving_detail"] = not_serving
        # the fault cleared, then plain re-runs (the link is already up again)
        if "clear" in ctx:
            ctx["clear"]()
        # as a user re-runs: the same report directory, so that the second run's fetch of an unchanged
        # record changes nothing on the controller either
        rerun_kw = ctx.get("rerun_kw", {})
        rerun1 = run(work, "rerun-1", timeout=RUN_TIMEOUT, report="rerun", **rerun_kw)
        rerun2 = run(work, "rerun-2", timeout=RUN_TIMEOUT, report="rerun", **rerun_kw)
        devices = set(spec["hosts"])
        changed = {h: c["changed"] for h, c in rerun2.recap().items() if h in devices and c["changed"]}
        result["rerun_converged"] = rerun1.rc == 0 and rerun2.rc == 0 and not changed
        result["rerun"] = {"rc": [rerun1.rc, rerun2.rc], "duration_s": [rerun1.duration, rerun2.duration], "second_changed": changed}
        lost = {}
        for h in spec["hosts"]:
            ok, live = fleet.serving(h, spec["grace"])
            decision, problem = fleet.record(h)
            if problem:
                lost[h] = problem
            elif not ok:
                lost[h] = "not serving after the re-run (%s)" % live
            elif live["spec_loaded"] != (decision == "keep"):
                lost[h] = "record says %s, live server %s speculation" % (decision, "loads" if live["spec_loaded"] else "does not load")
        result["configs_lost"] = len(lost)
        result["configs_lost_detail"] = lost
        if "handled" in ctx:
            result["handled"] = ctx["handled"]
    except Exception as exc:
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
        log("%s: ERROR %s" % (name, result["error"]))
    finally:
        fleet.down()
        result["detail"] = ctx["detail"]
        result["duration_s"] = round(time.monotonic() - t0, 1)
        result["logs"] = work
    result["clean"] = (
        "error" not in result
        and result["not_serving_after"] == 0
        and result["configs_lost"] == 0
        and result["rerun_converged"]
        and result["message_names_device"]
        and result["message_names_cause"]
        and result.get("handled", True)
    )
    if spec["note"] and not result.get("handled", True):
        result["note"] = spec["note"]
    log("%s: %s" % (name, json.dumps({k: result.get(k) for k in ("not_serving_after", "configs_lost", "rerun_converged", "clean", "error")})))
    return result


def table(rows):
    lines = ["%-20s %-9s %-8s %-6s %-9s %-5s  %s" % ("fault", "serving-", "lost", "conv", "msg ok", "clean", "message")]
    for r in rows:
        msg_ok = "%s/%s" % ("dev" if r.get("message_names_device") else "-", "cause" if r.get("message_names_cause") else "-")
        lines.append(
            "%-20s %-9s %-8s %-6s %-9s %-5s  %s"
            % (r["fault"], r["not_serving_after"], r["configs_lost"], r["rerun_converged"], msg_ok, r["clean"], (r.get("error") or r["message"])[:110])
        )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("faults", nargs="*", help="rows to run (default: all): %s" % " ".join(ROWS))
    ap.add_argument("--work", default=os.path.join(REPO, "build", "bench", "faults"))
    args = ap.parse_args(argv)
    names = args.faults or list(ROWS)
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        ap.error("unknown fault(s) %s; known: %s" % (", ".join(unknown), " ".join(ROWS)))
    if os.geteuid() != 0:
        ap.error("the fault matrix needs root (the simulated fleet)")
    os.makedirs(OUT_DIR, exist_ok=True)
    previous = {}
    if os.path.exists(OUT):
        with open(OUT) as f:
            previous = {r["fault"]: r for r in json.load(f).get("rows", [])}
    done = []
    try:
        for name in names:
            result = run_row(name, args.work)
            done.append(result)
            previous[name] = result
            with open(OUT, "w") as f:
                json.dump({"rows": [previous[n] for n in ROWS if n in previous]}, f, indent=2, default=str)
    finally:
        Fleet.down()
    print(table(done))
    print("written: %s" % os.path.relpath(OUT, REPO))
    return 0 if all(r["clean"] for r in done) else 1


if __name__ == "__main__":
    sys.exit(main())
