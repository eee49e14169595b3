# SPDX-License-Identifier: Apache-2.0
"""Unit tests for the Jetson device detection in plugins/module_utils/_jetson.py."""

import json
import os

import pytest
import yaml
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _families
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _jetson as jetson
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
PROFILES_FILE = os.path.join(ROOT, "tests", "fleet", "profiles.yml")

GIB_KB = 1024 * 1024


def meminfo(total_kib, available_kib=None):
    """A /proc/meminfo text with the fields the kernel prints around MemTotal/MemAvailable."""
    lines = ["MemTotal:       %8d kB" % total_kib, "MemFree:        %8d kB" % (total_kib // 2)]
    if available_kib is not None:
        lines.append("MemAvailable:   %8d kB" % available_kib)
    lines += ["Buffers:           12345 kB", "Cached:          987654 kB", "HugePages_Total:       0"]
    return ("\n".join(lines) + "\n").encode()


def dt_string(text):
    return text.encode() + b"\x00"


def dt_list(entries):
    return b"".join(entry.encode() + b"\x00" for entry in entries)


def l4t_line(major, rev):
    return "# R%d (release), REVISION: %s, GCID: 00000000, BOARD: generic, EABI: aarch64\n" % (major, rev)


def sources(model=None, compatible=None, release=None, *, boot=None, mem_gib=None, avail_gib=None, nvpmodel=None):
    return {
        "model": dt_string(model) if model is not None else None,
        "compatible": dt_list(compatible) if compatible is not None else None,
        "nv_tegra_release": release,
        "nv_boot_control": boot,
        "meminfo": meminfo(int(mem_gib * GIB_KB), int(avail_gib * GIB_KB) if avail_gib else None) if mem_gib is not None else None,
        "nvpmodel": nvpmodel,
    }


def load_profiles():
    with open(PROFILES_FILE) as handle:
        return yaml.safe_load(handle)


def profile_sources(profile, with_nvpmodel=True):
    mode = profile["nvpmodel"]
    return {
        "model": dt_string(profile["model"]),
        "compatible": dt_list(profile["compatible"]),
        "nv_tegra_release": (profile["nv_tegra_release"] + "\n# KERNEL_VARIANT: oot\n").encode(),
        "nv_boot_control": profile["nv_boot_control"].encode() if profile["nv_boot_control"] else None,
        "meminfo": meminfo(profile["mem_total_kib"], profile["mem_available_kib"]),
        "nvpmodel": ("NV Power Mode: %s\n%d\n" % (mode["name"], mode["id"])).encode() if with_nvpmodel else None,
    }


# --------------------------------------------------------------------------- parsers


class TestParseModel:
    def test_bytes_with_trailing_nul(self):
        assert jetson.parse_model(b"NVIDIA Jetson AGX Orin Developer Kit\x00") == "NVIDIA Jetson AGX Orin Developer Kit"

    def test_str_and_embedded_nuls(self):
        assert jetson.parse_model("  Jetson-AGX\x00\x00 ") == "Jetson-AGX"

    @pytest.mark.parametrize("raw", [None, b"", b"\x00", b"  \x00\n", 42, ["list"]])
    def test_absent_or_unusable(self, raw):
        assert jetson.parse_model(raw) is None

    def test_invalid_utf8_is_replaced(self):
        assert jetson.parse_model(b"Jetson \xff\xfe Orin\x00") == "Jetson \ufffd\ufffd Orin"

    def test_lone_surrogate_in_str_is_replaced(self):
        assert jetson.parse_model("Orin \udcff") == "Orin ?"


class TestParseCompatible:
    def test_kernel_layout(self):
        raw = b"nvidia,p3737-0000+p3701-0005\x00nvidia,p3701-0005\x00nvidia,tegra234\x00"
        assert jetson.parse_compatible(raw) == ["nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"]

    def test_list_input(self):
        assert jetson.parse_compatible(["nvidia,tegra264", b"nvidia,p3834-0008\x00", None, 3]) == [
            "nvidia,tegra264",
            "nvidia,p3834-0008",
        ]

    @pytest.mark.parametrize("raw", [None, b"", b"\x00\x00", 1.5])
    def test_empty(self, raw):
        assert jetson.parse_compatible(raw) == []


class TestParseNvTegraRelease:
    @pytest.mark.parametrize(
        "line, release, parts",
        [
            # First lines of /etc/nv_tegra_release as L4T ships them.
            ("# R38 (release), REVISION: 4.0, GCID: 43443517, BOARD: generic, EABI: aarch64", "38.4.0", (38, 4, 0)),
            ("# R36 (release), REVISION: 3.0", "36.3.0", (36, 3, 0)),
            ("# R39 (release), REVISION: 0.0", "39.0.0", (39, 0, 0)),
            ("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64", "36.4.3", (36, 4, 3)),
            ("# R35 (release), REVISION: 6.0, GCID: 1, BOARD: t186ref, EABI: aarch64", "35.6.0", (35, 6, 0)),
        ],
    )
    def test_documented_lines(self, line, release, parts):
        result = jetson.parse_nv_tegra_release((line + "\n# KERNEL_VARIANT: oot\n").encode())
        assert result["release"] == release
        assert (result["major"], result["minor"], result["patch"]) == parts
        assert result["raw"] == line

    def test_release_line_after_other_lines(self):
        text = "\n# some header\n# R36 (release), REVISION: 4.0, GCID: 1\n"
        result = jetson.parse_nv_tegra_release(text)
        assert result["release"] == "36.4.0"
        assert result["raw"] == "# R36 (release), REVISION: 4.0, GCID: 1"

    def test_unparseable_keeps_raw(self):
        result = jetson.parse_nv_tegra_release(b"\nsomething else entirely\nsecond line\n")
        assert result == {
            "release": "unknown",
            "major": None,
            "minor": None,
            "patch": None,
            "raw": "something else entirely",
        }

    def test_absent(self):
        assert jetson.parse_nv_tegra_release(None)["raw"] is None
        assert jetson.parse_nv_tegra_release(None)["release"] == "unknown"

    def test_huge_numbers_do_not_raise(self):
        result = jetson.parse_nv_tegra_release("# R" + "9" * 5000 + " (release), REVISION: 1.0")
        assert result["release"] == "unknown"

    def test_versions_compare_numerically(self):
        assert jetson.version_tuple("36.10.0") > jetson.version_tuple("36.4.3")
        assert jetson.version_tuple("39.0.0") == (39, 0, 0)
        assert jetson.version_tuple("unknown") == ()
        assert jetson.version_tuple(None) == ()


class TestParseBootControl:
    def test_real_layout(self):
        text = (
            "TNSPEC 3701-500-0005-G.0-1-1-jetson-agx-orin-devkit-\n"
            "COMPATIBLE_SPEC 3701-300-0005--1--jetson-agx-orin-devkit-\n"
            "TEGRA_LEGACY_UPDATE false\n"
            "TEGRA_CHIPID 0x23\n"
            "EMPTY_KEY\n"
            "lowercase ignored\n"
        )
        result = jetson.parse_boot_control(text.encode())
        assert result["TNSPEC"] == "3701-500-0005-G.0-1-1-jetson-agx-orin-devkit-"
        assert result["COMPATIBLE_SPEC"] == "3701-300-0005--1--jetson-agx-orin-devkit-"
        assert result["TEGRA_CHIPID"] == "0x23"
        assert result["EMPTY_KEY"] == ""
        assert "lowercase" not in result

    def test_first_value_wins(self):
        assert jetson.parse_boot_control("TNSPEC a\nTNSPEC b\n") == {"TNSPEC": "a"}

    def test_absent(self):
        assert jetson.parse_boot_control(None) == {}


class TestParseMeminfo:
    def test_fields(self):
        result = jetson.parse_meminfo(meminfo(64277709, 58720256))
        assert result["MemTotal"] == 64277709
        assert result["MemAvailable"] == 58720256
        assert result["HugePages_Total"] == 0

    def test_garbage_lines_are_skipped(self):
        assert jetson.parse_meminfo(b"MemTotal: lots kB\nMemAvailable: 5 kB\n\xff\xff") == {"MemAvailable": 5}


class TestParseNvpmodel:
    @pytest.mark.parametrize(
        "raw, expected",
        [
            (b"NV Power Mode: MAXN\n0\n", {"name": "MAXN", "id": 0}),
            (b"NV Power Mode: MAXN / 0\n", {"name": "MAXN", "id": 0}),
            ("NV Power Mode: 120W / 1", {"name": "120W", "id": 1}),
            (b"NV Power Mode: MAXN_SUPER\n2\n", {"name": "MAXN_SUPER", "id": 2}),
            (b"NVPM WARN: fan mode is not set!\nNV Power Mode: 15W\n0\n", {"name": "15W", "id": 0}),
            (b"NV Power Mode: MODE_20W_6CORE\r\n8\r\n", {"name": "MODE_20W_6CORE", "id": 8}),
            (b"NV Power Mode: MAXN\n\n3\n", {"name": "MAXN", "id": 3}),
            (b"NV Power Mode: MAXN\n", {"name": "MAXN", "id": None}),
            (b"NV Power Mode: MAXN\nnot a number\n", {"name": "MAXN", "id": None}),
            (b"NV Power Mode:\n", {"name": "unknown", "id": None}),
            (b"command not found\n", {"name": "unknown", "id": None}),
            (b"", {"name": "unknown", "id": None}),
            (None, {"name": None, "id": None}),
        ],
    )
    def test_layouts(self, raw, expected):
        assert jetson.parse_nvpmodel(raw) == expected


class TestJetpack:
    @pytest.mark.parametrize(
        "version, jetpack",
        [
            ((35, 6, 0), "5.x"),
            ((35, 1, 0), "5.x"),
            ((36, 2, 0), "6.0"),
            ((36, 3, 0), "6.0"),
            ((36, 4, 0), "6.1"),
            ((36, 4, 2), "6.1"),
            ((36, 4, 3), "6.2"),
            ((36, 4, 4), "6.2"),
            ((36, 5, 0), "unknown"),
            ((36, 0, 0), "unknown"),
            ((38, 2, 0), "7.0"),
            ((38, 4, 0), "7.1"),
            ((39, 0, 0), "7.2"),
            ((39, 1, 0), "7.2"),
            ((32, 7, 4), "unknown"),
            ((40, 0, 0), "unknown"),
            ((None, None, None), "unknown"),
            ((True, 4, 3), "unknown"),
            ((36, None, None), "unknown"),
            (("36", "4", "3"), "unknown"),
        ],
    )
    def test_mapping(self, version, jetpack):
        assert jetson.jetpack_from_l4t(*version) == jetpack


# --------------------------------------------------------------------------- classification table

# Each row: id, sources, expected (family, variant, variant_source, super, soc).
# The AGX Orin / AGX Thor developer-kit model strings, the SoC tokens and the nv_tegra_release
# layout follow NVIDIA's developer-kit documentation and L4T; the other board strings and part numbers are examples
# from general knowledge of L4T device trees (see tests/fleet/profiles.yml).
R36 = l4t_line(36, "4.3")
DEVICE_TABLE = [
    (
        "agx-orin-devkit-64gb",
        sources(
            "NVIDIA Jetson AGX Orin Developer Kit",
            ["nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"],
            R36,
            mem_gib=61.3,
        ),
        ("agx_orin", "64gb", "compatible", False, "tegra234"),
    ),
    (
        "agx-orin-devkit-32gb-early-module",
        sources(
            "Jetson AGX Orin",
            ["nvidia,p3737-0000+p3701-0000", "nvidia,p3701-0000", "nvidia,tegra234"],
            R36,
            mem_gib=30,
        ),
        ("agx_orin", "32gb", "compatible", False, "tegra234"),
    ),
    (
        "agx-orin-unknown-sku-split-by-memtotal-64",
        sources("NVIDIA Jetson AGX Orin", ["nvidia,p3701-0009", "nvidia,tegra234"], R36, mem_gib=61.3),
        ("agx_orin", "64gb", "memtotal", False, "tegra234"),
    ),
    (
        "agx-orin-unknown-sku-split-by-memtotal-32",
        sources("NVIDIA Jetson AGX Orin", ["nvidia,p3701-0009", "nvidia,tegra234"], R36, mem_gib=30),
        ("agx_orin", "32gb", "memtotal", False, "tegra234"),
    ),
    (
        "agx-orin-industrial-by-model",
        sources("NVIDIA Jetson AGX Orin Industrial", ["nvidia,tegra234"], R36, mem_gib=61.3),
        ("agx_orin", "industrial", "model", False, "tegra234"),
    ),
    (
        "agx-orin-industrial-by-sku",
        sources("NVIDIA Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0008", "nvidia,tegra234"], R36, mem_gib=61.3),
        ("agx_orin", "industrial", "compatible", False, "tegra234"),
    ),
    (
        "agx-orin-model-only-memtotal",
        sources("NVIDIA Jetson AGX Orin Developer Kit", None, R36, mem_gib=61.3),
        ("agx_orin", "64gb", "memtotal", False, "tegra234"),
    ),
    (
        "generic-orin-model-files-as-agx-like-the-reference",
        sources("NVIDIA Orin board", None, R36, mem_gib=30),
        ("agx_orin", "32gb", "memtotal", False, "tegra234"),
    ),
    (
        "agx-orin-too-little-memory-for-any-variant",
        sources("NVIDIA Jetson AGX Orin", ["nvidia,tegra234"], R36, mem_gib=20),
        ("agx_orin", "unknown", "none", False, "tegra234"),
    ),
    (
        "orin-nx-16gb",
        sources(
            "NVIDIA Jetson Orin NX Engineering Reference Developer Kit",
            ["nvidia,p3768-0000+p3767-0000", "nvidia,p3767-0000", "nvidia,tegra234"],
            R36,
            mem_gib=15.3,
        ),
        ("orin_nx", "16gb", "compatible", False, "tegra234"),
    ),
    (
        "orin-nx-8gb",
        sources("NVIDIA Jetson Orin NX", ["nvidia,p3768-0000+p3767-0001", "nvidia,tegra234"], R36, mem_gib=7.4),
        ("orin_nx", "8gb", "compatible", False, "tegra234"),
    ),
    (
        "orin-nx-by-model-memtotal-16",
        sources("NVIDIA Jetson Orin NX", ["nvidia,p3767-0099", "nvidia,tegra234"], R36, mem_gib=15.3),
        ("orin_nx", "16gb", "memtotal", False, "tegra234"),
    ),
    (
        "orin-nx-dashed-model-memtotal-8",
        sources("jetson orin-nx custom carrier", ["nvidia,tegra234"], R36, mem_gib=7.4),
        ("orin_nx", "8gb", "memtotal", False, "tegra234"),
    ),
    (
        "orin-nano-devkit-8gb",
        sources(
            "NVIDIA Jetson Orin Nano Developer Kit",
            ["nvidia,p3768-0000+p3767-0005", "nvidia,p3767-0005", "nvidia,tegra234"],
            R36,
            mem_gib=7.4,
        ),
        ("orin_nano", "8gb", "compatible", False, "tegra234"),
    ),
    (
        "orin-nano-8gb-production-module",
        sources("NVIDIA Jetson Orin Nano", ["nvidia,p3768-0000+p3767-0003", "nvidia,tegra234"], R36, mem_gib=7.4),
        ("orin_nano", "8gb", "compatible", False, "tegra234"),
    ),
    (
        "orin-nano-4gb",
        sources("NVIDIA Jetson Orin Nano", ["nvidia,p3768-0000+p3767-0004", "nvidia,tegra234"], R36, mem_gib=3.5),
        ("orin_nano", "4gb", "compatible", False, "tegra234"),
    ),
    (
        "orin-nano-by-model-memtotal-4",
        sources("NVIDIA Jetson Orin Nano", ["nvidia,tegra234"], R36, mem_gib=3.5),
        ("orin_nano", "4gb", "memtotal", False, "tegra234"),
    ),
    (
        "orin-nano-super-devkit-nvpmodel",
        sources(
            "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
            ["nvidia,p3768-0000+p3767-0005-super", "nvidia,p3767-0005", "nvidia,tegra234"],
            R36,
            mem_gib=7.4,
            nvpmodel=b"NV Power Mode: MAXN_SUPER\n2\n",
        ),
        ("orin_nano", "8gb", "compatible", True, "tegra234"),
    ),
    (
        "orin-nano-super-devkit-in-15w-is-not-super",
        sources(
            "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
            ["nvidia,p3768-0000+p3767-0005-super", "nvidia,tegra234"],
            R36,
            mem_gib=7.4,
            nvpmodel=b"NV Power Mode: 15W\n0\n",
        ),
        ("orin_nano", "8gb", "compatible", False, "tegra234"),
    ),
    (
        "orin-nano-super-model-without-nvpmodel",
        sources("NVIDIA Jetson Orin Nano Developer Kit Super", ["nvidia,tegra234"], R36, mem_gib=7.4),
        ("orin_nano", "8gb", "memtotal", True, "tegra234"),
    ),
    (
        "orin-nx-super-compatible-suffix-without-nvpmodel",
        sources("NVIDIA Jetson Orin NX", ["nvidia,p3768-0000+p3767-0000-super", "nvidia,tegra234"], R36, mem_gib=15.3),
        ("orin_nx", "16gb", "compatible", True, "tegra234"),
    ),
    (
        "orin-nx-super-nvpmodel",
        sources(
            "NVIDIA Jetson Orin NX",
            ["nvidia,p3767-0000", "nvidia,tegra234"],
            R36,
            mem_gib=15.3,
            nvpmodel=b"NV Power Mode: MAXN_SUPER / 0\n",
        ),
        ("orin_nx", "16gb", "compatible", True, "tegra234"),
    ),
    (
        "agx-orin-maxn-super-name-does-not-make-super",
        sources(
            "NVIDIA Jetson AGX Orin",
            ["nvidia,p3701-0005", "nvidia,tegra234"],
            R36,
            mem_gib=61.3,
            nvpmodel=b"NV Power Mode: MAXN_SUPER\n0\n",
        ),
        ("agx_orin", "64gb", "compatible", False, "tegra234"),
    ),
    (
        "igx-orin-devkit",
        sources(
            "NVIDIA IGX Orin Development Kit",
            ["nvidia,p3740-0002+p3701-0008", "nvidia,p3701-0008", "nvidia,tegra234"],
            R36,
            mem_gib=61.3,
        ),
        ("igx_orin", "devkit", "compatible", False, "tegra234"),
    ),
    (
        "igx-orin-model-wins-over-agx-module",
        sources("NVIDIA IGX Orin Development Kit", ["nvidia,p3701-0008", "nvidia,tegra234"], R36, mem_gib=61.3),
        ("igx_orin", "devkit", "model", False, "tegra234"),
    ),
    (
        "igx-orin-carrier-without-model",
        sources(None, ["nvidia,p3740-0002+p3701-0008", "nvidia,tegra234"], R36, mem_gib=61.3),
        ("igx_orin", "devkit", "compatible", False, "tegra234"),
    ),
    (
        "igx-thor-model",
        sources("NVIDIA IGX Thor Developer Kit", ["nvidia,tegra264"], l4t_line(38, "2.0"), mem_gib=122),
        ("igx_thor", "devkit", "model", False, "tegra264"),
    ),
    (
        "igx-thor-by-soc-token",
        sources("NVIDIA IGX Development Kit", ["nvidia,p3740-0000+p3834-0008", "nvidia,tegra264"], None, mem_gib=122),
        ("igx_thor", "devkit", "compatible", False, "tegra264"),
    ),
    (
        "thor-fleet-row-soc-token-only-memtotal",
        sources("NVIDIA Jetson AGX Thor Developer Kit", ["nvidia,tegra264"], l4t_line(38, "2.0"), mem_gib=122),
        ("thor", "t5000", "memtotal", False, "tegra264"),
    ),
    (
        "thor-t4000-memtotal",
        sources("NVIDIA Jetson AGX Thor", ["nvidia,tegra264"], l4t_line(39, "0.0"), mem_gib=62),
        ("thor", "t4000", "memtotal", False, "tegra264"),
    ),
    (
        "thor-too-little-memory",
        sources("NVIDIA Jetson AGX Thor", ["nvidia,tegra264"], l4t_line(39, "0.0"), mem_gib=20),
        ("thor", "unknown", "none", False, "tegra264"),
    ),
    (
        "thor-model-t4000-beats-memtotal",
        sources("NVIDIA Jetson T4000", ["nvidia,tegra264"], l4t_line(39, "0.0"), mem_gib=122),
        ("thor", "t4000", "model", False, "tegra264"),
    ),
    (
        "thor-model-t5000",
        sources("NVIDIA Jetson AGX Thor T5000", ["nvidia,p3834-0008", "nvidia,tegra264"], None, mem_gib=62),
        ("thor", "t5000", "model", False, "tegra264"),
    ),
    (
        "thor-boot-control-beats-model",
        sources(
            "NVIDIA Jetson T4000",
            ["nvidia,tegra264"],
            l4t_line(38, "2.0"),
            boot="TNSPEC 3834-500-0008-A.0-1-0-jetson-t5000-\n",
            mem_gib=62,
        ),
        ("thor", "t5000", "boot_control", False, "tegra264"),
    ),
    (
        "thor-boot-control-compatible-spec-t4000",
        sources(
            "NVIDIA Jetson AGX Thor",
            ["nvidia,tegra264"],
            l4t_line(39, "0.0"),
            boot="TNSPEC 3834-500-0004\nCOMPATIBLE_SPEC 3834-500-0004--1-0-jetson-t4000-\n",
            mem_gib=122,
        ),
        ("thor", "t4000", "boot_control", False, "tegra264"),
    ),
    (
        "thor-boot-control-devkit-means-t5000",
        sources(
            "NVIDIA Jetson AGX Thor",
            ["nvidia,tegra264"],
            l4t_line(38, "2.0"),
            boot="TNSPEC 3834-500-0008-A.0-1-0-jetson-agx-thor-devkit-\n",
            mem_gib=62,
        ),
        ("thor", "t5000", "boot_control", False, "tegra264"),
    ),
    (
        "thor-by-part-number-without-model",
        sources(None, ["nvidia,p3971-0000+p3834-0008", "nvidia,tegra264"], l4t_line(38, "2.0"), mem_gib=122),
        ("thor", "t5000", "memtotal", False, "tegra264"),
    ),
    (
        "thor-by-soc-token-only",
        sources(None, ["nvidia,tegra264"], None, mem_gib=62),
        ("thor", "t4000", "memtotal", False, "tegra264"),
    ),
    (
        "xavier-agx-devkit",
        sources("Jetson-AGX", ["nvidia,p2972-0000", "nvidia,galen", "nvidia,tegra194"], l4t_line(35, "6.0"), mem_gib=30),
        ("xavier", "agx", "compatible", False, "tegra194"),
    ),
    (
        "xavier-agx-model-only",
        sources("Jetson-AGX", None, l4t_line(35, "6.0"), mem_gib=30),
        ("xavier", "agx", "model", False, "tegra194"),
    ),
    (
        "xavier-agx-long-model",
        sources("NVIDIA Jetson AGX Xavier Industrial", ["nvidia,tegra194"], l4t_line(35, "6.0"), mem_gib=30),
        ("xavier", "agx", "model", False, "tegra194"),
    ),
    (
        "xavier-nx-devkit",
        sources(
            "NVIDIA Jetson Xavier NX Developer Kit",
            ["nvidia,p3509-0000+p3668-0001", "nvidia,tegra194"],
            l4t_line(35, "6.0"),
            mem_gib=7.4,
        ),
        ("xavier", "nx", "compatible", False, "tegra194"),
    ),
    (
        "xavier-nx-model-only",
        sources("NVIDIA Jetson Xavier NX", ["nvidia,tegra194"], l4t_line(35, "6.0"), mem_gib=7.4),
        ("xavier", "nx", "model", False, "tegra194"),
    ),
    (
        "xavier-soc-token-only",
        sources(None, ["nvidia,tegra194"], l4t_line(35, "6.0"), mem_gib=7.4),
        ("xavier", "unknown", "none", False, "tegra194"),
    ),
    (
        "boot-control-only-agx-orin",
        sources(
            None,
            None,
            R36,
            boot="TNSPEC 3701-500-0005-G.0-1-1-jetson-agx-orin-devkit-\nCOMPATIBLE_SPEC 3701-300-0005--1--x-\n",
            mem_gib=61.3,
        ),
        ("agx_orin", "64gb", "boot_control", False, "tegra234"),
    ),
    (
        "boot-control-sku-fills-in-orin-nano-variant",
        sources(
            "NVIDIA Jetson Orin Nano",
            ["nvidia,tegra234"],
            R36,
            boot="TNSPEC 3767-300-0004-R.0-1-2-jetson-orin-nano-devkit-\n",
            mem_gib=7.4,
        ),
        ("orin_nano", "4gb", "boot_control", False, "tegra234"),
    ),
    (
        "boot-control-other-family-is-ignored-for-variant",
        sources(
            "NVIDIA Jetson Orin Nano",
            ["nvidia,tegra234"],
            R36,
            boot="TNSPEC 3701-500-0005-G.0-1-1-jetson-agx-orin-devkit-\n",
            mem_gib=7.4,
        ),
        ("orin_nano", "8gb", "memtotal", False, "tegra234"),
    ),
    (
        "tegra234-token-only-is-unknown",
        sources(None, ["nvidia,tegra234"], R36, mem_gib=15.3),
        ("unknown", "unknown", "none", False, "tegra234"),
    ),
    (
        "jetson-nano-tegra210-is-unknown",
        sources(
            "NVIDIA Jetson Nano Developer Kit",
            ["nvidia,p3449-0000-b00+p3448-0000-b00", "nvidia,jetson-nano", "nvidia,tegra210"],
            "# R32 (release), REVISION: 7.4, GCID: 1, BOARD: t210ref, EABI: aarch64\n",
            mem_gib=3.9,
        ),
        ("unknown", "unknown", "none", False, "unknown"),
    ),
    (
        "jetson-tx2-is-unknown",
        sources("quill", ["nvidia,p2771-0000", "nvidia,tegra186"], "# R32 (release), REVISION: 7.4\n", mem_gib=7.7),
        ("unknown", "unknown", "none", False, "unknown"),
    ),
    (
        "only-nv-tegra-release-is-unknown",
        sources(None, None, R36, mem_gib=15.3),
        ("unknown", "unknown", "none", False, "unknown"),
    ),
    (
        "raspberry-pi-is-none",
        sources("Raspberry Pi 4 Model B Rev 1.4", ["raspberrypi,4-model-b", "brcm,bcm2711"], None, mem_gib=3.7),
        ("none", "unknown", "none", False, "unknown"),
    ),
    (
        "x86-server-is-none",
        sources(None, None, None, mem_gib=24),
        ("none", "unknown", "none", False, "unknown"),
    ),
]


@pytest.mark.parametrize("name, raw, expected", DEVICE_TABLE, ids=[row[0] for row in DEVICE_TABLE])
def test_device_table(name, raw, expected):
    facts = jetson.detect(raw)
    got = (facts["family"], facts["variant"], facts["variant_source"], facts["super"], facts["soc"])
    assert got == expected, name
    assert facts["is_jetson"] is (expected[0] != "none")
    assert_valid(facts)


def test_device_table_covers_every_family_and_source():
    families = {row[2][0] for row in DEVICE_TABLE}
    assert families == set(jetson.FAMILIES)
    assert {row[2][2] for row in DEVICE_TABLE} == set(jetson.VARIANT_SOURCES)
    pairs = {(row[2][0], row[2][1]) for row in DEVICE_TABLE}
    for family, variants in jetson.VARIANTS.items():
        for variant in variants:
            if variant != "unknown":
                assert (family, variant) in pairs, (family, variant)


# --------------------------------------------------------------------------- full fact dictionary


def test_full_facts_agx_orin():
    raw = sources(
        "NVIDIA Jetson AGX Orin Developer Kit",
        ["nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"],
        "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64\n# KERNEL_VARIANT: oot\n",
        boot="TNSPEC 3701-500-0005-G.0-1-1-jetson-agx-orin-devkit-\n",
        nvpmodel=b"NV Power Mode: MAXN\n0\n",
    )
    raw["meminfo"] = meminfo(64348160, 41943040)
    assert jetson.detect(raw) == {
        "is_jetson": True,
        "family": "agx_orin",
        "variant": "64gb",
        "variant_source": "compatible",
        "super": False,
        "soc": "tegra234",
        "model": "NVIDIA Jetson AGX Orin Developer Kit",
        "compatible": ["nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"],
        "memory": {"total_mb": 62840, "available_mb": 40960, "total_gib": 61},
        "l4t": {
            "release": "36.4.3",
            "major": 36,
            "minor": 4,
            "patch": 3,
            "raw": "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64",
        },
        "jetpack": "6.2",
        "power_mode": {"name": "MAXN", "id": 0},
        "cuda_arch": "8.7",
        "speculation_supported": True,
        "speculation_reason": "",
        "serve_defaults": {"gpu_memory_utilization": 0.70, "max_model_len": 8192, "max_num_seqs": 16},
        "unknown_fields": [],
    }


def test_none_has_no_unknown_fields_and_no_arch():
    facts = jetson.detect({})
    assert facts["family"] == "none"
    assert facts["is_jetson"] is False
    assert facts["unknown_fields"] == []
    assert facts["cuda_arch"] is None
    assert facts["speculation_supported"] is False
    assert facts["speculation_reason"] == "no Jetson device detected"


@pytest.mark.parametrize("bad", [None, [], "text", 3, {"model": 5, "compatible": object()}])
def test_detect_odd_container_types(bad):
    facts = jetson.detect(bad)
    assert facts["family"] == "none"
    assert_valid(facts)


def test_unknown_fields_keep_raw_strings():
    raw = sources("Acme Jetson Carrier X", ["acme,x1", "nvidia,tegra999"], "garbage release line\n", mem_gib=None)
    raw["nvpmodel"] = b"Segmentation fault\n"
    facts = jetson.detect(raw)
    assert facts["is_jetson"] is True
    assert facts["family"] == "unknown"
    assert facts["model"] == "Acme Jetson Carrier X"
    assert facts["compatible"] == ["acme,x1", "nvidia,tegra999"]
    assert facts["l4t"]["raw"] == "garbage release line"
    assert facts["power_mode"] == {"name": "unknown", "id": None}
    assert facts["unknown_fields"] == ["family", "variant", "soc", "l4t", "jetpack", "memory", "power_mode"]
    assert facts["cuda_arch"] is None


def test_unknown_fields_variant_only():
    facts = jetson.detect(sources("NVIDIA Jetson AGX Orin", ["nvidia,tegra234"], R36, mem_gib=20))
    assert facts["unknown_fields"] == ["variant"]


def test_soc_implied_by_family_when_token_missing():
    facts = jetson.detect(sources("NVIDIA Jetson AGX Thor Developer Kit", None, l4t_line(38, "2.0"), mem_gib=122))
    assert (facts["soc"], facts["cuda_arch"]) == ("tegra264", "11.0")
    assert "soc" not in facts["unknown_fields"]


def test_cuda_arch_follows_family_then_soc():
    orin = jetson.detect(sources("NVIDIA Jetson Orin Nano", ["nvidia,tegra234"], R36, mem_gib=7.4))
    xavier = jetson.detect(sources("Jetson-AGX", ["nvidia,tegra194"], l4t_line(35, "6.0"), mem_gib=30))
    unknown_orin = jetson.detect(sources(None, ["nvidia,tegra234"], R36, mem_gib=7.4))
    assert (orin["cuda_arch"], xavier["cuda_arch"], unknown_orin["cuda_arch"]) == ("8.7", "7.2", "8.7")


# --------------------------------------------------------------------------- speculation policy


@pytest.mark.parametrize(
    "raw, supported, reason_part",
    [
        (sources("NVIDIA Jetson AGX Thor", ["nvidia,tegra264"], l4t_line(38, "2.0"), mem_gib=122), True, ""),
        (sources("NVIDIA Jetson AGX Thor", ["nvidia,tegra264"], None, mem_gib=122), True, ""),
        (sources("NVIDIA Jetson AGX Thor", ["nvidia,tegra264"], l4t_line(36, "4.3"), mem_gib=122), False, "R38"),
        (sources("NVIDIA IGX Thor Developer Kit", ["nvidia,tegra264"], l4t_line(38, "2.0"), mem_gib=122), True, ""),
        (sources("NVIDIA Jetson AGX Orin", ["nvidia,p3701-0005", "nvidia,tegra234"], R36, mem_gib=61.3), True, ""),
        (sources("NVIDIA Jetson AGX Orin", ["nvidia,p3701-0004"], l4t_line(39, "0.0"), mem_gib=30), True, ""),
        (sources("NVIDIA IGX Orin Development Kit", ["nvidia,tegra234"], R36, mem_gib=61.3), True, ""),
        (sources("NVIDIA Jetson AGX Orin", ["nvidia,p3701-0005"], l4t_line(35, "4.1"), mem_gib=61.3), False, "R35"),
        (sources("NVIDIA Jetson AGX Orin", ["nvidia,p3701-0005"], None, mem_gib=61.3), False, "L4T release unknown"),
        (sources("NVIDIA Jetson Orin NX", ["nvidia,p3767-0000"], R36, mem_gib=15.3), False, "override is possible"),
        (sources("NVIDIA Jetson Orin Nano", ["nvidia,p3767-0005"], R36, mem_gib=7.4), False, "rarely fit"),
        (sources("NVIDIA Jetson Orin Nano", ["nvidia,p3767-0005"], l4t_line(35, "6.0"), mem_gib=7.4), False, "R35"),
        (sources("Jetson-AGX", ["nvidia,tegra194"], l4t_line(35, "6.0"), mem_gib=30), False, "vLLM 0.20+"),
        (sources(None, ["nvidia,tegra234"], R36, mem_gib=30), False, "unrecognised"),
        (sources(None, None, None, mem_gib=30), False, "no Jetson"),
    ],
)
def test_speculation_policy(raw, supported, reason_part):
    facts = jetson.detect(raw)
    assert facts["speculation_supported"] is supported
    assert reason_part in facts["speculation_reason"]
    assert (facts["speculation_reason"] == "") is supported


# --------------------------------------------------------------------------- profiles


PROFILES = load_profiles()


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_detects_as_expected(name):
    profile = PROFILES[name]
    facts = jetson.detect(profile_sources(profile))
    assert {"family": facts["family"], "variant": facts["variant"]} == profile["expect"]
    assert facts["is_jetson"] is True
    assert facts["unknown_fields"] == []
    assert facts["memory"]["total_mb"] == profile["mem_total_kib"] // 1024
    assert facts["memory"]["available_mb"] == profile["mem_available_kib"] // 1024
    assert facts["power_mode"] == profile["nvpmodel"]
    assert facts["super"] is (profile["nvpmodel"]["name"] == "MAXN_SUPER")
    assert facts["soc"] in [entry.split(",", 1)[1] for entry in profile["compatible"]]
    # Without nvpmodel (as with sysroot images) detection must not change the family or variant.
    offline = jetson.detect(profile_sources(profile, with_nvpmodel=False))
    assert (offline["family"], offline["variant"]) == (facts["family"], facts["variant"])


def test_profiles_cover_every_required_device():
    assert set(PROFILES) == {
        "thor-t5000",
        "thor-t4000",
        "agx-orin-64gb",
        "agx-orin-32gb",
        "agx-orin-industrial",
        "orin-nx-16gb",
        "orin-nx-8gb",
        "orin-nano-8gb",
        "orin-nano-4gb",
        "orin-nano-8gb-super",
        "orin-nx-16gb-super",
        "igx-orin",
        "xavier-agx",
        "xavier-nx",
    }
    releases = {name: jetson.parse_nv_tegra_release(p["nv_tegra_release"])["major"] for name, p in PROFILES.items()}
    assert any(releases[name] == 39 for name in PROFILES if name.startswith(("agx-orin", "orin-")))
    for profile in PROFILES.values():
        assert profile["mem_available_kib"] < profile["mem_total_kib"]
        assert profile["sim"]["bandwidth_gbs"] > 0
        assert profile["sim"]["tflops"] > 0


# --------------------------------------------------------------------------- properties


def assert_valid(facts):
    """Schema and invariants of a detect() result (docs/devel/architecture.md, Device facts)."""
    assert set(facts) == {
        "is_jetson",
        "family",
        "variant",
        "variant_source",
        "super",
        "soc",
        "model",
        "compatible",
        "memory",
        "l4t",
        "jetpack",
        "power_mode",
        "cuda_arch",
        "speculation_supported",
        "speculation_reason",
        "serve_defaults",
        "unknown_fields",
    }
    assert facts["serve_defaults"] == _families.serve_defaults(facts["family"])
    assert set(facts["serve_defaults"]) == {"gpu_memory_utilization", "max_model_len", "max_num_seqs"}
    assert facts["family"] in jetson.FAMILIES
    assert facts["variant"] in jetson.VARIANTS[facts["family"]]
    assert facts["variant_source"] in jetson.VARIANT_SOURCES
    assert (facts["variant"] == "unknown") is (facts["variant_source"] == "none")
    assert facts["soc"] in jetson.SOCS
    assert facts["is_jetson"] is (facts["family"] != "none")
    assert isinstance(facts["super"], bool)
    assert facts["super"] is False or facts["family"] in ("orin_nx", "orin_nano")
    assert facts["model"] is None or isinstance(facts["model"], str)
    assert facts["model"] is None or "\x00" not in facts["model"]
    assert all(isinstance(entry, str) and entry for entry in facts["compatible"])
    assert set(facts["memory"]) == {"total_mb", "available_mb", "total_gib"}
    assert set(facts["l4t"]) == {"release", "major", "minor", "patch", "raw"}
    assert (facts["l4t"]["release"] == "unknown") is (facts["l4t"]["major"] is None)
    assert set(facts["power_mode"]) == {"name", "id"}
    assert facts["cuda_arch"] in (None, "11.0", "8.7", "7.2")
    assert isinstance(facts["speculation_supported"], bool)
    assert (facts["speculation_reason"] == "") is facts["speculation_supported"]
    assert set(facts["unknown_fields"]) <= {"family", "variant", "soc", "l4t", "jetpack", "memory", "power_mode"}
    assert ("family" in facts["unknown_fields"]) is (facts["family"] == "unknown")
    json.dumps(facts, allow_nan=False)


SOURCE_KEYS = ("model", "compatible", "nv_tegra_release", "nv_boot_control", "meminfo", "nvpmodel")
raw_value = st.one_of(st.none(), st.binary(max_size=400), st.text(max_size=200))


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({key: raw_value for key in SOURCE_KEYS}))
def test_arbitrary_input_never_crashes(raw):
    assert_valid(jetson.detect(raw))


