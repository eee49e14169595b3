# SPDX-License-Identifier: Apache-2.0
"""Token counting, prompt classification and deterministic text generation.

The simulator has no tokenizer and no weights. Prompt length is estimated from word pieces
(about one token per short word or punctuation mark, long words split every six letters).
Greedy output (temperature 0) is a pure function of the model and the prompt: the i-th token is
drawn from a fixed word list by hashing ``(model, prompt, i)``, so speculation cannot change it,
as real speculative decoding guarantees. Temperature > 0 draws words from a seeded generator.
"""

from __future__ import annotations

import hashlib
import random
import re

WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no will can more "
    "other into some could them time these two may then do first any my now such like our over man me "
    "even most made after also did many before must through back years where much your way well down "
    "should because each just those people how too little state good very make world still own see men "
    "work long get here between both life being under never day same another know while last might us "
    "great old year off come since against go came right used take three system model memory device "
    "token speed batch request server engine value result data example section number point process "
    "order given based part small large local high low both next value model layer cache draft target "
    "decode prefill latency throughput measure test run step note case form group field line set table"
).split()

COMMON = frozenset(
    "the of and to a in is that for it as was with be by on not he i this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no will can more "
    "what how why who please explain write describe give me tell about your my do does list some".split()
)

_PIECE = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")
_CODE_MARKERS = (
    "def ",
    "return ",
    "import ",
    "class ",
    "function ",
    "#include",
    "```",
    "=>",
    "==",
    "();",
    "){",
    ") {",
    "for (",
    "while (",
    "print(",
    "self.",
    "const ",
    "let ",
    "var ",
    "public ",
    "fn ",
)
_STRUCT_MARKERS = ('{"', '":', "|---", "| ", "<table", "</", "\n- ", "\n* ", "\n1. ", "json", "yaml", "csv", "xml")


def count_tokens(text: str) -> int:
    """Approximate token count of ``text`` (at least 1)."""
    total = 0
    for piece in _PIECE.findall(text or ""):
        if piece[0].isalpha():
            total += (len(piece) + 5) // 6
        elif piece[0].isdigit():
            total += (len(piece) + 2) // 3
        else:
            total += 1
    return max(1, total)


def classify(text: str) -> str:
    """Kind of prompt for the acceptance model: ``code``, ``structured``, ``chat`` or ``random``."""
    text = text or ""
    words = re.findall(r"[A-Za-z]+", text)
    lower = text.lower()
    code_hits = sum(lower.count(m.lower()) for m in _CODE_MARKERS)
    if code_hits >= 2:
        return "code"
    if len(words) >= 12:
        common = sum(1 for w in words if w.lower() in COMMON)
        if common / len(words) < 0.04:
            return "random"
    struct_hits = sum(lower.count(m) for m in _STRUCT_MARKERS)
    if struct_hits >= 2:
        return "structured"
    return "chat"


def render_chat(messages, tokenizer_config=None) -> str:
    """A plain rendering of chat messages (role headers as the model's template would add)."""
    qwen = bool(tokenizer_config) and "im_start" in str(tokenizer_config.get("chat_template", ""))
    parts = []
    for message in messages or []:
        role = str(message.get("role", "user"))
        content = message.get("content", "")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if qwen:
            parts.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
        else:
            parts.append(f"<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>")
    parts.append("<|im_start|>assistant\n" if qwen else "<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(parts)


def _h(*parts) -> int:
    digest = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode("utf-8", "replace"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class Generation:
    """The token stream one request produces.

    ``greedy`` (temperature 0) streams depend only on ``(model_key, prompt)``. ``perturb`` makes the
    stream differ from the greedy one (the ``wrong_answers`` fault under speculation).
    """

    EOS_MIN = 24
    EOS_SPAN = 480

    def __init__(self, model_key, prompt, temperature=0.0, seed=None, perturb=False):
        self.state = _h(model_key, prompt)
        self.greedy = not temperature or temperature <= 0
        self.perturb = perturb
        if self.greedy:
            self.rng = None
            self.eos_at = self.EOS_MIN + _h(self.state, "eos") % self.EOS_SPAN
        else:
            self.rng = random.Random(seed) if seed is not None else random.Random()
            self.eos_at = self.EOS_MIN + self.rng.randrange(self.EOS_SPAN)
        self._tokens = []

    def token(self, i: int) -> str:
        while len(self._tokens) <= i:
            self._tokens.append(self._make(len(self._tokens)))
        return self._tokens[i]

    def _make(self, i: int) -> str:
        if self.rng is not None:
            idx = self.rng.randrange(len(WORDS))
            punct = self.rng.randrange(11) == 0
        else:
            value = _h(self.state, i)
            idx = value % len(WORDS)
            punct = (value >> 20) % 11 == 0
        if self.perturb and _h(self.state, i, "wrong") % 4 == 0:
            idx = (idx + 7) % len(WORDS)
        word = WORDS[idx]
        if i == 0 or self._sentence_start(i):
            word = word.capitalize()
        text = word if i == 0 else " " + word
        return text + ("." if punct else "")

    def _sentence_start(self, i: int) -> bool:
        return i > 0 and self._tokens[i - 1].endswith(".")

    def text(self, start: int, end: int) -> str:
        return "".join(self.token(i) for i in range(start, end))
