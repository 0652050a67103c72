"""The collector's journal: acknowledged requests, durable on disk, not yet merged into DuckDB.

DuckDB's cost per row falls by half when a transaction holds a full row group (122,880 rows: it is
then written straight to the data file instead of through its WAL), but OTLP clients wait for their
answer, so only the few requests in flight could ever share one transaction.  The journal splits the
two: each group of requests is appended here (the request bodies as received, after
decompression: the most compact form, copied without re-encoding) and fsynced, then answered; the
merger moves the already decoded spans into the store in large transactions a moment later.

Acknowledged means durable.  ``append`` writes every byte (a short write, which is how a full disk
shows itself on an unbuffered file, is retried until it fails with an error) and fsyncs, or it
raises: the writer then answers 503 / UNAVAILABLE, never 200.  After a failed write the segment is
cut back to its last complete record (``ftruncate``) and closed, so the next group goes to a new
segment; a torn record can never sit in front of a later acknowledged one.

Format.  A segment starts with ``SEGMENT_MAGIC``; each record is ``RECORD_MAGIC (4 bytes) + kind
(1) + length (4, little-endian) + CRC32 of the body (4) + CRC32 of the 9 bytes before it (4) +
body``.  Replay (``read_segment``) keeps every record whose checksums hold; where one does not (a
tail torn by power loss, or a cut that could not be truncated) it searches forward for the next
record marker, so damage never hides a later complete record.  Segments written before this format
(no segment magic; records ``kind (1) + length (4) + body``) are still read; their torn tail is
dropped as before.  Replay decodes the bodies again; the store's primary key turns the part that
had already been merged into no-ops.

Files are created mode 0600 in a 0700 directory, whatever the umask.

Fault injection, for tests on machines where a small filesystem cannot be mounted: the environment
variable ``TRACELENS_JOURNAL_FAULT``, read once when a ``Journal`` is constructed, makes its writes
fail like a full disk.  ``enospc-after:N`` lets N bytes through (the write that crosses N is cut
short there), then every write raises ENOSPC; ``enospc-after:N:K`` fails only K write calls, then
lets writes through again (space came back); ``eio-after:N`` and ``eio-after:N:K`` do the same with
EIO.  Unset (the default), writes go straight to ``os.write``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

SUFFIX: Final = ".otlp"
PROTOBUF: Final = 0
JSON: Final = 1
SEGMENT_MAGIC: Final = b"TLJ2\n"  # old segments start with a kind byte (0 or 1): unambiguous
RECORD_MAGIC: Final = b"\xe2\x9c\x8aR"
FAULT_ENV: Final = "TRACELENS_JOURNAL_FAULT"
_OLD_HEADER: Final = struct.Struct("<BI")
_HEADER: Final = struct.Struct("<4sBIII")  # magic, kind, length, body crc, header crc
_META: Final = struct.Struct("<BII")  # kind, length, body crc: what the header crc covers
_CRC: Final = struct.Struct("<I")
_FILE_MODE: Final = 0o600
_DIR_MODE: Final = 0o700
_PROBE: Final = ".probe"


def journal_dir(db: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(db)}.collector-journal")


class JournalError(OSError):
    """A group could not be made durable; nothing of it counts as written."""


@dataclass
class _Fault:
    """The ``TRACELENS_JOURNAL_FAULT`` seam: fail writes after ``after`` bytes, ``times`` times."""

    code: int
    after: int
    times: int | None  # None: for ever
    written: int = 0

    @classmethod
    def from_env(cls) -> _Fault | None:
        spec = os.environ.get(FAULT_ENV, "").strip()
        if not spec:
            return None
        name, _, rest = spec.partition("-after:")
        codes = {"enospc": errno.ENOSPC, "eio": errno.EIO}
        parts = rest.split(":")
        if name not in codes or not 1 <= len(parts) <= 2 or not all(p.isdigit() for p in parts):
            raise ValueError(
                f"{FAULT_ENV}={spec!r}: expected enospc-after:BYTES[:TIMES] or eio-after:..."
            )
        return cls(codes[name], int(parts[0]), int(parts[1]) if len(parts) == 2 else None)

    def write(self, fd: int, data: memoryview) -> int:
        room = self.after - self.written
        if room <= 0 and self.times != 0:
            if self.times is not None:
                self.times -= 1
            raise OSError(self.code, os.strerror(self.code))
        if room > 0 and self.times != 0:
            data = data[:room]  # the short write a filling disk gives
        done = os.write(fd, data)
        self.written += done
        return done


class Journal:
    """Appends to numbered segments in ``journal_dir(db)``; one writer thread at a time."""

    def __init__(self, db: str) -> None:
        self.dir = journal_dir(db)
        self.dir.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(self.dir, _DIR_MODE)
        existing = [int(p.stem) for p in segments(db)]
        self._next = max(existing, default=0) + 1
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0  # bytes durable in the open segment: where a failed write is cut back to
        self._records = 0  # complete records in the open segment
        self._closed: list[Path] = []  # segments given up after a failure, not yet rotated out
        self._fault = _Fault.from_env()

    def append(self, records: list[tuple[int, bytes]]) -> None:
        """Write and fsync: when this returns, the requests survive a crash of the process.

        Raises ``JournalError`` when any byte could not be written or synced; the segment is then
        cut back to what was durable before, and the next append starts a new segment."""
        data = b"".join(_record(kind, body) for kind, body in records)
        try:
            new = self._fd is None
            if new:
                self._open()
            assert self._fd is not None
            self._write_all(self._fd, data)
            os.fsync(self._fd)
            if new:
                _sync_dir(self.dir)  # the new segment's name survives a crash too
        except OSError as exc:
            self._give_up()
            why = exc.strerror or str(exc)
            raise JournalError(exc.errno, f"cannot write the journal in {self.dir}: {why}") from exc
        self._size += len(data)
        self._records += len(records)

    def rotate(self) -> list[Path]:
        """Close the current segment (the next append starts a new one); returns the segments
        closed since the last rotate, which hold every record appended since then.  A segment
        with no record is removed instead of returned."""
        self._close_current()
        closed, self._closed = self._closed, []
        return closed

    def close(self) -> None:
        """Close the open segment; what it holds is merged by the next start (or ``close``'s
        caller, after merging, removes it)."""
        self._close_current()

    def probe(self) -> None:
        """Raise ``OSError`` unless a small write to the journal's filesystem can be synced now
        (how the writer finds out, without traffic, that space has come back)."""
        path = self.dir / _PROBE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, _FILE_MODE)
        try:
            self._write_all(fd, memoryview(b"\0" * 4096))
            os.fsync(fd)
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()

    def _open(self) -> None:
        path = self.dir / f"{self._next:012d}{SUFFIX}"
        self._next += 1
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, _FILE_MODE)
        self._fd, self._path, self._size, self._records = fd, path, 0, 0
        self._write_all(fd, memoryview(SEGMENT_MAGIC))  # synced with the first records
        self._size = len(SEGMENT_MAGIC)

    def _write_all(self, fd: int, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            done = self._fault.write(fd, view) if self._fault else os.write(fd, view)
            if done <= 0:  # no progress and no error: treat as a full disk
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[done:]

    def _give_up(self) -> None:
        """After a failed write: cut the segment back to its last complete record, close it."""
        if self._fd is None:
            return
        fd, path = self._fd, self._path
        assert path is not None
        try:
            os.ftruncate(fd, self._size)
            os.fsync(fd)
        except OSError:
            pass  # the torn bytes stay; replay resyncs past them (see the module's docstring)
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
            self._forget(path)

    def _close_current(self) -> None:
        if self._fd is None:
            return
        path = self._path
        assert path is not None
        os.close(self._fd)
        self._forget(path)

    def _forget(self, path: Path) -> None:
        """The closed segment is the merger's if it holds a record, else it is removed."""
        self._fd, self._path = None, None
        if self._records:
            self._closed.append(path)
        else:
            _unlink(path)


