# SPDX-License-Identifier: Apache-2.0
"""What runs is what was decided: the live server against the record, on the two hosts of ``tests/fleet/live.yml``.

Each case of issue "reconcile each device's live server with its record" is reproduced on real hosts and
judged on the live server (its ``/metrics`` and its process), not on files:

- the controller stopped inside the revert handler (known-good files back, record says revert, server still
  speculative): check mode says what it would reconcile, the re-run restarts onto the decision;
- the controller stopped right after the baseline arm was rendered (files baseline, server speculative): the
  trial restarts into the baseline before measuring, and no baseline block measured speculation;
- two rollouts at once: the second finds the device "busy" and leaves it alone; the first is killed and a
  plain re-run breaks the dead run's lock and converges;
- a failure before the trial (an image tag that does not exist): that host fails with the registry's answer,
  the others finish, the summary and the report are written, and a plain re-run converges;
- a container host whose speculator is at a local path on the device: every speculative start of its trial
  runs a container that mounts it (read from the live container while the trial runs), and after the revert
  the container serves the baseline from the known-good files;
- weights: a speculator whose files are not where vLLM reads them (the native service's hub cache, a local path) is
  a skip before any restart, with where the files should be and how to fetch them;
- first contact: a native device whose vllm command is gone is skipped with that reason, untouched, and the run goes on;
- first contact: the operator's own vLLM, a container started by hand as NVIDIA's recipe does (named vllm, like the
  collection's), in place of the collection's unit: enable_speculation and disable_speculation refuse that device with
  its command line (the token masked) and leave the container serving, the same process, never restarted;
- day two (``playbooks/verify_speculation.yml``) on the two kept hosts, once the cases above have left them
  kept: verify leaves both kept, then the acceptance of l-orin-2 collapses (its simulator's acceptance_scale
  drops and vLLM restarts, as after an upgrade) and verify reverts that host only, checked on the live
  server, the device's records, the node_exporter textfile and the report; a third verify leaves the
  reverted host alone. (These ran on a fleet of their own, tests/fleet/verify.yml, with the same two hosts.)

Run as root: ``make fleet-test``. The module fixture brings the fleet up and always tears it down.
"""

import json
import os
import re
import signal
import subprocess
import time
import urllib.error

import pytest
import yaml
from fleet_helpers import BIN, FLEET_DIR, REPO, RunningFleet, ansible_env, config, fleet_cmd, ops

LIVE_FLEET = os.path.join(FLEET_DIR, "live.yml")
PLAYBOOK = os.path.join(REPO, "playbooks", "enable_speculation.yml")
HOSTS = ("l-orin-1", "l-orin-2")
DOCKER = "l-nano-docker"
# the container host whose EAGLE-3 head is at a local path (tests/fleet/live.yml)
LOCAL = "l-orin-docker"
LOCAL_HEAD = "/opt/models/llama31-8b-eagle3"
# l-orin-docker's further bind mount and vllm serve option (tests/fleet/live.yml)
EXTRA_SOURCE, EXTRA_DESTINATION = "/srv/prompts", "/data/prompts"
HUB = "/root/.cache/huggingface/hub/models--yuhuili--EAGLE3-LLaMA3.1-Instruct-8B"
STATE_DIR = "/var/lib/jetson_llm/speculative"
STATE = STATE_DIR + "/state.json"
HISTORY = STATE_DIR + "/history"
SERVE_YAML = "/etc/vllm/serve.yaml"
TEXTFILE = "/var/lib/node_exporter/textfile_collector/jetson_llm_speculative.prom"
VERIFY = os.path.join(REPO, "playbooks", "verify_speculation.yml")
DRIFT = "l-orin-2"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
SAMPLE = re.compile(r"^(jetson_llm_speculative_\w+)\{(.*)\} (\S+)$")
LOCK = STATE_DIR + "/rollout.lock"
KNOWN_GOOD = "/var/lib/jetson_llm/vllm/known-good"
SETTINGS = {"jetson_llm_serial": ["100%"]}


