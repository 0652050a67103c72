"""Gzip and zlib data inflated in time linear in its size, whatever its member layout.

Several gzip members (or zlib streams) one after another are one body (RFC 1952, 2.2).  zlib's
``decompressobj`` hands back what follows a member's end as ``unused_data``, a *copy* of all the
input it was given past that end.  Given the whole body, every member copies the rest of it: a
body of n empty members (20 bytes each) costs O(n^2) (4 MB of them took 25 s in the collector,
issue 27), and ``gzip.GzipFile``, which feeds 128 KiB at a time, still copies up to 128 KiB per
20-byte member.  Here each member is fed through a window that starts at ``FIRST_WINDOW`` bytes
and doubles while the member goes on, so what a call can copy is at most twice what the member
has consumed (plus ``FIRST_WINDOW``): linear in the input.  The input is never copied otherwise
(``memoryview`` slices).

``Members`` is the stream form (files: ``open_gzip``), ``inflate`` the in-memory form with a limit
on the output (the collector's request bodies); both share one loop.  The collector relies on this
module for ``Content-Encoding: gzip`` and ``deflate``.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from typing import IO, Any, Final

GZIP: Final = 16 + zlib.MAX_WBITS
"""``wbits`` for gzip members (header and CRC trailer checked)."""
ZLIB: Final = zlib.MAX_WBITS
"""``wbits`` for zlib streams (HTTP's ``deflate``)."""

FIRST_WINDOW: Final = 64
"""Input bytes given to zlib in a member's first call: a little over an empty gzip member."""
MAX_WINDOW: Final = 1 << 20
"""The window stops doubling here (a call copies at most this much)."""
READ_SIZE: Final = 1 << 20
"""Bytes read from a source stream at a time."""


class Truncated(Exception):
    """The input ends inside a member."""


class TooLarge(Exception):
    """The output would pass the limit given to ``inflate``."""


class Members(io.RawIOBase):
    """The inflated bytes of every member read from ``read`` (a stream's ``read``: it returns
    up to ``n`` bytes, empty at the end), as a raw stream.  ``readinto`` raises ``Truncated`` when
    the input ends inside a member and ``zlib.error`` on bad data (a member that is not gzip or
    zlib, trailing garbage included).  ``fed`` counts the input bytes handed to zlib: the work,
    which stays within a few times the input's size."""

    def __init__(self, read: Callable[[int], Any], wbits: int) -> None:
        self._read = read
        self._wbits = wbits
        self._buffer = memoryview(b"")
        self._at = 0
        self._inflater: Any = None  # zlib's Decompress of the member being read, if any
        self._window = FIRST_WINDOW
        self.fed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self.chunk(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def chunk(self, most: int) -> bytes:
        """Up to ``most`` (> 0) inflated bytes; empty at the end of the last member."""
        while True:
            if self._at >= len(self._buffer):
                self._buffer = memoryview(self._read(READ_SIZE))
                self._at = 0
            piece = self._buffer[self._at : self._at + self._window]
            if not piece:  # the input is spent
                if self._inflater is None:
                    return b""
                out: bytes = self._inflater.decompress(b"", most)  # output zlib still holds
                if out:
                    return out
                raise Truncated
            if self._inflater is None:
                self._inflater = zlib.decompressobj(self._wbits)
            self.fed += len(piece)
            out = self._inflater.decompress(piece, most)
            ended = self._inflater.eof
            left = len(self._inflater.unused_data if ended else self._inflater.unconsumed_tail)
            self._at += len(piece) - left
            if not out and not ended and left == len(piece):
                raise Truncated  # no progress (zlib always makes some on good data)
            if ended:
                self._inflater = None
                self._window = FIRST_WINDOW
            elif not left and self._window < MAX_WINDOW:
                self._window *= 2  # the member goes on: take more of it at once
            if out:
                return out


class _View:
    """``bytes`` in memory as a source for ``Members``: the whole of it at once, not copied."""

    def __init__(self, data: bytes) -> None:
        self._data: memoryview | None = memoryview(data)

    def read(self, _: int) -> memoryview:
        data, self._data = self._data, None
        return memoryview(b"") if data is None else data


def inflate(data: bytes, wbits: int, limit: int) -> bytes:
    """Every member of ``data`` inflated (``wbits``: ``GZIP`` or ``ZLIB``); ``TooLarge`` past
    ``limit`` bytes of output (found after at most one byte more), ``Truncated`` when a member
    ends early, ``zlib.error`` on bad data."""
    members = Members(_View(data).read, wbits)
    parts: list[bytes] = []
    total = 0
    while chunk := members.chunk(min(READ_SIZE, limit - total + 1)):
        total += len(chunk)
        if total > limit:
            raise TooLarge
        parts.append(chunk)
    return b"".join(parts)


def open_gzip(stream: IO[bytes], buffer_size: int = READ_SIZE) -> io.BufferedReader:
    """The inflated content of a gzip stream (one member or many), buffered for ``peek`` and
    ``readline``."""
    return io.BufferedReader(Members(stream.read, GZIP), buffer_size)
