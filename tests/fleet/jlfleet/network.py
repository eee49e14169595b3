# SPDX-License-Identifier: Apache-2.0
"""Bridge, one network namespace per host and veth pairs (docs/devel/fleet.md).

No NAT and no default route: fleet traffic stays on 10.200.0.0/24.
"""

import ipaddress
import json

from . import config
from .util import FleetError, run


def _links():
    out = run(["ip", "-j", "link", "show"]).stdout
    return {link["ifname"]: link for link in json.loads(out or "[]")}


def netns_list():
    out = run(["ip", "-j", "netns", "list"], check=False).stdout.strip()
    return [n["name"] for n in json.loads(out or "[]")]


def fleet_netns():
    return [n for n in netns_list() if n.startswith(config.NETNS_PREFIX)]


def fleet_links():
    links = _links()
    names = [n for n in links if n.startswith(config.VETH_PREFIX) and n[len(config.VETH_PREFIX) :].isdigit()]
    if config.BRIDGE in links:
        names.append(config.BRIDGE)
    return names


def check_subnet_free():
    """Refuse to start when another interface already holds an address of the fleet subnet."""
    net = ipaddress.ip_network(config.SUBNET_PREFIX + "0/24")
    out = json.loads(run(["ip", "-j", "-4", "addr", "show"]).stdout or "[]")
    for link in out:
        if link["ifname"] == config.BRIDGE:
            continue
        for a in link.get("addr_info", []):
            if ipaddress.ip_address(a["local"]) in net:
                raise FleetError("%s already has %s, inside the fleet subnet %s; remove it first" % (link["ifname"], a["local"], net))


def create_bridge():
    run(["ip", "link", "add", config.BRIDGE, "type", "bridge"])
    run(["ip", "addr", "add", config.BRIDGE_ADDR + "/24", "dev", config.BRIDGE])
    run(["ip", "link", "set", config.BRIDGE, "up"])


def add_host(host):
    ns, veth = host.netns, host.veth
    run(["ip", "netns", "add", ns])
    run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "link", "set", veth, "master", config.BRIDGE, "up"])
    run(["ip", "-n", ns, "addr", "add", host.address + "/24", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])


def remove_all():
    """Delete every namespace, veth and the bridge of the fleet. Returns a list of problems."""
    problems = []
    for ns in fleet_netns():
        p = run(["ip", "netns", "del", ns], check=False)
        if p.returncode:
            problems.append("ip netns del %s: %s" % (ns, p.stderr.strip()))
    for link in fleet_links():
        p = run(["ip", "link", "del", link], check=False)
        if p.returncode and "Cannot find device" not in p.stderr:
            problems.append("ip link del %s: %s" % (link, p.stderr.strip()))
    return problems
