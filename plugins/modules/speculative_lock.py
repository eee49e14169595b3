#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Licensed under the Apache License 2.0, or at your option under the
# GNU General Public License version 3 or later (see https://www.gnu.org/licenses/gpl-3.0.txt).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: speculative_lock
short_description: One rollout per device at a time
version_added: 0.1.0
description:
  - Takes or gives back the rollout lock of a device, so that two rollouts (two controllers, or two runs
    of the same controller) never trial or restart the same vLLM server at once.
  - The lock is a JSON file (O(path)) holding C(run_id), C(controller), C(pid), C(started_at),
    C(renewed_at) and C(expires_at) (seconds since the epoch, device clock). It outlives the task, so it
    holds for the whole trial; the run gives it back with O(state=released).
  - Every change of the lock (take, renew, break, give back) happens while the module holds an exclusive
    C(flock) on the lock's directory, for a few milliseconds; the kernel drops that C(flock) when the
    module exits, even when it is killed, so two modules that start at the same moment are served one
    after the other and exactly one of them gets the lock. The file is written to a temporary name and
    linked or renamed into place, so a reader never sees half a lock.
  - A lock held by another run is C(busy) (the message reads C(busy) followed by C(rollout <id> since <UTC time>)) unless
    it is stale. It is stale when it expired (C(expires_at) passed, so the holder stopped renewing it), when
    its run is listed in O(dead_runs) (the caller knows that run died, for example because its controller
    process is gone), when its holder process ran on this very host and is gone, or, only when O(force) is
    set, always. A stale lock is moved aside to C(<path>.broken-<UTC time>) (the newest five are kept) and
    returned in RV(broken), then the lock is taken.
  - Taking the lock again with the same O(run_id) renews C(expires_at) and reports C(changed=false), as the
    holder did not change. A long trial renews the lock before each step so that O(ttl) can stay short.
author:
  - Jetson LLM maintainers (@jetson-llm)
extends_documentation_fragment:
  - jetson_llm.speculative._attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is written; RV(acquired), RV(busy) and RV(broken) say what would happen.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
  action_group:
    description: Use C(group/jetson_llm.speculative.rollout) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - jetson_llm.speculative.rollout
options:
  path:
    description:
      - Lock file. Its directory is created when missing (mode 0755).
      - Use the state directory of the rollout so that every run on the device uses the same file.
    type: path
    default: /var/lib/jetson_llm/speculative/rollout.lock
  state:
    description: V(acquired) takes or renews the lock; V(released) gives it back.
    type: str
    choices: [acquired, released]
    default: acquired
  run_id:
    description: Identity of the rollout run (unique per run, for example a UTC timestamp and a random part).
    type: str
    required: true
  controller:
    description: Name of the controller that runs the rollout, recorded in the lock and shown to other runs.
    type: str
  pid:
    description:
      - Process id of the rollout on O(controller) (for example of C(ansible-playbook)), recorded so that a
        later run on the same controller can tell whether the holder still lives.
      - When O(controller) names the managed host itself (a local connection) the module checks this process
        on its own and treats a lock whose process is gone as stale.
    type: int
  ttl:
    description:
      - Seconds the lock stays valid after it is taken or renewed. A run that dies without giving the lock
        back blocks the device for at most this long, unless a later run breaks it through O(dead_runs).
    type: float
    default: 3600
  dead_runs:
    description: Run ids the caller knows to be dead; a lock held by one of them is broken.
    type: list
    elements: str
    default: []
  force:
    description:
      - With O(state=acquired), break any lock held by another run; with O(state=released), remove the lock
        whoever holds it. For an operator who made sure that no rollout runs.
    type: bool
    default: false
  fail_on_busy:
    description: Fail the task when another live run holds the lock. Set to V(false) to branch on RV(busy).
    type: bool
    default: true
  wait:
    description: Seconds to wait for the C(flock) that serialises changes of the lock before giving up.
    type: float
    default: 30
