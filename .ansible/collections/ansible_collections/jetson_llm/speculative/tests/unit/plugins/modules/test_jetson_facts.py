# SPDX-License-Identifier: Apache-2.0
"""Run the jetson_facts module for real through `ansible localhost` against sysroot image trees.

Each simulated device profile (tests/fleet/profiles.yml) is written out as the files a Jetson
has (device tree, /etc/nv_tegra_release, /etc/nv_boot_control.conf, /proc/meminfo) under a
temporary root, and the module reads them through its ``sysroot`` option.
"""

import hashlib
import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ANSIBLE = os.path.join(ROOT, ".venv", "bin", "ansible")
CACHE = os.path.join(ROOT, ".cache")
PROFILES_FILE = os.path.join(ROOT, "tests", "fleet", "profiles.yml")
MODULE = "jetson_llm.speculative.jetson_facts"
PROC_DT = "/proc/device-tree"
SYS_DT = "/sys/firmware/devicetree/base"

with open(PROFILES_FILE) as _handle:
    PROFILES = yaml.safe_load(_handle)


def ansible_env(extra=None):
    env = dict(os.environ)
    env.update(
        {
            "HOME": os.path.join(CACHE, "home"),
            "ANSIBLE_COLLECTIONS_PATH": os.path.join(CACHE, "collections"),
            "ANSIBLE_LOCAL_TEMP": os.path.join(CACHE, "home", ".ansible", "tmp"),
            "ANSIBLE_REMOTE_TMP": os.path.join(CACHE, "home", ".ansible", "tmp"),
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
            "ANSIBLE_STDOUT_CALLBACK": "json",
            "ANSIBLE_LOCALHOST_WARNING": "false",
            "ANSIBLE_DEPRECATION_WARNINGS": "false",
            "ANSIBLE_NOCOLOR": "1",
            # The module runs under the controller's Python, as on a device with python3.
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        }
    )
    env.update(extra or {})
    return env


def run_module(args, check=False, env=None):
    """Run the module on localhost; return the host's result dictionary."""
    assert os.path.exists(ANSIBLE), "run `make venv collections` first: %s is missing" % ANSIBLE
    argv = [ANSIBLE, "localhost", "-m", MODULE]
    if args:
        argv += ["-a", json.dumps(args)]
    if check:
        argv.append("--check")
    proc = subprocess.run(argv, env=ansible_env(env), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    return result["plays"][0]["tasks"][0]["hosts"]["localhost"]


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data if isinstance(data, bytes) else data.encode())


def write_device_tree(root, directory, model, compatible):
    base = os.path.join(str(root), directory.lstrip("/"))
    if model is not None:
        write(os.path.join(base, "model"), model.encode() + b"\x00")
    if compatible is not None:
        write(os.path.join(base, "compatible"), b"".join(entry.encode() + b"\x00" for entry in compatible))


def meminfo_text(total_kib, available_kib):
    return (
        "MemTotal:       %8d kB\n"
        "MemFree:        %8d kB\n"
        "MemAvailable:   %8d kB\n"
        "Buffers:           40960 kB\n"
        "Cached:          1048576 kB\n"
        "SwapCached:            0 kB\n"
        "SwapTotal:       4194304 kB\n"
        "HugePages_Total:       0\n"
        "Hugepagesize:       2048 kB\n"
    ) % (total_kib, available_kib - 1048576, available_kib)


def build_sysroot(root, profile, device_tree=SYS_DT):
    """Write a profile's identity files under ``root``, the way the simulated fleet fakes them."""
    write_device_tree(root, device_tree, profile["model"], profile["compatible"])
    write(
        os.path.join(str(root), "etc", "nv_tegra_release"),
        profile["nv_tegra_release"] + "\n# KERNEL_VARIANT: oot\nTARGET_USERSPACE_LIB_DIR=nvidia\n",
    )
    if profile["nv_boot_control"]:
        write(os.path.join(str(root), "etc", "nv_boot_control.conf"), profile["nv_boot_control"])
    write(
        os.path.join(str(root), "proc", "meminfo"),
        meminfo_text(profile["mem_total_kib"], profile["mem_available_kib"]),
    )
    return str(root)


def tree_digest(root):
    digest = hashlib.sha256()
    for directory, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(directory, name)
            stat = os.lstat(path)
            digest.update(path.encode())
            digest.update(str((stat.st_mtime_ns, stat.st_mode, stat.st_size)).encode())
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    digest.update(handle.read())
    return digest.hexdigest()


