# SPDX-License-Identifier: Apache-2.0
"""Fleet descriptions (YAML) and device profiles: loading and validation.

A description is validated completely before anything starts; every problem is reported at once,
each message naming the file and the host. Format: docs/devel/fleet.md.
"""

import copy
import re
import zlib

import yaml

from . import config
from .util import FleetError

HOST_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
VERSION_RE = re.compile(r"^\d+\.\d+(?:\.\d+)?(?:[.+-]?[0-9A-Za-z.]+)?$")
L4T_RE = re.compile(r"^# R(\d+) \(release\), REVISION: (\d+)\.(\d+)")
DATE_RE = re.compile(r"DATE: \w{3} (\w{3}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) \w+ (\d{4})")
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()

TOP_KEYS = {"name", "description", "defaults", "groups", "hosts"}
DEFAULT_KEYS = {"variant", "sim", "vars"}
HOST_KEYS = {"name", "profile", "variant", "sim", "vars", "mem_available_kib", "tmpfs"}
TMPFS_PATH_RE = re.compile(r"^/[A-Za-z0-9_./-]+$")
VARIANTS = ("native", "docker")
PROFILE_KEYS = {
    "model",
    "compatible",
    "nv_tegra_release",
    "nv_boot_control",
    "mem_total_kib",
    "mem_available_kib",
    "nvpmodel",
    "expect",
    "sim",
}
RESERVED_VARS = {"ansible_host", "ansible_user", "ansible_ssh_private_key_file", "ansible_ssh_common_args"}
RESERVED_GROUPS = {"all", "ungrouped"}

# Simulator settings (docs/devel/architecture.md, "vLLM simulator"; tests/vllm_sim/vllm_sim/settings.py):
# name -> checker. The device (name, bandwidth_gbs, tflops) always comes from the profile.
SIM_DEFAULTS = {"version": "0.20.0", "faults": {}, "account_memory": False}


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_count(v):
    return v is None or (_is_int(v) and v >= 0)


SIM_CHECKS = {
    "version": (lambda v: isinstance(v, str) and bool(VERSION_RE.match(v)), 'a vLLM version string such as "0.20.0"'),
    "time_scale": (lambda v: _is_num(v) and v > 0, "a number > 0"),
    "noise": (lambda v: _is_num(v) and v >= 0, "a number >= 0"),
    "seed": (_is_int, "an integer"),
    "acceptance_scale": (lambda v: _is_num(v) and v >= 0, "a number >= 0"),
    "load_gbps": (lambda v: _is_num(v) and v > 0, "a number > 0"),
    "init_s": (lambda v: _is_num(v) and v >= 0, "a number >= 0"),
    "faults": (lambda v: isinstance(v, dict), "a mapping"),
    "account_memory": (lambda v: isinstance(v, bool), "true or false"),
    "lag_limit": (lambda v: _is_num(v) and v >= 0, "a number >= 0"),
}
FAULT_CHECKS = {
    "crash_after_requests": (_opt_count, "an integer >= 0 or null"),
    "hang_after_requests": (_opt_count, "an integer >= 0 or null"),
    "slow_start_s": (lambda v: _is_num(v) and v >= 0, "a number >= 0"),
    "wrong_answers": (lambda v: isinstance(v, bool), "true or false"),
    "engine_dead_after_requests": (_opt_count, "an integer >= 0 or null"),
    "engine_dead_file": (lambda v: v is None or (isinstance(v, str) and v.startswith("/")), "an absolute path or null"),
}

FAMILY_GROUP = "jetson_%s"
DOCKER_GROUP = "fleet_docker"


