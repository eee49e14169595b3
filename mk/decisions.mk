# SPDX-License-Identifier: Apache-2.0
# Decision benchmark (tests/bench/bench_decisions.py, docs/decisions.md): the trial controller
# (plugins/module_utils/_trial.py; a canary per group of BENCH_GROUP devices calibrates, the others decide
# from acceptance) against the published single-run procedure on the vLLM simulator in virtual time;
# outcome error on the final state, requests, device seconds and restarts per row. Writes
# build/bench/decisions.json and prints the table. BENCH_TRIALS (default 200 a row), BENCH_GROUP (20) or
# BENCH_DECISIONS_ARGS="--trials N --jobs J" change the size.

BENCH_DECISIONS_ARGS ?=

.PHONY: bench-decisions
bench-decisions: collections  ## decision error on the final state and device time vs the published procedure
	PYTHONPATH=$(COLL_ROOT) $(BIN)/python tests/bench/bench_decisions.py $(BENCH_DECISIONS_ARGS)
