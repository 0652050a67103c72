"""The comparison of two runs as typed values.  Each part's ``to_dict`` gives its fields as the
JSON holds them (``docs/analysis-json.md``, section "diff": the field names there are a
contract); the document is ``tracelens.render.json``'s, the text and the page the other
renderers', found through ``analysis.outputs``."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar

from tracelens.analysis.diff.profile import FindingBrief
from tracelens.analysis.fields import Record, fields_dict
from tracelens.analysis.kinds import KINDS
from tracelens.analysis.outputs import document, render

SCHEMA = "tracelens.diff/1"

T = TypeVar("T")


class Verdict(str, Enum):
    """What a change is, once noise is accounted for."""

    REGRESSION = "regression"  # the whole confidence interval above zero, and >= min_delta_ms
    IMPROVEMENT = "improvement"  # the whole confidence interval below zero, and >= min_delta_ms
    UNCHANGED = "unchanged"  # the interval holds zero: not distinguishable from noise
    TOO_FEW = "too_few"  # too few traces in a run to judge this percentile


def _r(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(float(v), digits)


@dataclass(frozen=True)
class Change:
    """One percentile in both runs: its change, a confidence interval for the change, and the
    verdict.  ``relative`` is the change over the base value (None when that is 0)."""

    metric: str  # p50 | p95 | p99
    base_ms: float
    new_ms: float
    ci_low_ms: float | None
    ci_high_ms: float | None
    verdict: Verdict

    @property
    def delta_ms(self) -> float:
        return self.new_ms - self.base_ms

    @property
    def relative(self) -> float | None:
        return self.delta_ms / self.base_ms if self.base_ms > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "base_ms": _r(self.base_ms),
            "new_ms": _r(self.new_ms),
            "delta_ms": _r(self.delta_ms),
            "relative": _r(self.relative, 4),
            "ci_low_ms": _r(self.ci_low_ms),
            "ci_high_ms": _r(self.ci_high_ms),
            "verdict": self.verdict.value,
        }


@dataclass(frozen=True)
class Contribution:
    """An operation's mean critical-path time in the traces around a percentile, in both runs."""

    service: str
    name: str
    kind: str
    base_ms: float
    new_ms: float
    share: float | None  # of the percentile's change

    @property
    def delta_ms(self) -> float:
        return self.new_ms - self.base_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "name": self.name,
            "kind": self.kind,
            "base_ms": _r(self.base_ms),
            "new_ms": _r(self.new_ms),
            "delta_ms": _r(self.delta_ms),
            "share": _r(self.share, 4),
        }


@dataclass(frozen=True)
class Attribution:
    """Where a percentile's change went: the traces around that percentile in each run (the
    band) compared operation by operation and kind by kind (method in docs/analysis-json.md).

    The operations' changes add up to ``band_delta_ms`` (the change of the bands' mean
    latency); ``unattributed_ms`` is what separates it from the percentile's change."""

    metric: str
    delta_ms: float
    base_band: int
    new_band: int
    band_delta_ms: float
    operations: tuple[Contribution, ...]  # the largest changes first
    other_ms: float  # the operations left out of ``operations``, together
    kinds: dict[str, tuple[float, float]]  # kind -> (base_ms, new_ms)

    @property
    def unattributed_ms(self) -> float:
        return self.delta_ms - self.band_delta_ms

    def headline(self) -> str:
        """``p95 +180 ms: +150 ms from fetch_schema on the critical path``."""
        top = self.operations[0] if self.operations else None
        head = f"{self.metric} {_signed_ms(self.delta_ms)}"
        if top is None or top.delta_ms == 0:
            return head
        return f"{head}: {_signed_ms(top.delta_ms)} from {top.name} on the critical path"

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "delta_ms": _r(self.delta_ms),
            "band_traces": {"base": self.base_band, "new": self.new_band},
            "band_delta_ms": _r(self.band_delta_ms),
            "unattributed_ms": _r(self.unattributed_ms),
            "operations": [c.to_dict() for c in self.operations],
            "other_ms": _r(self.other_ms),
            "kinds": {
                k: {
                    "base_ms": _r(self.kinds[k][0]),
                    "new_ms": _r(self.kinds[k][1]),
                    "delta_ms": _r(self.kinds[k][1] - self.kinds[k][0]),
                }
                for k in KINDS
            },
            "headline": self.headline(),
        }


@dataclass(frozen=True)
class OperationDiff:
    """An operation's critical-path time per trace, under one root, in both runs."""

    service: str
    name: str
    kind: str
    base_traces: int  # traces where it was on the critical path
    new_traces: int
    changes: tuple[Change, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            **fields_dict(self, "service", "name", "kind", "base_traces", "new_traces"),
            "critical_ms": [c.to_dict() for c in self.changes],
        }


