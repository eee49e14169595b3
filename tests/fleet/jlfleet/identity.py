# SPDX-License-Identifier: Apache-2.0
"""Per-host Jetson identity files (device tree, L4T release, boot control, meminfo, nvpmodel) and the fake nvidia-l4t-core package."""

import json
import os
import shutil

from . import config
from .util import run, write_file

L4T_STUBS = ("nvpmodel", "jetson_clocks", "tegrastats")

# /proc/meminfo lines in kernel order; values are derived from MemTotal / MemAvailable so that
# tools computing "used" memory (free, psutil, Ansible facts) see a consistent picture.
MEMINFO_KEYS = (
    "MemTotal MemFree MemAvailable Buffers Cached SwapCached Active Inactive Active(anon) Inactive(anon) "
    "Active(file) Inactive(file) Unevictable Mlocked SwapTotal SwapFree Dirty Writeback AnonPages Mapped Shmem "
    "KReclaimable Slab SReclaimable SUnreclaim KernelStack PageTables NFS_Unstable Bounce WritebackTmp "
    "CommitLimit Committed_AS VmallocTotal VmallocUsed VmallocChunk Percpu AnonHugePages ShmemHugePages "
    "ShmemPmdMapped FileHugePages FilePmdMapped CmaTotal CmaFree HugePages_Total HugePages_Free "
    "HugePages_Rsvd HugePages_Surp Hugepagesize Hugetlb"
).split()


def meminfo(total_kib, available_kib):
    t, a = total_kib, available_kib
    used = t - a
    free = a * 3 // 4
    buffers = a // 64
    cached = a - free - buffers
    anon = used * 3 // 5
    v = {
        "MemTotal": t,
        "MemFree": free,
        "MemAvailable": a,
        "Buffers": buffers,
        "Cached": cached,
        "SwapCached": 0,
        "Active": anon // 2 + cached // 2,
        "Inactive": anon // 2 + cached // 2,
        "Active(anon)": anon // 2,
        "Inactive(anon)": anon // 2,
        "Active(file)": cached // 2,
        "Inactive(file)": cached // 2,
        "Unevictable": 0,
        "Mlocked": 0,
        "SwapTotal": 0,
        "SwapFree": 0,
        "Dirty": 0,
        "Writeback": 0,
        "AnonPages": anon,
        "Mapped": cached // 8,
        "Shmem": 16384,
        "KReclaimable": used // 40,
        "Slab": used // 20,
        "SReclaimable": used // 40,
        "SUnreclaim": used // 40,
        "KernelStack": 8192,
        "PageTables": 16384,
        "NFS_Unstable": 0,
        "Bounce": 0,
        "WritebackTmp": 0,
        "CommitLimit": t // 2,
        "Committed_AS": used,
        "VmallocTotal": 135290159104,
        "VmallocUsed": 65536,
        "VmallocChunk": 0,
        "Percpu": 2048,
        "AnonHugePages": 0,
        "ShmemHugePages": 0,
        "ShmemPmdMapped": 0,
        "FileHugePages": 0,
        "FilePmdMapped": 0,
        "CmaTotal": 0,
        "CmaFree": 0,
        "HugePages_Total": 0,
        "HugePages_Free": 0,
        "HugePages_Rsvd": 0,
        "HugePages_Surp": 0,
        "Hugepagesize": 2048,
        "Hugetlb": 0,
    }
    lines = []
    for key in MEMINFO_KEYS:
        label = key + ":"
        if key.startswith("HugePages_"):
            lines.append("%-15s %8d" % (label, v[key]))
        else:
            lines.append("%-15s %8d kB" % (label, v[key]))
    return "\n".join(lines) + "\n"


def nv_tegra_release(first_line):
    text = first_line.rstrip("\n") + "\n"
    major = int(first_line.split()[1][1:]) if first_line.startswith("# R") else 0
    if major >= 36:
        text += "# KERNEL_VARIANT: oot\n"
    return text


def nvpmodel_conf(mode):
    return "# nvpmodel configuration of a simulated Jetson host (only the profile's power mode)\n< POWER_MODEL ID=%d NAME=%s >\n< PM_CONFIG DEFAULT=%d >\n" % (
        mode["id"],
        mode["name"],
        mode["id"],
    )


