# SPDX-License-Identifier: Apache-2.0
"""Small helpers: running commands, logging, atomic writes, hashing."""

import hashlib
import json
import os
import subprocess
import sys
import time

from . import config

_T0 = time.monotonic()


class FleetError(Exception):
    """A fleet operation failed; the message is meant for the user."""


def log(msg):
    sys.stderr.write("[fleet %6.1fs] %s\n" % (time.monotonic() - _T0, msg))
    sys.stderr.flush()


def run(argv, *, check=True, capture=True, env=None, input_data=None, podman=False, timeout=None):
    """Run argv; return CompletedProcess (text). podman=True adds the fleet's podman environment."""
    full_env = None
    if env or podman:
        full_env = dict(os.environ)
        if podman:
            full_env.update(config.podman_env())
        if env:
            full_env.update(env)
    proc = subprocess.run(
        argv,
        check=False,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.PIPE if capture else None,
        text=True,
        env=full_env,
        input=input_data,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        err = (proc.stderr or "").strip() if capture else ""
        raise FleetError("command failed (%d): %s%s" % (proc.returncode, " ".join(argv), ("\n" + err) if err else ""))
    return proc


def podman(*args, check=True, capture=True, timeout=None):
    return run(["podman", *args], check=check, capture=capture, podman=True, timeout=timeout)


def write_file(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return default


def write_json(path, obj):
    write_file(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def sha256_tree(paths, extra=""):
    """Hash of file names and contents under the given files/directories (sorted, stable)."""
    h = hashlib.sha256(extra.encode())
    for top in paths:
        if os.path.isfile(top):
            items = [top]
        else:
            items = []
            for d, dirs, files in os.walk(top):
                dirs[:] = sorted(x for x in dirs if x != "__pycache__")
                items.extend(os.path.join(d, f) for f in sorted(files) if not f.endswith(".pyc"))
        for p in items:
            h.update(os.path.relpath(p, os.path.dirname(top)).encode() + b"\0")
            st = os.lstat(p)
            h.update(b"%o\0" % (st.st_mode & 0o777))
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            else:
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def require_root():
    if os.geteuid() != 0:
        raise FleetError("the simulated fleet needs root (network namespaces, podman with a private store)")
