# SPDX-License-Identifier: Apache-2.0
# vLLM simulator (tests/vllm_sim): its own tests, and the calibration table against published
# Jetson figures (virtual time, a few seconds), and the agreement of virtual time with the served
# timing (each calibration row through a loopback server at time_scale 0.1, about 65 s on 2 cores;
# fails when a ratio differs by more than 2 points or a server runs out of spec).

.PHONY: sim-test
sim-test: venv
	$(BIN)/python -m pytest -q tests/vllm_sim/tests --junitxml=$(CACHE)/test-times/sim-junit.xml

.PHONY: sim-calibration
sim-calibration: venv collections
	$(BIN)/python -m vllm_sim.calibration
	PYTHONPATH=$(COLL_ROOT) $(BIN)/python -m vllm_sim.agreement --time-scale 0.1

TEST_TARGETS += sim-calibration

TEST_TARGETS += sim-test
