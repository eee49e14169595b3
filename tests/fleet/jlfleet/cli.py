# SPDX-License-Identifier: Apache-2.0
"""Command line of the simulated fleet: image, up, down, status, inventory, validate, bench."""

import argparse
import json
import os
import sys
import time

from . import config, images, ops
from .description import load_fleet
from .util import FleetError, log, require_root


def cmd_validate(args):
    for path in args.description:
        fleet = load_fleet(path)
        print("%s: %d hosts, valid" % (path, len(fleet.hosts)))
    return 0


def cmd_image(args):
    require_root()
    ops.machine_state()
    ops.check_tools(need_debootstrap=True)
    ops.write_podman_config()
    t = time.monotonic()
    bad = [k for k in args.kinds if k not in ("host", "docker")]
    if bad:
        raise FleetError("unknown image kind(s) %s: use host and/or docker" % ", ".join(bad))
    spent = images.ensure_images(args.kinds or ("host", "docker"))
    sizes = images.rootfs_sizes()
    print("images ready in %.1f s (%s)" % (time.monotonic() - t, ", ".join("%s %.1f s" % kv for kv in spent.items())))
    print("rootfs cache %s: %s" % (config.CACHE, ", ".join("%s %.0f MB" % (k, (v or 0) / 1e6) for k, v in sizes.items())))
    return 0


def cmd_up(args):
    state = ops.up(args.description, inventory_paths=args.inventory or (), workers=args.workers)
    print("fleet %s: %d hosts SSH-ready in %.1f s" % (state["fleet"], len(state["hosts"]), state["timings"]["ssh_ready_s"]))
    for path in state["inventories"]:
        print("inventory: %s" % os.path.relpath(path))
    print("ssh:       ssh -F %s HOST" % state["ssh_config"])
    return 0


def cmd_down(args):
    problems = ops.down(purge=args.purge)
    if args.purge_cache:
        images.remove_cache()
    if problems:
        print("fleet-down: left behind or failed:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print("fleet down: no containers, namespaces, links or mounts of the fleet remain")
    return 0


def cmd_status(args):
    state, rows = ops.status()
    if not state:
        print("no fleet is up")
        return 0
    if args.json:
        print(json.dumps({"fleet": state["fleet"], "hosts": rows}, indent=2))
        return 0
    print("fleet %s (%s), started %s" % (state["fleet"], state["description"], state["started"]))
    fmt = "%-22s %-22s %-7s %-12s %-28s %-5s %s"
    print(fmt % ("HOST", "PROFILE", "VARIANT", "ADDRESS", "CONTAINER", "SSH", "VLLM:8000"))
    for r in rows:
        print(fmt % (r["name"], r["profile"], r["variant"], r["address"], r["container"][:28], r["ssh"], r["vllm"]))
    return 0


def cmd_inventory(args):
    state = ops.load_state()
    if not state:
        raise FleetError("no fleet is up")
    for path in args.output or [ops.STATE_INVENTORY]:
        ops.write_inventory(state, path)
        print(path)
    return 0


def cmd_bench(args):
    """Bring up the bench fleet, print seconds to SSH-ready and memory per idle host, tear down."""
    require_root()
    ops.machine_state()
    ops.write_podman_config()
    images.ensure_images(("host",))  # not timed: the figure is for an existing image
    try:
        state = ops.up(args.description, workers=args.workers)
        n = len(state["hosts"])
        time.sleep(args.settle)
        mem = ops.host_memory(state)
        pss = sorted(m["pss_kib"] for m in mem.values())
        rss = sorted(m["rss_kib"] for m in mem.values())
        conmon = sorted(m["conmon_rss_kib"] for m in mem.values())
        procs = sorted(m["processes"] for m in mem.values())
        print("bench-fleet-up: %d hosts" % n)
        print("  containers started:        %6.1f s" % state["timings"]["containers_started_s"])
        print("  all hosts SSH-ready:       %6.1f s" % state["timings"]["ssh_ready_s"])
        print("  memory per idle host, PSS: %6.1f MB mean, %.1f MB max (%d-%d processes)" % (
            sum(pss) / n / 1024, pss[-1] / 1024, procs[0], procs[-1]))  # fmt: skip
        print("  memory per idle host, RSS: %6.1f MB mean, %.1f MB max" % (sum(rss) / n / 1024, rss[-1] / 1024))
        print("  plus conmon per host, RSS: %6.1f MB mean" % (sum(conmon) / n / 1024))
        cg = [m["cgroup_kib"] for m in mem.values() if m["cgroup_kib"] is not None]
        if cg:
            print("  memory cgroup per host:    %6.1f MB mean (page cache and tmpfs included)" % (sum(cg) / len(cg) / 1024))
    finally:
        t = time.monotonic()
        ops.down()
        print("  teardown:                  %6.1f s" % (time.monotonic() - t))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="jlfleet", description="Simulated Jetson fleet (run as root)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("validate", help="validate fleet descriptions without starting anything")
    p.add_argument("description", nargs="+")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("image", help="build the root filesystems and podman images (cached)")
    p.add_argument("kinds", nargs="*", metavar="{host,docker}")
    p.set_defaults(func=cmd_image)
    p = sub.add_parser("up", help="start a fleet (removes leftovers of an earlier one first)")
    p.add_argument("description")
    p.add_argument("--inventory", action="append", help="also write the Ansible inventory here (repeatable)")
    p.add_argument("--workers", type=int, default=None, help="hosts started in parallel")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("down", help="remove every container, namespace, link and mount of the fleet")
    p.add_argument("--purge", action="store_true", help="also remove the podman image store")
    p.add_argument("--purge-cache", action="store_true", help="also remove the machine-wide rootfs cache")
    p.set_defaults(func=cmd_down)
    p = sub.add_parser("status", help="show the hosts of the running fleet")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("inventory", help="(re)write the Ansible inventory of the running fleet")
    p.add_argument("output", nargs="*")
    p.set_defaults(func=cmd_inventory)
    p = sub.add_parser("bench", help="time a fleet-up and measure idle memory, then tear down")
    p.add_argument("description")
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--settle", type=float, default=5.0, help="seconds to wait before measuring memory")
    p.set_defaults(func=cmd_bench)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except FleetError as exc:
        log("error: %s" % exc)
        return 2
    except KeyboardInterrupt:
        return 130
