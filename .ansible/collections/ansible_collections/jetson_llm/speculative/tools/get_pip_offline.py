# SPDX-License-Identifier: Apache-2.0
"""Stand-in for the pip bootstrap script that ansible-test downloads from its CI file host.

That host is not reachable from the build machines, while PyPI is. ansible-test runs this file
as ``get-pip.py [pip install options] packages...`` inside a new virtual environment. It bootstraps
pip from the wheel that ships with CPython (ensurepip), then installs the requested packages
(including the pinned pip itself) from the package index, as the real script would.
"""

import ensurepip
import os
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main():
    args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
    saved = dict(os.environ)
    ensurepip.bootstrap(upgrade=True)
    # ensurepip sets PIP_CONFIG_FILE=/dev/null and ENSUREPIP_OPTIONS for itself; the machine's pip
    # configuration (index, certificates) must apply to the real install.
    os.environ.clear()
    os.environ.update(saved)
    return subprocess.call([sys.executable, "-m", "pip", "install", *args])


if __name__ == "__main__":
    sys.exit(main())
