# SPDX-License-Identifier: Apache-2.0
"""``python3 -m vllm_sim`` is the ``vllm`` command."""

import sys

from .cli import main

sys.exit(main())
