"""Number and time formatting for reports: short, human, and byte-for-byte deterministic.

The committed sample report is checked to be current by regenerating it, so every figure goes
through these functions (fixed precision, no locale, no clock).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone


def ms(value: float | None) -> str:
    """A duration in milliseconds, in the unit a reader would say it in: 0.42 ms, 812 ms, 2.14 s."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    v = float(value)
    a = abs(v)
    if a < 1:
        return f"{v:.2f} ms"
    if a < 10:
        return f"{v:.1f} ms" if a < 9.95 else f"{v:.0f} ms"
    if a < 1000:
        return f"{v:.0f} ms" if a >= 99.5 else f"{v:.1f} ms"
    if a < 60_000:
        return f"{v / 1000:.2f} s" if a < 9995 else f"{v / 1000:.1f} s"
    if a < 3_600_000:
        return f"{v / 60_000:.1f} min"
    return f"{v / 3_600_000:.1f} h"


def tick(value: float) -> str:
    """An axis label: like ``ms`` but without trailing zeros ("1 s", "250 ms", "0")."""
    if value == 0:
        return "0"
    number, _, unit = ms(value).partition(" ")
    if "." in number:
        number = number.rstrip("0").rstrip(".")
    return f"{number} {unit}"


def pct(value: float | None, digits: int = 0) -> str:
    """A share (0..1) as a percentage; tiny non-zero shares say "<1%" rather than "0%"."""
    if value is None or math.isnan(value):
        return "–"
    p = float(value) * 100
    if 0 < p < 0.5 and digits == 0:
        return "<1%"
    return f"{p:.{digits}f}%"


def delta(value: float | None) -> str:
    """A relative change (0.12 -> "+12%")."""
    if value is None or math.isnan(value) or math.isinf(value):
        return "–"
    p = float(value) * 100
    if abs(p) < 0.5:
        return "±0%"
    return f"{p:+.0f}%"


def num(value: float | int | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def count(value: int | float | None, noun: str) -> str:
    """``1 trace``, ``2,000 traces``."""
    if value is None:
        return f"– {noun}s"
    return f"{num(value)} {noun}{'' if value == 1 else 's'}"


def utc(ns: int | None, with_time: bool = True) -> str:
    """A timestamp from the data (never the clock), in UTC."""
    if ns is None:
        return "–"
    dt = datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M UTC") if with_time else dt.strftime("%Y-%m-%d")


def coord(value: float) -> str:
    """A chart coordinate or CSS percentage: two decimals, no "-0"."""
    out = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if out in ("-0", "") else out


def short_id(value: str, n: int = 8) -> str:
    return value[:n]


FILTERS = {
    "ms": ms,
    "tick": tick,
    "pct": pct,
    "delta": delta,
    "num": num,
    "count": count,
    "utc": utc,
    "coord": coord,
    "short_id": short_id,
}
