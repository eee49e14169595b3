# SPDX-License-Identifier: Apache-2.0
"""Write the Jetson identity of every platform of a Molecule scenario, as the simulated fleet does.

Usage: identity.py SCENARIO_DIR

molecule/fleet.yml describes every scenario's host in the fleet description format
(docs/devel/fleet.md): name, profile, variant, mem_available_kib and sim. Role variables belong in
the scenario's molecule.yml, so `vars` is refused. For each platform of SCENARIO_DIR/molecule.yml
this writes, under
/tmp/jetson-llm-molecule/hosts/NAME/, the files the fleet mounts into a host (device tree, L4T
release, boot control, meminfo, simulator settings, nvpmodel state, the fake nvidia-l4t-core
package) plus an /etc/hosts and an empty resolv.conf, using the fleet's own helpers
(tests/fleet/jlfleet). It then checks that the platform in molecule.yml mounts exactly these files
with the options the fleet gives that variant, so the scenarios cannot drift from the fleet.
"""

import os
import shutil
import sys

import yaml
from jlfleet import config, identity
from jlfleet.description import load_fleet
from jlfleet.util import FleetError, write_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


MOLECULE_DIR = os.path.join(REPO, "molecule")
DESCRIPTION = os.path.join(MOLECULE_DIR, "fleet.yml")
ROOT = "/tmp/jetson-llm-molecule"
HOSTS_DIR = os.path.join(ROOT, "hosts")
DEB_DIR = os.path.join(ROOT, "debs")
NAME_PREFIX = "molecule-"
ULIMITS = ["nofile=20000:20000", "nproc=32768:32768"]


def host_dir(name):
    return os.path.join(HOSTS_DIR, name)


def write_host(host):
    """Write the files of one host; return the volumes its platform must mount."""
    hdir = host_dir(host.name)
    os.makedirs(hdir, exist_ok=True)
    mounts = identity.write_host_files(host, hdir, DEB_DIR)
    # The package is built once per L4T release; each host mounts its own copy under a fixed name.
    volumes = []
    for mount in mounts:
        src, dst = mount.split(":")[:2]
        if dst == "/opt/jlf/nvidia-l4t-core.deb":
            own = os.path.join(hdir, "nvidia-l4t-core.deb")
            shutil.copyfile(src, own)
            volumes.append(mount.replace(src, own, 1))
        else:
            volumes.append(mount)
    # Network "none": only loopback. The host's own name resolves without DNS, as on the fleet.
    write_file(
        os.path.join(hdir, "hosts"),
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n" % host.name,
    )
    write_file(os.path.join(hdir, "resolv.conf"), "")
    volumes += [
        "%s:/etc/hosts" % os.path.join(hdir, "hosts"),
        "%s:/etc/resolv.conf:ro" % os.path.join(hdir, "resolv.conf"),
        "%s:/opt/vllm/lib/vllm_sim:ro" % config.SIM_PACKAGE,
    ]
    if host.variant == "docker":
        docker_dir = os.path.join(hdir, "docker")
        os.makedirs(docker_dir, exist_ok=True)
        volumes.append("%s:/var/lib/docker" % docker_dir)
    return volumes


def expected_platform(host):
    """The podman options of the fleet for this host's variant (tests/fleet/jlfleet/ops.py)."""
    image = config.DOCKER_IMAGE if host.variant == "docker" else config.HOST_IMAGE
    want = {
        "image": image,
        "pre_build_image": True,
        "command": "/sbin/init",
        "systemd": "always",
        "network": "none",
        "ulimits": ULIMITS,
    }
    if host.variant == "docker":
        # docs/devel/fleet.md, "Safety": privileged only with a private cgroup namespace, and no cgroup mount.
        want["privileged"] = True
        want["extra_opts"] = ["--cgroupns=private", "--stop-timeout=3", "--no-hosts"]
    else:
        want["security_opts"] = ["unmask=/sys/firmware"]
        want["extra_opts"] = ["--stop-timeout=3", "--no-hosts"]
    return want


def load_platforms(scenario_dir):
    with open(os.path.join(scenario_dir, "molecule.yml")) as f:
        text = f.read().replace("${MOLECULE_PROJECT_DIRECTORY}", REPO)
    return {p["name"]: p for p in (yaml.safe_load(text) or {}).get("platforms") or []}


def check_platforms(platforms, hosts, volumes):
    problems = []
    for host in hosts:
        plat = platforms[host.name]
        for key, value in expected_platform(host).items():
            if plat.get(key) != value:
                problems.append("platform %s: %s must be %r (got %r)" % (host.name, key, value, plat.get(key)))
        have = plat.get("volumes") or []
        if sorted(have) != sorted(volumes[host.name]):
            problems.append(
                "platform %s: volumes must be exactly:\n      - %s\n    got:\n      - %s"
                % (host.name, "\n      - ".join(volumes[host.name]), "\n      - ".join(have))
            )
        if plat.get("privileged") and "--cgroupns=private" not in (plat.get("extra_opts") or []):
            problems.append("platform %s: privileged only with --cgroupns=private (docs/devel/fleet.md, Safety)" % host.name)
        if host.variant != "docker" and plat.get("privileged"):
            problems.append("platform %s: only container-capable hosts run privileged" % host.name)
        if any(":/sys/fs/cgroup" in v for v in have):
            problems.append("platform %s: never mount /sys/fs/cgroup into a host (docs/devel/fleet.md, Safety)" % host.name)
        for key in ("cgroupns", "pid_mode"):
            if key in plat:
                problems.append("platform %s: %s is not allowed" % (host.name, key))
    return problems


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: identity.py SCENARIO_DIR\n")
        return 2
    scenario_dir = os.path.abspath(argv[1])
    try:
        fleet = load_fleet(DESCRIPTION)
    except FleetError as exc:
        sys.stderr.write("%s\n" % exc)
        return 1
    problems = []
    for host in fleet.hosts:
        if not host.name.startswith(NAME_PREFIX):
            problems.append("%s: host %s: names must start with %r" % (DESCRIPTION, host.name, NAME_PREFIX))
        if host.vars:
            problems.append("%s: host %s: set role variables in molecule.yml, not in vars" % (DESCRIPTION, host.name))
    platforms = load_platforms(scenario_dir)
    known = {h.name: h for h in fleet.hosts}
    missing = sorted(set(platforms) - set(known))
    if not platforms or missing:
        problems.append("%s/molecule.yml: platforms %s are not hosts of %s" % (scenario_dir, missing or "(none)", DESCRIPTION))
    if problems:
        sys.stderr.write("\n".join(problems) + "\n")
        return 1
    hosts = [known[name] for name in platforms]
    volumes = {host.name: write_host(host) for host in hosts}
    problems = check_platforms(platforms, hosts, volumes)
    if problems:
        sys.stderr.write("%s/molecule.yml does not start the hosts as the fleet does:\n  %s\n" % (scenario_dir, "\n  ".join(problems)))
        return 1
    for host in hosts:
        print("%s: %s (%s), identity in %s" % (host.name, host.profile_name, host.variant, host_dir(host.name)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
