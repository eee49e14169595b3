# SPDX-License-Identifier: Apache-2.0
# Decision statistics (plugins/module_utils/_stats.py, docs/decisions.md): wrong-decision rates and
# requests spent by the statistical verdict against the published single-run rule, on the vLLM
# simulator in virtual time and on synthetic blocks. Prints a table; takes a few minutes
# (BENCH_REPS / BENCH_SYNTHETIC_REPS or BENCH_DECISIONS_ARGS="--reps N" to change the size).

BENCH_DECISIONS_ARGS ?=

.PHONY: bench-decisions
bench-decisions: collections  ## wrong-decision rate by true gain and noise, requests vs the published rule
	$(BIN)/python tests/bench/bench_decisions.py $(BENCH_DECISIONS_ARGS)
