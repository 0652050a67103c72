"""The narrow interface every span store keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pyarrow as pa


class SpanStore(Protocol):
    def append(self, spans: pa.Table) -> int:
        """Add spans; a (trace_id, span_id) already stored is kept once.  Returns rows added."""

    def read(
        self,
        columns: Sequence[str] | None = None,
        *,
        start_ns: int | None = None,
        end_ns: int | None = None,
    ) -> pa.Table:
        """Whole traces (every span of each trace whose root window meets the time range)."""

    def count(self) -> int: ...

    def close(self) -> None: ...