@dataclass(frozen=True)
class RootDiff:
    """The traces of one root operation: end-to-end latency, where its change went, and each
    operation on its critical path."""

    service: str
    name: str
    base_traces: int
    new_traces: int
    latency: tuple[Change, ...]
    attribution: tuple[Attribution, ...]
    operations: tuple[OperationDiff, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            **fields_dict(self, "service", "name", "base_traces", "new_traces"),
            "latency_ms": [c.to_dict() for c in self.latency],
            **fields_dict(self, "attribution", "operations"),
        }


@dataclass(frozen=True)
class Counted(Record):
    """An operation (or root operation) and how many spans (traces) it had."""

    service: str
    name: str
    count: int


@dataclass(frozen=True)
class Churn(Generic[T]):
    """What only the new run has (``appeared``) and what only the base run had (``vanished``):
    of root operations, operations or findings."""

    appeared: tuple[T, ...] = ()
    vanished: tuple[T, ...] = ()


@dataclass(frozen=True)
class RuleOutcome:
    """One ``--fail-on`` rule against one root operation."""

    rule: str
    service: str
    name: str
    change: Change
    tripped: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "service": self.service,
            "name": self.name,
            "metric": self.change.metric,
            "delta_ms": _r(self.change.delta_ms),
            "relative": _r(self.change.relative, 4),
            "verdict": self.change.verdict.value,
            "tripped": self.tripped,
        }


@dataclass(frozen=True)
class Method:
    """How significance was judged, stated in every result."""

    resamples: int
    confidence: float
    comparisons: int
    seed: int
    min_traces: int
    min_delta_ms: float

    @property
    def per_comparison_confidence(self) -> float:
        """Bonferroni: each interval at 1 - (1 - confidence) / comparisons, so that all of them
        hold together with probability ``confidence``."""
        return 1.0 - (1.0 - self.confidence) / max(self.comparisons, 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "statistic": "percentile, linear interpolation between order statistics",
            "resampling": "bootstrap over traces, with replacement, each run on its own",
            "resamples": self.resamples,
            "confidence": self.confidence,
            "comparisons": self.comparisons,
            "per_comparison_confidence": round(self.per_comparison_confidence, 6),
            "seed": self.seed,
            "min_traces": self.min_traces,
            "min_delta_ms": self.min_delta_ms,
        }


@dataclass(frozen=True)
class Run(Record):
    label: str
    traces: int
    spans: int


@dataclass
class Diff:
    """What changed from ``base`` to ``new``."""

    base: Run
    new: Run
    method: Method
    roots: tuple[RootDiff, ...]
    root_churn: Churn[Counted]
    operation_churn: Churn[Counted]
    finding_churn: Churn[FindingBrief]
    rules: tuple[RuleOutcome, ...] = ()
    warnings: list[str] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)  # inputs skipped with keep_going

    @property
    def failed(self) -> bool:
        """Whether a ``fail_on`` rule tripped."""
        return any(r.tripped for r in self.rules)

    def regressions(self) -> list[tuple[RootDiff, OperationDiff | None, Change]]:
        """Every significant increase: (root, operation or None for the root's latency, change)."""
        out: list[tuple[RootDiff, OperationDiff | None, Change]] = []
        for root in self.roots:
            out += [(root, None, c) for c in root.latency if c.verdict is Verdict.REGRESSION]
            for op in root.operations:
                out += [(root, op, c) for c in op.changes if c.verdict is Verdict.REGRESSION]
        return out

    def to_dict(self) -> dict[str, Any]:
        """The ``tracelens.diff/1`` document (``tracelens.render.json``, once
        ``tracelens.render`` is imported)."""
        return document(self)

    def to_json(self, indent: int | None = 2) -> str:
        """``to_dict`` as JSON text (``tracelens.render.json``)."""
        return render(self, "json", indent=indent)

    def to_text(self) -> str:
        """The terminal text (``tracelens.render.diff_text``, once ``tracelens.render`` is
        imported)."""
        return render(self, "text")

    def to_html(self, title: str | None = None) -> str:
        """The self-contained HTML page (``tracelens.render.html.diff``)."""
        return render(self, "html", title=title)


def _signed_ms(v: float) -> str:
    a = abs(v)
    text = f"{a:.0f} ms" if a >= 10 else f"{a:.1f} ms" if a >= 1 else f"{a:.2f} ms"
    if a >= 1000:
        text = f"{a / 1000:.2f} s"
    return ("+" if v >= 0 else "-") + text


__all__ = [
    "SCHEMA",
    "Attribution",
    "Change",
    "Churn",
    "Contribution",
    "Counted",
    "Diff",
    "Method",
    "OperationDiff",
    "RootDiff",
    "RuleOutcome",
    "Run",
    "Verdict",
]
