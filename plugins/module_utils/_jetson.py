# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
"""Jetson device detection: pure functions over raw file contents.

Runs on the managed device, so it uses the Python standard library only and stays valid on
Python 3.8. Nothing here reads files or raises on odd input: callers pass the raw contents of
``/proc/device-tree/model`` and ``compatible`` (NUL-separated), ``/etc/nv_tegra_release``,
``/etc/nv_boot_control.conf``, ``/proc/meminfo`` and the stdout of ``nvpmodel -q`` to
:func:`detect`, which returns the ``ansible_facts.jetson`` dictionary described in
``docs/devel/architecture.md`` ("Device facts").

Classification order (NVIDIA's own classifier script keys everything on the model string and
MemTotal; this module keys the family on the device tree first):

1. family: board part numbers in ``compatible`` (``p3701`` AGX Orin module, ``p3767`` Orin NX /
   Nano module, ``p3834`` Thor module, ``p3740`` IGX carrier, ``p2888``/``p2972`` AGX Xavier,
   ``p3668``/``p3509`` Xavier NX), then the model string, then the board id in the boot-control
   ``TNSPEC``, then the SoC token alone;
2. variant: the module SKU suffix (``-0000``, ``-0005`` ...), the model string ("industrial",
   "t5000"/"t4000"), boot-control data and, only to split memory sizes, MemTotal. Thor follows
   NVIDIA's order: boot control, model, MemTotal.

The board part numbers and SKU meanings are general knowledge of L4T device trees; confirm them
on hardware before relying on them for more than tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.jetson_llm.speculative.plugins.module_utils import _families

FAMILIES = _families.FAMILIES

VARIANTS = dict((name, _families.variants(name)) for name in FAMILIES)

VARIANT_SOURCES = ("boot_control", "model", "memtotal", "compatible", "none")

SOCS = ("tegra264", "tegra234", "tegra194", "unknown")

ORIN_FAMILIES = _families.of_generation("orin")
THOR_FAMILIES = _families.of_generation("thor")

_SOC_OF_FAMILY = dict((name, entry["soc"]) for name, entry in _families.TABLE.items() if entry["soc"])

_CUDA_ARCH_OF_SOC = dict((entry["soc"], entry["cuda_arch"]) for entry in _families.TABLE.values() if entry["soc"])

# Module SKU suffix -> (family, variant). General knowledge of the L4T board configurations.
_P3701_SKUS = {"0000": "32gb", "0004": "32gb", "0005": "64gb", "0008": "industrial"}
_P3767_SKUS = {
    "0000": ("orin_nx", "16gb"),
    "0001": ("orin_nx", "8gb"),
    "0003": ("orin_nano", "8gb"),
    "0004": ("orin_nano", "4gb"),
    "0005": ("orin_nano", "8gb"),
}
_XAVIER_AGX_BOARDS = ("2888", "2972", "2822")
_XAVIER_NX_BOARDS = ("3668", "3509")
_IGX_CARRIERS = ("3740",)

# MemTotal thresholds in rounded GiB, as NVIDIA's classifier applies them (the family table).
_MEM_THRESHOLDS = dict((name, entry["memtotal_gib"]) for name, entry in _families.TABLE.items() if entry["memtotal_gib"])

_MAX_TEXT = 1 << 20  # longest input considered, in characters

_L4T_RE = re.compile(r"^#\s*R(\d{1,6})\s*\(release\),\s*REVISION:\s*(\d{1,6})\.(\d{1,6})", re.MULTILINE)
_PART_RE = re.compile(r"p(\d{4})-(\d{4})(-super)?", re.IGNORECASE)
_SOC_RE = re.compile(r"^nvidia,(tegra\d{3})$", re.IGNORECASE)
_TNSPEC_BOARD_RE = re.compile(r"^\s*(\d{4})-\d{1,4}-(\d{4})")
_MEMINFO_RE = re.compile(r"^([A-Za-z0-9_()]+):\s*(\d{1,15})(?:\s*kB)?\s*$", re.MULTILINE)
_NVPMODEL_RE = re.compile(r"NV Power Mode\s*:\s*([^\r\n/]*?)\s*(?:/\s*(\d{1,6}))?\s*$", re.MULTILINE)
_NVPMODEL_ID_RE = re.compile(r"^\s*(\d{1,6})\s*$")
_SUPER_WORD_RE = re.compile(r"\bsuper\b", re.IGNORECASE)
_BOOT_KEY_RE = re.compile(r"^\s*([A-Z][A-Z0-9_]*)(?:[ \t]+(.*?))?\s*$")


# --------------------------------------------------------------------------- text helpers


def to_text(value):
    """Return ``value`` as clean text, or ``None`` when it is absent or of an unusable type.

    Bytes are decoded as UTF-8 with replacement; lone surrogates are replaced so the result
    always serialises to JSON.
    """
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = bytes(value[: _MAX_TEXT * 4]).decode("utf-8", "replace")
    elif isinstance(value, str):
        text = value
    else:
        return None
    text = text[:_MAX_TEXT]
    return text.encode("utf-8", "replace").decode("utf-8")


def version_tuple(text):
    """``"36.4.3"`` -> ``(36, 4, 3)``; anything not made of dot-separated numbers -> ``()``."""
    if not isinstance(text, str) or not re.match(r"^\d{1,6}(\.\d{1,6})*$", text):
        return ()
    return tuple(int(part) for part in text.split("."))


# --------------------------------------------------------------------------- parsers


def parse_model(raw):
    """Device-tree ``model``: NULs removed, surrounding whitespace stripped; ``None`` if empty."""
    text = to_text(raw)
    if text is None:
        return None
    text = text.replace("\x00", "").strip()
    return text or None


def parse_compatible(raw):
    """Device-tree ``compatible``: list of non-empty entries, most specific first.

    Accepts the kernel's NUL-separated bytes, a str, or an already split list.
    """
    if isinstance(raw, (list, tuple)):
        entries = []
        for item in raw:
            text = to_text(item)
            if text is not None:
                entries.extend(text.split("\x00"))
    else:
        text = to_text(raw)
        if text is None:
            return []
        entries = text.split("\x00")
    return [entry.strip() for entry in entries if entry.strip()]


def parse_nv_tegra_release(raw):
    """``/etc/nv_tegra_release`` -> ``{release, major, minor, patch, raw}``.

    ``# R36 (release), REVISION: 4.3, ...`` gives release ``"36.4.3"`` (major from ``R<major>``,
    then the two REVISION numbers). Unparseable content gives release ``"unknown"`` with the
    first non-empty line kept in ``raw``; an absent file gives ``raw: None``.
    """
    text = to_text(raw)
    result = {"release": "unknown", "major": None, "minor": None, "patch": None, "raw": None}
    if text is None:
        return result
    lines = [line.strip() for line in text.replace("\x00", "").splitlines() if line.strip()]
    result["raw"] = lines[0] if lines else None
    match = _L4T_RE.search(text)
    if match is None:
        return result
    major, minor, patch = (int(group) for group in match.groups())
    result.update(
        {
            "release": "%d.%d.%d" % (major, minor, patch),
            "major": major,
            "minor": minor,
            "patch": patch,
            "raw": match.group(0) + text[match.end() :].split("\n", 1)[0].rstrip(),
        }
    )
    return result


def parse_boot_control(raw):
    """``/etc/nv_boot_control.conf`` -> dict of ``KEY -> value`` (``TNSPEC``, ``COMPATIBLE_SPEC``, ...)."""
    text = to_text(raw)
    result = {}
    if text is None:
        return result
    for line in text.splitlines():
        match = _BOOT_KEY_RE.match(line)
        if match and match.group(1) not in result:
            result[match.group(1)] = match.group(2) or ""
    return result


def parse_meminfo(raw):
    """``/proc/meminfo`` -> dict of field name -> integer value (kB for the memory fields)."""
    text = to_text(raw)
    result = {}
    if text is None:
        return result
    for key, value in _MEMINFO_RE.findall(text):
        if key not in result:
            result[key] = int(value)
    return result


def parse_nvpmodel(raw):
    """Stdout of ``nvpmodel -q`` -> ``{name, id}``.

    Accepts both layouts seen in practice: ``NV Power Mode: MAXN`` followed by the id on the next
    line, and ``NV Power Mode: MAXN / 0`` on one line. Warning lines before the mode are skipped.
    ``None`` gives ``{name: None, id: None}``; output without a mode gives name ``"unknown"``.
    """
    text = to_text(raw)
    if text is None:
        return {"name": None, "id": None}
    text = text.replace("\x00", "")
    match = _NVPMODEL_RE.search(text)
    if match is None or not match.group(1):
        return {"name": "unknown", "id": None}
    name = match.group(1).strip()
    mode_id = match.group(2)
    if mode_id is None:
        for line in text[match.end() :].splitlines():
            if not line.strip():
                continue
            id_match = _NVPMODEL_ID_RE.match(line)
            if id_match:
                mode_id = id_match.group(1)
            break
    return {"name": name, "id": int(mode_id) if mode_id is not None else None}


def jetpack_from_l4t(major, minor=None, patch=None):
    """JetPack release implied by an L4T release; ``"unknown"`` when not derivable.

    R36.2/R36.3 -> 6.0, R36.4.0-36.4.2 -> 6.1, R36.4.3+ -> 6.2, R35 -> 5.x, R38 -> 7.0 (38.0-38.3) /
    7.1 (38.4+) and R39 -> 7.2 follow NVIDIA's JetPack release notes.
    """
    if not isinstance(major, int) or isinstance(major, bool):
        return "unknown"
    minor = minor if isinstance(minor, int) and not isinstance(minor, bool) else None
    patch = patch if isinstance(patch, int) and not isinstance(patch, bool) else 0
    if major == 35:
        return "5.x"
    if major == 36 and minor is not None:
        if minor in (2, 3):
            return "6.0"
        if minor == 4:
            return "6.2" if patch >= 3 else "6.1"
        return "unknown"
    if major == 38 and minor is not None:
        return "7.1" if minor >= 4 else "7.0"
    if major == 39:
        return "7.2"
    return "unknown"


# --------------------------------------------------------------------------- classification


def _parts(compatible):
    """Board part numbers in compatible entries: list of ``(board, sku, is_super)``."""
    parts = []
    for entry in compatible:
        for board, sku, super_suffix in _PART_RE.findall(entry):
            parts.append((board, sku, bool(super_suffix)))
    return parts


def _soc_token(compatible):
    for entry in compatible:
        match = _SOC_RE.match(entry)
        if match:
            soc = match.group(1).lower()
            return soc if soc in SOCS else "other"
    return None


def _family_from_parts(parts, soc):
    """(family, variant or None) from board part numbers, or (None, None)."""
    boards = [board for board, _sku, _super in parts]
    if any(board in _IGX_CARRIERS for board in boards):
        return ("igx_thor" if soc == "tegra264" or "3834" in boards else "igx_orin"), "devkit"
    for board, sku, _super in parts:
        if board == "3834":
            return "thor", None
        if board == "3701":
            return "agx_orin", _P3701_SKUS.get(sku)
        if board == "3767":
            if sku in _P3767_SKUS:
                return _P3767_SKUS[sku]
            return None, None
        if board in _XAVIER_AGX_BOARDS:
            return "xavier", "agx"
        if board in _XAVIER_NX_BOARDS:
            return "xavier", "nx"
    return None, None


def _family_from_model(model, soc):
    """(family, variant or None) from the model string, or (None, None)."""
    if not model:
        return None, None
    low = model.lower()
    if "igx" in low:
        return ("igx_thor" if "thor" in low or soc == "tegra264" else "igx_orin"), "devkit"
    if "thor" in low:
        return "thor", None
    if "orin" in low:
        if "nano" in low:
            return "orin_nano", None
        if "orin nx" in low or "orin-nx" in low:
            return "orin_nx", None
        return "agx_orin", ("industrial" if "industrial" in low else None)
    if "xavier nx" in low or "xavier-nx" in low:
        return "xavier", "nx"
    if "xavier" in low or low.startswith("jetson-agx"):
        return "xavier", "agx"
    return None, None


def _family_from_soc(soc):
    if soc == "tegra264":
        return "thor"
    if soc == "tegra194":
        return "xavier"
    return None


def _boot_specs(boot):
    return [boot.get("TNSPEC", ""), boot.get("COMPATIBLE_SPEC", "")]


def _boot_parts(boot):
    parts = []
    for spec in _boot_specs(boot):
        match = _TNSPEC_BOARD_RE.match(spec)
        if match:
            parts.append((match.group(1), match.group(2), "super" in spec.lower()))
    return parts


def _thor_from_boot_control(boot):
    specs = " ".join(_boot_specs(boot)).lower()
    if "t5000" in specs:
        return "t5000"
    if "t4000" in specs:
        return "t4000"
    if "jetson-agx-thor-devkit" in specs:
        return "t5000"
    return None


def _variant_from_memtotal(family, total_gib):
    if total_gib is None:
        return None
    for threshold, variant in _MEM_THRESHOLDS.get(family, ()):
        if total_gib >= threshold:
            return variant
    return None


def _has_jetson_signal(model, compatible, l4t_text, boot):
    if any(entry.lower().startswith("nvidia,") for entry in compatible):
        return True
    low = (model or "").lower()
    if "jetson" in low or "nvidia" in low or "igx" in low:
        return True
    if l4t_text and l4t_text.replace("\x00", "").strip():
        return True
    return "TNSPEC" in boot or "COMPATIBLE_SPEC" in boot


def _speculation(family, l4t_major):
    """(supported, reason) from the family table's policy and the L4T release."""
    return _families.speculation(family, l4t_major)


