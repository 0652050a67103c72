"""Trace files of any size to the store with bounded memory: chunks handed on as they decode.

``read_files`` returns one span table, which for a 2 GB JSON Lines file is ~1.7 GB of Arrow.  An
import does not need it whole: ``decode_files`` decodes the files chunk by chunk (``CHUNK_ROWS``
spans) on a thread of its own and hands each chunk on through a queue of ``DEPTH`` while the next
one decodes, so memory holds a few chunks whatever the files' size.  The store appends them in one
transaction that commits only once every file has decoded (``DuckDBStore.append_all``), so a bad
record anywhere still leaves the store as it was.  Decoding holds the GIL and DuckDB's insert
releases it: on two cores the two overlap.  An import larger than ``STREAM_BYTES`` goes through
the on-disk spool of ``spool.py`` instead (a write and a read of every span more).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from tracelens.ingest.detect import GZIP_HEAD, check_format, is_gzip
from tracelens.ingest.files import read_path

DEPTH: Final = 1
"""Decoded chunks waiting for the store, at most: with the one decoding and the one being stored,
three chunks of ``CHUNK_ROWS`` spans are held at once."""

_POLL_S: Final = 0.1  # how often a decoder waiting on a full queue checks it is still wanted


STREAM_BYTES: Final = 256 << 20
"""An import of at most this much input (a gzip file counted ``GZIP_FACTOR`` times its size)
streams into one store transaction.  DuckDB holds a transaction's key index, and caches the rows
it wrote, until it commits (2.2 GB of RSS for a 2 GB file; a memory limit makes the commit fail):
a larger import is spooled to disk first (``spool.py``) and stored a chunk at a time."""

GZIP_FACTOR: Final = 10


def streamable(paths: Sequence[str | os.PathLike[str]]) -> bool:
    """Whether ``paths`` are small enough to stream into one transaction (``STREAM_BYTES``)."""
    total = 0
    for path in paths:
        try:
            with open(path, "rb") as file:
                gzipped = is_gzip(file.read(GZIP_HEAD))
                total += os.fstat(file.fileno()).st_size * (GZIP_FACTOR if gzipped else 1)
        except OSError:
            continue  # the decoder says what is wrong with it
    return total <= STREAM_BYTES


@dataclass
class Decoded:
    """What the chunks handed on so far held: spans, distinct trace ids, the files' warnings
    (and, for an import spooled to disk, its count of distinct traces)."""

    num_rows: int = 0
    trace_ids: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    spooled_traces: int = 0

    @property
    def traces(self) -> int:
        return len(self.trace_ids) + self.spooled_traces


class _Stopped(Exception):
    """The consumer went away (it failed, or stopped early): the decoder ends quietly."""


@dataclass
class _FileRead:
    warnings: list[str]


@dataclass
class _Failed:
    error: BaseException


class _End:
    pass


def decode_files(
    paths: Sequence[str | os.PathLike[str]],
    decoded: Decoded,
    *,
    input_format: str | None = None,
) -> Generator[pa.Table, None, None]:
    """The spans of ``paths``, a chunk at a time, in file order, counted into ``decoded`` as they
    are handed on (a file's warnings once it has been read through).  A bad file raises its
    ``InputError`` here, after the chunks before it: whoever stores them undoes them."""
    check_format(input_format)
    chunks: queue.Queue[pa.Table | _FileRead | _Failed | _End] = queue.Queue(maxsize=DEPTH)
    stop = threading.Event()

    def put(item: pa.Table | _FileRead | _Failed | _End) -> None:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue
        raise _Stopped

    def decode() -> None:
        try:
            for path in paths:
                file_warnings: list[str] = []
                read_path(path, input_format, file_warnings, put)
                put(_FileRead(file_warnings))
            put(_End())
        except _Stopped:
            return
        except BaseException as exc:  # handed to the consumer, raised there
            try:
                put(_Failed(exc))
            except _Stopped:
                return

    decoder = threading.Thread(target=decode, name="tracelens-decode", daemon=True)
    decoder.start()
    try:
        while True:
            item = chunks.get()
            if isinstance(item, _End):
                return
            if isinstance(item, _Failed):
                raise item.error
            if isinstance(item, _FileRead):
                decoded.warnings.extend(item.warnings)
                continue
            decoded.num_rows += item.num_rows
            decoded.trace_ids.update(pc.unique(item["trace_id"]).to_pylist())
            yield item
    finally:
        stop.set()
        decoder.join()
