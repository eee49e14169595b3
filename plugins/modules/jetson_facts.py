#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Licensed under the Apache License 2.0, or at your option under the
# GNU General Public License version 3 or later (see https://www.gnu.org/licenses/gpl-3.0.txt).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: jetson_facts
short_description: Gather NVIDIA Jetson device facts
version_added: 0.1.0
description:
  - Reads the device identity of an NVIDIA Jetson (or IGX) host and returns it as C(ansible_facts.jetson).
  - Sources are the device-tree C(model) and C(compatible) entries, C(/etc/nv_tegra_release),
    C(/etc/nv_boot_control.conf), C(/proc/meminfo) and the output of C(nvpmodel -q).
  - The family is keyed on the board part numbers in C(compatible) and on the model string; MemTotal
    only splits memory variants. Xavier boards are detected and reported as unsupported.
  - Unrecognised or malformed data never fails the module; such fields come out as C(unknown), keep
    their raw strings and are listed in C(unknown_fields). A host without any Jetson signal reports
    family C(none).
  - Ansible's own fact gathering does not read the device tree; this module does.
author:
  - Jetson LLM maintainers (@jetson-llm)
extends_documentation_fragment:
  - jetson_llm.speculative._attributes
  - jetson_llm.speculative._attributes.facts
  - jetson_llm.speculative._attributes.info_module
attributes:
  facts:
    support: full
  platform:
    support: full
    platforms: posix
options:
  sysroot:
    description:
      - Root directory under which every identity file is read (device tree, C(/etc/nv_tegra_release),
        C(/etc/nv_boot_control.conf), C(/proc/meminfo)), for example a mounted device image.
      - Symbolic links inside O(sysroot) are resolved relative to O(sysroot).
      - C(nvpmodel -q) is only run when O(sysroot) is C(/).
    type: path
    default: /
  device_tree_paths:
    description:
      - Device-tree directories to try, in order, each relative to O(sysroot). The first one that
        holds a C(model) or C(compatible) entry is used.
      - On L4T kernels C(/proc/device-tree) is a link to C(/sys/firmware/devicetree/base). Containers
        cannot fake C(/proc/device-tree) but can fake C(/sys/firmware), hence the fallback.
    type: list
    elements: path
    default:
      - /proc/device-tree
      - /sys/firmware/devicetree/base
  nvpmodel_path:
    description:
      - Path of the C(nvpmodel) executable. When unset, C(nvpmodel) is searched for in E(PATH) and the
        usual system directories.
      - A missing executable or a failing C(nvpmodel -q) gives a null power mode, not an error.
    type: path
notes:
  - The module changes nothing; check mode returns the same facts.
seealso:
  - name: Jetson Linux (L4T) release notes
    description: Where L4T releases and their JetPack versions are listed.
    link: https://developer.nvidia.com/embedded/jetson-linux-archive
"""

EXAMPLES = r"""
- name: Gather Jetson facts
  jetson_llm.speculative.jetson_facts:

- name: Skip hosts that cannot run speculative decoding
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }}: {{ ansible_facts.jetson.speculation_reason }}"
  when: not ansible_facts.jetson.speculation_supported

- name: Read the identity of a mounted device image
  jetson_llm.speculative.jetson_facts:
    sysroot: /mnt/jetson-rootfs

- name: Prefer the /sys/firmware device tree (for example in a container)
  jetson_llm.speculative.jetson_facts:
    device_tree_paths:
      - /sys/firmware/devicetree/base
