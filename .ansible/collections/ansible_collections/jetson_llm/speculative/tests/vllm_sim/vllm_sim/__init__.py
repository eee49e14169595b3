# SPDX-License-Identifier: Apache-2.0
"""A simulator of the vLLM OpenAI-compatible server for testing jetson_llm.speculative."""

__version__ = "0.1.0"