def classify(model, compatible, boot, total_gib, power_mode_name=None):
    """Family, variant, variant source, super flag and SoC from parsed inputs.

    Returns a dict with ``family``, ``variant``, ``variant_source``, ``super`` and ``soc``.
    ``is_jetson`` signals are the caller's business: this returns family ``"unknown"`` when
    nothing matches.
    """
    soc_token = _soc_token(compatible)
    parts = _parts(compatible)
    family, variant = _family_from_parts(parts, soc_token)
    variant_source = "compatible" if variant else "none"

    model_family, model_variant = _family_from_model(model, soc_token)
    if family is None:
        family, variant = model_family, model_variant
        variant_source = "model" if variant else "none"
    elif family in ("igx_orin", "igx_thor") and model_family in ("igx_orin", "igx_thor"):
        family = model_family
    elif variant is None and model_family == family and model_variant:
        variant, variant_source = model_variant, "model"
    elif model_family in ("igx_orin", "igx_thor") and family in ORIN_FAMILIES + THOR_FAMILIES:
        # An IGX model string wins over the module part number (IGX Orin carries an AGX Orin module).
        family, variant, variant_source = model_family, model_variant, "model"

    boot_parts = _boot_parts(boot)
    if family is None:
        family, variant = _family_from_parts(boot_parts, soc_token)
        variant_source = "boot_control" if variant else "none"
    elif variant is None and family not in THOR_FAMILIES:
        boot_family, boot_variant = _family_from_parts(boot_parts, soc_token)
        if boot_family == family and boot_variant:
            variant, variant_source = boot_variant, "boot_control"

    if family is None:
        family = _family_from_soc(soc_token) or "unknown"
        variant, variant_source = None, "none"

    if family == "thor":
        # Order of evidence (as NVIDIA's classifier): boot control, model, (GPU name), MemTotal.
        variant, variant_source = None, "none"
        boot_variant = _thor_from_boot_control(boot)
        low = (model or "").lower()
        if boot_variant:
            variant, variant_source = boot_variant, "boot_control"
        elif "t5000" in low or "t4000" in low:
            variant, variant_source = ("t5000" if "t5000" in low else "t4000"), "model"

    if variant is None:
        variant = _variant_from_memtotal(family, total_gib)
        variant_source = "memtotal" if variant else "none"

    if variant is None or variant not in VARIANTS.get(family, ()):
        variant, variant_source = "unknown", "none"

    is_super = False
    if family in ("orin_nx", "orin_nano"):
        if power_mode_name is not None and power_mode_name != "unknown":
            is_super = "MAXN_SUPER" in power_mode_name.upper()
        else:
            is_super = bool(_SUPER_WORD_RE.search(model or "") or any(flag for _b, _s, flag in parts) or any(flag for _b, _s, flag in boot_parts))

    if soc_token in SOCS:
        soc = soc_token
    else:
        soc = _SOC_OF_FAMILY.get(family, "unknown")

    return {
        "family": family,
        "variant": variant,
        "variant_source": variant_source,
        "super": is_super,
        "soc": soc,
    }


