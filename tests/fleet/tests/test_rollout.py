# SPDX-License-Identifier: Apache-2.0
"""The main job end to end: ``playbooks/enable_speculation.yml`` over SSH against the eight-host mixed
fleet of ``tests/fleet/rollout.yml``, checking each host's end state on the host itself.

Order matters and is the file's order: check mode on the untouched fleet, the rollout, the end state
of every host (service, unit, rendered config, state and history files, what it serves), the summary
and the fleet report, then a second run and a second check-mode run that change nothing.
Run as root: ``make fleet-test``. The module fixture brings the fleet up and always tears it down.
"""

import json
import os
import re
import shlex
import subprocess
import urllib.request

import pytest
import yaml
from fleet_helpers import BIN, FLEET_DIR, REPO, RunningFleet, ansible_env, fleet_cmd, ops

ROLLOUT_FLEET = os.path.join(FLEET_DIR, "rollout.yml")
PLAYBOOK = os.path.join(REPO, "playbooks", "enable_speculation.yml")

# host -> (outcome, what the reason or label must say)
EXPECTED = {
    "r-orin-canary": ("keep", "keep"),
    "r-orin": ("keep", "keep"),
    "r-orin-lowgain": ("revert", "revert"),
    "r-orin-lowmem": ("keep", "keep"),
    "r-thor-docker": ("revert", "c=8"),
    "r-thor": ("revert", "c=8"),
    "r-nano": ("skip", "not suggested on orin_nano"),
    "r-xavier": ("skip", "Xavier"),
}
SERVE_YAML = "/etc/vllm/serve.yaml"
UNIT = "/etc/systemd/system/vllm.service"
STATE = "/var/lib/jetson_llm/speculative/state.json"
HISTORY = "/var/lib/jetson_llm/speculative/history"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
# What a host looks like from the outside: file checksums, the service state and its main process.
FINGERPRINT = (
    "for f in %s %s /etc/vllm/vllm.env %s; do if [ -e $f ]; then sha256sum $f; else echo absent $f; fi; done; "
    "systemctl show -p ActiveState -p MainPID vllm.service; ls /var/lib/jetson_llm 2>/dev/null | sort"
) % (SERVE_YAML, UNIT, STATE)


class Rollout(RunningFleet):
    def __init__(self, state, inventory, report_dir):
        super().__init__(state)
        self.inventory = inventory
        self.report_dir = report_dir
        self.runs = {}

    def playbook(self, *extra, timeout=3000):
        env = ansible_env()
        env["ANSIBLE_FORKS"] = "20"
        cmd = [
            os.path.join(BIN, "ansible-playbook"),
            "-i",
            self.inventory,
            PLAYBOOK,
            "-e",
            json.dumps({"jetson_llm_serial": ["50%", "100%"], "speculative_decoding_report_dir": self.report_dir}),
            *extra,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False, stdin=subprocess.DEVNULL)

    def fingerprints(self):
        return {name: self.ssh(name, FINGERPRINT, check=True).stdout for name in EXPECTED}

    def read_json(self, name, path):
        return json.loads(self.ssh(name, "cat %s" % path, check=True).stdout)


def recap(stdout):
    keys = ("ok", "changed", "unreachable", "failed")
    return {m.group(1): dict(zip(keys, (int(g) for g in m.groups()[1:]))) for m in RECAP.finditer(stdout)}


