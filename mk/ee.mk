# SPDX-License-Identifier: Apache-2.0
# Execution environment (execution-environment/, docs/devel/ee.md). Both targets run as root;
# ee-test brings the ci fleet up twice and always tears it down. Not part of `make test`.

EE_PY := $(BIN)/python execution-environment/ee.py

.PHONY: ee ee-test

ee: collections  ## build the EE with ansible-builder on podman (base image from the fleet's rootfs cache)
	$(EE_PY) build

ee-test: collections  ## enable_speculation on the ci fleet in the EE and plainly: same outcome per host
	$(EE_PY) test
