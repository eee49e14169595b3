# SPDX-License-Identifier: Apache-2.0
"""Fleet descriptions, identity files, inventory layout and the L4T stubs (no root, nothing started)."""

import importlib.metadata
import os
import subprocess

import pytest
import yaml
from fleet_helpers import CI_FLEET, FLEET_DIR, config, fleet_cmd, ops
from jlfleet import description, identity
from jlfleet.util import FleetError

PROFILES = description.load_profiles()
DEMO = os.path.join(FLEET_DIR, "demo.yml")
BENCH = os.path.join(FLEET_DIR, "bench.yml")


def write(tmp_path, data, name="fleet.yml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return str(path)


def refused(tmp_path, data):
    path = write(tmp_path, data)
    with pytest.raises(FleetError) as exc:
        description.load_fleet(path, profiles=PROFILES)
    return path, str(exc.value)


def host(name="h1", profile="agx-orin-64gb", **kw):
    return dict(name=name, profile=profile, **kw)


# ------------------------------------------------------------------ the shipped descriptions


@pytest.mark.parametrize("path", [DEMO, CI_FLEET, BENCH, os.path.join(FLEET_DIR, "faults.yml")])
def test_shipped_descriptions_are_valid(path):
    fleet = description.load_fleet(path)
    addresses = [h.address for h in fleet.hosts]
    assert len(set(addresses)) == len(addresses)
    assert all(a.startswith(config.SUBNET_PREFIX) for a in addresses)


def test_demo_fleet_has_the_required_mix():
    fleet = description.load_fleet(DEMO)
    profiles = {h.profile_name for h in fleet.hosts}
    for p in (
        "thor-t5000",
        "thor-t4000",
        "agx-orin-64gb",
        "agx-orin-32gb",
        "agx-orin-industrial",
        "igx-orin",
        "orin-nx-16gb",
        "orin-nano-8gb",
        "orin-nano-8gb-super",
        "xavier-agx",
    ):
        assert p in profiles, p
    orin = [h for h in fleet.hosts if h.family == "agx_orin"]
    assert any(h.sim.get("acceptance_scale", 1.0) < 0.5 for h in orin), "an AGX Orin with a small gain"
    low = [h for h in fleet.hosts if h.mem_available_kib < h.profile["mem_available_kib"]]
    assert low and all(h.sim["account_memory"] for h in low), "a host with low MemAvailable"
    assert [h for h in fleet.hosts if h.variant == "docker"], "a container-runtime host"
    assert all("vllm_server_model" in h.vars for h in fleet.hosts)


def test_bench_fleet_has_twenty_hosts():
    assert len(description.load_fleet(BENCH).hosts) == 20


# ------------------------------------------------------------------ validation


def test_unknown_profile_lists_the_allowed_ones(tmp_path):
    path, msg = refused(tmp_path, {"hosts": [host(profile="agx-orin-128gb")]})
    assert path in msg
    assert "host 'h1' (hosts[0])" in msg
    assert "unknown profile 'agx-orin-128gb'" in msg
    for name in PROFILES:
        assert name in msg


def test_tmpfs_mounts_are_sized_and_passed_to_podman(tmp_path):
    fleet = description.load_fleet(write(tmp_path, {"hosts": [host(tmpfs={"/etc/vllm": 4})]}), profiles=PROFILES)
    assert fleet.hosts[0].tmpfs == {"/etc/vllm": 4}
    args = ops._podman_run_args(fleet.hosts[0], fleet.hosts, str(tmp_path), [], "img")
    assert args[args.index("--tmpfs") + 1] == "/etc/vllm:rw,size=4m,mode=0755"


@pytest.mark.parametrize("bad", [{"etc": 4}, {"/etc/../x": 4}, {"/etc/vllm": 0}, {"/etc/vllm": 65}, {"/etc/vllm": "4m"}, ["/etc/vllm"]])
def test_bad_tmpfs_is_refused(tmp_path, bad):
    _unused, msg = refused(tmp_path, {"hosts": [host(tmpfs=bad)]})
    assert "tmpfs must map absolute paths to sizes in MiB" in msg


def test_duplicate_name(tmp_path):
    _unused, msg = refused(tmp_path, {"hosts": [host(), host(profile="thor-t5000")]})
    assert "duplicate name 'h1' (also hosts[0])" in msg


@pytest.mark.parametrize("bad", ["Orin1", "orin_1", "-orin", "orin-", "a" * 41, "orin.local", ""])
def test_bad_name_characters(tmp_path, bad):
    _unused, msg = refused(tmp_path, {"hosts": [host(name=bad)]})
    assert "bad name %r" % bad in msg


def test_too_many_hosts_for_the_address_range(tmp_path):
    hosts = [host(name="h%d" % i) for i in range(config.MAX_HOSTS + 1)]
    _unused, msg = refused(tmp_path, {"hosts": hosts})
    assert "%d hosts do not fit the address range" % (config.MAX_HOSTS + 1) in msg


def test_the_largest_fleet_fits(tmp_path):
    hosts = [host(name="h%d" % i) for i in range(config.MAX_HOSTS)]
    fleet = description.load_fleet(write(tmp_path, {"hosts": hosts}), profiles=PROFILES)
    assert fleet.hosts[-1].address == "10.200.0.254"


def test_unknown_keys_everywhere(tmp_path):
    data = {
        "nme": "x",
        "defaults": {"profile": "thor-t5000"},
        "hosts": [host(vrs={}, sim={"timescale": 1, "faults": {"crash_after": 1}})],
    }
    _unused, msg = refused(tmp_path, data)
    assert "unknown top-level key 'nme'" in msg
    assert "defaults: unknown key 'profile'" in msg
    assert "host 'h1' (hosts[0]): unknown key 'vrs'" in msg
    assert "unknown sim key 'timescale'" in msg
    assert "unknown sim.faults key 'crash_after'" in msg


def test_wrong_types(tmp_path):
    data = {
        "hosts": [
            host(name="a", sim={"time_scale": "fast", "seed": 1.5, "account_memory": "yes"}),
            host(name="b", vars=["x"], variant="lxc"),
            host(name="c", mem_available_kib=-1),
            host(name="d", mem_available_kib=PROFILES["agx-orin-64gb"]["mem_total_kib"] + 1),
            "e",
        ]
    }
    path, msg = refused(tmp_path, data)
    assert "host 'a' (hosts[0]): sim.time_scale must be a number > 0, got 'fast'" in msg
    assert "sim.seed must be an integer, got 1.5" in msg
    assert "sim.account_memory must be true or false, got 'yes'" in msg
    assert "host 'b' (hosts[1]): vars must be a mapping, got a list" in msg
    assert "variant must be one of native, docker, got 'lxc'" in msg
    assert "host 'c' (hosts[2]): mem_available_kib must be a positive integer" in msg
    assert "host 'd' (hosts[3]): mem_available_kib %d exceeds" % (PROFILES["agx-orin-64gb"]["mem_total_kib"] + 1) in msg
    assert "%s: hosts[4]: expected a mapping, got a string" % path in msg


def test_reserved_vars_and_groups(tmp_path):
    data = {
        "hosts": [host(vars={"ansible_host": "1.2.3.4", "fleet_profile": "x", "9bad": 1})],
        "groups": {"all": ["h1"], "jetson_thor": ["h1"], "canary": ["nope"]},
    }
    _unused, msg = refused(tmp_path, data)
    assert "vars key 'ansible_host' is set by the fleet itself" in msg
    assert "vars key 'fleet_profile' is set by the fleet itself" in msg
    assert "vars key '9bad' is not a valid Ansible variable name" in msg
    assert "groups.all: 'all' cannot be used as a group name" in msg
    assert "groups.jetson_thor: 'jetson_thor' cannot be used" in msg
    assert "groups.canary: unknown host 'nope'" in msg


def test_not_yaml_and_not_a_mapping(tmp_path):
    _unused, msg = refused(tmp_path, "hosts: [\n")
    assert "not valid YAML" in msg
    _unused, msg = refused(tmp_path, "- a\n- b\n")
    assert "expected a mapping with a 'hosts' list, got a list" in msg


def test_settings_merge_defaults_host_and_profile(tmp_path):
    data = {
        "defaults": {"sim": {"noise": 0.1, "faults": {"slow_start_s": 2}}, "vars": {"a": 1, "b": 1}},
        "hosts": [
            host(sim={"faults": {"crash_after_requests": 3}, "acceptance_scale": 0.3}, vars={"b": 2}),
            host(name="h2", profile="orin-nano-8gb"),
        ],
    }
    fleet = description.load_fleet(write(tmp_path, data), profiles=PROFILES)
    h1, h2 = fleet.hosts
    assert h1.sim["faults"] == {"slow_start_s": 2, "crash_after_requests": 3}
    assert h1.sim["noise"] == 0.1
    assert h1.sim["acceptance_scale"] == 0.3
    assert h1.sim["device"] == {"name": "agx-orin-64gb", "bandwidth_gbs": 204.8, "tflops": 42.6}
    assert h2.sim["device"]["bandwidth_gbs"] == PROFILES["orin-nano-8gb"]["sim"]["bandwidth_gbs"]
    assert "acceptance_scale" not in h2.sim
    assert h1.vars == {"a": 1, "b": 2}
    assert h2.vars == {"a": 1, "b": 1}
    assert h1.sim["seed"] != h2.sim["seed"]
    again = description.load_fleet(write(tmp_path, data, "again.yml"), profiles=PROFILES)
    assert again.hosts[0].sim["seed"] == h1.sim["seed"]
    assert (h1.address, h1.netns, h1.veth, h1.container) == ("10.200.0.11", "jlf-h1", "jlv001", "jlf-h1")


# ------------------------------------------------------------------ identity files and inventory


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_l4t_package_version_of_every_profile(name):
    version = description.l4t_package_version(PROFILES[name]["nv_tegra_release"])
    line = PROFILES[name]["nv_tegra_release"]
    major = line.split()[1][1:]
    revision = line.split("REVISION: ")[1].split(",")[0]
    assert version.startswith("%s.%s-" % (major, revision))
    assert len(version.split("-")[1]) == 14


def test_l4t_package_version_examples():
    line = "# R36 (release), REVISION: 4.3, GCID: 0, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 01:49:37 UTC 2025"
    assert description.l4t_package_version(line) == "36.4.3-20250108014937"
    assert description.l4t_package_version("# R38 (release), REVISION: 2.0") == "38.2.0-00000000000000"
    assert description.l4t_package_version("garbage") is None


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_meminfo_is_consistent(name):
    p = PROFILES[name]
    text = identity.meminfo(p["mem_total_kib"], p["mem_available_kib"])
    values = {}
    for line in text.splitlines():
        key, _unused, rest = line.partition(":")
        values[key] = int(rest.split()[0])
    assert values["MemTotal"] == p["mem_total_kib"]
    assert values["MemAvailable"] == p["mem_available_kib"]
    assert values["MemFree"] <= values["MemAvailable"]
    # what `free` computes as used memory must be positive
    assert values["MemTotal"] - values["MemFree"] - values["Buffers"] - values["Cached"] > 0
    assert text.startswith("MemTotal:       ")


def test_inventory_layout(tmp_path):
    data = {
        "hosts": [
            host(name="orin", vars={"vllm_server_model": "Qwen/Qwen3-8B", "nested": {"k": [1, 2]}}),
            host(name="thor", profile="thor-t5000", variant="docker"),
            host(name="nano", profile="orin-nano-8gb-super"),
        ],
        "groups": {"specdec_canary": ["orin"]},
    }
    fleet = description.load_fleet(write(tmp_path, data), profiles=PROFILES)
    state = {
        "fleet": fleet.name,
        "description": "x.yml",
        "hosts": [h.to_dict() for h in fleet.hosts],
        "groups": fleet.groups,
        "key": "/k/id_ed25519",
    }
    out = tmp_path / "hosts.yml"
    ops.write_inventory(state, str(out))
    inv = yaml.safe_load(out.read_text())["all"]
    assert inv["vars"]["ansible_user"] == "root"
    assert inv["vars"]["ansible_ssh_private_key_file"] == "/k/id_ed25519"
    assert inv["vars"]["vllm_server_read_write_paths"] == ["/run/vllm-sim", "/etc/vllm-sim/meminfo"]
    assert inv["hosts"]["orin"]["ansible_host"] == "10.200.0.11"
    assert inv["hosts"]["orin"]["vllm_server_model"] == "Qwen/Qwen3-8B"
    assert inv["hosts"]["orin"]["nested"] == {"k": [1, 2]}
    assert inv["hosts"]["thor"]["fleet_variant"] == "docker"
    assert inv["hosts"]["nano"]["fleet_expect"] == {"family": "orin_nano", "variant": "8gb"}
    assert set(inv["children"]) == {
        "jetson_agx_orin",
        "jetson_thor",
        "jetson_orin_nano",
        "fleet_docker",
        "specdec_canary",
    }
    assert set(inv["children"]["jetson_agx_orin"]["hosts"]) == {"orin"}
    assert set(inv["children"]["fleet_docker"]["hosts"]) == {"thor"}
    assert set(inv["children"]["specdec_canary"]["hosts"]) == {"orin"}
    assert out.read_text().startswith("---\n")


def test_validate_command_names_file_and_host(tmp_path):
    path = write(tmp_path, {"hosts": [host(profile="nope")]})
    proc = fleet_cmd("validate", path)
    assert proc.returncode == 2
    assert path in proc.stderr
    assert "host 'h1' (hosts[0]): unknown profile 'nope'" in proc.stderr


# ------------------------------------------------------------------ L4T stubs


def run_stub(tmp_path, *args, mode=None):
    conf = tmp_path / "nvpmodel.conf"
    status = tmp_path / "status"
    conf.write_text(identity.nvpmodel_conf(mode or {"name": "MAXN_SUPER", "id": 2}))
    env = dict(os.environ, NVPMODEL_CONF=str(conf), NVPMODEL_STATUS=str(status))
    return subprocess.run(["sh", os.path.join(FLEET_DIR, "l4t", "nvpmodel"), *args], capture_output=True, text=True, env=env, check=False)


def test_nvpmodel_query_layout(tmp_path):
    proc = run_stub(tmp_path, "-q")
    assert proc.returncode == 0
    assert proc.stdout == "NV Power Mode: MAXN_SUPER\n2\n"


def test_nvpmodel_set_mode(tmp_path):
    assert run_stub(tmp_path, "-m", "2").returncode == 0
    assert (tmp_path / "status").read_text() == "pmode:0002 fmode:quiet\n"
    bad = run_stub(tmp_path, "-m", "7")
    assert bad.returncode == 1
    assert "Invalid mode: 7" in bad.stderr
    assert run_stub(tmp_path, "-q").stdout == "NV Power Mode: MAXN_SUPER\n2\n"


def test_nvpmodel_reads_the_status_file(tmp_path):
    (tmp_path / "status").write_text("pmode:0000 fmode:quiet\n")
    proc = run_stub(tmp_path, "-q", mode={"name": "MAXN", "id": 0})
    assert proc.stdout == "NV Power Mode: MAXN\n0\n"


def test_jlfleet_command_is_this_trees_fleet():
    """`make venv` installs tests/fleet in editable mode: the `jlfleet` command runs this tree's code."""
    (script,) = [ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name == "jlfleet"]
    assert (script.value, script.dist.name) == ("jlfleet.cli:main", "jetson-llm-fleet")
    assert os.path.dirname(os.path.abspath(config.__file__)) == os.path.join(FLEET_DIR, "jlfleet")
    proc = fleet_cmd("--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: jlfleet"), proc.stdout + proc.stderr