def stub(path, body):
    write(path, "#!/bin/sh\n" + body)
    os.chmod(path, 0o700)
    return path


# --------------------------------------------------------------------------- every profile


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_sysroot(tmp_path, name):
    profile = PROFILES[name]
    sysroot = build_sysroot(tmp_path / "root", profile)
    result = run_module({"sysroot": sysroot})
    facts = result["ansible_facts"]["jetson"]

    assert result["changed"] is False
    assert result["device_tree_path"] == SYS_DT  # /proc/device-tree absent in the image: fallback
    assert {"family": facts["family"], "variant": facts["variant"]} == profile["expect"]
    assert facts["is_jetson"] is True
    assert facts["model"] == profile["model"]
    assert facts["compatible"] == profile["compatible"]
    assert facts["memory"] == {
        "total_mb": profile["mem_total_kib"] // 1024,
        "available_mb": profile["mem_available_kib"] // 1024,
        "total_gib": int(profile["mem_total_kib"] / 1048576.0 + 0.5),
    }
    assert facts["l4t"]["raw"] == profile["nv_tegra_release"]
    assert facts["l4t"]["release"] != "unknown"
    # nvpmodel only runs on the live system, never for a sysroot.
    assert facts["power_mode"] == {"name": None, "id": None}
    # Without nvpmodel, the Super profiles are recognised from their device tree.
    assert facts["super"] is (profile["nvpmodel"]["name"] == "MAXN_SUPER")
    assert facts["unknown_fields"] == []


def test_every_family_is_exercised():
    families = {profile["expect"]["family"] for profile in PROFILES.values()}
    assert families >= {"thor", "agx_orin", "orin_nx", "orin_nano", "igx_orin", "xavier"}


# --------------------------------------------------------------------------- check mode


def test_check_mode_returns_same_facts_and_changes_nothing(tmp_path):
    sysroot = build_sysroot(tmp_path / "root", PROFILES["agx-orin-64gb"])
    before = tree_digest(sysroot)
    normal = run_module({"sysroot": sysroot})
    checked = run_module({"sysroot": sysroot}, check=True)
    assert checked["changed"] is False
    assert checked["ansible_facts"] == normal["ansible_facts"]
    assert checked["ansible_facts"]["jetson"]["family"] == "agx_orin"
    assert tree_digest(sysroot) == before


# --------------------------------------------------------------------------- device-tree order


@pytest.fixture
def two_trees(tmp_path):
    """A root whose /proc/device-tree says Thor and whose /sys/firmware tree says AGX Orin."""
    root = build_sysroot(tmp_path / "root", PROFILES["agx-orin-64gb"], device_tree=SYS_DT)
    thor = PROFILES["thor-t5000"]
    write_device_tree(root, PROC_DT, thor["model"], thor["compatible"])
    return root


def test_device_tree_default_order_prefers_proc(two_trees):
    result = run_module({"sysroot": two_trees})
    assert result["device_tree_path"] == PROC_DT
    assert result["ansible_facts"]["jetson"]["family"] == "thor"


def test_device_tree_order_is_configurable(two_trees):
    result = run_module({"sysroot": two_trees, "device_tree_paths": [SYS_DT, PROC_DT]})
    assert result["device_tree_path"] == SYS_DT
    assert result["ansible_facts"]["jetson"]["family"] == "agx_orin"


def test_device_tree_compatible_alone_selects_a_path(tmp_path):
    root = build_sysroot(tmp_path / "root", PROFILES["agx-orin-64gb"], device_tree=SYS_DT)
    write_device_tree(root, PROC_DT, None, ["nvidia,p3768-0000+p3767-0001", "nvidia,tegra234"])
    result = run_module({"sysroot": root})
    assert result["device_tree_path"] == PROC_DT
    facts = result["ansible_facts"]["jetson"]
    assert (facts["family"], facts["variant"], facts["model"]) == ("orin_nx", "8gb", None)


