"""The collector's journal: acknowledged requests, durable on disk, not yet merged into DuckDB.

DuckDB's cost per row falls by half when a transaction holds a full row group (122,880 rows: it is
then written straight to the data file instead of through its WAL), but OTLP clients wait for their
answer, so only the few requests in flight could ever share one transaction.  The journal splits the
two: each group of requests is appended here (the request bodies as received, after
decompression: the most compact form, copied without re-encoding) and fsynced, then answered; the
merger moves the already decoded spans into the store in large transactions a moment later.

Records are ``kind (1 byte) + length (4 bytes, little-endian) + body``.  A segment is complete up to
its last fsync; a torn tail (power loss) was never acknowledged and is dropped on replay.  Replay
decodes the bodies again and re-appends them; the store's primary key turns the part that had
already been merged into no-ops.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

SUFFIX: Final = ".otlp"
PROTOBUF: Final = 0
JSON: Final = 1
_HEADER: Final = struct.Struct("<BI")


def journal_dir(db: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(db)}.collector-journal")


class Journal:
    """Appends to numbered segments in ``journal_dir(db)``; one writer thread at a time."""

    def __init__(self, db: str) -> None:
        self.dir = journal_dir(db)
        self.dir.mkdir(parents=True, exist_ok=True)
        existing = [int(p.stem) for p in segments(db)]
        self._next = max(existing, default=0) + 1
        self._file: BinaryIO | None = None
        self._path: Path | None = None

    def append(self, records: list[tuple[int, bytes]]) -> None:
        """Write and fsync: when this returns, the requests survive a crash of the process."""
        if self._file is None:
            self._path = self.dir / f"{self._next:012d}{SUFFIX}"
            self._next += 1
            self._file = open(self._path, "ab", buffering=0)  # noqa: SIM115 - closed in rotate
        for kind, body in records:
            self._file.write(_HEADER.pack(kind, len(body)) + body)
        os.fsync(self._file.fileno())

    def rotate(self) -> Path | None:
        """Close the current segment (the next append starts a new one); returns its path."""
        path = self._path
        if self._file is not None:
            self._file.close()
        self._file, self._path = None, None
        return path

    def close(self) -> None:
        self.rotate()


def segments(db: str | os.PathLike[str]) -> list[Path]:
    folder = journal_dir(db)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == SUFFIX and p.stem.isdigit())


def read_segment(path: Path) -> Iterator[tuple[int, bytes]]:
    """The complete records of a segment (a torn tail is left out)."""
    data = path.read_bytes()
    at = 0
    while at + _HEADER.size <= len(data):
        kind, length = _HEADER.unpack_from(data, at)
        start = at + _HEADER.size
        if start + length > len(data):
            return
        yield kind, data[start : start + length]
        at = start + length


def remove(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
