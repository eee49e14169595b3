# SPDX-License-Identifier: Apache-2.0
"""Paths, names and address plan of the simulated fleet (one fleet per machine at a time)."""

import os

FLEET_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/fleet
REPO_ROOT = os.path.dirname(os.path.dirname(FLEET_DIR))
IMAGE_SRC = os.path.join(FLEET_DIR, "image")
PROFILES = os.path.join(FLEET_DIR, "profiles.yml")
SIM_SRC = os.path.join(REPO_ROOT, "tests", "vllm_sim")
SIM_PACKAGE = os.path.join(SIM_SRC, "vllm_sim")

# Everything the fleet creates at run time lives under STATE (podman store, per-fleet files);
# root filesystem tarballs are cached machine-wide so fresh clones reuse them.
STATE = os.environ.get("JLF_STATE", "/tmp/jetson-llm-fleet")
CACHE = os.environ.get("JLF_CACHE", "/var/tmp/jetson-llm-fleet-cache")
DEBIAN_MIRROR = os.environ.get("JLF_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SUITE = "bookworm"

PODMAN_DIR = os.path.join(STATE, "podman")
BUILD_DIR = os.path.join(STATE, "build")
FLEET_STATE = os.path.join(STATE, "fleet")  # the running fleet: key, ssh_config, hosts, state.json
MACHINE_STATE = os.path.join(STATE, "machine.json")  # what existed before the first fleet-up

# Network plan: a private bridge, no NAT, no default route (docs/devel/fleet.md, "Safety").
BRIDGE = "jlfbr0"
SUBNET_PREFIX = "10.200.0."
BRIDGE_ADDR = SUBNET_PREFIX + "1"
FIRST_HOST_OCTET = 10  # host i (1-based) gets 10.200.0.(10 + i)
MAX_HOSTS = 254 - FIRST_HOST_OCTET
NETNS_PREFIX = "jlf-"
VETH_PREFIX = "jlv"
CONTAINER_PREFIX = "jlf-"
LABEL = "jetson-llm-fleet"

HOST_IMAGE = "localhost/jetson-llm/host"
DOCKER_IMAGE = "localhost/jetson-llm/host-docker"
ROOTFS_IMAGE = "localhost/jetson-llm/rootfs"

# Packages of the base root filesystem (debootstrap of Debian 12) and of the container-capable
# variant (docker inside the host, docs/devel/fleet.md "Container-capable hosts"). The cache key of each tarball is a hash of these lists.
BASE_PACKAGES = [
    "python3",
    "python3-apt",
    "python3-yaml",
    "openssh-server",
    "sudo",
    "systemd",
    "systemd-sysv",
    "dbus",
    "iproute2",
    "procps",
]
DOCKER_PACKAGES = ["docker.io", "busybox-static", "python3-requests"]

# Inner container images of the container-capable hosts (stand-ins, imported without a registry).
UPSTREAM_VLLM_IMAGE = "vllm/vllm-openai:v0.20.0"
JETSON_VLLM_IMAGE = "ghcr.io/nvidia-ai-iot/vllm:r36.4-jetson-orin"


def podman_env():
    """Environment variables that point podman at the fleet's private configuration (docs/devel/fleet.md, "Images and state")."""
    conf = os.path.join(PODMAN_DIR, "conf")
    return {
        "CONTAINERS_CONF": os.path.join(conf, "containers.conf"),
        "CONTAINERS_STORAGE_CONF": os.path.join(conf, "storage.conf"),
        "CONTAINERS_REGISTRIES_CONF": os.path.join(conf, "registries.conf"),
    }