def test_device_tree_absolute_symlink_stays_inside_sysroot(tmp_path):
    # On L4T /proc/device-tree is a link to /sys/firmware/devicetree/base; inside an image the
    # absolute target must resolve under the sysroot, not on the machine running the module.
    root = build_sysroot(tmp_path / "root", PROFILES["orin-nano-4gb"], device_tree=SYS_DT)
    os.makedirs(os.path.join(root, "proc"), exist_ok=True)
    os.symlink(SYS_DT, os.path.join(root, "proc", "device-tree"))
    result = run_module({"sysroot": root})
    assert result["device_tree_path"] == PROC_DT
    facts = result["ansible_facts"]["jetson"]
    assert (facts["family"], facts["variant"]) == ("orin_nano", "4gb")


def test_symlink_loop_is_treated_as_absent(tmp_path):
    root = build_sysroot(tmp_path / "root", PROFILES["xavier-nx"], device_tree=SYS_DT)
    os.makedirs(os.path.join(root, "proc"), exist_ok=True)
    os.symlink("/proc/device-tree", os.path.join(root, "proc", "device-tree"))
    result = run_module({"sysroot": root})
    assert result["device_tree_path"] == SYS_DT
    assert result["ansible_facts"]["jetson"]["family"] == "xavier"


def test_no_device_tree_keeps_other_sources(tmp_path):
    profile = dict(PROFILES["agx-orin-64gb"], model=None, compatible=None)
    root = build_sysroot(tmp_path / "root", profile)
    result = run_module({"sysroot": root})
    facts = result["ansible_facts"]["jetson"]
    assert result["device_tree_path"] is None
    # The boot-control TNSPEC still names the AGX Orin module.
    assert (facts["family"], facts["variant"], facts["variant_source"]) == ("agx_orin", "64gb", "boot_control")
    assert facts["l4t"]["release"] == "36.4.3"


def test_empty_sysroot_is_not_a_jetson(tmp_path):
    result = run_module({"sysroot": str(tmp_path)})
    facts = result["ansible_facts"]["jetson"]
    assert result["device_tree_path"] is None
    assert (facts["is_jetson"], facts["family"]) == (False, "none")
    assert facts["memory"] == {"total_mb": None, "available_mb": None, "total_gib": None}


# --------------------------------------------------------------------------- nvpmodel


def test_nvpmodel_runs_on_live_system(tmp_path):
    path = stub(str(tmp_path / "nvpmodel"), '[ "$1" = "-q" ] && printf "NV Power Mode: MAXN_SUPER\\n2\\n"\n')
    facts = run_module({"nvpmodel_path": path})["ansible_facts"]["jetson"]
    assert facts["power_mode"] == {"name": "MAXN_SUPER", "id": 2}


def test_nvpmodel_one_line_layout_found_on_path(tmp_path):
    bindir = tmp_path / "bin"
    stub(str(bindir / "nvpmodel"), '[ "$1" = "-q" ] && echo "NV Power Mode: 120W / 1"\n')
    env = {"PATH": "%s:%s" % (bindir, os.environ.get("PATH", "/usr/bin:/bin"))}
    facts = run_module({}, env=env)["ansible_facts"]["jetson"]
    assert facts["power_mode"] == {"name": "120W", "id": 1}


def test_nvpmodel_not_run_for_sysroot(tmp_path):
    marker = tmp_path / "ran"
    path = stub(str(tmp_path / "nvpmodel"), 'touch "%s"\necho "NV Power Mode: MAXN"\necho 0\n' % marker)
    root = build_sysroot(tmp_path / "root", PROFILES["orin-nano-8gb-super"])
    facts = run_module({"sysroot": root, "nvpmodel_path": path})["ansible_facts"]["jetson"]
    assert facts["power_mode"] == {"name": None, "id": None}
    assert not marker.exists()


@pytest.mark.parametrize(
    "body",
    ['echo "NVPM ERROR: failed to read" >&2\nexit 1\n', "echo garbage\n"],
    ids=["failing", "garbage"],
)
def test_nvpmodel_failure_is_not_an_error(tmp_path, body):
    path = stub(str(tmp_path / "nvpmodel"), body)
    result = run_module({"nvpmodel_path": path})
    assert not result.get("failed", False)
    power_mode = result["ansible_facts"]["jetson"]["power_mode"]
    assert power_mode["id"] is None
    assert power_mode["name"] in (None, "unknown")
    assert (power_mode["name"] is None) is body.endswith("exit 1\n")


def test_nvpmodel_missing_path_gives_null(tmp_path):
    result = run_module({"nvpmodel_path": str(tmp_path / "absent")})
    assert not result.get("failed", False)
    assert result["ansible_facts"]["jetson"]["power_mode"] == {"name": None, "id": None}
