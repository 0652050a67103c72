"""In-memory vector search over a generated corpus: the demo's CPU-bound retrieval step.

Embeddings are hashed bags of words (stable ``zlib.crc32`` buckets, unit length) and the search
is a brute-force dot product in plain Python over every document, as a small service without an
ANN index does: a few milliseconds of real computation per query, which the decorator measures
as on-CPU time and which holds the event loop (and so every other request) while it runs.
"""

from __future__ import annotations

import math
import operator
import random
import re
import zlib
from dataclasses import dataclass
from typing import Final

DIM: Final = 64
_TOKEN = re.compile(r"[a-z0-9_]+")
_TOPICS: Final = (
    "orders", "payments", "customers", "shipments", "schema", "migration", "timeout", "retry",
    "index", "deploy", "rollback", "latency", "queue", "cache", "weather", "calendar", "oncall",
    "incident", "postgres", "kafka", "batch", "nightly", "job", "alert", "dashboard", "quota",
)  # fmt: skip
_FILLER: Final = (
    "how", "to", "fix", "when", "the", "a", "after", "check", "runbook", "guide", "for", "with",
    "service", "failed", "slow", "error", "steps", "owner", "team", "playbook",
)  # fmt: skip


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def embed(text: str) -> tuple[float, ...]:
    vec = [0.0] * DIM
    for tok in tokens(text):
        h = zlib.crc32(tok.encode())
        vec[h % DIM] += 1.0 if (h >> 16) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return tuple(v / norm for v in vec)


@dataclass(frozen=True)
class Doc:
    doc_id: int
    title: str


class Corpus:
    """``size`` generated documents and their embeddings (built once, deterministically)."""

    def __init__(self, size: int = 8000, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.docs: list[Doc] = []
        self.vectors: list[tuple[float, ...]] = []
        for i in range(size):
            words = rng.sample(_TOPICS, 3) + rng.sample(_FILLER, 5)
            rng.shuffle(words)
            title = " ".join(words)
            self.docs.append(Doc(i, title))
            self.vectors.append(embed(title))

    def search(self, query: str, k: int = 5) -> list[Doc]:
        """The ``k`` documents nearest to ``query`` by cosine similarity (exhaustive)."""
        q = embed(query)
        mul = operator.mul
        scores = [sum(map(mul, q, v)) for v in self.vectors]
        best = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:k]
        return [self.docs[i] for i in best]