class Host:
    """One validated host of a fleet description."""

    def __init__(self, *, index, name, profile_name, profile, variant, sim, vars_, mem_available_kib, tmpfs=None):
        self.index = index  # 1-based position in the description
        self.name = name
        self.profile_name = profile_name
        self.profile = profile
        self.variant = variant
        self.sim = sim  # merged simulator settings, device included
        self.vars = vars_
        self.mem_total_kib = profile["mem_total_kib"]
        self.mem_available_kib = mem_available_kib
        self.tmpfs = dict(tmpfs or {})  # path inside the host -> size in MiB

    @property
    def address(self):
        return "%s%d" % (config.SUBNET_PREFIX, config.FIRST_HOST_OCTET + self.index)

    @property
    def container(self):
        return config.CONTAINER_PREFIX + self.name

    @property
    def netns(self):
        return config.NETNS_PREFIX + self.name

    @property
    def veth(self):
        return "%s%03d" % (config.VETH_PREFIX, self.index)

    @property
    def family(self):
        return self.profile["expect"]["family"]

    @property
    def l4t_version(self):
        return l4t_package_version(self.profile["nv_tegra_release"])

    def to_dict(self):
        return {
            "index": self.index,
            "name": self.name,
            "profile": self.profile_name,
            "variant": self.variant,
            "address": self.address,
            "container": self.container,
            "netns": self.netns,
            "veth": self.veth,
            "family": self.family,
            "expect": self.profile["expect"],
            "sim": self.sim,
            "vars": self.vars,
            "mem_total_kib": self.mem_total_kib,
            "mem_available_kib": self.mem_available_kib,
            "tmpfs": self.tmpfs,
        }


class Fleet:
    def __init__(self, path, name, hosts, groups):
        self.path = path
        self.name = name
        self.hosts = hosts
        self.groups = groups  # extra groups: name -> [host names]


def l4t_package_version(line):
    """'# R36 (release), REVISION: 4.3, ... DATE: Wed Jan  8 01:49:37 UTC 2025' -> '36.4.3-20250108014937'."""
    m = L4T_RE.match(line or "")
    if not m:
        return None
    version = "%s.%s.%s" % m.groups()
    d = DATE_RE.search(line)
    if d and d.group(1) in MONTHS:
        mon, day, hh, mm, ss, year = d.groups()
        stamp = "%s%02d%02d%s%s%s" % (year, MONTHS.index(mon) + 1, int(day), hh, mm, ss)
    else:
        stamp = "00000000000000"
    return version + "-" + stamp


def _type_name(v):
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(v), type(v).__name__)


def load_yaml(path):
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except FileNotFoundError:
        raise FleetError("%s: file not found" % path) from None
    except yaml.YAMLError as exc:
        raise FleetError("%s: not valid YAML: %s" % (path, exc)) from None


def load_profiles(path=None):
    path = path or config.PROFILES
    data = load_yaml(path)
    if not isinstance(data, dict) or not data:
        raise FleetError("%s: expected a mapping of profile names to profiles" % path)
    errors = []
    for name, prof in data.items():
        where = "%s: profile %r" % (path, name)
        if not isinstance(prof, dict):
            errors.append("%s: expected a mapping, got %s" % (where, _type_name(prof)))
            continue
        missing = sorted(PROFILE_KEYS - set(prof))
        if missing:
            errors.append("%s: missing keys %s" % (where, ", ".join(missing)))
            continue
        if not isinstance(prof["compatible"], list) or not all(isinstance(c, str) for c in prof["compatible"]):
            errors.append("%s: compatible must be a list of strings" % where)
        for k in ("mem_total_kib", "mem_available_kib"):
            if not _is_int(prof[k]) or prof[k] <= 0:
                errors.append("%s: %s must be a positive integer" % (where, k))
        if l4t_package_version(prof["nv_tegra_release"]) is None:
            errors.append("%s: nv_tegra_release %r has no '# R<major> (release), REVISION: x.y'" % (where, prof["nv_tegra_release"]))
        nvp = prof["nvpmodel"]
        if not (isinstance(nvp, dict) and isinstance(nvp.get("name"), str) and _is_int(nvp.get("id"))):
            errors.append("%s: nvpmodel must be {name: str, id: int}" % where)
        exp = prof["expect"]
        if not (isinstance(exp, dict) and isinstance(exp.get("family"), str)):
            errors.append("%s: expect must be {family, variant}" % where)
        sim = prof["sim"]
        if not (isinstance(sim, dict) and _is_num(sim.get("bandwidth_gbs")) and _is_num(sim.get("tflops"))):
            errors.append("%s: sim must be {bandwidth_gbs: number, tflops: number}" % where)
    if errors:
        raise FleetError("\n".join(errors))
    return data


