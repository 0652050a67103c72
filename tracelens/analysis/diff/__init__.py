"""Comparing two runs: what got slower, why, and whether it is real (``tracelens diff``).

``profile`` reduces an ``Analysis`` to what a comparison needs; ``compare`` turns two profiles
into a ``Diff`` (bootstrap intervals, verdicts, attribution to critical-path operations, new and
vanished operations and findings); ``parse_rules`` reads ``--fail-on``.  The weekly report
compares its weeks with the same code.
"""

from __future__ import annotations

from tracelens.analysis.diff.compare import compare
from tracelens.analysis.diff.profile import Profile, profile
from tracelens.analysis.diff.result import (
    Attribution,
    Change,
    Contribution,
    Diff,
    OperationDiff,
    RootDiff,
    Verdict,
)
from tracelens.analysis.diff.rules import Rule, parse_rules

__all__ = [
    "Attribution",
    "Change",
    "Contribution",
    "Diff",
    "OperationDiff",
    "Profile",
    "RootDiff",
    "Rule",
    "Verdict",
    "compare",
    "parse_rules",
    "profile",
]