notes:
  - All parties must use this module (or the same C(flock) protocol on the lock's directory) to change the
    lock; the directory must be on a local file system.
"""

EXAMPLES = r"""
- name: Take the device for this rollout (or learn who has it)
  jetson_llm.speculative.speculative_lock:
    path: /var/lib/jetson_llm/speculative/rollout.lock
    run_id: "{{ rollout_run_id }}"
    controller: "{{ rollout_controller }}"
    ttl: 1800
    fail_on_busy: false
  register: lock

- name: Leave a busy device alone
  ansible.builtin.debug:
    msg: "{{ lock.msg }}"
  when: lock.busy

- name: Give the device back at the end of the trial
  jetson_llm.speculative.speculative_lock:
    state: released
    run_id: "{{ rollout_run_id }}"
"""

RETURN = r"""
acquired:
  description: Whether this run holds the lock now (or, in check mode, would hold it).
  returned: always
  type: bool
busy:
  description: Whether another live run holds the lock (the lock was left as it is).
  returned: always
  type: bool
released:
  description: With O(state=released), whether the lock is no longer held by O(run_id) (also true when it was not held).
  returned: always
  type: bool
holder:
  description:
    - The lock in force after the module ran (this run's with RV(acquired), the other run's with RV(busy));
      null when no lock is held. Times are seconds since the epoch, by the device's clock.
  returned: always
  type: dict
  sample: {"run_id": "20261203T064131Z-4f2a", "controller": "ctl-1", "pid": 4242, "started_at": 1796279491.2,
           "renewed_at": 1796279491.2, "expires_at": 1796281291.2}
broken:
  description: The stale lock that was moved aside to take this one, with C(reason) and C(moved_to); null otherwise.
  returned: always
  type: dict
  sample: {"run_id": "20261203T051000Z-9c1e", "reason": "expired at 2026-12-03T05:40:00Z",
           "moved_to": "/var/lib/jetson_llm/speculative/rollout.lock.broken-20261203T064131Z"}
msg:
  description: What happened.
  returned: always
  type: str
  sample: "busy: rollout 20261203T051000Z-9c1e since 2026-12-03T05:10:00Z (controller ctl-2)"
"""

import errno
import fcntl
import json
import os
import socket
import tempfile
import time
from datetime import datetime, timezone

from ansible.module_utils.basic import AnsibleModule

KEEP_BROKEN = 5
FIELDS = ("run_id", "controller", "pid", "started_at", "renewed_at", "expires_at")


class LockError(Exception):
    pass


def iso(epoch):
    try:
        return datetime.fromtimestamp(float(epoch), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError, OverflowError, OSError):
        return "an unknown time"


def describe(holder):
    text = "rollout %s since %s" % (holder.get("run_id") or "(unknown)", iso(holder.get("started_at")))
    if holder.get("controller"):
        text += " (controller %s)" % holder["controller"]
    return text


def read_lock(path):
    """The lock record at ``path``: ``None`` when there is none, ``{"unreadable": reason}`` when it cannot be read."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        return {"unreadable": "cannot read %s: %s" % (path, exc)}
    try:
        record = json.loads(text)
    except ValueError as exc:
        return {"unreadable": "%s is not JSON: %s" % (path, exc)}
    if not isinstance(record, dict) or not isinstance(record.get("run_id"), str):
        return {"unreadable": "%s holds no run_id" % path}
    return record


def local_names():
    names = set(["localhost", "127.0.0.1", "::1"])
    for name in (socket.gethostname(), socket.getfqdn()):
        if name:
            names.add(name)
            names.add(name.split(".")[0])
    return names


def pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, ValueError, TypeError):
        return True
    return True


def stale_reason(record, now, dead_runs=(), force=False, path=None, mtime=None, ttl=None):
    """Why ``record`` (held by another run) may be broken, or None when it is live."""
    if "unreadable" in record:
        # Never written by this module (it writes atomically): expired once the file is older than ttl.
        if mtime is not None and ttl is not None and mtime + ttl <= now:
            return "unreadable and older than %g s (%s)" % (ttl, record["unreadable"])
        return "forced (%s)" % record["unreadable"] if force else None
    if force:
        return "forced"
    if record["run_id"] in (dead_runs or ()):
        return "run %s is known to be dead" % record["run_id"]
    expires = record.get("expires_at")
    if not isinstance(expires, (int, float)) or isinstance(expires, bool):
        return "it has no expiry"
    if expires <= now:
        return "expired at %s" % iso(expires)
    pid = record.get("pid")
    if record.get("controller") and record["controller"] in local_names() and isinstance(pid, int) and pid > 0 and not pid_alive(pid):
        return "its process %d on %s is gone" % (pid, record["controller"])
    return None


class Guard:
    """Exclusive flock on the lock's directory for the duration of one change."""

    def __init__(self, directory, wait):
        self.directory = directory
        self.wait = float(wait)
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.directory, os.O_RDONLY)
        end = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(self.fd)
                    raise
            if time.monotonic() >= end:
                os.close(self.fd)
                raise LockError("another process kept %s locked for more than %g s" % (self.directory, self.wait))
            time.sleep(0.01)

    def __exit__(self, *exc):
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
        return False


def _write_tmp(directory, record):
    fd, tmp = tempfile.mkstemp(prefix=".rollout-lock-", suffix=".tmp", dir=directory)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o644)
    return tmp


def create_lock(path, record):
    """Link a complete lock file into place; fails with EEXIST when one appeared."""
    tmp = _write_tmp(os.path.dirname(path), record)
    try:
        os.link(tmp, path)
    finally:
        os.unlink(tmp)


def replace_lock(path, record):
    tmp = _write_tmp(os.path.dirname(path), record)
    try:
        os.rename(tmp, path)
    except OSError:
        os.unlink(tmp)
        raise


