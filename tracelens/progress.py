"""Progress on stderr for loads and analyses that take long enough to wonder about.

A bar is drawn only when the stream is a terminal: piped or redirected output, CI logs and tests
stay clean without every caller checking.  Work that reports no progress of its own (one big
store read, one analysis call) still gets a live elapsed-time counter from a ticker thread, so a
30-second analysis does not look like a hang.  Set ``TRACELENS_PROGRESS=0`` to switch bars off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import IO, TypeVar

T = TypeVar("T")

_WIDTH = 24
_TICK_S = 0.2


def stream_is_tty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def progress_enabled(stream: IO[str] | None = None) -> bool:
    """Bars go to terminals only, and only unless ``TRACELENS_PROGRESS=0``."""
    if os.environ.get("TRACELENS_PROGRESS", "").strip() in ("0", "false", "no", "off"):
        return False
    return stream_is_tty(stream if stream is not None else sys.stderr)


class Progress:
    """One redrawn status line: ``label [#####.....] 3/10  4.2s``.

    ``total`` may be unknown (``None``): then only the label, the count and the elapsed time
    show.  All methods are no-ops when disabled, so callers never branch on it.
    """

    def __init__(
        self,
        total: int | None = None,
        label: str = "",
        *,
        stream: IO[str] | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self.total = total
        self.label = label
        self.done = 0
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._last_len = 0
        if self.enabled:
            self._draw()
            self._ticker = threading.Thread(target=self._tick, name="tracelens-progress")
            self._ticker.daemon = True
            self._ticker.start()

    def advance(self, n: int = 1, *, label: str | None = None) -> None:
        with self._lock:
            self.done += n
            if label is not None:
                self.label = label
        self._draw()

    def step(self, label: str) -> None:
        """Start the next phase of a job that was given its phases as ``total``."""
        with self._lock:
            if self.label and self.total is not None and self.done < self.total:
                self.done += 1
            self.label = label
        self._draw()

    def set_label(self, label: str) -> None:
        with self._lock:
            self.label = label
        self._draw()

    def close(self) -> None:
        """Stop the ticker and wipe the line, leaving the terminal as it was."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        if self.enabled:
            with self._lock:
                self._write("\r" + " " * self._last_len + "\r")
            self.enabled = False

    def line(self) -> str:
        elapsed = time.monotonic() - self._t0
        parts = [self.label] if self.label else []
        if self.total:
            frac = min(max(self.done / self.total, 0.0), 1.0)
            filled = round(frac * _WIDTH)
            parts.append(f"[{'#' * filled}{'.' * (_WIDTH - filled)}] {self.done}/{self.total}")
        elif self.done:
            parts.append(f"{self.done:,}")
        parts.append(f"{elapsed:.1f}s")
        return "  ".join(parts)

    def _draw(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            text = self.line()
            pad = max(self._last_len - len(text), 0)
            self._write("\r" + text + " " * pad)
            self._last_len = len(text)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing, keep working
            self.enabled = False

    def _tick(self) -> None:
        while not self._stop.wait(_TICK_S):
            self._draw()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def progress(
    total: int | None = None,
    label: str = "",
    *,
    stream: IO[str] | None = None,
    enabled: bool | None = None,
) -> Progress:
    return Progress(total, label, stream=stream, enabled=enabled)


def track(
    items: Iterable[T],
    label: str = "",
    *,
    total: int | None = None,
    stream: IO[str] | None = None,
    enabled: bool | None = None,
) -> Iterator[T]:
    """Yield ``items``, advancing a bar after each one."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(total, label, stream=stream, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.advance()


__all__ = ["Progress", "progress", "progress_enabled", "stream_is_tty", "track"]