class Live(RunningFleet):
    def __init__(self, state, inventory, work):
        super().__init__(state)
        self.inventory = inventory
        self.work = work

    def _cmd(self, report, extra, inventory=None, playbook=PLAYBOOK):
        settings = dict(SETTINGS, speculative_decoding_report_dir=os.path.join(self.work, report))
        return [os.path.join(BIN, "ansible-playbook"), "-i", inventory or self.inventory, playbook, "-e", json.dumps(settings), *extra]

    def playbook(self, report, *extra, timeout=1800, inventory=None, playbook=PLAYBOOK):
        env = ansible_env()
        cmd = self._cmd(report, extra, inventory, playbook)
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False, stdin=subprocess.DEVNULL)

    def subset(self, name, hosts):
        """An inventory of ``hosts`` only (every group keeps its variables), so that a case runs where it looks."""
        with open(self.inventory) as f:
            inventory = yaml.safe_load(f)

        def prune(group):
            if not isinstance(group, dict):
                return
            if isinstance(group.get("hosts"), dict):
                group["hosts"] = {h: v for h, v in group["hosts"].items() if h in hosts}
            for child in (group.get("children") or {}).values():
                prune(child)

        for group in inventory.values():
            prune(group)
        path = os.path.join(self.work, name + ".yml")
        with open(path, "w") as f:
            yaml.safe_dump(inventory, f)
        return path

    def verify(self):
        """One day-two run over the fleet; its per-host reports go to the same directory each time."""
        return self.playbook("day-two", playbook=VERIFY)

    def verify_report(self, name):
        with open(os.path.join(self.work, "day-two", "verify", name + ".json")) as f:
            return json.load(f)

    def read_json(self, name, path):
        return json.loads(self.ssh(name, "cat %s" % path, check=True).stdout)

    def textfile(self, name):
        """{(metric, frozenset(labels)): value} of the exported file, every line checked against the format."""
        text = self.ssh(name, "cat %s" % TEXTFILE, check=True).stdout
        samples, typed = {}, set()
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                typed.add(line.split()[2])
                continue
            if line.startswith("# HELP "):
                continue
            m = SAMPLE.match(line)
            assert m, (name, line)
            assert m.group(1) in typed, (name, line)
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            samples[(m.group(1), labels)] = float(m.group(3))
        return samples

    def start(self, report, name):
        """A playbook in its own process group (so that it can be killed like an operator's Ctrl-C would not)."""
        out = open(os.path.join(self.work, name + ".log"), "w")
        proc = subprocess.Popen(
            self._cmd(report, ()), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, text=True, env=ansible_env(), start_new_session=True
        )
        proc.log = out
        return proc

    def finish(self, proc, timeout=1800):
        rc = proc.wait(timeout=timeout)
        proc.log.close()
        with open(proc.log.name) as f:
            return rc, f.read()

    def speculating(self, name):
        return "vllm:spec_decode_num_drafts" in self.http_get(name, "/metrics")[1]

    def main_pid(self, name):
        return self.ssh(name, "systemctl show -p MainPID --value vllm.service", check=True).stdout.strip()

    def record(self, name):
        return json.loads(self.ssh(name, "cat " + STATE, check=True).stdout)

    def lock(self, name):
        out = self.ssh(name, "cat %s 2>/dev/null || true" % LOCK).stdout.strip()
        return json.loads(out) if out else None

    def wait_for_lock(self, name, deadline_s=600):
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            held = self.lock(name)
            if held:
                return held
            time.sleep(1)
        raise AssertionError("%s: no rollout lock within %d s" % (name, deadline_s))

    def container(self, name):
        """The live container of the service: its id and its mounts (docker inspect), or None when none runs."""
        out = self.ssh(name, "docker inspect --format '{{json .}}' vllm 2>/dev/null || true").stdout.strip()
        if not out:
            return None
        info = json.loads(out)
        return {"id": info["Id"], "mounts": info.get("Mounts") or []}

    def watch_container(self, name, proc, every_s=2.0):
        """While ``proc`` runs: the container's mounts each time it was seen serving, with or without speculation
        (the same container before and after reading /metrics, so that a restart in between is not misread)."""
        seen = []
        while proc.poll() is None:
            before = self.container(name)
            try:
                metrics = self.http_get(name, "/metrics")[1]
            except OSError:
                metrics = None
            after = self.container(name)
            if before and after and metrics is not None and before["id"] == after["id"]:
                seen.append({"id": before["id"], "speculative": "vllm:spec_decode_num_drafts" in metrics, "mounts": before["mounts"]})
            time.sleep(every_s)
        return seen

    def fingerprint(self):
        cmd = "sha256sum /etc/vllm/serve.yaml /etc/vllm/vllm.env %s; systemctl show -p MainPID -p InvocationID vllm.service" % STATE
        return {h: self.ssh(h, cmd, check=True).stdout for h in HOSTS}


def host_report(live, report):
    with open(os.path.join(live.work, report, "latest.json")) as f:
        return {h["host"]: h for h in json.load(f)["hosts"]}


def tail(text, n=6000):
    return text[-n:]


