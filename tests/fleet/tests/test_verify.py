# SPDX-License-Identifier: Apache-2.0
"""Day two end to end: ``playbooks/verify_speculation.yml`` over SSH against the two-host fleet of
``tests/fleet/verify.yml``, after ``enable_speculation.yml`` kept speculation on both hosts.

Order matters and is the file's order: the rollout (both keep, the textfile written by the record
step), verify on the healthy fleet (both stay kept), then the acceptance of v-orin-drift collapses (its
simulator's acceptance_scale drops and vLLM restarts, as after an upgrade) and verify reverts that host
only, checked on the live server, the device's records, the textfile and the report directory; a
third verify leaves the reverted host alone. Run as root: ``make fleet-test FLEET_PYTEST="-k verify"``.
The module fixture brings the fleet up and always tears it down.
"""

import json
import os
import re
import subprocess
import time
import urllib.error

import pytest
from fleet_helpers import BIN, FLEET_DIR, REPO, RunningFleet, ansible_env, config, fleet_cmd, ops

VERIFY_FLEET = os.path.join(FLEET_DIR, "verify.yml")
ENABLE = os.path.join(REPO, "playbooks", "enable_speculation.yml")
VERIFY = os.path.join(REPO, "playbooks", "verify_speculation.yml")
HOSTS = ("v-orin-canary", "v-orin-drift")
DRIFT = "v-orin-drift"
SERVE_YAML = "/etc/vllm/serve.yaml"
STATE = "/var/lib/jetson_llm/speculative/state.json"
HISTORY = "/var/lib/jetson_llm/speculative/history"
TEXTFILE = "/var/lib/node_exporter/textfile_collector/jetson_llm_speculative.prom"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
SAMPLE = re.compile(r"^(jetson_llm_speculative_\w+)\{(.*)\} (\S+)$")


class DayTwo(RunningFleet):
    def __init__(self, state, inventory, report_dir):
        super().__init__(state)
        self.inventory = inventory
        self.report_dir = report_dir

    def playbook(self, playbook, timeout=1800):
        cmd = [
            os.path.join(BIN, "ansible-playbook"),
            "-i",
            self.inventory,
            playbook,
            "-e",
            json.dumps({"jetson_llm_serial": ["100%"], "jetson_llm_tune_on_canaries": False, "speculative_decoding_report_dir": self.report_dir}),
        ]
        return subprocess.run(cmd, capture_output=True, text=True, env=ansible_env(), timeout=timeout, check=False)

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

    def report(self, name):
        with open(os.path.join(self.report_dir, "verify", name + ".json")) as f:
            return json.load(f)


def recap(stdout):
    keys = ("ok", "changed", "unreachable", "failed")
    return {m.group(1): dict(zip(keys, (int(g) for g in m.groups()[1:]))) for m in RECAP.finditer(stdout)}


def tail(proc, n=6000):
    return proc.stdout[-n:] + proc.stderr[-2000:]


def metric(samples, name, **labels):
    want = frozenset(labels.items())
    found = [v for (n, lb), v in samples.items() if n == "jetson_llm_speculative_" + name and want <= lb]
    assert len(found) == 1, (name, labels, samples)
    return found[0]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the fleet tests need root (network namespaces, podman)")
    work = tmp_path_factory.mktemp("verify")
    inventory = str(work / "hosts.yml")
    proc = fleet_cmd("up", VERIFY_FLEET, "--inventory", inventory)
    try:
        if proc.returncode != 0:
            pytest.fail("fleet up failed (%d):\n%s%s" % (proc.returncode, proc.stdout, proc.stderr))
        with open(ops.STATE_JSON) as f:
            yield DayTwo(json.load(f), inventory, str(work / "report"))
    finally:
        fleet_cmd("down")


@pytest.fixture(scope="module")
def rollout(fleet):
    proc = fleet.playbook(ENABLE)
    assert proc.returncode == 0, tail(proc)
    return proc


def test_the_rollout_keeps_both_and_exports_the_decision(fleet, rollout):
    for host in HOSTS:
        assert fleet.read_json(host, STATE)["decision"] == "keep", host
        samples = fleet.textfile(host)
        assert metric(samples, "decision", host=host, decision="keep") == 1
        assert metric(samples, "decision", host=host, decision="revert") == 0
        assert 0 < metric(samples, "acceptance_rate", host=host, source="trial") <= 1
        # atomic write: no temporary file is left next to the exported one, and it is world-readable
        listing = fleet.ssh(host, "ls -a %s; stat -c %%a %s" % (os.path.dirname(TEXTFILE), TEXTFILE), check=True).stdout.split()
        assert listing == [".", "..", os.path.basename(TEXTFILE), "644"], (host, listing)