def tail(proc, n=6000):
    return proc.stdout[-n:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the fleet tests need root (network namespaces, podman)")
    work = tmp_path_factory.mktemp("rollout")
    inventory = str(work / "hosts.yml")
    proc = fleet_cmd("up", ROLLOUT_FLEET, "--inventory", inventory)
    try:
        if proc.returncode != 0:
            pytest.fail("fleet up failed (%d):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
        with open(ops.STATE_JSON) as f:
            yield Rollout(json.load(f), inventory, str(work / "report"))
    finally:
        fleet_cmd("down")


@pytest.fixture(scope="module")
def first_run(rollout):
    """The rollout itself, once for the module (after the check-mode test has looked at the fresh fleet)."""
    proc = rollout.playbook()
    assert proc.returncode == 0, tail(proc)
    rollout.runs["first"] = proc
    return proc


@pytest.fixture(scope="module")
def results(rollout, first_run):
    with open(os.path.join(rollout.report_dir, "latest.json")) as f:
        report = json.load(f)
    return {h["host"]: h for h in report["hosts"]}


def test_check_mode_on_the_fresh_fleet_changes_nothing_and_shows_plans_and_diffs(rollout):
    before = rollout.fingerprints()
    proc = rollout.playbook("--check", "--diff")
    assert proc.returncode == 0, tail(proc)
    assert rollout.fingerprints() == before
    assert not os.path.exists(os.path.join(rollout.report_dir, "latest.json"))
    out = proc.stdout
    # the plan of every host, and the exact files a run would write
    for host in EXPECTED:
        assert re.search(r"ok: \[%s\] => \{\n\s+\"__speculative_decoding_plan\": \{" % re.escape(host), out), host
    assert out.count("+++ after: /etc/vllm/serve.yaml") == len(EXPECTED)
    assert out.count('+ExecStart="/usr/local/bin/vllm" "serve" "--config" "/etc/vllm/serve.yaml"') == len(EXPECTED) - 1
    assert '+ExecStart="/usr/bin/docker" "run"' in out  # the container host's unit
    assert out.count('+speculative-config: "{') == 6  # the hosts whose plan enables speculation
    assert "skipped: speculation is not suggested on orin_nano" in out
    assert "HF_TOKEN" not in out and "VLLM_API_KEY" not in out
    assert "check mode: the report of run" in out


def test_every_host_reaches_its_expected_outcome(rollout, first_run, results):
    assert set(results) == set(EXPECTED)
    for host, (outcome, why) in EXPECTED.items():
        r = results[host]
        assert r["outcome"] == outcome, (host, r["outcome"], r["reason"])
        assert why in (r["label"] + " " + r["reason"]), (host, r["label"], r["reason"])
    counts = recap(first_run.stdout)
    assert set(EXPECTED) <= set(counts)
    assert all(c["failed"] == 0 and c["unreachable"] == 0 for c in counts.values()), counts


def test_no_host_ran_out_of_spec(results):
    """Figures from a simulator that could not keep its device's timing are skewed: fail, do not pass on
    them. A block measured late is allowed only when the verdict discarded it (and measured it again)."""
    shares = {}
    for host, r in results.items():
        discarded = {d["index"] for d in (r.get("verdict") or {}).get("discarded") or []}
        for block in r.get("blocks") or []:
            if "sim_lag_share" in block:
                shares.setdefault(host, []).append(block["sim_lag_share"])
                if block.get("sim_out_of_spec"):
                    assert block["index"] in discarded, (host, block.get("arm"), block.get("concurrency"), block["sim_lag_share"])
                    assert block.get("discard"), (host, block["index"])
    benchmarked = [h for h, r in results.items() if r.get("blocks")]
    assert benchmarked and set(shares) == set(benchmarked), ("hosts without the simulator's lag", set(benchmarked) - set(shares))


def test_the_trial_runs_as_one_task_per_host_with_its_round_trips_counted(first_run, results):
    """One task runs each host's trial, the canary's k sweep included (the speculative_trial action plugin): one
    progress line per step and a final one, no "FAILED - RETRYING" polling anywhere, its SSH round trips counted."""
    out = first_run.stdout
    trialled = [h for h, r in results.items() if r["outcome"] in ("keep", "revert") and r.get("blocks")]
    assert len(trialled) >= 5, trialled
    for host in trialled:
        steps = re.findall(r"^%s: trial step (\d+): " % re.escape(host), out, re.M)
        assert steps and [int(n) for n in steps] == list(range(1, len(steps) + 1)), (host, steps)
        assert len(re.findall(r"^%s: trial step \d+: done: %s " % (re.escape(host), results[host]["outcome"]), out, re.M)) == 1, host
        trips = results[host]["round_trips"]
        assert trips["total"] == trips["exec"] + trips["put"] + trips["fetch"], (host, trips)
        # a module per step (apply: copy, restart, ready, info; measure: one benchmark), nothing polled
        assert len(steps) <= trips["total"] <= 8 * len(steps), (host, len(steps), trips)
    assert "r-orin-canary" in trialled, trialled
    retried = set(re.findall(r"FAILED - RETRYING: \[([^\]]+)\]", out))
    assert not retried, retried


def test_restarts_are_timed_on_the_devices_clock(results):
    """Every restart window of the report runs from systemd's time of the unit's stop or start to the end of
    the readiness wait, both on the device's clock: positive, shorter than the run, and there is one per start."""
    restarted = 0
    for host, r in results.items():
        windows = [(start, end) for kind, start, end in r.get("intervals") or [] if kind == "restart"]
        restarted += bool(windows)
        for start, end in windows:
            assert 0 < end - start < 900, (host, start, end)
    assert restarted >= 6, "hosts with timed restarts: %d" % restarted


def test_every_restart_is_downtime_in_the_report(rollout, results):
    """The downtime of each device counts every restart of the run: the baseline's, the trial's and the revert's
    (the handler's, after the last benchmark); the summary, the table and the page show it."""
    with open(os.path.join(rollout.report_dir, "latest.json")) as f:
        doc = json.load(f)
    summary = {s["host"]: s for s in doc["summary"]}
    for host, (outcome, _why) in EXPECTED.items():
        windows = sorted((start, end) for kind, start, end in results[host]["intervals"] if kind == "restart")
        benchmarks = [end for kind, _start, end in results[host]["intervals"] if kind == "benchmark"]
        # a fresh device starts its baseline: every host restarted at least once, and its downtime is those windows
        assert windows, host
        union, reach = 0.0, None
        for start, end in windows:
            union += max(0.0, end - max(start, reach if reach is not None else start))
            reach = end if reach is None else max(reach, end)
        assert summary[host]["restarts"] == len(windows), host
        assert abs(summary[host]["downtime_s"] - union) < 0.11, (host, summary[host]["downtime_s"], union)
        if outcome == "revert":
            assert benchmarks and windows[-1][0] >= max(benchmarks), (host, windows, max(benchmarks or [0]))
    assert doc["downtime"]["restarts"] == sum(s["restarts"] for s in summary.values())
    assert doc["downtime"]["text"] in rollout.runs["first"].stdout
    with open(os.path.join(rollout.report_dir, "latest.html")) as f:
        assert doc["downtime"]["text"] in f.read()


def test_every_host_serves_its_decided_configuration(rollout, results):
    for host, (outcome, _why) in EXPECTED.items():
        r = results[host]
        assert rollout.ssh(host, "systemctl is-active vllm.service").stdout.strip() == "active", host
        status, _body = rollout.http_get(host, "/health")
        assert status == 200, host
        status, body = rollout.http_get(host, "/v1/models")
        assert status == 200 and r["model"] in body, host
        serve = rollout.ssh(host, "cat %s" % SERVE_YAML, check=True).stdout
        unit = rollout.ssh(host, "cat %s" % UNIT, check=True).stdout
        assert 'model: "%s"' % r["model"] in serve, host
        assert "--config" in unit and "/etc/vllm/serve.yaml" in unit, host
        assert "HF_TOKEN" not in unit, host
        if outcome == "keep":
            spec = json.loads(json.loads(re.search(r"^speculative-config: (.*)$", serve, re.M).group(1)))
            assert spec["method"] == "eagle3", host
            assert spec["num_speculative_tokens"] == int(r["num_speculative_tokens"]), host
            assert "gpu-memory-utilization: %s" % r["gpu_memory_utilization"] in serve, host
        else:
            assert "speculative-config" not in serve, host
            assert "gpu-memory-utilization: %s" % r["baseline_gpu_memory_utilization"] in serve, host
        # what the server really runs: vLLM logs the speculative config it parsed
        metrics = rollout.http_get(host, "/metrics")[1]
        assert ("vllm:spec_decode_num_drafts" in metrics) == (outcome == "keep"), host


def test_each_host_records_its_decision_and_keeps_its_history(rollout, results):
    for host, (outcome, _why) in EXPECTED.items():
        state = rollout.read_json(host, STATE)
        assert state["decision"] == outcome, host
        assert state["key"] == results[host]["key"], host
        mode = rollout.ssh(host, "stat -c %%a %s %s" % (STATE, HISTORY), check=True).stdout.split()
        assert mode == ["600", "700"], host
        files = rollout.ssh(host, "ls %s" % HISTORY, check=True).stdout.split()
        assert any(f.startswith("decision-%s-" % state["key"]) for f in files), (host, files)
        benchmarks = [f for f in files if not f.startswith("decision-")]
        if outcome == "skip":
            assert benchmarks == [], (host, files)
            continue
        assert benchmarks, (host, files)
        # every benchmark result on the device is a real run with vllm bench serve's field names
        sample = rollout.read_json(host, "%s/%s" % (HISTORY, sorted(benchmarks)[0]))
        runs = sample["runs"] if "runs" in sample else [sample]
        assert all(run["completed"] > 0 and run["output_throughput"] > 0 for run in runs), host
        # the verdict: its interval, the requests spent and the reason are part of the result
        verdict = results[host]["verdict"]
        assert verdict["requests_spent"] > 0 and verdict["reason"], host
        lo, hi = verdict["gain_c1"]["ci"]
        assert lo <= verdict["gain_c1"]["estimate"] <= hi, host
        # the fetched copy on the controller is the device's record
        with open(os.path.join(rollout.report_dir, "hosts", host + ".json")) as f:
            assert json.load(f) == state, host


def test_the_canary_tunes_k_for_its_group_and_the_group_uses_it(rollout, first_run, results):
    canary = results["r-orin-canary"]
    assert canary["sweep"], canary["k_source"]
    tuned = int(canary["num_speculative_tokens"])
    assert canary["sweep"]["choice"]["k"] == tuned
    assert canary["k_source"] == "tuned on r-orin-canary"
    # the trial controller ran the sweep (its steps and its choice are the canary's progress lines) ...
    out = first_run.stdout
    assert re.search(r"^r-orin-canary: trial step \d+: k sweep: measure speculative k=\d+ c=1 ", out, re.M), "no sweep step"
    assert re.search(r"^r-orin-canary: trial step \d+: done: keep .*; k=%d chosen by the k sweep" % tuned, out, re.M), "no choice"
    # ... the summary prints the choice ...
    assert re.search(r"k=%d \([^)]*tuned on r-orin-canary" % tuned, out), "the summary does not print the canary's k"
    # ... and the canary's live server runs it: vLLM exports one acceptance counter per draft position
    metrics = rollout.http_get("r-orin-canary", "/metrics")[1]
    positions = set(re.findall(r'^vllm:spec_decode_num_accepted_tokens_per_pos(?:_total)?\{[^}]*position="(\d+)"', metrics, re.M))
    assert len(positions) == tuned, sorted(positions)
    for host in ("r-orin", "r-orin-lowgain", "r-orin-lowmem"):
        assert results[host]["k_source"] == "tuned on r-orin-canary", host
        assert int(results[host]["num_speculative_tokens"]) == tuned, host
        assert results[host]["group"] == canary["group"], host


def test_the_low_memory_host_walked_the_ladder_and_serves(results):
    r = results["r-orin-lowmem"]
    assert r["ladder"], r
    first = r["ladder"][0]
    assert "Free memory on device" in json.dumps(first)
    assert float(r["gpu_memory_utilization"]) == pytest.approx(0.40)
    assert r["plan"]["gpu_memory_utilization"] == pytest.approx(0.45)


# ---- What the Molecule scenarios `default` and `oom_ladder` checked on a single host, checked here on the
# rollout's hosts of the same kind (docs/devel/testing.md): r-orin keeps speculation natively on the planned
# configuration, r-orin-lowmem is the oom_ladder host (same memory, vLLM version and utilizations).

NATIVE_ARGV = ["/usr/local/bin/vllm", "serve", "--config", SERVE_YAML]
ENV_FILE = "/etc/vllm/vllm.env"
KNOWN_GOOD = "/var/lib/jetson_llm/vllm/known-good"
LOWMEM_AVAILABLE_KIB = 36700160  # tests/fleet/rollout.yml, r-orin-lowmem
SANDBOX = {
    "User": "vllm",
    "Group": "vllm",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "RestrictRealtime": "yes",
    "LockPersonality": "yes",
}


def _metric(text, name):
    """Sum of a Prometheus counter over its label sets."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith((name + "{", name + " ")))


def _drafts_after_a_completion(rollout, host, model):
    """vLLM's draft counter before and after one completion sent to the live server."""
    before = _metric(rollout.http_get(host, "/metrics")[1], "vllm:spec_decode_num_drafts_total")
    body = json.dumps({"model": model, "prompt": "Explain speculative decoding.", "max_tokens": 16}).encode()
    request = urllib.request.Request(  # noqa: S310 - fleet address, http only
        "http://%s:8000/v1/completions" % rollout.address(host), data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - fleet address, http only
        out = json.load(answer)
    assert 0 < out["usage"]["completion_tokens"] <= 16, out
    after = _metric(rollout.http_get(host, "/metrics")[1], "vllm:spec_decode_num_drafts_total")
    return before, after


def _yaml(rollout, host, path):
    return yaml.safe_load(rollout.ssh(host, "cat %s" % path, check=True).stdout)


def test_the_kept_native_host_runs_vllm_from_the_rendered_files(rollout, results):
    host = "r-orin"
    out = rollout.ssh(host, "systemctl show -p ExecStart --value vllm", check=True).stdout
    assert shlex.split(out.split("argv[]=", 1)[1].split(" ; ", 1)[0]) == NATIVE_ARGV
    modes = rollout.ssh(host, "stat -c '%%U %%a' %s %s" % (UNIT, ENV_FILE), check=True).stdout.split("\n")
    assert modes[:2] == ["root 644", "root 600"], modes
    assert "EnvironmentFile=%s" % ENV_FILE in rollout.ssh(host, "cat %s" % UNIT, check=True).stdout
    assert re.search(r"^HF_HUB_OFFLINE=1$", rollout.ssh(host, "cat %s" % ENV_FILE, check=True).stdout, re.M)
    serve = _yaml(rollout, host, SERVE_YAML)
    r = results[host]
    assert serve["gpu-memory-utilization"] == pytest.approx(float(r["gpu_memory_utilization"]))
    assert json.loads(serve["speculative-config"])["model"] == r["speculator"]
    before, after = _drafts_after_a_completion(rollout, host, r["model"])
    assert after > before, (before, after)


def test_the_kept_hosts_known_good_copy_is_its_baseline(rollout, results):
    host = "r-orin"
    known_good = _yaml(rollout, host, KNOWN_GOOD + "/serve.yaml")
    assert known_good["model"] == results[host]["model"]
    assert known_good["gpu-memory-utilization"] == pytest.approx(float(results[host]["baseline_gpu_memory_utilization"]))
    assert "speculative-config" not in known_good
    modes = rollout.ssh(host, "stat -c %%a %s/vllm.service %s/vllm.env" % (KNOWN_GOOD, KNOWN_GOOD), check=True).stdout.split()
    assert modes == ["644", "600"]


def test_the_kept_host_decided_on_the_first_rung_from_saved_benchmarks(rollout, results):
    host = "r-orin"
    state = rollout.read_json(host, STATE)
    assert (state["decision"], state["outcome"]) == ("keep", "keep")
    assert state["label"].startswith("keep") and state["verdict"]["decision"] == "keep"
    assert state["verdict"]["gain_c1"]["ci"][0] >= state["verdict"]["thresholds"]["min_gain"] > 0
    assert (state["family"], state["variant"], state["vllm_version"]) == ("agx_orin", "64gb", "0.12.0")
    assert state["ladder"] == [] and state["fitted"]["rung"] == "plan"
    assert state["method"] == "eagle3" and state["gpu_memory_utilization"] < state["baseline_gpu_memory_utilization"]
    history = rollout.ssh(host, "ls %s" % HISTORY, check=True).stdout.split()
    assert len([n for n in history if n.startswith("decision-%s-" % state["key"])]) == 1
    for arm in ("baseline", "speculative"):
        assert any(n.startswith("%s-%s-" % (state["key"], arm)) for n in history), arm
    assert {b["result_file"] for b in state["blocks"]} <= {"%s/%s" % (HISTORY, n) for n in history}
    assert len(state["blocks"]) >= 4 * state["verdict"]["thresholds"]["min_rounds"]


def test_the_service_runs_as_an_unprivileged_sandboxed_user(rollout):
    host = "r-orin"
    passwd = rollout.ssh(host, "getent passwd vllm", check=True).stdout.strip().split(":")
    uid = int(passwd[2])
    assert 0 < uid < 1000 and passwd[5] == "/var/lib/vllm" and passwd[6] == "/usr/sbin/nologin", passwd
    assert rollout.ssh(host, "stat -c '%U %a %F' /var/lib/vllm", check=True).stdout.strip() == "vllm 750 directory"
    groups = rollout.ssh(host, "id -nG vllm", check=True).stdout.split()
    for group in ("video", "render"):
        if rollout.ssh(host, "getent group %s" % group).returncode == 0:
            assert group in groups, group
    out = rollout.ssh(host, "systemctl show -p %s vllm" % ",".join(SANDBOX), check=True).stdout
    assert dict(line.split("=", 1) for line in out.splitlines()) == SANDBOX
    assert "/var/lib/vllm" in rollout.ssh(host, "systemctl show -p ReadWritePaths --value vllm", check=True).stdout.split()
    pid = int(rollout.ssh(host, "systemctl show -p MainPID --value vllm", check=True).stdout)
    assert pid > 0
    status = rollout.ssh(host, "cat /proc/%d/status" % pid, check=True).stdout
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    assert [int(v) for v in fields["Uid"].split()] == [uid] * 4
    assert fields["NoNewPrivs"].strip() == "1"


def test_the_low_memory_host_was_refused_at_startup_and_serves_at_the_lowered_utilization(rollout, results):
    host = "r-orin-lowmem"
    state = rollout.read_json(host, STATE)
    assert state["plan"]["decision"] == "enabled" and state["plan"]["gpu_memory_utilization"] == 0.45
    assert len(state["ladder"]) == 1
    assert re.match(r"^%s at 0\.45: oom_free_memory \(.*less than desired GPU memory utilization" % re.escape(state["speculator"]), state["ladder"][0])
    assert state["fitted"]["rung"] == "utilization" and state["fitted"]["gpu_memory_utilization"] == 0.40
    serve = _yaml(rollout, host, SERVE_YAML)
    assert serve["gpu-memory-utilization"] == 0.40
    assert json.loads(serve["speculative-config"])["model"] == state["speculator"]
    before, after = _drafts_after_a_completion(rollout, host, results[host]["model"])
    assert after > before, (before, after)
    # the simulator lowers MemAvailable by its reservation while it serves: the refused start left nothing behind
    info = {}
    for line in rollout.ssh(host, "cat /proc/meminfo", check=True).stdout.splitlines():
        name, rest = line.split(":", 1)
        info[name] = int(rest.split()[0])
    assert info["MemAvailable"] == LOWMEM_AVAILABLE_KIB - int(0.40 * info["MemTotal"] * 1024) // 1024
    journal = rollout.ssh(host, "journalctl -u vllm --no-pager -o cat", check=True).stdout
    assert "is less than desired GPU memory utilization (0.45" in journal


def test_the_summary_shows_every_host_and_the_report_is_written(rollout, first_run, results):
    out = first_run.stdout
    table_task = out.index("TASK [Per-host table]")
    table = out[table_task : out.index("TASK [", table_task + 10)]
    for host, (outcome, _why) in EXPECTED.items():
        assert re.search(r"%s\b.*\b%s\b" % (re.escape(host), outcome), table), (host, table)
    assert "wall" in out[out.index("TASK [Where the time went]") :]
    for name in ("latest.json", "latest.html", "index.json"):
        assert os.path.getsize(os.path.join(rollout.report_dir, name)) > 0, name
    with open(os.path.join(rollout.report_dir, "latest.html")) as f:
        html = f.read()
    assert all(host in html for host in EXPECTED) and "<svg" in html
    with open(os.path.join(rollout.report_dir, "index.json")) as f:
        assert len(json.load(f)["runs"]) == 1


def test_a_second_run_changes_nothing(rollout, results):
    before = rollout.fingerprints()
    proc = rollout.playbook()
    assert proc.returncode == 0, tail(proc)
    counts = recap(proc.stdout)
    assert {h: counts[h]["changed"] for h in EXPECTED} == {h: 0 for h in EXPECTED}, tail(proc)
    assert rollout.fingerprints() == before  # same files, same main process: no restart
    with open(os.path.join(rollout.report_dir, "latest.json")) as f:
        again = {h["host"]: h for h in json.load(f)["hosts"]}
    assert {h: again[h]["outcome"] for h in EXPECTED} == {h: o for h, (o, _w) in EXPECTED.items()}
    assert all(again[h]["reused"] for h in EXPECTED)
    # nothing restarted, and the report says so
    assert "downtime: none (no device restarted vLLM)" in proc.stdout


def test_check_mode_after_the_rollout_shows_no_change(rollout, results):
    before = rollout.fingerprints()
    proc = rollout.playbook("--check", "--diff")
    assert proc.returncode == 0, tail(proc)
    counts = recap(proc.stdout)
    assert {h: counts[h]["changed"] for h in EXPECTED} == {h: 0 for h in EXPECTED}, tail(proc)
    assert rollout.fingerprints() == before
    assert "already decided" in proc.stdout


def test_zz_fleet_down_leaves_no_host(rollout):
    proc = fleet_cmd("down")
    assert proc.returncode == 0, proc.stderr
    assert not os.path.exists(ops.STATE_JSON)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    assert all(host not in netns for host in EXPECTED)
