# SPDX-License-Identifier: Apache-2.0
# Simulated Jetson fleet (tests/fleet, docs/devel/fleet.md). Every target runs as root.

FLEET           ?= tests/fleet/demo.yml
FLEET_INVENTORY ?= inventories/demo/hosts.yml
FLEET_PY        := $(BIN)/jlfleet
FLEET_PYTEST    ?=

.PHONY: fleet-image fleet-up fleet-down fleet-status fleet-inventory fleet-validate fleet-test bench-fleet-up fleet-purge

fleet-image: venv  ## build the fleet's root filesystems (cached) and podman images
	$(FLEET_PY) image

fleet-validate: venv
	$(FLEET_PY) validate $(FLEET)

fleet-up: venv  ## start the fleet of $(FLEET) and write $(FLEET_INVENTORY)
	$(FLEET_PY) up $(FLEET) --inventory $(FLEET_INVENTORY)

fleet-down: venv  ## remove every host, namespace, link and mount of the fleet
	$(FLEET_PY) down

fleet-status: venv
	$(FLEET_PY) status

fleet-inventory: venv
	$(FLEET_PY) inventory $(FLEET_INVENTORY)

# Also removes the podman image store under the state directory (the rootfs cache stays).
fleet-purge: venv
	$(FLEET_PY) down --purge

fleet-test: collections  ## fleet end-to-end tests on tests/fleet/ci.yml (brings it up, always tears it down)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/fleet/tests --junitxml=$(CACHE)/test-times/fleet-junit.xml $(FLEET_PYTEST)

bench-fleet-up: venv  ## seconds to SSH-ready and idle memory per host for 20 hosts
	$(FLEET_PY) bench tests/fleet/bench.yml

TEST_TARGETS += fleet-test
