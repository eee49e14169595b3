# SPDX-License-Identifier: Apache-2.0
"""`make demo` and `make test` are the whole set-up on a fresh Debian 12 machine.

Each entry point must install the host packages (tools/install_host_packages.sh) before it creates
the virtual environment or runs anything else. `make -n -B` prints what a fresh machine would run,
in order, without running it.
"""

import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INSTALL = "tools/install_host_packages.sh"
ENTRY_POINTS = ["demo", "test", "check", "fleet-test", "molecule", "sim-test", "bench-decisions", "units", "lint", "sanity"]


def dry_run(target):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k != "MFLAGS"}
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "-C", ROOT, target],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("target", ENTRY_POINTS)
def test_host_packages_come_first(target):
    lines = dry_run(target)
    assert lines, "make -n %s printed nothing" % target
    assert lines[0] == INSTALL, "make %s does not install the host packages first: %r" % (target, lines[:3])
    venv = [i for i, line in enumerate(lines) if " -m venv " in line]
    assert venv and venv[0] > 0, "make %s creates no virtual environment after the host packages" % target


def _fake_bin(tmp_path, scripts):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "grep"):
        path = subprocess.run(["sh", "-c", "command -v " + tool], capture_output=True, text=True, check=True)
        os.symlink(path.stdout.strip(), bindir / tool)
    for name, body in scripts.items():
        (bindir / name).write_text("#!" + str(bindir / "bash") + "\n" + body + "\n")
        (bindir / name).chmod(0o755)
    return bindir


def test_install_script_names_missing_packages_without_root(tmp_path):
    """Not root and packages missing: a clear message naming them, and apt-get is not run."""
    calls = tmp_path / "apt-calls"
    bindir = _fake_bin(
        tmp_path,
        {
            "id": "echo 1000",
            "dpkg-query": 'case "$*" in *podman*|*debootstrap*) exit 1;; esac; echo "install ok installed"',
            "apt-get": 'echo "$*" >> ' + str(calls),
        },
    )
    out = subprocess.run(
        [str(bindir / "bash"), os.path.join(ROOT, INSTALL)],
        env={"PATH": str(bindir)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1
    assert "missing Debian packages: podman debootstrap" in out.stderr
    assert "as root" in out.stderr
    assert not calls.exists()


def test_install_script_installs_only_missing_as_root(tmp_path):
    calls = tmp_path / "apt-calls"
    bindir = _fake_bin(
        tmp_path,
        {
            "id": "echo 0",
            "dpkg-query": 'case "$*" in *runc*) exit 1;; esac; echo "install ok installed"',
            "apt-get": 'echo "$*" >> ' + str(calls),
        },
    )
    out = subprocess.run(
        [str(bindir / "bash"), os.path.join(ROOT, INSTALL)],
        env={"PATH": str(bindir)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = calls.read_text().splitlines()
    assert lines[0] == "update -qq"
    assert lines[1].endswith("install -y -qq --no-install-recommends runc")


def test_install_script_refuses_without_apt(tmp_path):
    """A machine without dpkg/apt gets the package list instead of a shell error."""
    bindir = _fake_bin(tmp_path, {"id": "echo 0"})
    out = subprocess.run(
        [str(bindir / "bash"), os.path.join(ROOT, INSTALL)],
        env={"PATH": str(bindir)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1
    assert "no dpkg/apt" in out.stderr
    assert "podman" in out.stderr and "debootstrap" in out.stderr
