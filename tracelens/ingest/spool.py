"""Trace files of any size into a store with bounded memory: decoded chunks spooled to disk.

``read_files`` returns one span table, which for a 2 GB JSON Lines file is ~1.7 GB of Arrow.  An
import does not need it whole: ``spool_files`` decodes each file chunk by chunk (``CHUNK_ROWS``
spans) into a temporary Arrow IPC file (LZ4-compressed: resources and scopes repeat on every
span), and ``Spooled.tables`` reads them back one chunk at a time for the store to append.
Nothing of a file is handed on before the whole file has decoded, so a bad record anywhere leaves
the store as it was, as with ``read_files``: the first bad file raises ``InputError`` (unless
``keep_going``: it is listed in ``errors`` and its spool is dropped).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from tracelens.errors import InputError
from tracelens.ingest.detect import check_format
from tracelens.ingest.files import read_path
from tracelens.schema import SPAN_SCHEMA

_CODEC: Final = "lz4" if pa.Codec.is_available("lz4") else None


@dataclass
class Spooled:
    """The spans of the files that could be read, on disk until ``tables`` hands them on."""

    files: list[Path] = field(default_factory=list)
    num_rows: int = 0
    traces: int = 0
    warnings: list[str] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)

    def tables(self) -> Iterator[pa.Table]:
        """The spans, a chunk at a time, in file order."""
        for path in self.files:
            with pa.OSFile(str(path), "rb") as source, ipc.open_stream(source) as reader:
                for chunk in reader:
                    yield pa.Table.from_batches([chunk], schema=SPAN_SCHEMA)


@contextlib.contextmanager
def spool_files(
    paths: Sequence[str | os.PathLike[str]],
    *,
    input_format: str | None = None,
    keep_going: bool = False,
    directory: str | os.PathLike[str] | None = None,
) -> Iterator[Spooled]:
    """Decode ``paths`` into a temporary spool (in ``directory``, else the system's temporary
    directory), removed when the ``with`` block ends.  Errors as ``read_files``."""
    check_format(input_format)
    spooled = Spooled()
    trace_ids: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="tracelens-import-", dir=directory) as tmp:
        for n, path in enumerate(paths):
            target = Path(tmp) / f"{n}.arrows"
            file_warnings: list[str] = []
            try:
                rows, file_traces = _spool_one(path, input_format, file_warnings, target)
            except InputError as exc:
                if not keep_going:
                    raise
                spooled.errors.append(exc)
                continue
            spooled.files.append(target)
            spooled.num_rows += rows
            spooled.warnings.extend(file_warnings)
            trace_ids |= file_traces
        spooled.traces = len(trace_ids)
        yield spooled


def _spool_one(
    path: str | os.PathLike[str], input_format: str | None, warnings: list[str], target: Path
) -> tuple[int, set[str]]:
    """Decode one file into the IPC stream ``target``: its span count and trace ids."""
    rows = 0
    traces: set[str] = set()
    options = ipc.IpcWriteOptions(compression=_CODEC)
    with (
        pa.OSFile(str(target), "wb") as out,
        ipc.new_stream(out, SPAN_SCHEMA, options=options) as writer,
    ):

        def sink(table: pa.Table) -> None:
            nonlocal rows
            rows += table.num_rows
            traces.update(pc.unique(table["trace_id"]).to_pylist())
            for chunk in table.to_batches():
                writer.write_batch(chunk)

        read_path(path, input_format, warnings, sink)
    return rows, traces
