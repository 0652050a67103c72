"""What a detector hands to the report: a remedy (as a replay change) and why it is believed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracelens.analysis.findings.replay import Change

CONFIDENCE = ("low", "medium", "high")
# Replays are the costly part: per type, only the candidates with the most to gain go through.
MAX_PER_TYPE = 20


def weakest(*levels: str) -> str:
    return min(levels, key=CONFIDENCE.index)


def count(n: int, word: str) -> str:
    """``1 trace``, ``3 traces``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


@dataclass(frozen=True)
class Evidence:
    """One reason behind a verdict: a stable machine-readable ``code`` (docs/analysis-json.md
    lists them) and the sentence a person reads."""

    code: str
    detail: str


@dataclass
class Candidate:
    """One finding before its replay: ``change`` is the remedy applied to every affected trace."""

    type: str
    names: list[str]
    services: list[str]
    change: Change
    traces: np.ndarray  # trace numbers the pattern occurs in
    confidence: str
    evidence: list[Evidence]
    occurrences: int
    parent: str | None = None
    parent_service: str | None = None
    example: list[int] = field(default_factory=list)  # span rows of one occurrence
    extra: dict[str, Any] = field(default_factory=dict)
