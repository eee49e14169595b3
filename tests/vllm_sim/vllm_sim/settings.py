# SPDX-License-Identifier: Apache-2.0
"""Simulator settings: ``$VLLM_SIM_SETTINGS`` (default ``/etc/vllm-sim/settings.json``).

A missing file means defaults. Unknown keys are rejected so that typos do not go unnoticed.
"""

from __future__ import annotations

import copy
import json
import os

from .versions import DEFAULT_VERSION, MIN_VERSION, Version

DEFAULT_PATH = "/etc/vllm-sim/settings.json"

DEFAULTS = {
    "version": DEFAULT_VERSION,
    # Device the simulated vLLM runs on. Efficiency factors default per family (engine.py).
    "device": {"name": "agx-orin-64gb", "bandwidth_gbs": 204.8, "tflops": 42.6},
    # Wall seconds per modelled second (1.0 = real time, 0.01 = 100x faster).
    "time_scale": 1.0,
    # Share of modelled busy time the served timing may lose to lateness (a busy host) before the
    # simulator reports itself out of spec (vllm_sim:out_of_spec on /metrics, a warning in the log).
    "lag_limit": 0.02,
    # Relative run-to-run standard deviation of step times (slow AR(1) drift + per-step jitter).
    "noise": 0.02,
    # Seed of every random draw (acceptance, noise, sampling); null = a new seed per process.
    "seed": None,
    # Multiplies the per-position acceptance probability of every speculator.
    "acceptance_scale": 1.0,
    # Weight loading speed in GB/s (modelled); plus init_s for profiling, KV cache and CUDA graphs.
    "load_gbps": 1.5,
    "init_s": 20.0,
    # Lower MemAvailable/MemFree in the meminfo file by the reservation while serving.
    "account_memory": False,
    # Directory for the status file and memory reservations.
    "state_dir": "/run/vllm-sim",
    "faults": {
        "crash_after_requests": None,
        "hang_after_requests": None,
        "slow_start_s": 0.0,
        "wrong_answers": False,
        "engine_dead_after_requests": None,
        "engine_dead_file": None,
    },
}

DEVICE_KEYS = {
    "name",
    "bandwidth_gbs",
    "tflops",
    "mem_efficiency",
    "decode_efficiency",
    "prefill_efficiency",
    "step_overhead_ms",
    "draft_overhead_ms",
    "family",
}


class SettingsError(Exception):
    pass


def _merge(base: dict, override: dict, where: str) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if key not in base:
            raise SettingsError(f"unknown setting {where}{key!r}")
        if isinstance(base[key], dict) and key != "device":
            if not isinstance(value, dict):
                raise SettingsError(f"setting {where}{key!r} must be an object")
            out[key] = _merge(base[key], value, f"{where}{key}.")
        elif key == "device":
            if not isinstance(value, dict):
                raise SettingsError("setting 'device' must be an object")
            unknown = set(value) - DEVICE_KEYS
            if unknown:
                raise SettingsError(f"unknown setting device.{sorted(unknown)[0]!r}")
            merged = dict(base["device"]) if not value.get("name") else {}
            merged.update(value)
            out[key] = merged
        else:
            out[key] = value
    return out


def validate(settings: dict) -> dict:
    try:
        version = Version(settings["version"])
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    if version < MIN_VERSION:
        raise SettingsError(f"version {version} is older than the oldest simulated release 0.10.0")
    settings["version"] = str(version)
    dev = settings["device"]
    for key in ("bandwidth_gbs", "tflops"):
        if key not in dev:
            dev[key] = DEFAULTS["device"][key]
        if not isinstance(dev[key], (int, float)) or dev[key] <= 0:
            raise SettingsError(f"device.{key} must be a positive number")
    for key in ("time_scale", "load_gbps"):
        if not isinstance(settings[key], (int, float)) or settings[key] <= 0:
            raise SettingsError(f"{key} must be a positive number")
    for key in ("noise", "acceptance_scale", "init_s", "lag_limit"):
        if not isinstance(settings[key], (int, float)) or settings[key] < 0:
            raise SettingsError(f"{key} must be a non-negative number")
    faults = settings["faults"]
    for key in ("crash_after_requests", "hang_after_requests", "engine_dead_after_requests"):
        value = faults[key]
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise SettingsError(f"faults.{key} must be null or a non-negative integer")
    if not isinstance(faults["slow_start_s"], (int, float)) or faults["slow_start_s"] < 0:
        raise SettingsError("faults.slow_start_s must be a non-negative number")
    return settings


def load(path=None, env=None) -> dict:
    env = os.environ if env is None else env
    path = path or env.get("VLLM_SIM_SETTINGS") or DEFAULT_PATH
    data = {}
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError) as exc:
            raise SettingsError(f"cannot read settings file {path}: {exc}") from None
        if not isinstance(data, dict):
            raise SettingsError(f"settings file {path} must hold a JSON object")
    return from_dict(data)


def from_dict(data: dict) -> dict:
    return validate(_merge(DEFAULTS, data or {}, ""))
