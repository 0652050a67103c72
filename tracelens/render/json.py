"""The JSON renderer: the one writer of the ``tracelens.analysis/1`` document of an ``Analysis``
and of the ``tracelens.diff/1`` document of a ``Diff`` (``docs/analysis-json.md``: the field
names and their order are a contract, held byte for byte by ``tests/golden``), and of a
``Sizing`` (``tracelens size --format json``).

The results hold data; this module reads them.  ``analysis_document`` is the one place the
analysis document is put together (the small typed parts, a fit or a stage table, give their
own fields with ``to_dict``, as ``fields_dict`` spells them), ``analysis_json`` its text and
``finding_json`` one finding.  Importing the module registers its writers with
``tracelens.analysis.outputs`` as the ``"dict"`` and ``"json"`` outputs, which is how the thin
conveniences ``to_dict``/``to_json`` of ``Analysis``, ``Diff`` and ``Sizing`` find them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any

from tracelens.analysis import summary as s
from tracelens.analysis.diff.result import SCHEMA as DIFF_SCHEMA
from tracelens.analysis.diff.result import Diff
from tracelens.analysis.fields import fields_dict
from tracelens.analysis.findings.finding import Example, Finding
from tracelens.analysis.outputs import register
from tracelens.analysis.result import Analysis

if TYPE_CHECKING:  # a Sizing's renderer is registered by name: tracelens size loads the module
    from tracelens.analysis.sizing import Sizing

_MARK = "\x00traces\x00"  # where ``analysis_json`` writes the traces (a control character: escaped)


def analysis_document(analysis: Analysis) -> dict[str, Any]:
    """The ``tracelens.analysis/1`` document (docs/analysis-json.md)."""
    return _document(analysis, [_trace_json(t) for t in analysis.slowest(analysis.top)])


def _document(analysis: Analysis, traces: list[Any]) -> dict[str, Any]:
    from tracelens.analysis.gpu import MAX_MODEL_CALLS  # loaded when written, as before

    return {
        "schema": s.SCHEMA,
        "summary": {
            **fields_dict(analysis.summary),
            "stages": analysis.stages.to_dict(),
            "models": [m.to_dict() for m in analysis.models],
            "gpu_model_calls": [c.to_dict() for c in analysis.gpu_model_calls[:MAX_MODEL_CALLS]],
            **analysis.request_latency.to_dict(),
        },
        "operations": [fields_dict(o.rounded()) for o in analysis.operations],
        "traces": traces,
        "findings": [finding_json(f) for f in analysis.findings],
        "what_ifs": [a.to_dict() for a in analysis.what_ifs],
        "warnings": analysis.warnings,
        "cpu_hotspots": analysis.cpu_hotspots.to_dict(),
    }


def analysis_json(analysis: Analysis, indent: int | None = 2) -> str:
    """``analysis_document`` as JSON text.  Indented, the traces (every trace without ``top``:
    about 100 critical-path rows each) are encoded one at a time into the text, never held all
    as dicts at once: that held 1.1 GB for 1M spans, and the encoder's pieces 1.9 GB more."""
    slowest = analysis.slowest(analysis.top)
    if indent is None or not slowest:
        return json.dumps(analysis_document(analysis), indent=indent, ensure_ascii=False)
    text = json.dumps(_document(analysis, [_MARK]), indent=indent, ensure_ascii=False)
    pad = "\n" + " " * (2 * indent)  # a trace is at depth 2: document, "traces" list
    # Real newlines only come from the layout (strings escape theirs): this is the one place.
    mark = f'"traces": [{pad}{json.dumps(_MARK)}'
    head, tail = text.split(mark)
    parts = [head, '"traces": [', pad]
    for i, t in enumerate(slowest):
        if i:
            parts.append("," + pad)
        parts.append(
            json.dumps(_trace_json(t), indent=indent, ensure_ascii=False).replace("\n", pad)
        )
    parts.append(tail)
    return "".join(parts)


# A trace's fields but its critical path: a table, written out as rows.
_TRACE_FIELDS = tuple(f.name for f in fields(s.TraceSummary) if f.name != "critical_path")


def _trace_json(t: s.TraceSummary) -> dict[str, Any]:
    return {
        **fields_dict(t, *_TRACE_FIELDS),
        "critical_path": t.critical_path.to_dicts(),
    }


def finding_json(f: Finding) -> dict[str, Any]:
    """One finding as ``docs/analysis-json.md`` states it: the common fields, then the type's
    own (``details``), then its example trace."""
    out: dict[str, Any] = {"type": f.type.value, "names": f.names, "services": f.services}
    if f.parent is not None:
        out["parent"] = f.parent
        out["parent_service"] = f.parent_service
    out.update(
        fields_dict(
            f,
            *("traces", "occurrences", "saving_ms", "projected_latency_ms", "total_saving_ms"),
            *("traces_on_critical_path", "confidence", "evidence", "explanation"),
        )
    )
    out["alternative_to"] = f.alternative_to
    out["top_change"] = f.top_change
    if f.details is not None:
        out.update(asdict(f.details))
    if f.example is not None:
        out.update(_example_json(f.example))
    return out


def _example_json(ex: Example) -> dict[str, Any]:
    out: dict[str, Any] = {"example_trace_id": ex.trace_id}
    if ex.span_ids is not None:
        out["span_ids"] = ex.span_ids
    out.update(
        example_latency_ms=ex.latency_ms,
        example_projected_latency_ms=ex.projected_latency_ms,
        example_projected_critical_path=[
            {"name": p.name, "ms": p.ms} for p in ex.projected_critical_path
        ],
    )
    return out


def diff_document(diff: Diff) -> dict[str, Any]:
    """The ``tracelens.diff/1`` document (docs/analysis-json.md, section "diff")."""
    return {
        "schema": DIFF_SCHEMA,
        "base": diff.base.to_dict(),
        "new": diff.new.to_dict(),
        "method": diff.method.to_dict(),
        "roots": [r.to_dict() for r in diff.roots],
        "new_roots": [c.to_dict() for c in diff.root_churn.appeared],
        "vanished_roots": [c.to_dict() for c in diff.root_churn.vanished],
        "new_operations": [c.to_dict() for c in diff.operation_churn.appeared],
        "vanished_operations": [c.to_dict() for c in diff.operation_churn.vanished],
        "findings": {
            "appeared": [f.to_dict() for f in diff.finding_churn.appeared],
            "vanished": [f.to_dict() for f in diff.finding_churn.vanished],
        },
        "regressions": len(diff.regressions()),
        "rules": [r.to_dict() for r in diff.rules],
        "failed": diff.failed,
        "warnings": list(diff.warnings),
    }


def diff_json(diff: Diff, indent: int | None = 2) -> str:
    """``diff_document`` as JSON text."""
    return json.dumps(diff_document(diff), indent=indent, ensure_ascii=False)


def sizing_json(sizing: Sizing) -> str:
    """A ``Sizing`` as ``tracelens size --format json`` prints it (``docs/analysis-json.md``,
    Sizing: its ``to_dict``, indented, ASCII)."""
    return json.dumps(sizing.to_dict(), indent=2)


register(Analysis, "dict", analysis_document)
register(Analysis, "json", analysis_json)
register(Diff, "dict", diff_document)
register(Diff, "json", diff_json)
register("tracelens.analysis.sizing.Sizing", "json", sizing_json)  # by name: not loaded here

__all__ = [
    "analysis_document",
    "analysis_json",
    "diff_document",
    "diff_json",
    "finding_json",
    "sizing_json",
]
