#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Debian packages the test fleet, the gates and the fault matrix (faketime) need on the controller machine. `make` runs this
# before anything else (target host-packages), so `make demo` and `make test` work on a fresh
# Debian 12 machine. Installs only what is missing; needs root for that, and Debian's apt.
set -euo pipefail
pkgs=(podman runc debootstrap openssh-client openssh-server iproute2 git make python3-venv shellcheck faketime)
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install_host_packages: this machine has no dpkg/apt; install these packages (Debian 12 names) yourself:" \
    "${pkgs[*]}" >&2
  exit 1
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install_host_packages: missing Debian packages: ${missing[*]}" >&2
    echo "install_host_packages: run 'make' as root, or install them: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "install_host_packages: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "host packages present: ${pkgs[*]}"