"""

RETURN = r"""
device_tree_path:
  description: Entry of O(device_tree_paths) the device tree was read from; null when none held one.
  returned: always
  type: str
  sample: /sys/firmware/devicetree/base
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    jetson:
      description: Identity of the Jetson device.
      returned: always
      type: dict
      contains:
        is_jetson:
          description: Whether any Jetson signal exists; false only for family C(none).
          type: bool
          returned: always
          sample: true
        family:
          description: Device family.
          type: str
          returned: always
          sample: agx_orin
          choices: [thor, agx_orin, orin_nx, orin_nano, igx_orin, igx_thor, xavier, unknown, none]
        variant:
          description:
            - Variant within the family. C(thor) has C(t5000) or C(t4000); C(agx_orin) C(64gb), C(32gb) or
              C(industrial); C(orin_nx) C(16gb) or C(8gb); C(orin_nano) C(8gb) or C(4gb); C(igx_orin) and
              C(igx_thor) C(devkit); C(xavier) C(agx) or C(nx). Otherwise C(unknown).
          type: str
          returned: always
          sample: 64gb
        variant_source:
          description: Which data decided the variant.
          type: str
          returned: always
          sample: compatible
          choices: [boot_control, model, memtotal, compatible, none]
        super:
          description: Whether an Orin Nano or Orin NX runs a C(MAXN_SUPER) power mode (from C(nvpmodel),
            or from the Super device tree when C(nvpmodel) was not run).
          type: bool
          returned: always
          sample: false
        soc:
          description: SoC generation from the C(compatible) list (or implied by the family).
          type: str
          returned: always
          sample: tegra234
          choices: [tegra264, tegra234, tegra194, unknown]
        model:
          description: Device-tree model string, NULs stripped; null when absent.
          type: str
          returned: always
          sample: NVIDIA Jetson AGX Orin Developer Kit
        compatible:
          description: Device-tree compatible entries, most specific first.
          type: list
          elements: str
          returned: always
          sample: ["nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"]
        memory:
          description: Memory from C(/proc/meminfo); CPU and GPU share it on Jetson.
          type: dict
          returned: always
          contains:
            total_mb:
              description: MemTotal in MiB; null when unknown.
              type: int
              sample: 62771
            available_mb:
              description: MemAvailable in MiB; null when unknown.
              type: int
              sample: 57344
            total_gib:
              description: MemTotal in GiB, rounded to the nearest integer.
              type: int
              sample: 61
        l4t:
          description: Jetson Linux (L4T) release from C(/etc/nv_tegra_release).
          type: dict
          returned: always
          contains:
            release:
              description: Release as C(major.minor.patch), or C(unknown).
              type: str
              sample: 36.4.3
            major:
              description: Major release number (the C(R) number); null when unknown.
              type: int
              sample: 36
            minor:
              description: First REVISION number; null when unknown.
              type: int
              sample: 4
            patch:
              description: Second REVISION number; null when unknown.
              type: int
              sample: 3
            raw:
              description: The release line as read; null when the file is absent.
              type: str
              sample: "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64"
        jetpack:
          description: JetPack release implied by L4T (C(5.x), C(6.0), C(6.1), C(6.2), C(7.0), C(7.1), C(7.2)),
            or C(unknown).
          type: str
          returned: always
          sample: "6.2"
        power_mode:
          description: Current C(nvpmodel) mode; name and id are null when C(nvpmodel) did not run.
          type: dict
          returned: always
          contains:
            name:
              description: Mode name, C(unknown) when the output could not be parsed.
              type: str
              sample: MAXN
            id:
              description: Mode id.
              type: int
              sample: 0
        cuda_arch:
          description: CUDA compute capability of the integrated GPU; null when unknown.
          type: str
          returned: always
          sample: "8.7"
        speculation_supported:
          description: Whether the family policy and the L4T release allow speculative decoding.
            The planner still checks memory.
          type: bool
          returned: always
          sample: true
        speculation_reason:
          description: Why speculative decoding is not supported; empty when it is.
          type: str
          returned: always
          sample: ""
        serve_defaults:
          description:
            - The family's baseline serve settings from the collection's family table, used by the vllm_server
              role when the inventory sets none.
            - Keys C(gpu_memory_utilization), C(max_model_len) and C(max_num_seqs); a conservative row for
              families the collection does not plan for.
          type: dict
          returned: always
          sample: {"gpu_memory_utilization": 0.7, "max_model_len": 8192, "max_num_seqs": 16}
        unknown_fields:
          description: Names of fields that came out unknown on a Jetson host (C(family), C(variant), C(soc),
            C(l4t), C(jetpack), C(memory), C(power_mode)).
          type: list
          elements: str
          returned: always
          sample: []
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.jetson_llm.speculative.plugins.module_utils._jetson import detect

_READ_LIMIT = 1 << 20
_MAX_LINKS = 40


def resolve_in_root(root, path):
    """Resolve ``path`` as if ``root`` were ``/``: symlinks never leave ``root``.

    Returns the host path, or ``None`` when a link loop is found.
    """
    root = os.path.abspath(root)
    if root == os.sep:
        return os.path.abspath(path)
    pending = [part for part in path.split("/") if part]
    resolved = []
    links = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = os.path.join(root, *[*resolved, part])
        if os.path.islink(candidate):
            links += 1
            if links > _MAX_LINKS:
                return None
            try:
                target = os.readlink(candidate)
            except OSError:
                return None
            if target.startswith("/"):
                resolved = []
            pending = [p for p in target.split("/") if p] + pending
            continue
        resolved.append(part)
    return os.path.join(root, *resolved)


class JetsonFacts(object):
    def __init__(self, module):
        self.module = module
        self.sysroot = module.params["sysroot"]
        self.is_live = os.path.normpath(self.sysroot) == os.sep

    def _path(self, path):
        return resolve_in_root(self.sysroot, path)

    def read(self, path):
        """Raw bytes of a file under the system root, or ``None`` when unreadable."""
        host_path = self._path(path)
        if host_path is None:
            return None
        try:
            with open(host_path, "rb") as handle:
                return handle.read(_READ_LIMIT)
        except OSError:
            return None

    def device_tree(self):
        for directory in self.module.params["device_tree_paths"]:
            model = self.read(os.path.join(directory, "model"))
            compatible = self.read(os.path.join(directory, "compatible"))
            if model is not None or compatible is not None:
                return directory, model, compatible
        return None, None, None

    def nvpmodel(self):
        """Stdout of ``nvpmodel -q`` on the live system, or ``None``."""
        if not self.is_live:
            return None
        path = self.module.params["nvpmodel_path"]
        if path is None:
            path = self.module.get_bin_path("nvpmodel")
        if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
            return None
        try:
            rc, out, _err = self.module.run_command([path, "-q"], check_rc=False)
        except Exception:  # any failure to run nvpmodel means "no power mode"
            return None
        if rc != 0:
            return None
        return out

    def run(self):
        directory, model, compatible = self.device_tree()
        sources = {
            "model": model,
            "compatible": compatible,
            "nv_tegra_release": self.read("/etc/nv_tegra_release"),
            "nv_boot_control": self.read("/etc/nv_boot_control.conf"),
            "meminfo": self.read("/proc/meminfo"),
            "nvpmodel": self.nvpmodel(),
        }
        return {
            "changed": False,
            "device_tree_path": directory,
            "ansible_facts": {"jetson": detect(sources)},
        }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysroot=dict(type="path", default="/"),
            device_tree_paths=dict(
                type="list",
                elements="path",
                default=["/proc/device-tree", "/sys/firmware/devicetree/base"],
            ),
            nvpmodel_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**JetsonFacts(module).run())


if __name__ == "__main__":
    main()
