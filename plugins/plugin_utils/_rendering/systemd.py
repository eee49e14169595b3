# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""Quoting of a command line for a systemd unit's ``ExecStart=``.

Private controller-side module. Deterministic: the same input gives the same output, byte for byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import unicodedata

from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import (
    _bad,
    _is_int,
)

# ---------------------------------------------------------------- systemd quoting

# Prefixes systemd interprets on the first word of ExecStart= even after unquoting
# (systemd.service "Command lines": "-", "@", ":", "+", "!").
_EXEC_PREFIXES = ("-", "@", ":", "+", "!")


def _bad_char(ch):
    # C0/C1 controls and DEL (Cc), lone surrogates (Cs): systemd cannot carry them on a unit line.
    return unicodedata.category(ch) in ("Cc", "Cs")


def systemd_quote_word(word, index=1, host=""):
    """One argv word as a double-quoted systemd word (``\\`` and ``"`` escaped, ``%`` and ``$``
    doubled so no specifier or variable expansion can happen)."""
    if _is_int(word):
        word = str(word)
    if not isinstance(word, str):
        raise _bad(host, "argv[{}]".format(index), word, "a string")
    if word == "":
        raise _bad(host, "argv[{}]".format(index), word, "a non-empty string")
    for ch in word:
        if _bad_char(ch):
            raise _bad(host, "argv[{}]".format(index), word, "a string without control characters")
    if index == 0 and (word.startswith(_EXEC_PREFIXES) or word == ";"):
        raise _bad(
            host,
            "argv[0]",
            word,
            "an executable path or name not starting with one of - @ : + ! (systemd reads them as prefixes)",
        )
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return '"' + escaped + '"'


def systemd_quote(argv, host=""):
    """An ``ExecStart=`` value that systemd splits back into exactly ``argv``."""
    if not isinstance(argv, (list, tuple)) or not argv:
        raise _bad(host, "argv", argv, "a non-empty list of strings")
    return " ".join(systemd_quote_word(word, index, host) for index, word in enumerate(argv))