def _record(kind: int, body: bytes) -> bytes:
    meta = _META.pack(kind, len(body), zlib.crc32(body))
    return RECORD_MAGIC + meta + _CRC.pack(zlib.crc32(meta)) + body


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def segments(db: str | os.PathLike[str]) -> list[Path]:
    folder = journal_dir(db)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == SUFFIX and p.stem.isdigit())


def read_segment(path: Path) -> Iterator[tuple[int, bytes]]:
    """The complete records of a segment: damaged bytes are skipped, never what follows them."""
    data = path.read_bytes()
    if not data.startswith(SEGMENT_MAGIC):
        yield from _read_old(data)
        return
    at = len(SEGMENT_MAGIC)
    end = len(data)
    while at + _HEADER.size <= end:
        record = _record_at(data, at)
        if record is None:  # damaged: resume at the next marker (checksums reject false ones)
            at = data.find(RECORD_MAGIC, at + 1)
            if at < 0:
                return
            continue
        kind, start, length = record
        yield kind, data[start : start + length]
        at = start + length


def _record_at(data: bytes, at: int) -> tuple[int, int, int] | None:
    magic, kind, length, body_crc, head_crc = _HEADER.unpack_from(data, at)
    if magic != RECORD_MAGIC or zlib.crc32(data[at + 4 : at + 4 + _META.size]) != head_crc:
        return None
    start = at + _HEADER.size
    if start + length > len(data) or zlib.crc32(data[start : start + length]) != body_crc:
        return None
    return kind, start, length


def _read_old(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Segments of the first format: no checksums, so the first torn record ends the replay."""
    at = 0
    while at + _OLD_HEADER.size <= len(data):
        kind, length = _OLD_HEADER.unpack_from(data, at)
        start = at + _OLD_HEADER.size
        if start + length > len(data):
            return
        yield kind, data[start : start + length]
        at = start + length


def remove(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
