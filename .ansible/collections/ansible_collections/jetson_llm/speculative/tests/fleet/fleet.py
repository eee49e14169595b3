# SPDX-License-Identifier: Apache-2.0
"""Simulated Jetson fleet for jetson_llm.speculative: `fleet.py {validate,image,up,down,status,inventory,bench}`.

Run as root with the project's venv python (make fleet-up / fleet-down / fleet-status / fleet-test).
See docs/devel/fleet.md.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jlfleet.cli import main

if __name__ == "__main__":
    sys.exit(main())
