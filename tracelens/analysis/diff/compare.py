"""``compare(base, new)``: two profiles in, one ``Diff`` out.  Pure: no I/O, seeded.

Per root operation, the end-to-end latency's p50/p95/p99 and, per operation on its critical
path, the percentiles of that operation's critical-path time per trace, each with a bootstrap
confidence interval for the change (traces resampled, each run on its own) and a verdict.  The
intervals are Bonferroni-corrected over every comparison made, so that "no regression" holds
for the whole diff with the stated confidence, not for each line of it: an A/A comparison of
two runs of the same code should flag nothing.  A percentile is judged only when both runs have
``min_traces`` traces and at least ``MIN_TAIL`` of them above it (p95 needs 100, p99 500), and
a change smaller than ``min_delta_ms`` is never significant.

Attribution: for each percentile, the traces around it in each run (the band: percentiles
``q - d`` to ``q + d`` with ``d = BAND * min(q, 1 - q)``, at least ``MIN_BAND`` traces) are
compared by their mean critical-path time per operation and per kind.  Each trace's critical
path partitions its latency, so the operations' changes add up to the change of the bands'
mean latency, which the percentile's change approximates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from tracelens.analysis.diff.bootstrap import percentile, resampled_percentiles
from tracelens.analysis.diff.profile import Op, Profile, RootSample
from tracelens.analysis.diff.result import (
    Attribution,
    Change,
    Churn,
    Contribution,
    Counted,
    Diff,
    Method,
    OperationDiff,
    RootDiff,
    RuleOutcome,
    Run,
    Verdict,
)
from tracelens.analysis.diff.rules import QUANTILES, Rule
from tracelens.analysis.kinds import KINDS

RESAMPLES = 20_000
CONFIDENCE = 0.95
MIN_TRACES = 20
MIN_DELTA_MS = 1.0
MIN_TAIL = 5
BAND = 0.2
MIN_BAND = 5
TOP_CONTRIBUTIONS = 10

T = TypeVar("T")


def needed(q: float, min_traces: int = MIN_TRACES) -> int:
    """Traces a run needs for its ``q`` percentile to be judged."""
    return max(min_traces, math.ceil(MIN_TAIL / (1.0 - q) - 1e-9))


@dataclass
class _Pending:
    """A change waiting for its interval: the interval's level depends on how many there are."""

    metric: str
    base_ms: float
    new_ms: float
    draws: np.ndarray | None  # bootstrap draws of new - base; None when too few traces


@dataclass
class _PendingRoot:
    """One root operation's changes, drawn before the interval level is known."""

    base: RootSample
    new: RootSample
    latency: list[_Pending]
    operations: list[tuple[Op, str, int, int]]  # (op, kind, on base's paths, on new's paths)
    per_operation: list[list[_Pending]]

    def pending(self) -> list[_Pending]:
        return [*self.latency, *(p for ps in self.per_operation for p in ps)]


def compare(
    base: Profile,
    new: Profile,
    *,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    min_traces: int = MIN_TRACES,
    min_delta_ms: float = MIN_DELTA_MS,
    rules: Sequence[Rule] = (),
    base_label: str = "base",
    new_label: str = "new",
) -> Diff:
    """What changed from ``base`` to ``new`` (see the module's docstring for the method): every
    change drawn first, then judged at the level that the number of judged changes sets."""
    _check(resamples, confidence)
    rng = np.random.default_rng(seed)
    pending = [
        _draw(base.roots[key], new.roots[key], resamples, min_traces, rng)
        for key in sorted(set(base.roots) & set(new.roots))
    ]
    judged = sum(p.draws is not None for root in pending for p in root.pending())
    method = Method(resamples, confidence, judged, seed, min_traces, min_delta_ms)
    alpha = 1.0 - method.per_comparison_confidence
    roots = tuple(_root_diff(root, alpha, min_delta_ms) for root in pending)
    return Diff(
        base=Run(base_label, base.traces, base.spans),
        new=Run(new_label, new.traces, new.spans),
        method=method,
        roots=roots,
        root_churn=_counted_churn(base.roots, new.roots, lambda s: s.traces),
        operation_churn=_counted_churn(base.operations, new.operations, lambda c: c),
        finding_churn=_finding_churn(base, new),
        rules=_rule_outcomes(rules, roots),
        warnings=[*(f"base: {w}" for w in base.warnings), *(f"new: {w}" for w in new.warnings)],
    )