# Fragments of real strings, recombined, reach the classification branches far more often than
# random bytes do.
FRAGMENTS = st.sampled_from(
    [
        "nvidia,",
        "tegra234",
        "tegra264",
        "tegra194",
        "p3701-0005",
        "p3701-0008",
        "p3767-0000",
        "p3767-0004",
        "p3834-0008",
        "p3740-0002+",
        "p2972-0000",
        "p3668-0001",
        "-super",
        "\x00",
        " ",
        "NVIDIA Jetson ",
        "AGX ",
        "Orin ",
        "NX ",
        "Nano ",
        "Thor ",
        "IGX ",
        "Xavier ",
        "Industrial ",
        "Super",
        "T4000",
        "t5000",
        "Jetson-AGX",
        "\xff",
    ]
)
fragmented = st.lists(FRAGMENTS, max_size=12).map("".join)
release_line = st.builds(
    lambda major, minor, patch, tail: "# R%d (release), REVISION: %d.%d%s" % (major, minor, patch, tail),
    st.integers(0, 99),
    st.integers(0, 9),
    st.integers(0, 9),
    st.text(max_size=20),
)
boot_text = st.builds(
    lambda spec, extra: "TNSPEC %s\nCOMPATIBLE_SPEC %s\n" % (spec, extra),
    st.lists(st.sampled_from(["3834-500-0008", "3701-500-0005", "3767-300-0003", "-t4000", "-t5000", "x"]), max_size=4).map("".join),
    st.text(max_size=20),
)
mem_text = st.builds(
    lambda total, avail: "MemTotal: %d kB\nMemAvailable: %d kB\n" % (total, avail),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
)
nvpmodel_text = st.builds(
    lambda name, mode_id, one_line: ("NV Power Mode: %s / %d\n" if one_line else "NV Power Mode: %s\n%d\n") % (name, mode_id),
    st.sampled_from(["MAXN", "MAXN_SUPER", "15W", "120W", "x/y", ""]),
    st.integers(0, 99),
    st.booleans(),
)


@settings(max_examples=600, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "model": st.one_of(st.none(), fragmented),
            "compatible": st.one_of(st.none(), fragmented, st.lists(fragmented, max_size=4)),
            "nv_tegra_release": st.one_of(st.none(), release_line),
            "nv_boot_control": st.one_of(st.none(), boot_text),
            "meminfo": st.one_of(st.none(), mem_text),
            "nvpmodel": st.one_of(st.none(), nvpmodel_text),
        }
    )
)
def test_recombined_real_fragments_stay_valid(raw):
    facts = jetson.detect(raw)
    assert_valid(facts)
    if raw["nv_tegra_release"] is not None:
        assert facts["l4t"]["release"] != "unknown"
        assert jetson.version_tuple(facts["l4t"]["release"])[0] == facts["l4t"]["major"]
