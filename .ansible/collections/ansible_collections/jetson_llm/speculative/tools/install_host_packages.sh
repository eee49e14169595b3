#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Debian packages the test fleet and the gates need on the controller machine (run as root).
set -euo pipefail
pkgs=(podman runc debootstrap openssh-client openssh-server iproute2 git make python3-venv shellcheck)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install_host_packages: missing ${missing[*]}; run as root or install them" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "host packages present: ${pkgs[*]}"