def recap(stdout):
    keys = ("ok", "changed", "unreachable", "failed")
    return {m.group(1): dict(zip(keys, (int(g) for g in m.groups()[1:]))) for m in RECAP.finditer(stdout)}


def metric(samples, name, **labels):
    want = frozenset(labels.items())
    found = [v for (n, lb), v in samples.items() if n == "jetson_llm_speculative_" + name and want <= lb]
    assert len(found) == 1, (name, labels, samples)
    return found[0]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the fleet tests need root (network namespaces, podman)")
    work = tmp_path_factory.mktemp("live")
    inventory = str(work / "hosts.yml")
    proc = fleet_cmd("up", LIVE_FLEET, "--inventory", inventory)
    try:
        if proc.returncode != 0:
            pytest.fail("fleet up failed (%d):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
        with open(ops.STATE_JSON) as f:
            fleet = Live(json.load(f), inventory, str(work))
        # the operator's local copy of the EAGLE-3 head (the files of the Hub snapshot, at a path of their own)
        fleet.ssh(LOCAL, 'mkdir -p /opt/models && cp -rL "%s/snapshots/$(cat %s/refs/main)" %s' % (HUB, HUB, LOCAL_HEAD), check=True)
        # the source of the further bind mount the operator gives that container (vllm_server_extra_mounts)
        fleet.ssh(LOCAL, "mkdir -p %s" % EXTRA_SOURCE, check=True)
        yield fleet
    finally:
        fleet_cmd("down")


@pytest.fixture(scope="module")
def watched(live):
    """The first run, with the local-path container host's live container read all along its trial."""
    proc = live.start("first", "first")
    seen = live.watch_container(LOCAL, proc)
    rc, out = live.finish(proc)
    assert rc == 0, tail(out)
    return seen


@pytest.fixture(scope="module")
def kept(live, watched):
    report = host_report(live, "first")
    assert {h: report[h]["outcome"] for h in HOSTS} == {h: "keep" for h in HOSTS}, report
    assert report[DOCKER]["outcome"] == "skip", report[DOCKER]
    for h in HOSTS:
        assert live.speculating(h), h
        assert live.lock(h) is None, h  # given back at the end of the run
        # the unit wrote its start record: what this invocation was started from
        record = live.ssh(h, "cat /run/vllm/config.sha256", check=True).stdout
        assert record.startswith("# invocation ") and "/etc/vllm/serve.yaml" in record, record
    return report


def test_a_revert_cut_off_before_its_restart_is_reconciled_on_the_live_server(live, kept):
    # What the revert handler leaves when the controller dies after restoring the files and recording
    # "revert" but before "Restart vLLM": baseline files and record, speculative server.
    host, other = HOSTS
    live.ssh(host, "cp -p %s/serve.yaml /etc/vllm/serve.yaml && cp -p %s/vllm.env /etc/vllm/vllm.env" % (KNOWN_GOOD, KNOWN_GOOD), check=True)
    live.ssh(
        host,
        "python3 -c \"import json; p='%s'; s=json.load(open(p)); s.update(decision='revert', outcome='revert', label='revert (no gain)'); "
        "json.dump(s, open(p, 'w'))\"" % STATE,
        check=True,
    )
    assert live.speculating(host)  # the device serves what nobody decided
    before = live.fingerprint()
    other_pid = live.main_pid(other)

    check = live.playbook("check", "--check")
    assert check.returncode == 0, tail(check.stdout + check.stderr)
    assert "would reconcile:" in check.stdout and "speculation is loaded where the decision is revert" in check.stdout, tail(check.stdout)
    assert live.fingerprint() == before  # check mode changed nothing
    assert live.speculating(host)

    proc = live.playbook("reconcile")
    assert proc.returncode == 0, tail(proc.stdout + proc.stderr)
    assert "reconciled:" in proc.stdout and "speculation is loaded where the decision is revert" in proc.stdout, tail(proc.stdout)
    assert not live.speculating(host)  # the live server now serves the recorded decision
    assert live.speculating(other) and live.main_pid(other) == other_pid  # the other device was left as it was
    report = host_report(live, "reconcile")
    assert report[host]["outcome"] == "revert" and report[host]["reconciled"], report[host]
    assert not report[other]["reconciled"]

    # and it holds: the next run finds nothing to reconcile and restarts nothing
    pid = live.main_pid(host)
    again = live.playbook("again")
    assert again.returncode == 0, tail(again.stdout + again.stderr)
    assert "reconciled:" not in again.stdout and live.main_pid(host) == pid
    assert "already decided: revert (no gain), and the live server serves it" in again.stdout


def test_a_trial_cut_off_after_rendering_the_baseline_measures_the_baseline(live, kept):
    # What a controller killed right after rendering the baseline arm leaves: baseline files, no decision,
    # speculative server. The files already match the baseline arm; the live server does not.
    host = HOSTS[1]
    assert live.speculating(host)
    live.ssh(host, "cp -p %s/serve.yaml /etc/vllm/serve.yaml && rm -f %s" % (KNOWN_GOOD, STATE), check=True)
    proc = live.playbook("early")
    assert proc.returncode == 0, tail(proc.stdout + proc.stderr)
    assert "the live server is not the configuration wanted (the baseline arm: " in proc.stdout, tail(proc.stdout)
    record = live.record(host)
    assert record["decision"] == "keep", record.get("reason")
    baseline = [b for b in record["blocks"] if b["arm"] == "baseline"]
    speculative = [b for b in record["blocks"] if b["arm"] == "speculative"]
    assert baseline and speculative
    # every baseline block measured a server without speculation, every speculative one a server with it
    assert all(b.get("spec_decode_num_drafts") is None for b in baseline), baseline
    assert all(b.get("spec_decode_num_drafts") is not None for b in speculative)
    assert not [b for b in record["blocks"] if b.get("arm_proof")]
    assert live.speculating(host)


def test_two_rollouts_at_once_then_a_killed_one_and_a_plain_rerun(live, kept):
    host = HOSTS[0]
    live.ssh(host, "rm -f " + STATE, check=True)  # the device is decided again: a trial holds its lock
    first = live.start("run-a", "run-a")
    try:
        holder = live.wait_for_lock(host)
        second = live.playbook("run-b")
        assert second.returncode == 0, tail(second.stdout + second.stderr)
        assert "busy: rollout %s since" % holder["run_id"] in second.stdout, tail(second.stdout)
        report = host_report(live, "run-b")
        assert report[host]["outcome"] == "busy" and holder["run_id"] in report[host]["reason"]
        assert live.lock(host)["run_id"] == holder["run_id"]  # the second run left the lock alone
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the first run dies mid-trial, holding the lock
        live.finish(first, timeout=60)
    assert live.lock(host)["run_id"] == holder["run_id"]

    rerun = live.playbook("rerun")
    assert rerun.returncode == 0, tail(rerun.stdout + rerun.stderr)
    assert "busy:" not in rerun.stdout, tail(rerun.stdout)
    broken = live.ssh(host, "ls %s.broken-* 2>/dev/null | wc -l" % LOCK).stdout.strip()
    assert int(broken) >= 1  # the dead run's lock was moved aside, not silently deleted
    assert live.lock(host) is None
    record = live.record(host)
    assert record["decision"] in ("keep", "revert")
    assert live.speculating(host) == (record["decision"] == "keep")  # the live server is the record
    status, _body = live.http_get(host, "/health")
    assert status == 200


def test_a_failure_before_the_trial_fails_that_host_not_the_run(live, kept):
    with open(live.inventory) as f:
        inventory = yaml.safe_load(f)
    wrong = "vllm/vllm-openai:v0.0.0-no-such-tag"
    found = False
    for group in inventory.values():
        for name, hostvars in ((group or {}).get("hosts") or {}).items():
            if name == DOCKER:
                hostvars["vllm_server_image"] = wrong
                found = True
    assert found, inventory
    bad_inventory = os.path.join(live.work, "missing-image.yml")
    with open(bad_inventory, "w") as f:
        yaml.safe_dump(inventory, f)
    pids = {h: live.main_pid(h) for h in HOSTS}

    proc = live.playbook("missing", inventory=bad_inventory)
    out = proc.stdout
    assert proc.returncode != 0, tail(out)  # the run fails at its end, naming the failed host
    report = host_report(live, "missing")  # the summary and the report were written
    assert report[DOCKER]["outcome"] == "failed", report[DOCKER]
    reason = report[DOCKER]["reason"]
    assert reason.startswith("before the trial: host %s: could not read the vLLM version" % DOCKER), reason
    assert wrong in reason and "pull the image on the device or fix vllm_server_image" in reason, reason
    assert re.search(r"(?i)unable to find image|error|manifest|not found", reason.split("exited", 1)[-1]), reason  # the engine's answer
    for h in HOSTS:  # the other hosts of the batch finished, untouched
        assert report[h]["outcome"] in ("keep", "revert"), report[h]
        assert live.main_pid(h) == pids[h], h
    assert "rollout stopped" in out or "failed" in out.split("PLAY RECAP")[0][-3000:], tail(out)

    rerun = live.playbook("fixed")
    assert rerun.returncode == 0, tail(rerun.stdout + rerun.stderr)
    report = host_report(live, "fixed")
    assert report[DOCKER]["outcome"] in ("skip", "keep", "revert"), report[DOCKER]
    assert live.http_get(DOCKER, "/health")[0] == 200


# ---------------------------------------------------------------- day two (verify_speculation.yml)


def test_day_two_starts_from_two_kept_hosts_with_their_decision_exported(live, kept):
    for host in HOSTS:
        assert live.read_json(host, STATE)["decision"] == "keep", host
        assert live.speculating(host), host
        samples = live.textfile(host)
        assert metric(samples, "decision", host=host, decision="keep") == 1
        assert metric(samples, "decision", host=host, decision="revert") == 0
        assert 0 < metric(samples, "acceptance_rate", host=host, source="trial") <= 1
        # atomic write: no temporary file is left next to the exported one, and it is world-readable
        listing = live.ssh(host, "ls -a %s; stat -c %%a %s" % (os.path.dirname(TEXTFILE), TEXTFILE), check=True).stdout.split()
        assert listing == [".", "..", os.path.basename(TEXTFILE), "644"], (host, listing)


def test_verify_leaves_healthy_kept_devices_kept(live, kept):
    proc = live.verify()
    assert proc.returncode == 0, tail(proc.stdout + proc.stderr)
    counts = recap(proc.stdout)
    assert all(counts[h]["failed"] == 0 for h in HOSTS), counts
    for host in HOSTS:
        found = live.verify_report(host)
        assert found["action"] == "keep", (host, found["reason"])
        assert found["acceptance_rate"] >= 0.30 and found["gain"] > 0, found
        assert "%s: recorded keep -> keep" % host in proc.stdout
        state = live.read_json(host, STATE)
        assert state["decision"] == "keep" and state["verify"]["action"] == "keep", host
        samples = live.textfile(host)
        assert metric(samples, "decision", host=host, decision="keep") == 1
        assert metric(samples, "acceptance_rate", host=host, source="verify") == pytest.approx(found["acceptance_rate"])
        assert live.speculating(host), host
        assert "speculative-config" in live.ssh(host, "cat %s" % SERVE_YAML, check=True).stdout, host
    # the devices verify does not own: the reverted local-path host and the skipped Nano are left alone
    assert live.verify_report(LOCAL)["action"] == "leave" and live.verify_report(DOCKER)["action"] == "leave"


def collapse_acceptance(live, host, scale):
    """As after an upgrade that breaks the speculator: the simulator accepts far fewer draft tokens."""
    path = os.path.join(config.FLEET_STATE, "hosts", host, "settings.json")
    with open(path) as f:
        settings = json.load(f)
    settings["acceptance_scale"] = scale
    with open(path, "w") as f:  # same inode: the file is bind-mounted into the host
        f.write(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    live.ssh(host, "systemctl restart vllm.service", check=True)
    end = time.monotonic() + 300
    while time.monotonic() < end:
        try:
            if live.http_get(host, "/health", timeout=2)[0] == 200:
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    raise AssertionError("%s: vLLM did not come back after the restart" % host)


def test_verify_reverts_the_device_whose_acceptance_collapsed(live, kept):
    collapse_acceptance(live, DRIFT, 0.05)
    assert live.speculating(DRIFT)  # still speculating, badly
    proc = live.verify()
    assert proc.returncode == 0, tail(proc.stdout + proc.stderr)
    found = live.verify_report(DRIFT)
    assert found["action"] == "revert", found
    assert found["acceptance_rate"] < 0.30 and "under the floor" in found["reason"], found
    assert re.search(r"%s: recorded keep -> revert \(acceptance \d+\.\d %%" % DRIFT, proc.stdout), tail(proc.stdout)
    assert "%s: speculation reverted" % DRIFT in proc.stdout, tail(proc.stdout)
    # the live server serves the baseline: no speculative config, no spec-decode counters
    assert live.http_get(DRIFT, "/health")[0] == 200
    assert "vllm:spec_decode" not in live.http_get(DRIFT, "/metrics")[1]
    assert "speculative-config" not in live.ssh(DRIFT, "cat %s" % SERVE_YAML, check=True).stdout
    # the device's records: the decision is now a revert by verify, the check is in the history
    state = live.read_json(DRIFT, STATE)
    assert state["decision"] == "revert" and state["label"] == "revert (verify)", state["label"]
    assert state["verify"]["action"] == "revert"
    assert any(f.startswith("verify-") for f in live.ssh(DRIFT, "ls %s" % HISTORY, check=True).stdout.split())
    samples = live.textfile(DRIFT)
    assert metric(samples, "decision", host=DRIFT, decision="revert") == 1
    assert metric(samples, "decision", host=DRIFT, decision="keep") == 0
    assert metric(samples, "acceptance_rate", host=DRIFT, source="verify") == pytest.approx(found["acceptance_rate"])
    assert metric(samples, "verify_timestamp_seconds", host=DRIFT, action="revert") > 0
    # the healthy host is untouched
    assert live.verify_report(HOSTS[0])["action"] == "keep"
    assert live.speculating(HOSTS[0])


def test_verify_leaves_a_reverted_device_alone(live, kept):
    probe = "sha256sum %s %s %s; systemctl show -p MainPID vllm.service" % (STATE, TEXTFILE, SERVE_YAML)
    before = live.ssh(DRIFT, probe, check=True).stdout
    proc = live.verify()
    assert proc.returncode == 0, tail(proc.stdout + proc.stderr)
    found = live.verify_report(DRIFT)
    assert found["action"] == "leave" and "recorded decision is revert" in found["reason"], found
    assert "%s: recorded revert -> leave" % DRIFT in proc.stdout
    assert live.ssh(DRIFT, probe, check=True).stdout == before


def test_a_container_mounts_a_speculator_at_a_local_path_through_the_trial_and_after_the_revert(live, watched, kept):
    """One renderer of the service's files: each speculative start of the trial is a container that mounts the local
    head read-only (otherwise vLLM cannot load it and the trial could not have measured speculation), and the revert
    gives back the baseline's files, the unit included, which the live container runs."""
    report = kept[LOCAL]
    # the trial measured speculation and reverted for the acceptance asked for (0.99), not for a start that failed
    assert report["outcome"] == "revert", report
    assert "under the floor 99.0 %" in (report.get("reason") or ""), report
    speculative = [s for s in watched if s["speculative"]]
    assert speculative, "the live container of %s never served speculation during the trial: %s" % (LOCAL, watched)
    for seen in speculative:
        mounts = [m for m in seen["mounts"] if m.get("Destination") == LOCAL_HEAD]
        assert mounts and mounts[0]["Source"] == LOCAL_HEAD and mounts[0]["RW"] is False, seen
    # after the revert: the baseline serves, from the known-good files (the unit too), in a container without the head
    assert live.http_get(LOCAL, "/health")[0] == 200
    assert not live.speculating(LOCAL)
    now = live.container(LOCAL)
    assert now and not [m for m in now["mounts"] if m.get("Destination") == LOCAL_HEAD], now
    same = live.ssh(LOCAL, "cmp /etc/systemd/system/vllm.service %s/vllm.service && cmp /etc/vllm/serve.yaml %s/serve.yaml" % (KNOWN_GOOD, KNOWN_GOOD))
    assert same.returncode == 0, same.stdout + same.stderr
    record = live.ssh(LOCAL, "cat /run/vllm/config.sha256", check=True).stdout
    assert "/etc/systemd/system/vllm.service" in record, record


def test_the_servers_further_option_and_mount_are_served_with_and_without_speculation(live, watched, kept):
    """vllm_server_extra_args and vllm_server_extra_mounts: every container seen serving during the trial, speculative
    or not, and the one after the revert has the further bind mount; every start of vLLM on the device took the
    further option (its configuration log line), none ran without it."""
    assert [s for s in watched if s["speculative"]] and [s for s in watched if not s["speculative"]], watched
    for seen in [*watched, live.container(LOCAL)]:
        mounts = [m for m in seen["mounts"] if m.get("Destination") == EXTRA_DESTINATION]
        assert mounts and mounts[0]["Source"] == EXTRA_SOURCE and mounts[0]["RW"] is False, seen
    config = live.ssh(LOCAL, "cat /etc/vllm/serve.yaml", check=True).stdout.splitlines()
    assert "enable-prefix-caching: false" in config and "max-num-batched-tokens: 4096" in config, config
    starts = live.ssh(LOCAL, "journalctl -u vllm.service -o cat | grep -o 'enable_prefix_caching=[A-Za-z]*'", check=True).stdout.split()
    # the baseline, each arm switch of the trial and the revert: every one with prefix caching off, as asked
    assert len(starts) >= 3 and set(starts) == {"enable_prefix_caching=False"}, starts


# ---------------------------------------------------------------- weights: what the device holds, looked at before any restart

NATIVE_HUB = "/var/lib/vllm/.cache/huggingface/hub"  # the native service's HF_HOME/hub: its dedicated user's home
TARGET_DIR = "models--meta-llama--Llama-3.1-8B-Instruct"


def test_a_speculator_missing_from_the_device_is_a_skip_before_any_restart(live, kept):
    """vLLM runs offline: a speculator whose files are not where it reads them could only fail to start. l-orin-2 (native)
    loses every speculator from its hub cache, l-orin-docker the EAGLE-3 head at its local path; the next run skips both
    with where the files should be and how to fetch them, and neither server restarts."""
    # after day two: l-orin-2 reverted, l-orin-docker reverted by its acceptance floor; both serve their baseline
    assert not live.speculating(DRIFT) and not live.speculating(LOCAL), "runs after day two has reverted l-orin-2"
    away = NATIVE_HUB + ".away"
    live.ssh(DRIFT, 'mkdir -p %s && cd %s && for d in models--*; do [ "$d" = %s ] || mv "$d" %s/; done' % (away, NATIVE_HUB, TARGET_DIR, away), check=True)
    live.ssh(LOCAL, "mv %s %s.away" % (LOCAL_HEAD, LOCAL_HEAD), check=True)
    try:
        before = {DRIFT: live.main_pid(DRIFT), LOCAL: (live.main_pid(LOCAL), live.container(LOCAL)["id"])}
        proc = live.playbook("weights", inventory=live.subset("weights-hosts", (DRIFT, LOCAL)))
        assert proc.returncode == 0, tail(proc.stdout + proc.stderr)
        report = host_report(live, "weights")
        native, local = report[DRIFT], report[LOCAL]
        assert native["outcome"] == "skip", native
        for part in (
            "speculator yuhuili/EAGLE3-LLaMA3.1-Instruct-8B is not on the device",
            NATIVE_HUB + "/models--yuhuili--EAGLE3-LLaMA3.1-Instruct-8B",
            "huggingface-cli download yuhuili/EAGLE3-LLaMA3.1-Instruct-8B --cache-dir " + NATIVE_HUB,
            "vllm_server_hf_offline: false",
        ):
            assert part in native["reason"], (part, native["reason"])
        assert local["outcome"] == "skip", local
        assert "speculator %s is not on the device: %s holds no config.json" % (LOCAL_HEAD, LOCAL_HEAD) in local["reason"], local["reason"]
        # on the live servers: the same processes, serving without speculation
        assert {DRIFT: live.main_pid(DRIFT), LOCAL: (live.main_pid(LOCAL), live.container(LOCAL)["id"])} == before
        for h in (DRIFT, LOCAL):
            assert live.http_get(h, "/health")[0] == 200 and not live.speculating(h), h
    finally:
        live.ssh(DRIFT, "mv %s/models--* %s/ 2>/dev/null; rmdir %s" % (away, NATIVE_HUB, away))
        live.ssh(LOCAL, "mv %s.away %s" % (LOCAL_HEAD, LOCAL_HEAD))


# ---------------------------------------------------------------- first contact: a device without vLLM


def test_a_device_without_vllm_is_skipped_at_first_contact_and_the_run_goes_on(live, kept):
    """The vllm command of a native device is gone (an upgrade half done, say): first contact skips that device with the
    reason, no later play touches it (no lock, no restart), and the run ends green with the other device done."""
    host = HOSTS[0]
    assert live.speculating(host), "runs while l-orin-1 keeps its decision"
    live.ssh(host, "mv /usr/local/bin/vllm /usr/local/bin/vllm.away", check=True)
    try:
        record = "sha256sum %s; ls %s" % (STATE, HISTORY)
        before, recorded = live.main_pid(host), live.ssh(host, record, check=True).stdout
        proc = live.playbook("no-vllm", inventory=live.subset("no-vllm-hosts", (host, DOCKER)))
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, tail(out)
        report = host_report(live, "no-vllm")
        assert report[host]["outcome"] == "skip", report[host]
        reason = report[host]["reason"]
        assert "vLLM is not installed: /usr/local/bin/vllm is not an executable file (vllm_server_vllm_bin)" in reason, reason
        assert "nothing was changed on this host" in reason, reason
        assert report[DOCKER]["outcome"] == "skip" and "not suggested" in report[DOCKER]["reason"], report[DOCKER]  # the run went on
        # on the device: the same server, still speculating as decided; its record and history as they were
        assert live.main_pid(host) == before and live.speculating(host)
        assert live.ssh(host, record, check=True).stdout == recorded
        assert recap(out)[host]["changed"] == 0, recap(out)
    finally:
        live.ssh(host, "mv /usr/local/bin/vllm.away /usr/local/bin/vllm")


# ---------------------------------------------------------------- first contact: a server the operator started by hand

DISABLE = os.path.join(REPO, "playbooks", "disable_speculation.yml")
SECRET = "hf_handstarted_not_for_logs"
# the shape of NVIDIA's recipe (a container named vllm on the host network, the Hugging Face cache mounted, the token
# in its environment), detached instead of interactive, with settings the collection's own baseline does not have
HAND_RUN = (
    "docker run -d --runtime nvidia --network host --ipc host --name vllm"
    " -v /root/.cache/huggingface:/root/.cache/huggingface -e HF_TOKEN=%s -e HF_HUB_OFFLINE=1"
    " vllm/vllm-openai:v0.20.0 meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 8000"
    " --max-model-len 6144 --gpu-memory-utilization 0.75" % SECRET
)


def _hand_container(live, name):
    out = live.ssh(name, "docker inspect --format '{{json .}}' vllm", check=True).stdout
    info = json.loads(out)
    return {"id": info["Id"], "pid": info["State"]["Pid"], "started": info["State"]["StartedAt"], "running": info["State"]["Running"]}


def test_a_vllm_container_started_by_hand_is_refused_and_keeps_serving_untouched(live, kept):
    """First contact: the operator's own container (NVIDIA's recipe, named vllm like the collection's) is never removed
    or restarted: enable_speculation and disable_speculation leave that device alone, report it as refused with its
    command line (the token masked) and fail at their end, while the other devices go on."""
    host = LOCAL
    files = "stat -c '%n %Y %s' /etc/vllm/serve.yaml /etc/systemd/system/vllm.service"
    live.ssh(host, "systemctl stop vllm.service", check=True)
    try:
        live.ssh(host, HAND_RUN, check=True)
        live.wait_healthy(host, lambda: (_hand_container(live, host)["running"], live.ssh(host, "docker logs --tail 40 vllm").stderr), deadline_s=300)
        before, files_before = _hand_container(live, host), live.ssh(host, files, check=True).stdout

        # the operator's device and one more that goes on (a skipped one: no trial, no restart)
        inventory = live.subset("hand-hosts", (host, DOCKER))
        proc = live.playbook("hand", inventory=inventory)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, tail(out)  # the run fails at its end, naming the refused device
        report = host_report(live, "hand")
        assert report[host]["outcome"] == "refused", report[host]
        reason = report[host]["reason"]
        for part in ("container 'vllm'", "vllm/vllm-openai:v0.20.0", "--max-model-len 6144", "HF_TOKEN", "not started by vllm.service",
                     "nothing was changed on this host", "stop and disable that server"):  # fmt: skip
            assert part in reason, (part, reason)
        # what to set for the collection to serve the same, read from the container on the device: valid settings
        settings = json.loads(re.search(r"which serve what it serves: (\{.*?\})(;|$)", reason).group(1))
        assert settings == {
            "vllm_server_container_name": "vllm",
            "vllm_server_gpu_memory_utilization": 0.75,
            "vllm_server_hf_cache_dir": "/root/.cache/huggingface",
            "vllm_server_host": "0.0.0.0",
            "vllm_server_image": "vllm/vllm-openai:v0.20.0",
            "vllm_server_image_flavor": "upstream",
            "vllm_server_max_model_len": 6144,
            "vllm_server_model": "meta-llama/Llama-3.1-8B-Instruct",
            "vllm_server_oci_runtime": "nvidia",
            "vllm_server_port": 8000,
            "vllm_server_runtime": "docker",
        }, reason
        assert "from Ansible Vault, vllm_server_hf_token (its HF_TOKEN)" in reason, reason
        assert "refused: host %s" % host in out, tail(out)
        assert report[DOCKER]["outcome"] == "skip", report[DOCKER]  # the other device went on
        with open(os.path.join(live.work, "hand", "latest.json")) as f:
            assert SECRET not in f.read() + out

        # disable_speculation refuses it too: it would have replaced the operator's server with the collection's baseline
        proc = live.playbook("hand-disable", inventory=inventory, playbook=DISABLE)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "container 'vllm'" in out and SECRET not in out, tail(out)

        # asserted on the live server: the same container, the same process, never restarted; the collection's files untouched
        assert _hand_container(live, host) == before
        assert live.http_get(host, "/health")[0] == 200
        assert live.ssh(host, "systemctl is-active vllm.service").stdout.strip() != "active"
        assert live.ssh(host, files, check=True).stdout == files_before
    finally:
        live.ssh(host, "docker rm -f vllm")
        live.ssh(host, "systemctl start vllm.service", check=True)


def test_zz_fleet_down(live):
    proc = fleet_cmd("down")
    assert proc.returncode == 0, proc.stderr
    assert not os.path.exists(ops.STATE_JSON)
