# SPDX-License-Identifier: Apache-2.0
# Molecule scenarios of the roles (molecule/, docs/devel/molecule.md). Runs as root.
# `make molecule` runs every scenario with `molecule test` (always destroyed), prints the time and
# the verifier's test count of each, removes any molecule-* container left behind and fails if the
# machine's /sys/fs/cgroup mount options changed. MOLECULE_SCENARIOS="default revert" runs a subset.

# `make test` runs the scenarios whose paths no fleet test covers (CI's time budget, docs/devel/testing.md): the
# rollout fleet test reverts a low-gain host and skips an Orin Nano on the live fleet, as `revert` and `nano_skip`
# do here, and checks on its hosts what `default` (r-orin: kept natively, sandboxed service user, known-good
# baseline, history) and `oom_ladder` (r-orin-lowmem: the same memory and versions) check here; `container` (a
# docker host that keeps speculation) stays. `make molecule-all` runs every scenario (also `wrong_output`).
MOLECULE_ALL       := default revert oom_ladder nano_skip container wrong_output
MOLECULE_SCENARIOS ?= container
# Own state directory: the podman store of the scenarios is separate from the fleet's
# (/tmp/jetson-llm-fleet), which `make fleet-down` unmounts and purges; same configuration.
MOLECULE_STATE      := /tmp/jetson-llm-molecule
MOLECULE_PODMAN_ENV := CONTAINERS_CONF=$(MOLECULE_STATE)/state/podman/conf/containers.conf \
                       CONTAINERS_STORAGE_CONF=$(MOLECULE_STATE)/state/podman/conf/storage.conf \
                       CONTAINERS_REGISTRIES_CONF=$(MOLECULE_STATE)/state/podman/conf/registries.conf
MOLECULE_ENV        := $(MOLECULE_PODMAN_ENV) MOLECULE_GLOB='molecule/*/molecule.yml' PY_COLORS=0 NO_COLOR=1 ANSIBLE_FORCE_COLOR=0
# Removes what a broken run may leave: the molecule-* containers of the scenarios' podman store.
MOLECULE_CLEAN      := left=$$($(MOLECULE_PODMAN_ENV) podman ps -a --filter label=owner=molecule --format '{{.Names}}' 2>/dev/null | grep '^molecule-' || true); \
                       if [ -n "$$left" ]; then echo "molecule-clean: removing" $$left; $(MOLECULE_PODMAN_ENV) podman rm -f -t 0 $$left >/dev/null; fi

.PHONY: molecule molecule-all molecule-image molecule-clean

# The fleet's images (localhost/jetson-llm/host and host-docker), built into the scenarios' own
# store from the machine-wide root filesystem cache; rebuilt only when an input changes.
molecule-image: venv
	JLF_STATE=$(MOLECULE_STATE)/state $(BIN)/jlfleet image host docker

molecule: collections molecule-image  ## Molecule scenarios of the roles (about 15 min on 2 cores)
	@mkdir -p $(MOLECULE_STATE)/logs; \
	cg_before=$$(findmnt -no OPTIONS /sys/fs/cgroup); failed=""; summary=""; \
	for s in $(MOLECULE_SCENARIOS); do \
	  t0=$$(date +%s); \
	  if $(MOLECULE_ENV) $(BIN)/molecule -c molecule/config.yml test -s $$s 2>&1 | tee $(MOLECULE_STATE)/logs/$$s.log; \
	  then result=passed; else result=FAILED; failed="$$failed $$s"; fi; \
	  tests=$$(grep -Eo '=+ .*[0-9]+ (passed|failed).* in [0-9.]+s' $(MOLECULE_STATE)/logs/$$s.log | tail -n 1 | sed 's/=//g; s/^ *//; s/ *$$//'); \
	  summary="$$summary$$(printf '  %-12s %-7s %5d s   %s' $$s $$result $$(( $$(date +%s) - t0 )) "$${tests:-no verifier run}")\n"; \
	  mkdir -p $(CACHE)/test-times; \
	  printf '{"name": "molecule %s", "seconds": %d, "result": "%s", "verifier": "%s"}\n' $$s $$(( $$(date +%s) - t0 )) $$result "$${tests:-no verifier run}" >> $(CACHE)/test-times/molecule.jsonl; \
	  if [ "$$(findmnt -no OPTIONS /sys/fs/cgroup)" != "$$cg_before" ]; then \
	    echo "!!! /sys/fs/cgroup mount options changed during scenario $$s: $$cg_before -> $$(findmnt -no OPTIONS /sys/fs/cgroup)" >&2; \
	    echo "!!! see docs/devel/fleet.md, section Safety, for the recovery" >&2; exit 3; \
	  fi; \
	done; \
	$(MOLECULE_CLEAN); \
	printf "molecule: scenario, result, time, verifier\n$$summary"; \
	if [ -n "$$failed" ]; then echo "molecule: failed:$$failed (logs in $(MOLECULE_STATE)/logs)" >&2; exit 1; fi

molecule-all:  ## every Molecule scenario (about 20 min on 2 cores)
	$(MAKE) molecule MOLECULE_SCENARIOS="$(MOLECULE_ALL)"

molecule-clean:
	@$(MOLECULE_CLEAN)

TEST_TARGETS += molecule
