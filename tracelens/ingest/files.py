"""Reading files and byte strings: gzip, JSON vs JSON Lines vs protobuf, errors with places.

A source is read once, as a stream.  The first non-blank line decides: if it is a whole JSON
value and more lines follow, the source is JSON Lines (the OpenTelemetry Collector's file exporter
writes one ExportTraceServiceRequest per line) and is decoded line by line, so a file of any size
needs memory for one line plus the Arrow table.  Otherwise the rest is read and parsed as one
document, or, when it is not JSON, handed to the OTLP protobuf decoder.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from tracelens.errors import InputError
from tracelens.ingest import detect, jaeger, otlp_json
from tracelens.ingest._common import (
    FieldError,
    LongNumberError,
    SpanBatch,
    json_cost,
    loads,
    max_json_cost,
)
from tracelens.ingest.inflate import Truncated, open_gzip

Decoder = Callable[[Any, SpanBatch, list[str]], None]

MAX_DOCUMENT_MB: Final = 256
"""Default cap on what is held at once: one JSON document, one JSON Lines line or one protobuf
message, after decompression.  A gzip bomb or a file of one endless line is refused with its
place once the cap is passed, never read whole first; a JSON Lines file may be of any size.
``TRACELENS_MAX_DOCUMENT_MB`` changes it."""


PARSE_FACTOR: Final = 16
"""A document is parsed only if ``json_cost`` estimates its Python objects at no more than this
many times the document cap (4 GiB by default): JSON builds 20-40x its size in objects, so a
256 MiB document of ``{},`` would otherwise take 9 GB.  Legitimate OTLP/JSON passes up to
about 180 MiB."""


BLANK_KEPT: Final = 4096
"""Blank bytes before the first line that are kept in case the file is protobuf, not JSON
(``_Reader._skip_blank``); past them, a file that is not JSON is refused."""

_NOT_BLANK: Final = re.compile(rb"[^ \t\n\r\x0b\x0c]")  # what bytes.strip() keeps

READ_BUFFER: Final = 1 << 20
"""Bytes read from a file at once: JSON Lines records of the Collector's file exporter run to
hundreds of KiB, which the default 8 KiB buffer reads in many small pieces."""


def max_document_bytes() -> int:
    """The cap in bytes (``TRACELENS_MAX_DOCUMENT_MB`` or ``MAX_DOCUMENT_MB``)."""
    try:
        megabytes = float(os.environ.get("TRACELENS_MAX_DOCUMENT_MB", "") or MAX_DOCUMENT_MB)
    except ValueError:
        megabytes = MAX_DOCUMENT_MB
    return max(1, int(megabytes * (1 << 20)))


DECODERS: Final[dict[str, Decoder]] = {
    name: module.decode for name, module in detect.JSON_CODECS.items()
}


def read_path(
    path: str | os.PathLike[str],
    input_format: str | None,
    warnings: list[str],
    sink: Callable[[pa.Table], None] | None = None,
) -> pa.Table:
    """Spans of one file; problems with the file raise ``InputError`` naming it.  With a
    ``sink``, chunks of spans go to it as they are decoded and the table returned is empty."""
    source = os.fspath(path)
    try:
        raw = open(source, "rb", buffering=READ_BUFFER)  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise InputError(source, "no such file") from None
    except IsADirectoryError:
        raise InputError(source, "is a directory, not a trace file") from None
    except OSError as exc:
        raise InputError(source, f"cannot open: {exc.strerror or exc}") from None
    with raw:
        return read_stream(raw, source, input_format, warnings, sink)


def read_stream(
    stream: IO[bytes],
    source: str,
    input_format: str | None,
    warnings: list[str],
    sink: Callable[[pa.Table], None] | None = None,
) -> pa.Table:
    """Spans of one source given as a binary stream (gzip-compressed or not); ``sink`` as for
    ``read_path``."""
    detect.check_format(input_format)
    buffered = (
        stream
        if isinstance(stream, io.BufferedReader)
        else io.BufferedReader(_Raw(stream), READ_BUFFER)
    )
    odd = _OddIds(sink)
    reader = _Reader(source, input_format, warnings, None if sink is None else odd.put)
    try:
        with gc_paused():
            if detect.is_gzip(buffered.peek(detect.GZIP_HEAD)):
                with open_gzip(buffered) as unzipped:
                    table = reader.read(unzipped)
            else:
                table = reader.read(buffered)
    except zlib.error as exc:
        raise InputError(source, f"corrupt gzip data ({exc})") from None
    except Truncated:
        raise InputError(source, "truncated gzip data (the file ends inside a member)") from None
    except OSError as exc:
        raise InputError(source, f"cannot read: {exc}") from None
    if sink is not None and table.num_rows:  # a protobuf file: one table
        odd.put(table)
        table = table.slice(0, 0)
    odd.count(table)
    warnings.extend(odd.warnings(source))
    return table


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while decoding.

    Decoding allocates millions of small acyclic containers; each allocation burst triggers a
    collection that walks every live object, the growing span columns included, which made
    imports about twice as slow.  Nothing decoded here forms a cycle, so pausing loses nothing.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Reader:
    """Decodes one source; keeps the warnings and the batch the decoders append to."""

    def __init__(
        self,
        source: str,
        input_format: str | None,
        warnings: list[str],
        sink: Callable[[pa.Table], None] | None,
    ) -> None:
        self.cap = max_document_bytes()
        self.source = source
        self.input_format = input_format
        self.batch = SpanBatch(sink=sink)
        self._doc_warnings: list[str] = []
        self._warnings = warnings
        # Readers straight from a document's bytes (``decode_bytes``) for the formats asked for.
        self._direct = [
            module.decode_bytes
            for name, module in ((detect.OTLP_JSON, otlp_json), (detect.JAEGER, jaeger))
            if input_format in (None, name)
        ]

    def read(self, stream: io.BufferedReader) -> pa.Table:
        if self.input_format in detect.BINARY_FORMATS:
            data = self._rest(stream, 0)
            return _binary(self.input_format, data, self.source, tried_json=False)
        prefix = bytearray()
        lineno = self._skip_blank(stream, prefix)
        first = self._line(stream, lineno + 1, len(prefix))
        if not first:
            raise InputError(self.source, "empty file: no spans")
        lineno += 1
        held = len(prefix) + len(first)
        if not detect.starts_json(first):
            if len(prefix) > BLANK_KEPT:
                raise InputError(
                    self.source,
                    f"unrecognised format: not JSON, after {len(prefix)} bytes of blank lines",
                )
            return self._binary(bytes(prefix) + first + self._rest(stream, held))
        self._parse_cap(first, lineno)
        doc = _try_json(first)
        if doc is _NOT_JSON:
            data = first + self._rest(stream, len(first))  # what was blank is left out
            self._parse_cap(data, None)
            self.batch.document(len(data))
            if not self._read_direct(data):
                self._document(self._parse(data, lineno - 1), line=None)
        else:
            self.batch.document(len(first))
            self._document(doc, line=lineno)
            del doc
            self._lines(stream, lineno)
        self._flush_warnings()
        return self.batch.finish()

    def _skip_blank(self, stream: io.BufferedReader, kept: bytearray | None = None) -> int:
        """Skip the blank lines at the stream's position, a buffer at a time (never a line at a
        time: a file of a billion newlines costs what reading it costs); the number of lines
        skipped.  The first ``BLANK_KEPT`` + 1 bytes skipped are added to ``kept``: a protobuf
        message may begin with bytes that read as blank (``\\n`` and a length of 9-13 or 32)."""
        lines = 0
        while buffered := stream.peek(1):
            found = _NOT_BLANK.search(buffered)
            if found is None:  # blank to the end of what is buffered
                end = buffered.rfind(b"\n") + 1 or len(buffered)
            else:  # up to the line that is not blank
                end = buffered.rfind(b"\n", 0, found.start()) + 1
            if end == 0:
                break
            lines += buffered.count(b"\n", 0, end)
            skipped = stream.read(end)
            if kept is not None and len(kept) <= BLANK_KEPT:
                kept += skipped[: BLANK_KEPT + 1 - len(kept)]
            if found is not None:
                break
        return lines

    def _line(self, stream: io.BufferedIOBase, lineno: int, held: int = 0) -> bytes:
        """The next line, read no further than the cap (``held`` bytes are held already)."""
        room = self.cap - held
        line = stream.readline(room + 1)
        if len(line) > room:
            raise InputError(self.source, self._over_cap("a line"), line=lineno)
        return line

    def _rest(self, stream: io.BufferedIOBase, held: int) -> bytes:
        """The rest of the stream, read no further than the cap."""
        room = self.cap - held
        data = stream.read(room + 1)
        if len(data) > room:
            raise InputError(self.source, self._over_cap("the document"))
        return data

    def _parse_cap(self, data: bytes, line: int | None) -> None:
        """``InputError`` when parsing ``data`` would build too much (``PARSE_FACTOR``)."""
        if max_json_cost(len(data)) <= PARSE_FACTOR * self.cap:
            return  # cannot be too much: counting would cost a pass over the bytes
        cost = json_cost(data)
        if cost > PARSE_FACTOR * self.cap:
            raise InputError(
                self.source,
                f"parsing this JSON would take about {cost >> 20} MiB of memory, more than "
                f"{PARSE_FACTOR * self.cap >> 20} MiB; split the file, or raise "
                "TRACELENS_MAX_DOCUMENT_MB",
                line=line,
            )

    def _over_cap(self, what: str) -> str:
        return (
            f"{what} is larger than {self.cap >> 20} MiB (after decompression), more than is "
            "read at once; split the file, or raise TRACELENS_MAX_DOCUMENT_MB"
        )

    def _lines(self, stream: io.BufferedReader, lineno: int) -> None:
        while True:
            lineno += self._skip_blank(stream)
            line = self._line(stream, lineno + 1)
            if not line:
                return
            lineno += 1
            if line.isspace():  # blank, and begun beyond what the buffer held
                continue
            self._parse_cap(line, lineno)
            if self._direct:  # read straight from the bytes where it can be: no parse
                self.batch.document(len(line))
                if self._read_direct(line):
                    continue
            try:
                doc = loads(line)
            except LongNumberError as exc:
                raise _long_number(self.source, exc, lineno) from None
            except json.JSONDecodeError as exc:
                raise InputError(
                    self.source,
                    f"invalid JSON Lines record: {exc.msg} (column {exc.colno})",
                    line=lineno,
                ) from None
            except UnicodeDecodeError as exc:
                raise InputError(
                    self.source, f"not UTF-8 text ({exc.reason})", line=lineno
                ) from None
            self.batch.document(len(line))
            self._document(doc, line=lineno)
            del doc  # freed before the next record is parsed: its memory is reused while warm

    def _read_direct(self, data: bytes) -> bool:
        return any(decode_bytes(data, self.batch) for decode_bytes in self._direct)

    def _parse(self, data: bytes, skipped: int = 0) -> Any:
        """``data`` parsed as JSON; ``skipped`` blank lines came before it (for error lines)."""
        try:
            return loads(data)
        except LongNumberError as exc:
            raise _long_number(self.source, exc, None) from None
        except json.JSONDecodeError as exc:
            binary = detect.binary_format(data) if self.input_format is None else None
            if binary is not None:
                try:
                    return _ProtoTable(_binary(binary, data, self.source, tried_json=True))
                except InputError:
                    pass
            raise InputError(
                self.source,
                f"invalid JSON: {exc.msg} (column {exc.colno})",
                line=exc.lineno + skipped,
            ) from None
        except UnicodeDecodeError as exc:
            raise InputError(self.source, f"not UTF-8 text ({exc.reason})") from None
        except RecursionError:
            raise InputError(self.source, "JSON nested too deeply") from None

    def _document(self, doc: Any, *, line: int | None) -> None:
        if isinstance(doc, _ProtoTable):
            self.batch.extend(doc.table)
            return
        fmt = self.input_format or detect.json_format(doc)
        if fmt is None:
            raise InputError(
                self.source,
                f"unrecognised format: {detect.describe(doc)}; {detect.TRIED}",
                line=line,
            )
        try:
            DECODERS[fmt](doc, self.batch, self._doc_warnings)
        except FieldError as exc:
            raise InputError(self.source, exc.message, line=line, field=exc.field or None) from None
        except RecursionError:
            raise InputError(self.source, "attribute values nested too deeply", line=line) from None

    def _binary(self, data: bytes) -> pa.Table:
        if self.input_format in detect.JSON_FORMATS:
            raise InputError(self.source, f"not JSON, but {self.input_format} is a JSON format")
        binary = detect.binary_format(data)
        if binary is None:
            first = data.lstrip()[:1].hex() or "nothing"
            raise InputError(
                self.source, f"unrecognised format: not JSON (first byte 0x{first}); {detect.TRIED}"
            )
        return _binary(binary, data, self.source, tried_json=True)

    def _flush_warnings(self) -> None:
        seen: set[str] = set()
        for warning in self._doc_warnings:
            if warning not in seen:
                seen.add(warning)
                self._warnings.append(f"{self.source}: {warning}")


class _Raw(io.RawIOBase):
    """Any binary stream as the raw stream ``io.BufferedReader`` wants (for ``peek``)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _NotJson:
    pass


