# SPDX-License-Identifier: Apache-2.0
"""Small prompt sets for virtual-time benchmarks and tests (chat, code, structured, random)."""

from __future__ import annotations

import random

CHAT = [
    "Explain how a heat pump can both warm and cool a house, and when it is more efficient than a furnace.",
    "What are the main differences between a comet and an asteroid? Give a short answer for a curious child.",
    "I have two weeks of holiday in October. Suggest a relaxed itinerary for the north of Portugal.",
    "Summarise the causes of the French Revolution in a few paragraphs for a history student.",
    "How do I politely tell my neighbour that their dog barks all night? Please suggest what I could say.",
    "Describe the water cycle and explain why some regions get much more rain than others.",
    "What should I look for when I buy a used bicycle? Give me a checklist with a short reason for each item.",
    "Why is the sky blue during the day and red at sunset? Explain it without equations.",
    "Write a short, friendly email that asks my team to send their status updates by Friday.",
    "What are good habits for learning a new language as an adult with a busy job?",
    "Tell me about the history of the printing press and how it changed the way people shared ideas.",
    "How does compound interest work, and why does it matter when I save for retirement?",
    "Give me some ideas for a vegetarian dinner that I can cook in thirty minutes with simple ingredients.",
    "Explain what a black hole is and what happens to light that gets too close to one.",
    "What is the difference between weather and climate? Please explain with an example.",
    "Describe how vaccines train the immune system, in plain language for a general audience.",
]

CODE = [
    "Write a Python function `def merge_sorted(a, b):` that merges two sorted lists and return the merged list. Include a docstring.",
    "Fix the bug in this code:\n```python\ndef mean(xs):\n    return sum(xs) / len(xs) if xs else None\nprint(mean([]))\n```",
    "Implement `class LRUCache:` in Python with `get(key)` and `put(key, value)` in O(1); use `import collections`.",
    "Translate this JavaScript to Python: `const add = (a, b) => a + b; for (let i = 0; i < 3; i++) { console.log(add(i, i)); }`",
    "Write a C function `int count_bits(unsigned int x)` and a `main()` that prints the result; `#include <stdio.h>`.",
    "Refactor this function so it does not use a global variable:\n```python\ntotal = 0\ndef add(x):\n    global total\n    total += x\n    return total\n```",
]

STRUCTURED = [
    'Return a JSON object with the keys "name", "country" and "population" for the five largest cities in Europe. Output JSON only.',
    "Make a markdown table with the columns | planet | diameter | moons | for the planets of the solar system.",
    'Convert this list to YAML:\n- apples: 3\n- pears: 5\n- plums: 7\nThen give the same data as JSON like {"apples": 3}.',
    "List the steps to set up a Python virtual environment as a numbered list:\n1. ...\n2. ...\nKeep each step short.",
]

_SUBWORDS = (
    "ing tion ab qu zx ver ptr ent olo ry ism ght ke vr ud ex ct mn lph ory stra ck ql wv br ief dg sv ax ill opt rk nd xt oc yq ze ur ph sch gu tw iv mb ou rp"
).split()


def random_prompt(input_len: int, rng: random.Random) -> str:
    """Text of about ``input_len`` tokens made of random sub-word pieces, like the bench 'random' set."""
    pieces = []
    for _unused in range(max(1, input_len)):
        piece = rng.choice(_SUBWORDS)
        pieces.append(piece if rng.random() < 0.7 else piece.upper())
    return " ".join(pieces)


def random_prompts(count: int, input_len: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    return [random_prompt(input_len, rng) for _unused in range(count)]


def chat_messages(prompts=None) -> list:
    """Prompts as chat requests (``{"messages": [...]}``)."""
    return [{"messages": [{"role": "user", "content": p}]} for p in (prompts or CHAT)]
