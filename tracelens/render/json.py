"""The JSON output of a result: its document (``to_dict``, the one writer of each contract,
``docs/analysis-json.md``) as text, the same bytes whoever asks (``tracelens analyze --format
json``, ``diff --format json``: ``Analysis.to_json``, ``Diff.to_json``)."""

from __future__ import annotations

import json
from typing import Any, Protocol

from tracelens.analysis.diff.result import Diff
from tracelens.analysis.outputs import register
from tracelens.analysis.result import Analysis


class Documented(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


def render_json(result: Documented, indent: int | None = 2) -> str:
    return json.dumps(result.to_dict(), indent=indent, ensure_ascii=False)


register(Analysis, "json", render_json)
register(Diff, "json", render_json)

__all__ = ["Documented", "render_json"]