def _check_sim(sim, where, errors):
    if not isinstance(sim, dict):
        errors.append("%s: sim must be a mapping, got %s" % (where, _type_name(sim)))
        return
    for key, value in sim.items():
        if key not in SIM_CHECKS:
            errors.append("%s: unknown sim key %r (allowed: %s)" % (where, key, ", ".join(sorted(SIM_CHECKS))))
            continue
        ok, what = SIM_CHECKS[key]
        if not ok(value):
            errors.append("%s: sim.%s must be %s, got %r" % (where, key, what, value))
        elif key == "faults":
            for fkey, fval in value.items():
                if fkey not in FAULT_CHECKS:
                    errors.append("%s: unknown sim.faults key %r (allowed: %s)" % (where, fkey, ", ".join(sorted(FAULT_CHECKS))))
                elif not FAULT_CHECKS[fkey][0](fval):
                    errors.append("%s: sim.faults.%s must be %s, got %r" % (where, fkey, FAULT_CHECKS[fkey][1], fval))


def _check_vars(vars_, where, errors):
    if not isinstance(vars_, dict):
        errors.append("%s: vars must be a mapping, got %s" % (where, _type_name(vars_)))
        return
    for key in vars_:
        if not isinstance(key, str) or not VAR_NAME_RE.match(key):
            errors.append("%s: vars key %r is not a valid Ansible variable name" % (where, key))
        elif key in RESERVED_VARS or key.startswith("fleet_"):
            errors.append("%s: vars key %r is set by the fleet itself and cannot be given" % (where, key))


def merge_sim(*layers):
    out = {}
    for layer in layers:
        for k, v in (layer or {}).items():
            if k == "faults":
                out["faults"] = dict(out.get("faults") or {}, **(v or {}))
            else:
                out[k] = copy.deepcopy(v)
    return out


