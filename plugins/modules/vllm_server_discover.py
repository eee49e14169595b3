#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Licensed under the Apache License 2.0, or at your option under the
# GNU General Public License version 3 or later (see https://www.gnu.org/licenses/gpl-3.0.txt).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vllm_server_discover
short_description: Find what serves vLLM on a device, and whether this collection started it
version_added: 0.1.0
description:
  - First contact with a device. Finds the process that listens on O(port) (from C(/proc/net/tcp) and
    C(/proc/net/tcp6) and the sockets each process holds) or, when nothing listens yet, a C(vllm serve) process
    that is still starting, and tells how it runs. RV(kind) is
    C(collection) when the unit this collection writes (O(service) with the start record of O(start_record) in its
    file O(unit_path)) runs it, natively or as the container O(container_name) it started;
    C(unit) for another systemd unit (an operator's own, even one named like O(service));
    C(container) for a container that the collection's unit did not start (a C(docker run) by hand, for example);
    C(process) for a process under no systemd service and no container; C(none) when nothing serves.
  - RV(foreign) is true for C(unit), C(container) and C(process). A rollout leaves such a server alone, since it
    cannot give back what the operator had after it replaced it.
  - The command line is reported with secrets masked (values of options and environment variables whose
    names contain C(token), C(key), C(secret), C(password) or C(auth)); for a container only the names of its
    environment variables are reported.
  - Reads only; needs the privileges to read other users' C(/proc/PID/fd) (root, as the roles run).
author:
  - Jetson LLM maintainers (@jetson-llm)
extends_documentation_fragment:
  - jetson_llm.speculative._attributes
  - jetson_llm.speculative._attributes.info_module
attributes:
  platform:
    support: full
    platforms: posix
  action_group:
    description: Use C(group/jetson_llm.speculative.vllm) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - jetson_llm.speculative.vllm
options:
  port:
    description: TCP port vLLM serves on.
    type: int
    default: 8000
  service:
    description: Name of the systemd unit this collection writes for vLLM (C(vllm_server_service_name) with C(.service)).
    type: str
    default: vllm.service
  unit_path:
    description: Path of that unit's file.
    type: path
    default: /etc/systemd/system/vllm.service
  start_record:
    description:
      - The start record the collection's unit writes (see M(jetson_llm.speculative.vllm_server_info)). A unit file
        that does not write it was not written by this collection.
    type: path
    default: /run/vllm/config.sha256
  container_name:
    description: Name of the container the collection's unit runs (container runtimes).
    type: str
    default: vllm
  engines:
    description: Container engines whose running containers are looked at (names on C(PATH) or absolute paths); missing ones are ignored.
    type: list
    elements: str
    default: [docker, podman]
  vllm_bin:
    description: The C(vllm) command a native service runs; when given, RV(lacking) says whether it is installed.
    type: path
  engine:
    description: The container engine a container service runs (a name on C(PATH) or an absolute path); when given, RV(lacking) says whether it is installed.
    type: str
notes:
  - Nothing is changed; the module supports check mode.
"""

EXAMPLES = r"""
- name: What serves vLLM on this device?
  jetson_llm.speculative.vllm_server_discover:
    port: 8000
  register: serving

- name: Leave a server the collection did not start alone
  ansible.builtin.fail:
    msg: "{{ inventory_hostname }}: {{ serving.description }}"
  when: serving.foreign
"""

RETURN = r"""
kind:
  description: C(collection), C(unit), C(container), C(process) or C(none) (see the description).
  returned: always
  type: str
  sample: container
foreign:
  description: True when something serves that this collection did not start (RV(kind) C(unit), C(container) or C(process)).
  returned: always
  type: bool
listening:
  description: Whether a process listens on O(port).
  returned: always
  type: bool
vllm:
  description: Whether the process found is vLLM (its command line runs C(vllm serve) or vLLM's API server); false for another program holding the port.
  returned: always
  type: bool
pid:
  description: The process found (the listener, or the C(vllm serve) process starting); null for RV(kind) C(none).
  returned: always
  type: int
started_at:
  description: When that process started, in seconds since the epoch; null for RV(kind) C(none).
  returned: always
  type: float
command:
  description: That process's command line, secrets masked, quoted as a shell would need it; empty for RV(kind) C(none).
  returned: always
  type: str
  sample: vllm serve Qwen/Qwen3-8B --port 8000 --api-key '***'
unit:
  description: The systemd unit the process runs under (C(.service) only); null when none.
  returned: always
  type: str
container:
  description: The container the process runs in; null when none.
  returned: always
  type: dict
  contains:
    engine:
      description: The engine that reported it.
      type: str
    id:
      description: Container id.
      type: str
    name:
      description: Container name.
      type: str
    image:
      description: Image reference it was started from.
      type: str
    command:
      description: Entrypoint and arguments, secrets masked.
      type: str
    mounts:
      description: Bind mounts as C(source:destination[:ro]).
      type: list
      elements: str
    env_names:
      description: Names of its environment variables (never their values).
      type: list
      elements: str
    network:
      description: Its network mode.
      type: str
    started_at:
      description: C(State.StartedAt) as the engine reports it.
      type: str
handover:
  description:
    - For a vLLM server the collection did not start (RV(foreign)), what to set so that the collection serves the same;
      null otherwise.
    - Read from its command line (a container's entrypoint and arguments) and, for a container, how the engine runs it
      (image, name, OCI runtime, network, bind mounts, environment names).
  returned: always
  type: dict
  contains:
    settings:
      description:
        - The C(vllm_server_*) settings that reproduce it (runtime, image and its flavor, container name, OCI runtime,
          the Hugging Face cache mounted, model, host, port, utilization, lengths, C(vllm_server_extra_args) for its further
          options and C(vllm_server_extra_mounts) for its further bind mounts); never a secret.
      type: dict
      sample: {vllm_server_runtime: docker, vllm_server_image: "vllm/vllm-openai:v0.20.0", vllm_server_max_model_len: 8192}
    secrets:
      description: The secret settings to set from a vault, each with what the server reads it from (C(HF_TOKEN), C(--api-key)).
      type: list
      elements: str
    not_carried:
      description: What the collection's unit would not carry over (another network mode, an environment variable, a C(--config) file, speculation).
      type: list
      elements: str
description:
  description: One line that names what serves and how (for messages); C(nothing serves on port N) for RV(kind) C(none).
  returned: always
  type: str
lacking:
  description:
    - What the collection needs to serve vLLM on the device and does not find, one sentence each; empty when nothing
      is lacking. Systemd (C(systemctl) and a booted systemd, C(/run/systemd/system)), O(vllm_bin) and O(engine).
  returned: always
  type: list
  elements: str
"""

import json
import os
import re
import shlex

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.jetson_llm.speculative.plugins.module_utils._handover import handover
from ansible_collections.jetson_llm.speculative.plugins.module_utils._vllm_health import parse_systemctl_show

SECRET = re.compile(r"(?i)token|key|secret|password|passwd|auth")
MASK = "***"
VLLM_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main")


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return None


def listening_inodes(port, proc="/proc"):
    """Socket inodes that listen on TCP ``port`` (IPv4 and IPv6)."""
    found = set()
    for name in ("tcp", "tcp6"):
        text = _read(os.path.join(proc, "net", name)) or ""
        for line in text.splitlines()[1:]:
            parts = line.split()
            if len(parts) < 10 or parts[3] != "0A":  # 0A: LISTEN
                continue
            try:
                local_port = int(parts[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if local_port == port and parts[9] != "0":
                found.add(parts[9])
    return found


def _pids(proc):
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


def socket_pids(inodes, proc="/proc"):
    """Processes that hold one of the socket ``inodes``, lowest pid first."""
    want = set("socket:[%s]" % i for i in inodes)
    found = []
    if not want:
        return found
    for pid in _pids(proc):
        fd_dir = os.path.join(proc, str(pid), "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in want:
                    found.append(pid)
                    break
            except OSError:
                continue
    return found


def unit_of_cgroup(text):
    """The systemd service a process runs under, from the text of ``/proc/PID/cgroup`` (None when none)."""
    for line in (text or "").splitlines():
        path = line.split(":", 2)[-1]
        for part in reversed(path.split("/")):
            if part.endswith(".service"):
                return part
    return None


def boot_time(proc="/proc"):
    for line in (_read(os.path.join(proc, "stat")) or "").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None


def process(pid, proc="/proc", btime=None, ticks=None):
    """``{pid, ppid, argv, started_at, unit}`` of a process, or None when it is gone."""
    stat = _read(os.path.join(proc, str(pid), "stat"))
    raw = _read(os.path.join(proc, str(pid), "cmdline"))
    if stat is None or raw is None or ")" not in stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    started = None
    try:
        ticks = ticks or os.sysconf("SC_CLK_TCK")
        btime = boot_time(proc) if btime is None else btime
        if btime is not None:
            started = round(btime + int(fields[19]) / float(ticks), 2)
    except (IndexError, ValueError, OSError):
        started = None
    return {
        "pid": pid,
        "ppid": int(fields[1]) if len(fields) > 1 and fields[1].lstrip("-").isdigit() else 0,
        "argv": [a for a in raw.split("\0") if a != ""] if raw else [],
        "started_at": started,
        "unit": unit_of_cgroup(_read(os.path.join(proc, str(pid), "cgroup"))),
    }


def is_vllm(argv):
    """Whether ``argv`` runs vLLM's server: ``... vllm serve ...`` (any path of the ``vllm`` command, also as a
    script argument of python) or ``python -m vllm.entrypoints.openai.api_server``."""
    for i, arg in enumerate(argv):
        if os.path.basename(arg) == "vllm" and "serve" in argv[i + 1 :]:
            return True
        if arg in VLLM_MODULES:
            return True
    return False


def mask(argv):
    """``argv`` with the values of secret-looking options and environment assignments replaced by ``***``."""
    out = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        if arg.startswith("-") and "=" in arg:
            name, _value = arg.split("=", 1)
            out.append(name + "=" + MASK if SECRET.search(name) else arg)
        elif arg.startswith("-"):
            out.append(arg)
            hide_next = bool(SECRET.search(arg))
        elif "=" in arg and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", arg):
            name = arg.split("=", 1)[0]
            out.append(name + "=" + MASK if SECRET.search(name) else arg)
        else:
            out.append(arg)
    return out


def quote(argv):
    return " ".join(MASK if a == MASK else shlex.quote(a) for a in argv)


def _engine_path(module, engine):
    if os.path.isabs(engine):
        return engine if os.access(engine, os.X_OK) else None
    return module.get_bin_path(engine)


def containers(module, engines):
    """Running containers of every engine found: the fields of ``inspect`` that say how each was started."""
    found, seen = [], set()
    for engine in engines:
        path = _engine_path(module, engine)
        if not path or path in seen:
            continue
        seen.add(path)
        rc, out, _err = module.run_command([path, "ps", "-q", "--no-trunc"])
        ids = out.split() if rc == 0 else []
        if not ids:
            continue
        rc, out, _err = module.run_command([path, "inspect", *ids])
        try:
            docs = json.loads(out) if rc == 0 else []
        except ValueError:
            docs = []
        for doc in docs:
            found.append(container_fields(os.path.basename(path), doc))
    return found


def container_fields(engine, doc):
    config = doc.get("Config") or {}
    state = doc.get("State") or {}
    host = doc.get("HostConfig") or {}
    argv = list(config.get("Entrypoint") or []) + list(config.get("Cmd") or [])
    mounts = []
    for m in doc.get("Mounts") or []:
        if m.get("Source") and m.get("Destination"):
            mounts.append("%s:%s%s" % (m["Source"], m["Destination"], "" if m.get("RW", True) else ":ro"))
    return {
        "engine": engine,
        "id": str(doc.get("Id") or ""),
        "name": str(doc.get("Name") or "").lstrip("/"),
        "image": str(config.get("Image") or doc.get("ImageName") or ""),
        "command": quote(mask([str(a) for a in argv])),
        "mounts": mounts,
        "env_names": sorted(set(str(e).split("=", 1)[0] for e in config.get("Env") or [])),
        "network": str(host.get("NetworkMode") or ""),
        "started_at": str(state.get("StartedAt") or ""),
        "pid": int(state.get("Pid") or 0),
        # how the engine runs it (private: for the handover, never returned as such)
        "_argv": [str(a) for a in argv],
        "_entrypoint": [str(a) for a in config.get("Entrypoint") or []],
        "_runtime": str(host.get("Runtime") or ""),
        "_mounts": [
            {"source": m["Source"], "destination": m["Destination"], "rw": bool(m.get("RW", True))}
            for m in doc.get("Mounts") or []
            if m.get("Source") and m.get("Destination")
        ],
        "ports": sorted(
            set(
                str(b.get("HostPort"))
                for bindings in (host.get("PortBindings") or {}).values()
                for b in bindings or []
                if isinstance(b, dict) and b.get("HostPort")
            )
        ),
    }


def container_of(proc_info, found, lookup):
    """The container whose main process is ``proc_info`` or one of its ancestors (``lookup(pid)`` reads a process)."""
    by_pid = dict((c["pid"], c) for c in found if c["pid"])
    current, hops = proc_info, 0
    while current and hops < 64:
        if current["pid"] in by_pid:
            return by_pid[current["pid"]]
        if current["ppid"] <= 1:
            return None
        current, hops = lookup(current["ppid"]), hops + 1
    return None


def systemctl_show(module, systemctl, service):
    """What systemd says of ``service`` (``systemctl``: the command's path, None when the device has none)."""
    if not systemctl:
        return {}
    rc, out, _err = module.run_command([systemctl, "show", service, "--property=ActiveState,MainPID,LoadState"])
    return parse_systemctl_show(out) if rc == 0 else {}


def owned_unit_file(text, start_record):
    """Whether a unit file was written by this collection: it writes the collection's start record."""
    return bool(text) and "# invocation" in text and start_record in text


def classify(found, ours, params, lookup, known_containers):
    """What ``found`` (a process, or None) is. ``ours``: ``{owned, active, main_pid}`` of the collection's unit."""
    result = {
        "kind": "none",
        "foreign": False,
        "handover": None,
        "vllm": False,
        "pid": None,
        "started_at": None,
        "command": "",
        "unit": None,
        "container": None,
    }
    port = params["port"]
    if not found:
        result["description"] = "nothing serves on port %d" % port
        return result
    command = quote(mask(found["argv"]))
    result.update(pid=found["pid"], started_at=found["started_at"], command=command, vllm=is_vllm(found["argv"]), unit=found["unit"])
    what = "vLLM" if result["vllm"] else "a program that is not vLLM"
    container = container_of(found, known_containers, lookup)
    if container is None:
        proxied = [c for c in known_containers if str(port) in c["ports"]]
        container = proxied[0] if proxied and not result["vllm"] else None
    if container is not None:
        public = dict((k, v) for k, v in container.items() if k not in ("pid", "ports") and not k.startswith("_"))
        result["container"] = public
        main = lookup(ours["main_pid"]) if ours["main_pid"] else None
        started_by_ours = (
            ours["owned"] and ours["active"] and container["name"] == params["container_name"] and main is not None and params["container_name"] in main["argv"]
        )
        if started_by_ours:
            result["kind"] = "collection"
        else:
            result["kind"] = "container"
            result["description"] = "port %d is served by %s in container %r (%s image %s%s%s; not started by %s): %s" % (
                port,
                what,
                container["name"],
                container["engine"],
                container["image"],
                "; mounts " + ", ".join(container["mounts"]) if container["mounts"] else "",
                "; environment " + ", ".join(container["env_names"]) if container["env_names"] else "",
                params["service"],
                command,
            )
    elif found["unit"] == params["service"] and ours["owned"]:
        result["kind"] = "collection"
    elif found["unit"]:
        result["kind"] = "unit"
        result["description"] = "port %d is served by %s under the systemd unit %s%s: %s" % (
            port,
            what,
            found["unit"],
            " (its file %s was not written by this collection)" % params["unit_path"] if found["unit"] == params["service"] else "",
            command,
        )
    else:
        result["kind"] = "process"
        result["description"] = "port %d is served by %s, process %d under no systemd service and no container: %s" % (port, what, found["pid"], command)
    if result["kind"] == "collection":
        result["description"] = "port %d is served by this collection's %s (%s)" % (
            port,
            params["service"],
            "container " + container["name"] if container else "process %d" % found["pid"],
        )
    result["foreign"] = result["kind"] in ("unit", "container", "process")
    result["handover"] = None
    if result["foreign"] and result["vllm"]:
        result["handover"] = handover(
            container.get("_argv") or found["argv"] if result["kind"] == "container" else found["argv"],
            {
                "engine": container["engine"],
                "image": container["image"],
                "name": container["name"],
                "entrypoint": container.get("_entrypoint") or [],
                "runtime": container.get("_runtime") or "",
                "network": container.get("network") or "",
                "mounts": container.get("_mounts") or [],
                "env_names": container.get("env_names") or [],
            }
            if result["kind"] == "container"
            else None,
        )
    return result


def lacking(module, params, systemctl, booted="/run/systemd/system"):
    """What the collection needs to serve vLLM here and the device lacks: systemd, vLLM (native) or the container engine.

    ``systemctl``: the command's path, None when the device has none.
    """
    out = []
    if not (systemctl and os.path.isdir(booted)):
        out.append("systemd does not run on this device (the collection serves vLLM as a systemd unit)")
    vllm_bin = params.get("vllm_bin")
    if vllm_bin and not (os.path.isfile(vllm_bin) and os.access(vllm_bin, os.X_OK)):
        out.append("vLLM is not installed: %s is not an executable file (vllm_server_vllm_bin)" % vllm_bin)
    engine = params.get("engine")
    if engine and not _engine_path(module, engine):
        out.append("the container engine %s is not installed (vllm_server_runtime, vllm_server_engine_bin)" % engine)
    return out


def discover(module, proc="/proc"):
    params = module.params
    btime = boot_time(proc)

    def lookup(pid):
        return process(pid, proc, btime=btime)

    listeners = [p for p in (lookup(pid) for pid in socket_pids(listening_inodes(params["port"], proc), proc)) if p]
    systemctl = module.get_bin_path("systemctl")
    show = systemctl_show(module, systemctl, params["service"])
    ours = {
        "owned": owned_unit_file(_read(params["unit_path"]), params["start_record"]),
        "active": show.get("ActiveState") in ("active", "activating", "reloading"),
        "main_pid": int(show.get("MainPID") or 0),
    }
    candidates = listeners[:1]
    if not candidates:
        # nothing listens yet: a vLLM that is still loading its weights (or a container engine's client that runs one)
        candidates = [p for p in (lookup(pid) for pid in _pids(proc) if pid != os.getpid()) if p and is_vllm(p["argv"])]
    known = containers(module, params["engines"]) if candidates else []
    # the server itself rather than the engine client that started it: a process in a container or a unit first
    candidates.sort(key=lambda p: (container_of(p, known, lookup) is None and p["unit"] is None, p["pid"]))
    found = candidates[0] if candidates else None
    result = classify(found, ours, params, lookup, known)
    result["listening"] = bool(listeners)
    result["lacking"] = lacking(module, params, systemctl)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            port=dict(type="int", default=8000),
            service=dict(type="str", default="vllm.service"),
            unit_path=dict(type="path", default="/etc/systemd/system/vllm.service"),
            start_record=dict(type="path", default="/run/vllm/config.sha256"),
            container_name=dict(type="str", default="vllm"),
            engines=dict(type="list", elements="str", default=["docker", "podman"]),
            vllm_bin=dict(type="path"),
            engine=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    if not 0 < module.params["port"] < 65536:
        module.fail_json(msg="port must be between 1 and 65535, got %d" % module.params["port"])
    if not module.params["service"].endswith(".service"):
        module.params["service"] += ".service"
    module.exit_json(changed=False, **discover(module))


if __name__ == "__main__":
    main()