def _cuda_arch(family, soc):
    """GPU architecture: from the family when known, else from the SoC token, else ``None``."""
    return _CUDA_ARCH_OF_SOC.get(_SOC_OF_FAMILY.get(family, soc))


def _memory(meminfo):
    total_kb = meminfo.get("MemTotal")
    available_kb = meminfo.get("MemAvailable")
    return {
        "total_mb": total_kb // 1024 if total_kb is not None else None,
        "available_mb": available_kb // 1024 if available_kb is not None else None,
        "total_gib": int(total_kb / 1048576.0 + 0.5) if total_kb is not None else None,
    }


def detect(sources):
    """Build the ``ansible_facts.jetson`` dictionary from raw file contents.

    ``sources`` keys: ``model``, ``compatible``, ``nv_tegra_release``, ``nv_boot_control``,
    ``meminfo``, ``nvpmodel``; values are bytes, str or ``None`` (absent). Never raises.
    """
    if not isinstance(sources, dict):
        sources = {}
    model = parse_model(sources.get("model"))
    compatible = parse_compatible(sources.get("compatible"))
    l4t_text = to_text(sources.get("nv_tegra_release"))
    l4t = parse_nv_tegra_release(l4t_text)
    boot = parse_boot_control(sources.get("nv_boot_control"))
    memory = _memory(parse_meminfo(sources.get("meminfo")))
    power_mode = parse_nvpmodel(sources.get("nvpmodel"))

    is_jetson = _has_jetson_signal(model, compatible, l4t_text, boot)
    if is_jetson:
        facts = classify(model, compatible, boot, memory["total_gib"], power_mode["name"])
    else:
        facts = {"family": "none", "variant": "unknown", "variant_source": "none", "super": False, "soc": "unknown"}

    family = facts["family"]
    jetpack = jetpack_from_l4t(l4t["major"], l4t["minor"], l4t["patch"])
    supported, reason = _speculation(family, l4t["major"])

    unknown_fields = []
    if is_jetson:
        checks = (
            ("family", family == "unknown"),
            ("variant", facts["variant"] == "unknown"),
            ("soc", facts["soc"] == "unknown"),
            ("l4t", l4t["release"] == "unknown"),
            ("jetpack", jetpack == "unknown"),
            ("memory", memory["total_mb"] is None),
            ("power_mode", power_mode["name"] == "unknown"),
        )
        unknown_fields = [name for name, is_unknown in checks if is_unknown]

    return {
        "is_jetson": is_jetson,
        "family": family,
        "variant": facts["variant"],
        "variant_source": facts["variant_source"],
        "super": facts["super"],
        "soc": facts["soc"],
        "model": model,
        "compatible": compatible,
        "memory": memory,
        "l4t": l4t,
        "jetpack": jetpack,
        "power_mode": power_mode,
        "cuda_arch": _cuda_arch(family, facts["soc"]) if is_jetson else None,
        "speculation_supported": supported,
        "speculation_reason": reason,
        "serve_defaults": _families.serve_defaults(family),
        "unknown_fields": unknown_fields,
    }
