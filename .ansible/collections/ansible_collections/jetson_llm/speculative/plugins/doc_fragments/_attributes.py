# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0
# Private standard attributes fragment, modelled on the ``attributes`` fragments of
# community.crypto, community.docker and community.general.

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Standard documentation fragment: describes the attributes every module sets.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description: Returns details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
"""

    # Use together with the standard fragment for modules that only read state.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
"""

    # Describes the facts attribute; use together with the standard fragment.
    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that updates existing host facts.
"""

    # Use together with the standard fragment and FACTS for read-only fact-gathering modules.
    FACTS_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
  facts:
    support: full
"""
