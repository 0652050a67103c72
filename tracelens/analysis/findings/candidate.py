"""What a detector hands to ``assess``: a remedy (as a replay change) and why it is believed."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracelens.analysis.findings.finding import (
    CONFIDENCE,
    Confidence,
    Details,
    Evidence,
    FindingType,
)
from tracelens.analysis.findings.replay import Change

# Replays are the costly part: per type, only the candidates with the most to gain go through.
MAX_PER_TYPE = 20


def weakest(*levels: Confidence) -> Confidence:
    return min(levels, key=CONFIDENCE.index)


def count(n: int, word: str) -> str:
    """``1 trace``, ``3 traces``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


@dataclass
class Candidate:
    """One finding before its replay: ``change`` is the remedy applied to every affected trace."""

    type: FindingType
    names: list[str]
    services: list[str]
    change: Change
    traces: np.ndarray  # trace numbers the pattern occurs in
    confidence: Confidence
    evidence: list[Evidence]
    occurrences: int
    parent: str | None = None
    parent_service: str | None = None
    example: list[int] = field(default_factory=list)  # span rows of one occurrence
    details: Details | None = None  # the type's own fields (docs/analysis-json.md)


__all__ = ["CONFIDENCE", "MAX_PER_TYPE", "Candidate", "Evidence", "count", "weakest"]