def build_l4t_deb(version, outdir):
    """The fake nvidia-l4t-core package (Architecture all) carrying the Jetson tool stubs."""
    deb = os.path.join(outdir, "nvidia-l4t-core_%s_all.deb" % version)
    if os.path.exists(deb):
        return deb
    pkg = os.path.join(outdir, "pkg-" + version)
    if os.path.isdir(pkg):
        shutil.rmtree(pkg)
    write_file(
        os.path.join(pkg, "DEBIAN", "control"),
        "Package: nvidia-l4t-core\n"
        "Version: %s\n"
        "Architecture: all\n"
        "Maintainer: jetson_llm test fleet <noreply@example.invalid>\n"
        "Section: misc\n"
        "Priority: optional\n"
        "Description: NVIDIA L4T core package (simulated fleet stand-in)\n"
        " Test stub carrying nvpmodel, jetson_clocks and tegrastats stand-ins.\n" % version,
    )
    for stub in L4T_STUBS:
        with open(os.path.join(config.FLEET_DIR, "l4t", stub)) as f:
            write_file(os.path.join(pkg, "usr", "bin", stub), f.read(), mode=0o755)
    for d in ("DEBIAN", "usr", "usr/bin"):
        os.chmod(os.path.join(pkg, d), 0o755)  # noqa: S103 - package directories are world-readable
    run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", pkg, deb])
    shutil.rmtree(pkg)
    return deb


def write_host_files(host, hostdir, debdir):
    """Write every per-host file; return the list of podman -v arguments that mount them."""
    prof = host.profile
    base = os.path.join(hostdir, "fw", "devicetree", "base")
    write_file(os.path.join(base, "model"), prof["model"] + "\0")
    write_file(os.path.join(base, "compatible"), "".join(c + "\0" for c in prof["compatible"]))
    write_file(os.path.join(hostdir, "nv_tegra_release"), nv_tegra_release(prof["nv_tegra_release"]))
    write_file(os.path.join(hostdir, "meminfo"), meminfo(host.mem_total_kib, host.mem_available_kib))
    write_file(os.path.join(hostdir, "settings.json"), json.dumps(host.sim, indent=2, sort_keys=True) + "\n")
    write_file(os.path.join(hostdir, "nvpmodel.conf"), nvpmodel_conf(prof["nvpmodel"]))
    write_file(os.path.join(hostdir, "nvpmodel", "status"), "pmode:%04d fmode:quiet\n" % prof["nvpmodel"]["id"])
    deb = build_l4t_deb(host.l4t_version, debdir)
    meminfo_mode = "rw" if host.sim.get("account_memory") else "ro"
    mounts = [
        "%s:/sys/firmware:ro" % os.path.join(hostdir, "fw"),
        "%s:/etc/nv_tegra_release:ro" % os.path.join(hostdir, "nv_tegra_release"),
        "%s:/proc/meminfo:%s" % (os.path.join(hostdir, "meminfo"), meminfo_mode),
        # The same file again outside /proc, named by VLLM_SIM_MEMINFO (set for every service
        # and login of the host): the simulator accounts its memory only in a file outside /proc.
        "%s:/etc/vllm-sim/meminfo:%s" % (os.path.join(hostdir, "meminfo"), meminfo_mode),
        "%s:/etc/vllm-sim/settings.json:ro" % os.path.join(hostdir, "settings.json"),
        "%s:/etc/nvpmodel.conf:ro" % os.path.join(hostdir, "nvpmodel.conf"),
        "%s:/var/lib/nvpmodel" % os.path.join(hostdir, "nvpmodel"),
        "%s:/opt/jlf/nvidia-l4t-core.deb:ro" % deb,
    ]
    if prof.get("nv_boot_control"):
        write_file(os.path.join(hostdir, "nv_boot_control.conf"), prof["nv_boot_control"])
        mounts.append("%s:/etc/nv_boot_control.conf:ro" % os.path.join(hostdir, "nv_boot_control.conf"))
    return mounts