def test_verify_leaves_healthy_kept_devices_kept(fleet, rollout):
    proc = fleet.playbook(VERIFY)
    assert proc.returncode == 0, tail(proc)
    counts = recap(proc.stdout)
    assert all(counts[h]["failed"] == 0 for h in HOSTS), counts
    for host in HOSTS:
        found = fleet.report(host)
        assert found["action"] == "keep", (host, found["reason"])
        assert found["acceptance_rate"] >= 0.30 and found["gain"] > 0, found
        assert "%s: recorded keep -> keep" % host in proc.stdout
        state = fleet.read_json(host, STATE)
        assert state["decision"] == "keep" and state["verify"]["action"] == "keep", host
        samples = fleet.textfile(host)
        assert metric(samples, "decision", host=host, decision="keep") == 1
        assert metric(samples, "acceptance_rate", host=host, source="verify") == pytest.approx(found["acceptance_rate"])
        assert "vllm:spec_decode_num_drafts" in fleet.http_get(host, "/metrics")[1], host
        assert "speculative-config" in fleet.ssh(host, "cat %s" % SERVE_YAML, check=True).stdout, host


def collapse_acceptance(fleet, host, scale):
    """As after an upgrade that breaks the speculator: the simulator accepts far fewer draft tokens."""
    path = os.path.join(config.FLEET_STATE, "hosts", host, "settings.json")
    with open(path) as f:
        settings = json.load(f)
    settings["acceptance_scale"] = scale
    with open(path, "w") as f:  # same inode: the file is bind-mounted into the host
        f.write(json.dumps(settings, indent=2, sort_keys=True) + "\n")
    fleet.ssh(host, "systemctl restart vllm.service", check=True)
    end = time.monotonic() + 300
    while time.monotonic() < end:
        try:
            if fleet.http_get(host, "/health", timeout=2)[0] == 200:
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    raise AssertionError("%s: vLLM did not come back after the restart" % host)


def test_verify_reverts_the_device_whose_acceptance_collapsed(fleet, rollout):
    collapse_acceptance(fleet, DRIFT, 0.05)
    assert "vllm:spec_decode_num_drafts" in fleet.http_get(DRIFT, "/metrics")[1]  # still speculating, badly
    proc = fleet.playbook(VERIFY)
    assert proc.returncode == 0, tail(proc)
    found = fleet.report(DRIFT)
    assert found["action"] == "revert", found
    assert found["acceptance_rate"] < 0.30 and "under the floor" in found["reason"], found
    assert re.search(r"%s: recorded keep -> revert \(acceptance \d+\.\d %%" % DRIFT, proc.stdout), tail(proc)
    assert "%s: speculation reverted" % DRIFT in proc.stdout, tail(proc)
    # the live server serves the baseline: no speculative config, no spec-decode counters
    assert fleet.http_get(DRIFT, "/health")[0] == 200
    assert "vllm:spec_decode" not in fleet.http_get(DRIFT, "/metrics")[1]
    assert "speculative-config" not in fleet.ssh(DRIFT, "cat %s" % SERVE_YAML, check=True).stdout
    # the device's records: the decision is now a revert by verify, the check is in the history
    state = fleet.read_json(DRIFT, STATE)
    assert state["decision"] == "revert" and state["label"] == "revert (verify)", state["label"]
    assert state["verify"]["action"] == "revert"
    assert any(f.startswith("verify-") for f in fleet.ssh(DRIFT, "ls %s" % HISTORY, check=True).stdout.split())
    samples = fleet.textfile(DRIFT)
    assert metric(samples, "decision", host=DRIFT, decision="revert") == 1
    assert metric(samples, "decision", host=DRIFT, decision="keep") == 0
    assert metric(samples, "acceptance_rate", host=DRIFT, source="verify") == pytest.approx(found["acceptance_rate"])
    assert metric(samples, "verify_timestamp_seconds", host=DRIFT, action="revert") > 0
    # the healthy host is untouched
    assert fleet.report("v-orin-canary")["action"] == "keep"
    assert "vllm:spec_decode_num_drafts" in fleet.http_get("v-orin-canary", "/metrics")[1]


def test_verify_leaves_a_reverted_device_alone(fleet, rollout):
    before = fleet.ssh(DRIFT, "sha256sum %s %s %s; systemctl show -p MainPID vllm.service" % (STATE, TEXTFILE, SERVE_YAML), check=True).stdout
    proc = fleet.playbook(VERIFY)
    assert proc.returncode == 0, tail(proc)
    found = fleet.report(DRIFT)
    assert found["action"] == "leave" and "recorded decision is revert" in found["reason"], found
    assert "%s: recorded revert -> leave" % DRIFT in proc.stdout
    after = fleet.ssh(DRIFT, "sha256sum %s %s %s; systemctl show -p MainPID vllm.service" % (STATE, TEXTFILE, SERVE_YAML), check=True).stdout
    assert after == before
