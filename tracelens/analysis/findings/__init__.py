"""The bottleneck finder: what to do about the critical path, and what each change would save.

Detectors (one per finding type, named in ``FindingType``'s table and called through
``detectors``: ``parallel``, ``repeats``, ``tail``, ...) turn the analysed traces into
candidates, each with its remedy stated as a what-if
:class:`~tracelens.analysis.findings.replay.Change`; one replay mechanism (``replay``) re-times
the affected traces with the change applied and reads off their new latency, so every saving in
the output comes from the same model (``assess``).  Findings (``finding.Finding``) are ordered
by total saving over all traces (the sum of per-trace savings), most first.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.findings.assess import Scored, assess, rank
from tracelens.analysis.findings.candidate import Candidate
from tracelens.analysis.findings.detectors import Inputs, detector
from tracelens.analysis.findings.features import Features, features
from tracelens.analysis.findings.finding import Evidence, Finding, FindingType
from tracelens.analysis.findings.repeats import DEFAULT_WINDOW_S
from tracelens.analysis.findings.replay import Change
from tracelens.analysis.findings.timeline import Timeline, build_timeline


def candidates(
    trace_analysis: TraceAnalysis,
    timeline: Timeline,
    window_s: float = DEFAULT_WINDOW_S,
    span_features: Features | None = None,
) -> list[Candidate]:
    """Every detector's candidates, before replay: the detector ``FindingType``'s table names
    for each type, in the table's order, all reading the same ``Inputs``."""
    inputs = Inputs(
        trace_analysis,
        timeline,
        span_features if span_features is not None else features(trace_analysis.spans),
        window_s,
    )
    found: list[Candidate] = []
    for kind in FindingType:
        detect = detector(kind)
        if detect is not None:
            found += detect(inputs)
    return found


def find_all(
    trace_analysis: TraceAnalysis,
    *,
    window_s: float = DEFAULT_WINDOW_S,
    timeline: Timeline | None = None,
    extra: Sequence[Scored] = (),
) -> list[Finding]:
    """The findings of ``docs/analysis-json.md``, most total saving first: the detectors' and
    the ``extra`` ones (what-ifs asked for, built on ``timeline``, the replay's timeline of
    ``trace_analysis`` when the caller has it) in one order."""
    if trace_analysis.spans.height == 0:
        return rank(extra)
    # The span features (Polars, which releases the GIL) and the replay's timeline (NumPy)
    # need nothing from each other: build them side by side.
    with ThreadPoolExecutor(max_workers=1) as pool:
        fe_job = pool.submit(features, trace_analysis.spans)
        timeline = build_timeline(trace_analysis.tree) if timeline is None else timeline
        span_features = fe_job.result()
    return assess(
        trace_analysis,
        timeline,
        candidates(trace_analysis, timeline, window_s, span_features),
        extra,
    )


__all__ = [
    "Change",
    "Evidence",
    "Finding",
    "FindingType",
    "Scored",
    "Timeline",
    "build_timeline",
    "candidates",
    "find_all",
    "rank",
]
