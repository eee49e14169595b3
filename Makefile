# SPDX-License-Identifier: Apache-2.0
# jetson_llm.speculative: development, test and demo entry points.
# `make demo` runs the main job on the simulated fleet; `make test` runs every test and gate.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT        := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
PYTHON      ?= python3
VENV        := $(ROOT)/.venv
BIN         := $(VENV)/bin
CACHE       := $(ROOT)/.cache
COLL_ROOT   := $(CACHE)/collections
ANSIBLE_WHEEL_VERSION := 12.3.0
# Scratch HOME so Ansible, Molecule and ssh never write into the user's home.
export HOME := $(CACHE)/home
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT)
export ANSIBLE_LOCAL_TEMP := $(CACHE)/home/.ansible/tmp
export ANSIBLE_DEPRECATION_WARNINGS := false
export PATH := $(BIN):$(PATH)

.PHONY: help
help:
	@echo "make demo        bring up the demo fleet and enable speculation across it"
	@echo "make test        run every test and quality gate"
	@echo "make fleet-up    start the simulated fleet (FLEET=file, default tests/fleet/demo.yml)"
	@echo "make fleet-down  remove every fleet host, namespace and bridge"
	@echo "make check       the inner loop after an edit: lint of the changed files, unit tests, ansible-doc (minutes)"
	@echo "make test-times  the per-part times of the last make test (build/test-times.json)"
	@echo "make lint        ruff, yamllint, ansible-lint"
	@echo "make units       unit tests"
	@echo "make sanity      ansible-test sanity"
	@echo "make build       ansible-galaxy collection build"

# ---------------------------------------------------------------- environment
# Debian packages (podman, runc, debootstrap, ssh, iproute2, python3-venv, ...): every target that
# needs the virtual environment installs them first, so `make demo` and `make test` work on a fresh
# Debian 12 machine (as root; elsewhere the script says what is missing and how to install it).
.PHONY: host-packages
host-packages:
	tools/install_host_packages.sh

# The simulator and the fleet are their own packages (tests/vllm_sim, tests/fleet), installed in
# editable mode: the `vllm` and `jlfleet` commands, `import vllm_sim` and `import jlfleet`. Compat
# mode installs a path entry (not an import hook), so the package wins over the project directory
# of the same name (tests/vllm_sim) that would otherwise import as an empty namespace package
# wherever tests/ is on sys.path, as it is under pytest.
$(BIN)/.stamp: requirements-dev.txt constraints-dev.txt tests/vllm_sim/pyproject.toml tests/fleet/pyproject.toml | host-packages
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements-dev.txt -c constraints-dev.txt
	$(BIN)/pip install -q --no-build-isolation --no-deps --config-settings editable_mode=compat -e tests/vllm_sim -e tests/fleet
	touch $@

.PHONY: venv
venv: host-packages $(BIN)/.stamp

# containers.podman, ansible.posix and community.general come from the PyPI `ansible`
# wheel (Galaxy is not needed); the collection itself is linked in as jetson_llm.speculative.
$(COLL_ROOT)/.stamp: $(BIN)/.stamp
	mkdir -p $(CACHE)/dl $(COLL_ROOT)/ansible_collections/jetson_llm $(HOME)
	test -f $(CACHE)/dl/ansible-$(ANSIBLE_WHEEL_VERSION)-py3-none-any.whl || \
	  $(BIN)/pip download -q --no-deps -d $(CACHE)/dl 'ansible==$(ANSIBLE_WHEEL_VERSION)'
	$(BIN)/python tools/extract_collections.py $(CACHE)/dl/ansible-$(ANSIBLE_WHEEL_VERSION)-py3-none-any.whl $(COLL_ROOT) \
	  containers/podman ansible/posix community/general
	ln -sfn $(ROOT) $(COLL_ROOT)/ansible_collections/jetson_llm/speculative
	touch $@

.PHONY: collections
collections: $(COLL_ROOT)/.stamp

# ---------------------------------------------------------------- gates
.PHONY: ruff
ruff: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

.PHONY: yamllint
yamllint: venv
	$(BIN)/yamllint -s .

.PHONY: ansible-lint
ansible-lint: collections
	$(BIN)/ansible-lint --profile production

.PHONY: lint
lint: ruff yamllint ansible-lint

# The unit tests are independent of each other: pytest-xdist runs them on every core.
UNITS_ARGS ?= -n auto
.PHONY: units
units: collections
	$(BIN)/python -m pytest -q tests/unit --junitxml=$(CACHE)/test-times/units-junit.xml $(UNITS_ARGS)

# ansible-test --venv bootstraps pip with a script it downloads from a host outside the package
# registries; tools/get_pip_offline.py stands in for it (ensurepip, then pip from the index).
GET_PIP_STAMP := $(CACHE)/home/.ansible/test/cache/.get-pip-stamp
$(GET_PIP_STAMP): tools/get_pip_offline.py $(BIN)/.stamp
	pipv=$$(sed -n "s/^ *pip='\\([0-9.]*\\)',$$/\\1/p" $(VENV)/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py); \
	  test -n "$$pipv" && mkdir -p $(dir $@) && cp tools/get_pip_offline.py $(dir $@)get_pip_$${pipv//./_}.py
	touch $@

.PHONY: sanity
sanity: collections $(GET_PIP_STAMP)
	tools/ansible_test.sh sanity

.PHONY: build
build: venv
	rm -rf build && mkdir -p build
	$(BIN)/ansible-galaxy collection build --output-path build .

.PHONY: docs
docs: collections
	tools/check_docs.sh

# The inner loop after an edit (docs/devel/testing.md), a few minutes: ruff, yamllint, ansible-lint on the
# YAML files changed since CHECK_BASE (default HEAD: staged, unstaged and new files), the unit tests on every
# core, ansible-doc for every plugin. `make test` stays what CI runs.
CHECK_BASE ?= HEAD
.PHONY: check
check: collections
	@t0=$$(date +%s); \
	$(BIN)/ruff check .; $(BIN)/ruff format --check .; $(BIN)/yamllint -s .; \
	changed=$$( { git diff --name-only --diff-filter=d $(CHECK_BASE) -- '*.yml' '*.yaml'; git ls-files --others --exclude-standard -- '*.yml' '*.yaml'; } \
	  | sort -u | grep -Ev '^(tests/fleet/|changelogs/|\.|inventories/demo/)' || true); \
	if [ -n "$$changed" ]; then echo "ansible-lint on:" $$changed; $(BIN)/ansible-lint --profile production $$changed; \
	else echo "ansible-lint: no changed YAML file since $(CHECK_BASE)"; fi; \
	$(MAKE) --no-print-directory units; \
	tools/check_docs.sh; \
	echo "make check: passed in $$(( $$(date +%s) - t0 )) s"

-include mk/*.mk

# Every gate and every test. Later parts (simulator, fleet, molecule) add their targets
# to TEST_TARGETS in mk/*.mk.
# Each part runs as `make PART` in this order, timed by tools/test_times.py, which goes on after a failed
# part, writes build/test-times.json, prints the table of times and fails when any part failed.
TEST_TARGETS ?=
TEST_PARTS   ?= lint units sanity build docs $(TEST_TARGETS)
.PHONY: test test-times
test: venv
	$(BIN)/python tools/test_times.py run $(TEST_PARTS)

test-times:  ## the per-part times of the last `make test` (build/test-times.json)
	@$(BIN)/python tools/test_times.py show