def load_fleet(path, profiles=None, profiles_path=None):
    """Load and validate a fleet description. Raises FleetError listing every problem."""
    profiles = profiles if profiles is not None else load_profiles(profiles_path)
    data = load_yaml(path)
    errors = []
    if not isinstance(data, dict):
        raise FleetError("%s: expected a mapping with a 'hosts' list, got %s" % (path, _type_name(data)))
    for key in data:
        if key not in TOP_KEYS:
            errors.append("%s: unknown top-level key %r (allowed: %s)" % (path, key, ", ".join(sorted(TOP_KEYS))))
    name = data.get("name", "fleet")
    if not isinstance(name, str) or not HOST_NAME_RE.match(name):
        errors.append("%s: name must be a short lowercase name, got %r" % (path, name))
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        errors.append("%s: defaults must be a mapping, got %s" % (path, _type_name(defaults)))
        defaults = {}
    for key in defaults:
        if key not in DEFAULT_KEYS:
            errors.append("%s: defaults: unknown key %r (allowed: %s)" % (path, key, ", ".join(sorted(DEFAULT_KEYS))))
    if "variant" in defaults and defaults["variant"] not in VARIANTS:
        errors.append("%s: defaults: variant must be one of %s, got %r" % (path, ", ".join(VARIANTS), defaults["variant"]))
    if "sim" in defaults:
        _check_sim(defaults["sim"], "%s: defaults" % path, errors)
    if "vars" in defaults:
        _check_vars(defaults["vars"], "%s: defaults" % path, errors)

    raw_hosts = data.get("hosts")
    if not isinstance(raw_hosts, list) or not raw_hosts:
        errors.append("%s: hosts must be a non-empty list" % path)
        raw_hosts = []
    if len(raw_hosts) > config.MAX_HOSTS:
        errors.append(
            "%s: %d hosts do not fit the address range %s%d-254 (at most %d hosts)"
            % (path, len(raw_hosts), config.SUBNET_PREFIX, config.FIRST_HOST_OCTET + 1, config.MAX_HOSTS)
        )
    hosts = []
    seen = {}
    for i, raw in enumerate(raw_hosts, start=1):
        label = "hosts[%d]" % (i - 1)
        if isinstance(raw, dict) and isinstance(raw.get("name"), str):
            label = "host %r (hosts[%d])" % (raw["name"], i - 1)
        where = "%s: %s" % (path, label)
        if not isinstance(raw, dict):
            errors.append("%s: expected a mapping, got %s" % (where, _type_name(raw)))
            continue
        for key in raw:
            if key not in HOST_KEYS:
                errors.append("%s: unknown key %r (allowed: %s)" % (where, key, ", ".join(sorted(HOST_KEYS))))
        hname = raw.get("name")
        if not isinstance(hname, str):
            errors.append("%s: name is required and must be a string" % where)
        elif not HOST_NAME_RE.match(hname):
            errors.append("%s: bad name %r: use 1-40 characters a-z, 0-9 and '-', starting and ending with a letter or digit" % (where, hname))
        elif hname in seen:
            errors.append("%s: duplicate name %r (also hosts[%d])" % (where, hname, seen[hname]))
        else:
            seen[hname] = i - 1
        pname = raw.get("profile")
        if not isinstance(pname, str):
            errors.append("%s: profile is required (one of: %s)" % (where, ", ".join(sorted(profiles))))
        elif pname not in profiles:
            errors.append("%s: unknown profile %r (allowed: %s)" % (where, pname, ", ".join(sorted(profiles))))
        variant = raw.get("variant", defaults.get("variant", "native"))
        if variant not in VARIANTS:
            errors.append("%s: variant must be one of %s, got %r" % (where, ", ".join(VARIANTS), variant))
        if "sim" in raw:
            _check_sim(raw["sim"], where, errors)
        if "vars" in raw:
            _check_vars(raw["vars"], where, errors)
        mem = raw.get("mem_available_kib")
        if mem is not None and (not _is_int(mem) or mem <= 0):
            errors.append("%s: mem_available_kib must be a positive integer, got %r" % (where, mem))
            mem = None
        elif mem is not None and pname in profiles and mem > profiles[pname]["mem_total_kib"]:
            errors.append("%s: mem_available_kib %d exceeds the profile's mem_total_kib %d" % (where, mem, profiles[pname]["mem_total_kib"]))
        tmpfs = raw.get("tmpfs") or {}
        if not isinstance(tmpfs, dict) or not all(
            isinstance(k, str) and TMPFS_PATH_RE.match(k) and ".." not in k and _is_int(v) and 0 < v <= 64 for k, v in tmpfs.items()
        ):
            errors.append("%s: tmpfs must map absolute paths to sizes in MiB (1-64), got %r" % (where, tmpfs))
        if errors:
            continue
        profile = profiles[pname]
        sim = merge_sim(
            SIM_DEFAULTS,
            {"seed": zlib.crc32(hname.encode()) & 0x7FFFFFFF},
            defaults.get("sim"),
            raw.get("sim"),
        )
        sim["device"] = {
            "name": pname,  # the simulator derives its family calibration from the name
            "bandwidth_gbs": profile["sim"]["bandwidth_gbs"],
            "tflops": profile["sim"]["tflops"],
        }
        vars_ = dict(defaults.get("vars") or {})
        vars_.update(raw.get("vars") or {})
        hosts.append(
            Host(
                index=i,
                name=hname,
                profile_name=pname,
                profile=profile,
                variant=variant,
                sim=sim,
                vars_=copy.deepcopy(vars_),
                mem_available_kib=mem or profile["mem_available_kib"],
                tmpfs=tmpfs,
            )
        )

    groups = data.get("groups") or {}
    if not isinstance(groups, dict):
        errors.append("%s: groups must be a mapping of group name to host names" % path)
        groups = {}
    auto = {FAMILY_GROUP % p["expect"]["family"] for p in profiles.values()} | {DOCKER_GROUP}
    for gname, members in groups.items():
        where = "%s: groups.%s" % (path, gname)
        if not isinstance(gname, str) or not VAR_NAME_RE.match(gname) or gname in RESERVED_GROUPS or gname in auto:
            errors.append("%s: %r cannot be used as a group name (reserved or not a valid name)" % (where, gname))
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            errors.append("%s: expected a list of host names" % where)
            continue
        for m in members:
            if m not in seen:
                errors.append("%s: unknown host %r" % (where, m))
    if errors:
        raise FleetError("invalid fleet description:\n  " + "\n  ".join(errors))
    return Fleet(path, name, hosts, {g: list(m) for g, m in groups.items()})
