"""The time windows a comparison reads (``tracelens diff --since 24h``): instants as ns since the
epoch, from an ISO 8601 instant or a duration ago, and a window as a person reads it.

Pure: ``now_ns`` is given, so the same text always gives the same window.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from tracelens.errors import OptionError

Window = tuple[int | None, int | None]  # [start, end) in ns since the epoch; None: open

_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_instant(option: str, text: str | None, now_ns: int) -> int | None:
    """``text`` as ns since the epoch: an ISO 8601 instant (UTC unless it gives an offset), or a
    duration before ``now_ns`` (``90s``, ``30m``, ``24h``, ``7d``, ``2w``); ``OptionError``
    names ``option`` when it is neither."""
    if text is None:
        return None
    s = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", s)
    if m:
        return now_ns - int(float(m[1]) * _UNIT_S[m[2]] * 10**9)
    try:
        when = datetime.fromisoformat(s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s)
    except ValueError:
        raise OptionError(
            f"{option}: {text!r} is neither an ISO 8601 instant (2026-03-01T12:00Z) nor a "
            "duration ago (30m, 24h, 7d)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp()) * 10**9 + when.microsecond * 1000


def parse_window(
    options: tuple[str, str], texts: tuple[str | None, str | None], now_ns: int
) -> Window:
    """The window between two instants (``options`` name them, e.g. ``--since``/``--until``);
    ``OptionError`` when it ends before it starts."""
    lo = parse_instant(options[0], texts[0], now_ns)
    hi = parse_instant(options[1], texts[1], now_ns)
    if lo is not None and hi is not None and lo >= hi:
        raise OptionError(f"{options[0]}/{options[1]}: the window ends before it starts")
    return lo, hi


def describe_window(window: Window) -> str:
    """``[2026-03-01 12:00:00, …)``: UTC, an open end as an ellipsis."""

    def at(ns: int | None) -> str:
        if ns is None:
            return "…"
        return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")

    return f"[{at(window[0])}, {at(window[1])})"


__all__ = ["Window", "describe_window", "parse_instant", "parse_window"]
