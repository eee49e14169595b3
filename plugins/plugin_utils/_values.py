# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""Plain Python values from what Ansible hands a filter (tagged strings, lazy containers, vault values)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def plain(value):
    """Copy Ansible's (possibly tagged or lazy) containers and scalars into plain Python types."""
    if isinstance(value, dict):
        return dict((plain(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if type(value).__name__ in ("EncryptedString", "AnsibleVaultEncryptedUnicode"):
        return str(value)
    return value
