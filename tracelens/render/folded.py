"""CPU stacks in flamegraph.pl's collapsed format (``--flamegraph-out``): one
``frame;frame;frame COUNT`` line per stack, COUNT in microseconds, for flamegraph.pl, speedscope
or Pyroscope; read from ``CpuHotspots`` (``docs/analysis-json.md``, "cpu_hotspots")."""

from __future__ import annotations

from collections import defaultdict
from typing import Final

from tracelens.analysis.hotspots import CpuHotspots, Stack

_LINE_BREAKS: Final = str.maketrans({"\n": "_", "\r": "_", "\x0b": "_", "\x0c": "_"})


def folded_text(stacks: tuple[tuple[Stack, float], ...]) -> str:
    """flamegraph.pl's collapsed format: ``frame;frame;frame COUNT`` lines, sorted, COUNT a
    positive integer (microseconds); a line break inside a frame becomes ``_``."""
    merged: dict[str, int] = defaultdict(int)
    for stack, ms in stacks:
        merged[";".join(stack).translate(_LINE_BREAKS)] += round(ms * 1000)
    return "".join(f"{k} {us}\n" for k, us in sorted(merged.items()) if us > 0)


def folded(hotspots: CpuHotspots, off_path: bool = False) -> str:
    """flamegraph.pl's collapsed format, one ``frame;frame;frame COUNT`` line per stack,
    COUNT in microseconds (integers, as the format wants); critical path by default."""
    side = hotspots.off_path if off_path else hotspots.critical_path
    return folded_text(side.stacks)


def write_folded(hotspots: CpuHotspots, path: str, off_path: bool = False) -> int:
    """Writes ``folded(hotspots)`` to ``path`` (UTF-8); returns the number of stacks."""
    text = folded(hotspots, off_path)
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write(text)
    return text.count("\n")


__all__ = ["folded", "folded_text", "write_folded"]
