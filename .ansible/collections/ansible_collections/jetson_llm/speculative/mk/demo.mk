# SPDX-License-Identifier: Apache-2.0
# `make demo`: bring up the demo fleet (tests/fleet/demo.yml) and run the main job against it.
# The fleet stays up afterwards so that it can be inspected; `make fleet-down` removes it.

DEMO_FLEET      ?= tests/fleet/demo.yml
DEMO_REPORT_DIR ?= $(ROOT)/reports
# Canaries first, then the rest of the fleet in two batches (the product default is [1, '25%', '100%']).
DEMO_SERIAL     ?= ["50%", "100%"]
DEMO_ARGS       ?=

.PHONY: demo demo-run demo-check demo-disable

demo: collections fleet-image
	$(FLEET_PY) up $(DEMO_FLEET) --inventory $(FLEET_INVENTORY)
	$(MAKE) --no-print-directory demo-run
	@echo "demo: the fleet is still up (ssh -F /tmp/jetson-llm-fleet/fleet/ssh_config HOST); 'make fleet-down' removes it"
	@echo "demo: report in $(DEMO_REPORT_DIR)/latest.html"

# The main job against a fleet that is already up (for example to show that a second run changes nothing).
demo-run: collections
	ANSIBLE_FORKS=20 $(BIN)/ansible-playbook -i $(FLEET_INVENTORY) playbooks/enable_speculation.yml \
	  -e '{"jetson_llm_serial": $(DEMO_SERIAL), "speculative_decoding_report_dir": "$(DEMO_REPORT_DIR)"}' $(DEMO_ARGS)

# Check mode: the plan and the exact unit/config diffs per host, nothing changed.
demo-check: collections
	ANSIBLE_FORKS=20 $(BIN)/ansible-playbook -i $(FLEET_INVENTORY) playbooks/enable_speculation.yml --check --diff \
	  -e '{"jetson_llm_serial": $(DEMO_SERIAL), "speculative_decoding_report_dir": "$(DEMO_REPORT_DIR)"}' $(DEMO_ARGS)

demo-disable: collections
	ANSIBLE_FORKS=20 $(BIN)/ansible-playbook -i $(FLEET_INVENTORY) playbooks/disable_speculation.yml $(DEMO_ARGS)
