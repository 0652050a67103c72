"""The memory budget of an embedded analysis: the one rule that refuses a read too large for it.

The embedded engine holds every span of the analysis at once (the span table, its Polars copy
with the per-span results, the critical-path sections, the tree), so its peak grows with the
span count.  Rather than let a large store exhaust the machine (3.07M spans once took 15.3 GB),
``analyze`` estimates its peak from the span count before it reads the store, and again once
files are loaded, and refuses with ``BudgetError`` when the estimate exceeds the budget.

Attributes are counted too (spans with eight attributes measured about 65 bytes an attribute more
than spans with one). The figures are measured (``python bench/analyze_memory.py``; README,
"Hostile input and limits"): peak RSS of ``tracelens analyze --db`` on agent-shaped traces
(bench/synth.py, 50 spans a trace) was 813 and 920 MiB for 300k spans, 1,900 and 2,424 MiB for 1M
(text; JSON of every trace): 1.6 and 2.25 KB a span over about 300 MiB. The estimate uses the
larger, rounded up (``FIXED_MIB`` + ``BYTES_PER_SPAN`` a span + ``BYTES_PER_ATTRIBUTE`` an
attribute), so a run the budget admits stays under it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa

from tracelens.errors import BudgetError

BYTES_PER_SPAN = 2_400  # the JSON of every trace measured 2.25 KB a span, the text 1.6 KB
BYTES_PER_ATTRIBUTE = 100  # 8 attributes a span measured ~65 bytes each (text, 1M spans)
FIXED_MIB = 384  # the interpreter, its libraries and the output's fixed part (~300 measured)
MIB = 1 << 20


@dataclass(frozen=True)
class Estimate:
    """What analysing ``spans`` spans is expected to need, against the budget."""

    spans: int
    attributes: int
    need_mb: int
    budget_mb: int

    @property
    def fits(self) -> bool:
        return self.need_mb <= self.budget_mb


def default_memory_mb() -> int:
    """Half the memory of the machine (or of the container's cgroup limit, when lower)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            limit = fh.read().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return max(1, total // 2 // MIB)


def estimate(spans: int, attributes: int = 0, memory_mb: int | None = None) -> Estimate:
    """The estimated peak of analysing ``spans`` spans carrying ``attributes`` attributes in
    all, against ``memory_mb`` (default ``default_memory_mb()``)."""
    need = FIXED_MIB + -(-(spans * BYTES_PER_SPAN + attributes * BYTES_PER_ATTRIBUTE) // MIB)
    budget = default_memory_mb() if memory_mb is None else memory_mb
    return Estimate(spans, attributes, need, budget)


def table_counts(spans: pa.Table) -> tuple[int, int]:
    """The spans of a loaded span table and the attributes they carry (``check``'s counts)."""
    if "attributes" not in spans.column_names:
        return spans.num_rows, 0
    column = spans.column("attributes")
    attributes = sum(c.offsets[-1].as_py() - c.offsets[0].as_py() for c in column.chunks if len(c))
    return spans.num_rows, attributes


def check(counts: tuple[int, int], memory_mb: int | None, source: str, narrow: str = "") -> None:
    """Refuse (``BudgetError``) to analyse ``counts`` (spans, attributes) of ``source`` over the
    budget; the message names the budget, the estimate, the option that raises it and, in
    ``narrow``, how to read fewer spans."""
    est = estimate(*counts, memory_mb=memory_mb)
    if est.fits:
        return
    how = f"; or read fewer spans ({narrow})" if narrow else ""
    what = f"{est.spans:,} span{'' if est.spans == 1 else 's'} ({est.attributes:,} attributes)"
    raise BudgetError(
        f"{source}: {what} would need about {est.need_mb:,} MiB to analyse "
        f"({FIXED_MIB} MiB + {BYTES_PER_SPAN:,} bytes a span + {BYTES_PER_ATTRIBUTE} an "
        f"attribute), over the memory budget of {est.budget_mb:,} MiB; raise it with "
        f"--memory-mb (memory_mb in the library){how}"
    )