def move_aside(path, now):
    stamp = datetime.fromtimestamp(now, timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = "%s.broken-%s" % (path, stamp)
    n = 0
    while os.path.exists(target):
        n += 1
        target = "%s.broken-%s-%d" % (path, stamp, n)
    os.rename(path, target)
    prefix = os.path.basename(path) + ".broken-"
    directory = os.path.dirname(path)
    old = sorted((f for f in os.listdir(directory) if f.startswith(prefix)), key=lambda f: os.stat(os.path.join(directory, f)).st_mtime)
    for name in old[:-KEEP_BROKEN]:
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass
    return target


def acquire(path, run_id, controller=None, pid=None, ttl=3600.0, dead_runs=(), force=False, check=False, wait=30.0, now=None):
    """Take or renew the lock. Returns the result dict of the module (without ``failed``)."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        if check:
            return result(True, False, None, None, "would take the lock %s (its directory does not exist yet)" % path, changed=True, holder=None)
        os.makedirs(directory, 0o755, exist_ok=True)  # concurrent first runs create it together
    with Guard(directory, wait):
        now = time.time() if now is None else now
        current = read_lock(path)
        broken = None
        if current is not None and current.get("run_id") == run_id and "unreadable" not in current:
            renewed = dict(current, renewed_at=now, expires_at=now + ttl)
            if controller is not None:
                renewed["controller"] = controller
            if pid is not None:
                renewed["pid"] = pid
            if not check:
                replace_lock(path, renewed)
            return result(True, False, None, None, "rollout %s holds the lock (renewed until %s)" % (run_id, iso(now + ttl)), False, renewed)
        if current is not None:
            try:
                mtime = os.stat(path).st_mtime
            except OSError:
                mtime = None
            reason = stale_reason(current, now, dead_runs, force, path, mtime, ttl)
            if reason is None:
                if "unreadable" in current:
                    msg = "busy: %s; it counts as held until %s" % (current["unreadable"], iso((mtime or now) + ttl))
                    return result(False, True, None, None, msg, False, current)
                return result(False, True, None, None, "busy: %s" % describe(current), False, current)
            broken = dict((k, current.get(k)) for k in FIELDS if k in current)
            broken["reason"] = reason
            if "unreadable" in current:
                broken["unreadable"] = current["unreadable"]
        record = {"run_id": run_id, "controller": controller, "pid": pid, "started_at": now, "renewed_at": now, "expires_at": now + ttl}
        if check:
            msg = "would take the lock for rollout %s" % run_id
            if broken:
                msg += ", breaking the lock of rollout %s (%s)" % (broken.get("run_id"), broken["reason"])
            return result(True, False, None, broken, msg, True, record)
        if broken is not None:
            broken["moved_to"] = move_aside(path, now)
        create_lock(path, record)
        msg = "rollout %s took the lock until %s" % (run_id, iso(now + ttl))
        if broken:
            msg += " after breaking the lock of rollout %s (%s)" % (broken.get("run_id"), broken["reason"])
        return result(True, False, None, broken, msg, True, record)


def release(path, run_id, force=False, check=False, wait=30.0):
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        return result(False, False, True, None, "no lock at %s" % path, False, None)
    with Guard(directory, wait):
        current = read_lock(path)
        if current is None:
            return result(False, False, True, None, "no lock at %s" % path, False, None)
        mine = current.get("run_id") == run_id
        if not mine and not force:
            other = current if "unreadable" not in current else None
            text = describe(current) if other else current["unreadable"]
            return result(False, True, True, None, "lock not released: held by %s" % text, False, other)
        if not check:
            os.unlink(path)
        if mine:
            return result(False, False, True, None, "rollout %s released the lock" % run_id, True, None)
        return result(False, False, True, None, "removed the lock of %s (force)" % (describe(current) if "unreadable" not in current else path), True, None)


def result(acquired, busy, released, broken, msg, changed, holder):
    return {
        "acquired": acquired,
        "busy": busy,
        "released": bool(released),
        "broken": broken,
        "msg": msg,
        "changed": changed,
        "holder": holder,
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/var/lib/jetson_llm/speculative/rollout.lock"),
            state=dict(type="str", default="acquired", choices=["acquired", "released"]),
            run_id=dict(type="str", required=True),
            controller=dict(type="str"),
            pid=dict(type="int"),
            ttl=dict(type="float", default=3600.0),
            dead_runs=dict(type="list", elements="str", default=[]),
            force=dict(type="bool", default=False),
            fail_on_busy=dict(type="bool", default=True),
            wait=dict(type="float", default=30.0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["run_id"].strip():
        module.fail_json(msg="run_id must not be empty")
    if p["ttl"] <= 0:
        module.fail_json(msg="ttl must be > 0, got %s" % p["ttl"])
    path = os.path.abspath(p["path"])
    try:
        if p["state"] == "acquired":
            res = acquire(path, p["run_id"], p["controller"], p["pid"], p["ttl"], p["dead_runs"], p["force"], module.check_mode, p["wait"])
        else:
            res = release(path, p["run_id"], p["force"], module.check_mode, p["wait"])
    except (LockError, OSError) as exc:
        module.fail_json(msg="cannot change the rollout lock %s: %s" % (path, exc), acquired=False, busy=False, released=False, broken=None, holder=None)
    if res["broken"]:
        module.warn("broke the rollout lock of %s: %s" % (res["broken"].get("run_id"), res["broken"]["reason"]))
    if p["state"] == "acquired" and res["busy"] and p["fail_on_busy"]:
        module.fail_json(**res)
    module.exit_json(**res)


if __name__ == "__main__":
    main()
