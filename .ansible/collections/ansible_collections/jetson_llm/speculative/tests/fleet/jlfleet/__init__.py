# SPDX-License-Identifier: Apache-2.0
"""Simulated Jetson fleet: podman hosts with systemd and sshd, each in its own network namespace."""
