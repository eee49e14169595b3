# SPDX-License-Identifier: Apache-2.0
# vLLM simulator (tests/vllm_sim): its own tests, and the calibration table against published
# Jetson figures (virtual time, a few seconds).

.PHONY: sim-test
sim-test: venv
	$(BIN)/python -m pytest -q tests/vllm_sim/tests

.PHONY: sim-calibration
sim-calibration: venv
	cd tests/vllm_sim && $(BIN)/python -m vllm_sim.calibration

TEST_TARGETS += sim-test
