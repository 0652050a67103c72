"""The detectors behind one signature: each reads ``Inputs`` and returns its candidates.

``FindingType``'s table names each type's detector (``"module:function"`` in this package);
``detector`` loads it.  What several detectors share (the retries, the repeated calls, the hop
groups) is computed once, on first use, in ``Inputs``, so a detector asks for what it needs and
nothing is wired by hand per type.  The adapters below give the built-in detectors, whose own
functions take the parts they read, that one signature.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.findings.candidate import Candidate
from tracelens.analysis.findings.features import Features
from tracelens.analysis.findings.finding import FindingType
from tracelens.analysis.findings.hops import groups
from tracelens.analysis.findings.launch_bound import launch_bound_candidates
from tracelens.analysis.findings.parallel import n_plus_one_candidates, parallel_candidates
from tracelens.analysis.findings.repeats import (
    Repeats,
    cacheable_candidates,
    find_repeats,
    find_retries,
    repeated_write_candidates,
    retry_candidates,
)
from tracelens.analysis.findings.tail import tail_candidates
from tracelens.analysis.findings.timeline import Timeline


@dataclass
class Inputs:
    """What a detector reads: the analysed traces, the replay's timeline, the span features,
    the cache window; and, computed once when first asked for, what detectors share."""

    traces: TraceAnalysis
    timeline: Timeline
    features: Features
    window_s: float

    @property
    def spans(self) -> pl.DataFrame:
        return self.traces.spans

    @cached_property
    def retries(self) -> tuple[np.ndarray, np.ndarray]:
        """The retried calls and the failed attempts (``repeats.find_retries``)."""
        return find_retries(self.timeline, self.features)

    @cached_property
    def repeats(self) -> Repeats:
        return find_repeats(self.timeline, self.features, self.spans, self.retries[0])

    @cached_property
    def hop_groups(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The sibling hops in groups, and the overlap evidence (``hops.groups``)."""
        return groups(self.timeline, self.features, self.spans, self.repeats.polling)


Detector = Callable[[Inputs], list[Candidate]]


def detector(kind: FindingType) -> Detector | None:
    """The detector the table names for ``kind`` (None: the type is built elsewhere)."""
    if kind.detector is None:
        return None
    module, _, name = kind.detector.partition(":")
    found: Detector = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    return found


def parallelizable(inp: Inputs) -> list[Candidate]:
    hops, evidence = inp.hop_groups
    return parallel_candidates(inp.spans, hops, evidence)


def n_plus_one(inp: Inputs) -> list[Candidate]:
    return n_plus_one_candidates(inp.spans, inp.hop_groups[0])


def cacheable(inp: Inputs) -> list[Candidate]:
    """Cacheable calls, and the polling loops found with them."""
    timeline, span_features, retry = inp.timeline, inp.features, inp.retries[0]
    return cacheable_candidates(
        timeline, span_features, inp.spans, retry, inp.window_s, inp.repeats
    )


def retry(inp: Inputs) -> list[Candidate]:
    retried, failed = inp.retries
    return retry_candidates(inp.timeline, inp.features, inp.spans, retried, failed)


def repeated_write(inp: Inputs) -> list[Candidate]:
    return repeated_write_candidates(inp.timeline, inp.features, inp.spans, inp.retries[0])


def tail(inp: Inputs) -> list[Candidate]:
    return tail_candidates(inp.traces, inp.timeline, inp.features)


def launch_bound(inp: Inputs) -> list[Candidate]:
    return launch_bound_candidates(inp.traces, inp.timeline)


__all__ = [
    "Detector",
    "Inputs",
    "cacheable",
    "detector",
    "launch_bound",
    "n_plus_one",
    "parallelizable",
    "repeated_write",
    "retry",
    "tail",
]