def _check(resamples: int, confidence: float) -> None:
    if resamples < 100:
        raise ValueError("resamples: at least 100")
    if not 0 < confidence < 1:
        raise ValueError("confidence: between 0 and 1")


def _draw(
    base: RootSample, new: RootSample, resamples: int, min_traces: int, rng: np.random.Generator
) -> _PendingRoot:
    """The bootstrap draws of one root: its latency, then each operation on either run's
    critical paths (in that order: the draws' order fixes the seeded result)."""
    latency = _changes(base.latency_ms, new.latency_ms, resamples, min_traces, rng)
    operations, per_operation = [], []
    for op, kind, in_base, in_new in _union_ops(base, new):
        base_values = base.op_values(in_base) if in_base >= 0 else np.zeros(base.traces)
        new_values = new.op_values(in_new) if in_new >= 0 else np.zeros(new.traces)
        per_operation.append(_changes(base_values, new_values, resamples, min_traces, rng))
        on_base = base.op_on_path(in_base) if in_base >= 0 else 0
        on_new = new.op_on_path(in_new) if in_new >= 0 else 0
        operations.append((op, kind, on_base, on_new))
    return _PendingRoot(base, new, latency, operations, per_operation)


def _root_diff(root: _PendingRoot, alpha: float, min_delta_ms: float) -> RootDiff:
    latency = tuple(_judge(p, alpha, min_delta_ms) for p in root.latency)
    operations = tuple(
        OperationDiff(
            op[0], op[1], kind, on_base, on_new, tuple(_judge(p, alpha, min_delta_ms) for p in ps)
        )
        for (op, kind, on_base, on_new), ps in zip(root.operations, root.per_operation, strict=True)
    )
    return RootDiff(
        service=root.base.root[0],
        name=root.base.root[1],
        base_traces=root.base.traces,
        new_traces=root.new.traces,
        latency=latency,
        attribution=tuple(_attribute(root.base, root.new, c) for c in latency),
        operations=operations,
    )


def _finding_churn(base: Profile, new: Profile) -> Churn:
    """Findings that appeared and vanished (by their key)."""
    return Churn(
        tuple(f for k, f in new.findings.items() if k not in base.findings),
        tuple(f for k, f in base.findings.items() if k not in new.findings),
    )


def _rule_outcomes(rules: Sequence[Rule], roots: tuple[RootDiff, ...]) -> tuple[RuleOutcome, ...]:
    """Each rule against each root's change of the rule's metric."""
    return tuple(
        RuleOutcome(rule.text, root.service, root.name, change, _trips(rule, change))
        for rule in rules
        for root in roots
        for change in root.latency
        if change.metric == rule.metric
    )


def _trips(rule: Rule, change: Change) -> bool:
    return change.verdict is Verdict.REGRESSION and rule.exceeded(change.base_ms, change.delta_ms)


def _changes(
    base: np.ndarray, new: np.ndarray, resamples: int, min_traces: int, rng: np.random.Generator
) -> list[_Pending]:
    bs, ns = np.sort(base), np.sort(new)
    out = []
    for metric, q in QUANTILES.items():
        draws = None
        if min(len(bs), len(ns)) >= needed(q, min_traces):
            draws = resampled_percentiles(ns, q, resamples, rng) - resampled_percentiles(
                bs, q, resamples, rng
            )
        out.append(_Pending(metric, percentile(bs, q), percentile(ns, q), draws))
    return out


def _judge(p: _Pending, alpha: float, min_delta_ms: float) -> Change:
    """Significant: the whole interval on one side of zero, and a change of at least
    ``min_delta_ms`` (a real but sub-millisecond shift is not news)."""
    if p.draws is None:
        return Change(p.metric, p.base_ms, p.new_ms, None, None, Verdict.TOO_FEW)
    lo, hi = (float(v) for v in np.quantile(p.draws, [alpha / 2, 1 - alpha / 2]))
    big = abs(p.new_ms - p.base_ms) >= min_delta_ms
    if lo > 0 and big:
        verdict = Verdict.REGRESSION
    elif hi < 0 and big:
        verdict = Verdict.IMPROVEMENT
    else:
        verdict = Verdict.UNCHANGED
    return Change(p.metric, p.base_ms, p.new_ms, lo, hi, verdict)


