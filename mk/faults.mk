# SPDX-License-Identifier: Apache-2.0
# The fault matrix (tests/bench/bench_faults.py, docs/devel/faults.md): enable_speculation.yml on the
# simulated fleet under one fault per row, measured on the live servers. Root, heavy, not part of
# `make test`: run it under the shared lock, e.g.
#   flock /tmp/jl-heavy.lock make bench-faults FAULTS="crash hang"
# Writes build/bench/faults.json (rows merged by fault name).

FAULTS ?=

.PHONY: bench-faults
bench-faults: collections  ## fault matrix on the simulated fleet (FAULTS="crash hang" for a subset)
	$(BIN)/python tests/bench/bench_faults.py $(FAULTS)

# Controller time of a rollout on the 20-host tests/fleet/bench.yml per connection setting (ssh defaults,
# pipelining + ControlPersist, Mitogen): tests/bench/bench_controller.py, figures in docs/devel/fleet.md.
.PHONY: bench-controller
bench-controller: collections  ## controller time on 20 hosts: ssh defaults vs tuned ssh vs Mitogen
	$(BIN)/python tests/bench/bench_controller.py
