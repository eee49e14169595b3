# SPDX-License-Identifier: Apache-2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: systemd_quote
short_description: Quote an argument list for a systemd ExecStart= line
version_added: 0.1.0
author:
  - jetson_llm.speculative contributors
description:
  - Turns an argument list into a value for C(ExecStart=) (or any systemd command line) that systemd
    splits back into exactly the same arguments.
  - Every word is double-quoted; backslash and double quote are escaped with a backslash, C(%) is
    doubled to C(%%) and C($) to C($$), so no word can become a unit specifier or an environment
    variable reference.
  - Control characters, empty words and a first word starting with one of systemd's executable
    prefixes (C(-), C(@), C(:), C(+), C(!)) are refused.
options:
  _input:
    description:
      - The argument list, executable first. Integers are converted to text.
    type: list
    elements: raw
    required: true
  host:
    description:
      - Host name used in error messages, normally C(inventory_hostname).
    type: str
    default: ""
seealso:
  - plugin: jetson_llm.speculative.vllm_serve_config
    plugin_type: filter
"""

EXAMPLES = r"""
---
- name: Show the ExecStart line of the vLLM service
  ansible.builtin.debug:
    msg: >-
      ExecStart={{ ['/usr/local/bin/vllm', 'serve', '--config', '/etc/vllm/serve.yaml']
      | jetson_llm.speculative.systemd_quote }}
  # ExecStart="/usr/local/bin/vllm" "serve" "--config" "/etc/vllm/serve.yaml"
"""

RETURN = r"""
_value:
  description:
    - The quoted command line, words separated by one space.
  type: string
  sample: '"/usr/local/bin/vllm" "serve" "--config" "/etc/vllm/serve.yaml"'
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.systemd import systemd_quote

_FQCN = "jetson_llm.speculative.systemd_quote"


def systemd_quote_filter(argv, host=""):
    if not isinstance(argv, (list, tuple)):
        raise AnsibleFilterError("The input of the {} filter must be a list of arguments; got {}".format(_FQCN, type(argv).__name__))
    words = []
    for item in argv:
        if isinstance(item, str):
            words.append(str(item))
        elif isinstance(item, int) and not isinstance(item, bool):
            words.append(int(item))
        else:
            words.append(item)
    try:
        return systemd_quote(words, host=str(host or ""))
    except SpecdecError as exc:
        raise AnsibleFilterError("{}: {}".format(_FQCN, exc)) from exc


class FilterModule:
    """Ansible jinja2 filters"""

    def filters(self):
        return {"systemd_quote": systemd_quote_filter}