_NOT_JSON: Final = _NotJson()


class _ProtoTable:
    """A protobuf payload that turned up where JSON was expected (it began with ``\\n{``)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table


def _long_number(source: str, exc: LongNumberError, line: int | None) -> InputError:
    """The error for an integer too long to read, naming its field (and line, in JSON Lines)."""
    return InputError(source, exc.msg, line=line, field=exc.field or None)


def _try_json(line: bytes) -> Any:
    try:
        return loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError
        return _NOT_JSON


def _binary(name: str, data: bytes, source: str, *, tried_json: bool) -> pa.Table:
    """``data`` decoded as the binary format ``name`` (its module in the formats' table)."""
    label = detect.label(name)
    try:
        table: pa.Table = detect.binary_codec(name).decode_bytes(data, source)
    except InputError as exc:
        if not tried_json:
            raise
        raise InputError(
            source,
            f"not JSON, and not valid as {label} either: {exc.message}",
            line=exc.line,
            field=exc.field,
        ) from None
    except Exception as exc:  # the decoder's own failure on hostile bytes must not escape raw
        raise InputError(source, f"not a valid {label} message ({exc})") from None
    return table


CLOCK_NS: Final = 946_684_800 * 10**9
"""2000-01-01 in ns since the epoch: a later time is a real clock's, beside which a time of 0
(what a missing time reads as) makes no sense.  Times that start at 0 and stay small are a
relative timeline (hand-made traces such as CRISP's) and make sense."""


def _int64(value: int) -> pa.Int64Scalar:
    """An Arrow int64 scalar made from its bytes: ``pa.scalar`` and ``pa.array`` of Python values
    import pandas first (when installed), which took ~0.4 s of every ``tracelens import``."""
    data = pa.py_buffer(struct.pack("<q", value))
    return pa.Array.from_buffers(pa.int64(), 1, [None, data])[0]


_ZERO: Final = _int64(0)
_CLOCK: Final = _int64(CLOCK_NS)


class _OddIds:
    """Counts spans whose ids are not 32/16 lower-case hex and spans whose zero time makes no
    sense (one warning each per file), passing chunks on to ``sink``."""

    def __init__(self, sink: Callable[[pa.Table], None] | None) -> None:
        self.odd = 0
        self.zero_times = 0
        self._sink = sink

    def count(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        good_trace = pc.match_substring_regex(table["trace_id"], "^[0-9a-f]{32}$")
        good_span = pc.match_substring_regex(table["span_id"], "^[0-9a-f]{16}$")
        self.odd += table.num_rows - pc.sum(pc.and_(good_trace, good_span)).as_py()
        start, end = table["start_ns"], table["end_ns"]
        start_zero = pc.and_(
            pc.equal(start, _ZERO), pc.or_(pc.equal(end, _ZERO), pc.greater(end, _CLOCK))
        )
        zero = pc.or_(start_zero, pc.and_(pc.equal(end, _ZERO), pc.greater(start, _ZERO)))
        self.zero_times += pc.sum(zero).as_py() or 0

    def put(self, table: pa.Table) -> None:
        self.count(table)
        if self._sink is not None:
            self._sink(table)

    def warnings(self, source: str) -> list[str]:
        found = []
        if self.odd:
            found.append(
                f"{source}: {self.odd} spans have trace or span ids that are not 32/16 lower-case "
                "hex digits (kept as they are)"
            )
        if self.zero_times:
            found.append(
                f"{source}: {self.zero_times} spans have a start or end time of 0 beside a "
                "time of a real clock, or no times at all (a missing time reads as 0, "
                "1970-01-01): their durations and places in time mean nothing"
            )
        return found