def _union_ops(b: RootSample, n: RootSample) -> list[tuple[Op, str, int, int]]:
    """Operations on either run's critical paths: (op, kind, index in b or -1, in n or -1),
    the most critical-path time first."""
    bi = {op: j for j, op in enumerate(b.ops)}
    ni = {op: j for j, op in enumerate(n.ops)}

    def total(s: RootSample, j: int) -> float:
        return float(s.row_ms[s.op_start[j] : s.op_start[j + 1]].sum()) / max(s.traces, 1)

    rows = []
    for op in set(bi) | set(ni):
        bj, nj = bi.get(op, -1), ni.get(op, -1)
        kind = n.op_kind[nj] if nj >= 0 else b.op_kind[bj]
        weight = max(total(b, bj) if bj >= 0 else 0.0, total(n, nj) if nj >= 0 else 0.0)
        rows.append((-weight, op, kind, bj, nj))
    rows.sort()
    return [(op, kind, bj, nj) for _, op, kind, bj, nj in rows]


def band(latency: np.ndarray, q: float) -> np.ndarray:
    """The traces around the ``q`` percentile of ``latency`` (indices into it)."""
    n = len(latency)
    order = np.argsort(latency, kind="stable")
    d = BAND * min(q, 1.0 - q)
    lo = math.floor((q - d) * (n - 1))
    hi = math.ceil((q + d) * (n - 1))
    while hi - lo + 1 < min(MIN_BAND, n):
        lo, hi = max(lo - 1, 0), min(hi + 1, n - 1)
    return order[lo : hi + 1]


def _attribute(b: RootSample, n: RootSample, change: Change) -> Attribution:
    q = QUANTILES[change.metric]
    rb, rn = band(b.latency_ms, q), band(n.latency_ms, q)
    ob, kb = b.band_means(rb)
    on, kn = n.band_means(rn)
    per_op: dict[Op, list[float]] = {}
    kinds: dict[Op, str] = {}
    for j, op in enumerate(b.ops):
        per_op.setdefault(op, [0.0, 0.0])[0] = float(ob[j])
        kinds[op] = b.op_kind[j]
    for j, op in enumerate(n.ops):
        per_op.setdefault(op, [0.0, 0.0])[1] = float(on[j])
        kinds[op] = n.op_kind[j]
    delta = change.delta_ms
    contributions = sorted(
        (
            Contribution(
                op[0], op[1], kinds[op], v[0], v[1], (v[1] - v[0]) / delta if delta else None
            )
            for op, v in per_op.items()
        ),
        key=lambda c: (-abs(c.delta_ms), c.service, c.name),
    )
    top = tuple(c for c in contributions[:TOP_CONTRIBUTIONS] if c.delta_ms != 0)
    rest = sum(c.delta_ms for c in contributions if c not in top)
    band_delta = float(n.latency_ms[rn].mean() - b.latency_ms[rb].mean())
    return Attribution(
        metric=change.metric,
        delta_ms=delta,
        base_band=len(rb),
        new_band=len(rn),
        band_delta_ms=band_delta,
        operations=top,
        other_ms=rest,
        kinds={k: (float(kb[i]), float(kn[i])) for i, k in enumerate(KINDS)},
    )


def _counted_churn(
    base: Mapping[Op, T], new: Mapping[Op, T], count: Callable[[T], int]
) -> Churn[Counted]:
    """The operations only one run has, each run's most frequent first."""

    def only(these: Mapping[Op, T], those: Mapping[Op, T]) -> tuple[Counted, ...]:
        rows = [Counted(op[0], op[1], int(count(v))) for op, v in these.items() if op not in those]
        return tuple(sorted(rows, key=lambda c: (-c.count, c.service, c.name)))

    return Churn(only(new, base), only(base, new))


__all__ = ["BAND", "CONFIDENCE", "MIN_TRACES", "RESAMPLES", "band", "compare", "needed"]
