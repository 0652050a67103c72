"""A small HTTP/1.1 server on asyncio streams, enough for OTLP/HTTP and the read endpoints.

A framework would add little: the collector needs POST with Content-Length or chunked bodies,
``Expect: 100-continue``, keep-alive, and strict limits (header size, body size before reading it,
bytes held by all requests at once, connections, slow clients).  Handling the protocol here keeps
those limits exact and adds no dependency.  Routing and answers live in ``routes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from tracelens.collector.config import CollectorConfig
from tracelens.collector.stats import Stats

log = logging.getLogger("tracelens.collector")

HEADER_LIMIT = 64 * 1024
HEADER_TIMEOUT_S = 10.0  # a whole request head: from connect, and from the head's first byte
IDLE_TIMEOUT_S = 60.0  # between requests of a keep-alive connection
BODY_TIMEOUT_S = 20.0  # head and body, from the first byte, on top of the body's size at the rate
BODY_MIN_RATE = 1 << 20  # bytes/s: a body slower than this (after BODY_TIMEOUT_S) is cut off
TRAILER_TIMEOUT_S = 5.0  # the whole trailer section of a chunked body
TRAILER_LIMIT = 8 * 1024
LINGER_S = 2.0  # after an error answer, how long unread request bytes are read and dropped
LINGER_BYTES = 128 << 20
CONNECTION_SHARE = 4  # one connection holds at most 1/CONNECTION_SHARE of the body budget
PIECE = 1 << 20  # a Content-Length body is read (and charged to the budget) this much at a time
DRAIN_BODY_S = 1.0  # at shutdown, how long a body still arriving may take before it is cut off

_DIGITS = re.compile(r"[0-9]{1,18}")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    version: str
    headers: dict[str, str]
    body: bytes = b""
    started: float = 0.0  # time.monotonic() of its first byte: its deadlines count from it

    @property
    def keep_alive(self) -> bool:
        conn = self.headers.get("connection", "").lower()
        return "close" not in conn if self.version == "HTTP/1.1" else "keep-alive" in conn


@dataclass
class Response:
    status: int
    body: bytes | memoryview = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    close: bool = False
    # A body made while it is sent (chunked): pieces are written as they come, each after the
    # client took the one before, so what is held is one piece, whatever the body's size.
    stream: AsyncIterator[bytes] | None = None

    def head(self, keep_alive: bool) -> bytes:
        reason = HTTPStatus(self.status).phrase
        lines = [f"HTTP/1.1 {self.status} {reason}", f"Content-Type: {self.content_type}"]
        if self.stream is not None:
            lines.append("Transfer-Encoding: chunked")
        else:
            lines.append(f"Content-Length: {len(self.body)}")
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        if self.close or not keep_alive:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send(self, writer: asyncio.StreamWriter, keep_alive: bool) -> None:
        writer.write(self.head(keep_alive))
        if self.body:
            writer.write(self.body)


class HttpError(Exception):
    """Answer ``response`` and close the connection (the body may be unread)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response


class _BadRequest(Exception):
    """A request head that breaks HTTP/1.1 framing (RFC 9112): 400, or 501 for a transfer
    coding the server does not implement."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Budget:
    """Bytes of request bodies held at once, across all connections and both transports.  Used
    from the event loop thread only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        if n and self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n


# (request, expect_body) -> response.  ``expect_body`` is called (and awaited) by the handler when
# it wants the body; the server then checks limits, sends 100 Continue and reads it.
Handler = Callable[[Request, Callable[[], Awaitable[bytes]]], Awaitable[Response]]
Refusal = Callable[[int, str], Response]


class HttpServer:
    """Connections, framing and limits; ``handler`` answers each parsed request.

    Fairness: every wait has a deadline (the head, the body at a minimum rate, the trailers); no
    connection holds more than ``1/CONNECTION_SHARE`` of the body budget; and a new connection
    that finds every slot taken closes the longest-idle connection (one with no request in
    progress) rather than being refused, so idle or slow-header connections cannot lock clients
    out.  Errors are answered, then the connection is half-closed and what the client still sends
    is read and dropped for a moment, so it reads the status instead of a reset.
    """

    def __init__(
        self,
        config: CollectorConfig,
        handler: Handler,
        refuse: Refusal,
        stats: Stats,
        budget: Budget,
    ) -> None:
        self._config = config
        self._stats = stats
        self._handler = handler
        self._refuse = refuse  # builds the Status answer for limits hit in this module
        self._budget = budget
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._busy: set[asyncio.StreamWriter] = set()
        self._idle: dict[asyncio.StreamWriter, None] = {}  # oldest idle first
        self._receiving: set[asyncio.StreamWriter] = set()  # a request body is arriving
        self._closing = False

    @property
    def body_limit(self) -> int:
        """The largest body one request (one connection) may hold."""
        return max(1, min(self._config.max_body_bytes, self._budget.limit // CONNECTION_SHARE))

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(
            self._serve, host, port, limit=HEADER_LIMIT, backlog=1024
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self, timeout: float) -> None:
        """Stop accepting; let requests in progress finish (up to ``timeout``); close the rest."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections - self._busy):
            writer.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        cut = loop.time() + min(DRAIN_BODY_S, timeout)
        while self._busy and loop.time() < deadline:
            if self._receiving and loop.time() >= cut:
                # Bodies still arriving are not acknowledged: end them (the client retries)
                # rather than wait for a slow sender for the whole drain.
                for writer in list(self._receiving):
                    writer.transport.abort()
                self._stats.add(requests_cut_at_shutdown=len(self._receiving))
                self._receiving.clear()
            await asyncio.sleep(0.02)
        for writer in list(self._connections):
            writer.close()

    def _make_room(self) -> bool:
        """Whether a new connection may be served: below the limit, or after closing the
        connection idle the longest."""
        if len(self._connections) < self._config.max_connections:
            return True
        oldest = next(iter(self._idle), None)
        if oldest is None:
            return False
        del self._idle[oldest]
        self._connections.discard(oldest)
        oldest.transport.abort()  # its reader wakes with an error and its task ends
        self._stats.add(connections_evicted=1)
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing or not self._make_room():
            with contextlib.suppress(Exception):
                self._busy_response("too many connections").send(writer, False)
                await self._linger(reader, writer, LINGER_S / 4)
            writer.close()
            return
        self._connections.add(writer)
        try:
            await self._requests(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except Exception:  # never let one connection's surprise reach the loop
            log.exception("HTTP connection failed")
        finally:
            self._connections.discard(writer)
            self._busy.discard(writer)
            self._idle.pop(writer, None)
            writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = True
        connected = time.monotonic()
        while not self._closing:
            self._idle[writer] = None
            try:
                # The first byte (the idle wait), then the rest of the head: HEADER_TIMEOUT_S
                # from that byte (from connect for a connection's first request).
                wait = HEADER_TIMEOUT_S if first else IDLE_TIMEOUT_S
                lead = await asyncio.wait_for(reader.readexactly(1), wait)
                started = connected if first else time.monotonic()
                left = started + HEADER_TIMEOUT_S - time.monotonic()
                head = lead + await asyncio.wait_for(
                    reader.readuntil(b"\r\n\r\n"), max(left, 0.001)
                )
            except asyncio.LimitOverrunError:
                self._idle.pop(writer, None)
                await self._fail(self._refuse(431, "request headers too large"), reader, writer)
                return
            except TimeoutError:
                self._idle.pop(writer, None)
                if reader._buffer:  # type: ignore[attr-defined]  # part of a head: say why
                    await self._fail(self._refuse(408, "request head too slow"), reader, writer)
                return
            except asyncio.IncompleteReadError:
                return
            self._idle.pop(writer, None)
            first = False
            self._busy.add(writer)
            try:
                response, keep = await self._one(head, started, reader, writer)
            finally:
                self._busy.discard(writer)
            if not keep and response.status >= 400:
                await self._fail(response, reader, writer)
                return
            response.send(writer, keep)
            await writer.drain()
            if response.stream is not None:
                await _send_stream(response.stream, writer)
            if not keep:
                return

    async def _fail(
        self, response: Response, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Answer, then close politely: the client may still be sending a body we will not read,
        and closing with unread data would reset the connection before it reads the answer."""
        response.send(writer, False)
        await writer.drain()
        await self._linger(reader, writer, LINGER_S)

    async def _linger(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seconds: float
    ) -> None:
        with contextlib.suppress(Exception):
            if writer.can_write_eof():
                writer.write_eof()
            deadline = time.monotonic() + seconds
            dropped = 0
            while dropped < LINGER_BYTES:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                data = await asyncio.wait_for(reader.read(1 << 16), left)
                if not data:
                    break
                dropped += len(data)

    async def _one(
        self,
        head: bytes,
        started: float,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> tuple[Response, bool]:
        try:
            request = _parse_head(head)
        except _BadRequest as exc:
            self._count(400)
            return self._refuse(exc.status, f"malformed HTTP request: {exc}"), False
        request.started = started
        held = 0
        body_state = {"read": False}

        async def read_body() -> bytes:
            nonlocal held
            body_state["read"] = True
            body, held = await self._read_body(request, reader, writer)
            return body

        try:
            response = await self._handler(request, read_body)
        except HttpError as exc:
            self._count(exc.response.status)
            return exc.response, False
        finally:
            self._budget.give(held)
        if not body_state["read"] and _has_body(request.headers):
            return response, False  # the unread body would be taken for the next request
        return response, request.keep_alive and not response.close and not self._closing

    async def _read_body(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[bytes, int]:
        headers = request.headers
        limit = self.body_limit
        chunked = "transfer-encoding" in headers  # _parse_head allows only "chunked"
        length = 0
        if not chunked:
            length = int(headers.get("content-length", "0"))  # checked by _parse_head
            if length > limit:
                raise HttpError(self._refuse(413, f"body over the limit of {limit} bytes"))
        started = request.started
        self._receiving.add(writer)
        try:
            if headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await writer.drain()
            if not chunked:
                return await self._read_sized(reader, length, started)
            return await self._read_chunked(reader, limit, started)
        finally:
            self._receiving.discard(writer)

    async def _read_sized(
        self, reader: asyncio.StreamReader, length: int, started: float
    ) -> tuple[bytes, int]:
        """A Content-Length body, ``PIECE`` bytes at a time, each charged to the budget as it
        arrives: what a client declares costs nothing until it is sent."""
        parts: list[bytes] = []
        held = 0
        try:
            while held < length:
                size = min(PIECE, length - held)
                if not self._budget.take(size):
                    raise HttpError(self._busy_response("too much request data in flight"))
                try:
                    parts.append(await self._timed(reader.readexactly(size), started, held + size))
                except BaseException:
                    self._budget.give(size)
                    raise
                held += size
        except BaseException:
            self._budget.give(held)
            raise
        return (parts[0] if len(parts) == 1 else b"".join(parts)), held

    async def _timed(self, step: Awaitable[bytes], started: float, size: int) -> bytes:
        """``step``, cut off (408) once the body has taken longer than its size allows."""
        left = started + BODY_TIMEOUT_S + size / BODY_MIN_RATE - time.monotonic()
        try:
            return await asyncio.wait_for(step, max(left, 0.001))
        except TimeoutError:
            raise HttpError(self._refuse(408, "request body too slow")) from None

    async def _read_chunked(
        self, reader: asyncio.StreamReader, limit: int, started: float
    ) -> tuple[bytes, int]:
        parts: list[bytes] = []
        held = 0
        try:
            while True:
                line = await self._chunk_line(reader, started, held)
                size_text = line[:-2].split(b";", 1)[0].rstrip(b" \t")
                if not _CHUNK_SIZE.fullmatch(size_text):
                    raise HttpError(self._refuse(400, "bad chunk size"))
                size = int(size_text, 16)
                if size == 0:
                    await self._trailers(reader)
                    return b"".join(parts), held
                if held + size > limit:
                    raise HttpError(self._refuse(413, f"body over the limit of {limit} bytes"))
                while size:  # a declared chunk size, like a Content-Length, is charged as it comes
                    piece = min(PIECE, size)
                    if not self._budget.take(piece):
                        raise HttpError(self._busy_response("too much request data in flight"))
                    held += piece
                    size -= piece
                    parts.append(await self._timed(reader.readexactly(piece), started, held))
                if await self._timed(reader.readexactly(2), started, held) != b"\r\n":
                    raise HttpError(self._refuse(400, "bad chunk framing"))
        except BaseException:
            self._budget.give(held)
            raise

    async def _chunk_line(self, reader: asyncio.StreamReader, started: float, held: int) -> bytes:
        try:
            return await self._timed(reader.readuntil(b"\r\n"), started, held)
        except asyncio.LimitOverrunError:
            raise HttpError(self._refuse(400, "chunk size line too long")) from None

    async def _trailers(self, reader: asyncio.StreamReader) -> None:
        """Read and ignore the trailer section: at most ``TRAILER_LIMIT`` bytes, all of it within
        ``TRAILER_TIMEOUT_S`` (a client dripping trailer lines is cut off)."""
        deadline = time.monotonic() + TRAILER_TIMEOUT_S
        total = 0
        while True:
            left = deadline - time.monotonic()
            try:
                line = await asyncio.wait_for(reader.readuntil(b"\r\n"), max(left, 0.001))
            except TimeoutError:
                raise HttpError(self._refuse(408, "chunked trailers too slow")) from None
            except asyncio.LimitOverrunError:
                raise HttpError(self._refuse(431, "chunked trailers too large")) from None
            if line == b"\r\n":
                return
            total += len(line)
            if total > TRAILER_LIMIT:
                raise HttpError(self._refuse(431, "chunked trailers too large"))

    def _count(self, status: int) -> None:
        if status == 413:
            self._stats.add(requests_too_large=1)
        elif status == 503:
            self._stats.add(requests_refused_busy=1)
        else:
            self._stats.add(requests_bad=1)

    def _busy_response(self, why: str) -> Response:
        response = self._refuse(503, f"tracelens collect is busy ({why}); retry later")
        response.headers["Retry-After"] = str(self._config.retry_after_s)
        response.close = True
        return response


async def _send_stream(stream: AsyncIterator[bytes], writer: asyncio.StreamWriter) -> None:
    """A chunked body, piece by piece.  A failure midway aborts the connection: the client sees
    a truncated body (no last chunk), never a complete-looking partial one."""
    try:
        async for piece in stream:
            if piece:
                writer.write(b"%x\r\n" % len(piece))
                writer.write(piece)
                writer.write(b"\r\n")
                await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    except (ConnectionError, TimeoutError):
        raise
    except Exception:
        log.warning("a streamed answer failed midway; its connection is closed", exc_info=False)
        writer.transport.abort()
        raise ConnectionError("stream failed") from None


def _has_body(headers: dict[str, str]) -> bool:
    return headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers


def _parse_head(head: bytes) -> Request:
    """The request line and headers, framing checked as RFC 9112 asks: Content-Length is digits
    only and every copy agrees; Transfer-Encoding ends in ``chunked`` (else the length is
    unknowable: 400), with no other coding (not implemented: 501); not both; no obs-fold."""
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not _TOKEN.fullmatch(parts[0]):
        raise _BadRequest("bad request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise _BadRequest(f"bad header line {line[:40]!r}")
        key = name.lower()
        value = value.strip(" \t")
        if key in headers and key in ("content-length", "transfer-encoding"):
            headers[key] += ", " + value  # a list, as if sent on one line (RFC 9110 5.3)
        else:
            headers[key] = value
    if "transfer-encoding" in headers:
        if "content-length" in headers:
            raise _BadRequest("both Transfer-Encoding and Content-Length")
        if version == "HTTP/1.0":
            raise _BadRequest("Transfer-Encoding in an HTTP/1.0 request")
        codings = [c.strip().lower() for c in headers["transfer-encoding"].split(",")]
        if not all(codings):
            raise _BadRequest("an empty transfer coding in Transfer-Encoding")
        if codings[-1] != "chunked" or codings.count("chunked") != 1:
            raise _BadRequest("Transfer-Encoding must end in chunked, once")
        if len(codings) > 1:
            raise _BadRequest(f"transfer coding {codings[0]!r} not implemented", 501)
    elif "content-length" in headers:
        values = {v.strip() for v in headers["content-length"].split(",")}
        if len(values) != 1 or not _DIGITS.fullmatch(next(iter(values))):
            raise _BadRequest("bad Content-Length")
        headers["content-length"] = str(int(values.pop()))
    auth = headers.get("authorization")
    if auth is not None:
        headers["authorization"] = _canonical_scheme(auth)
    url = urlsplit(target)
    return Request(method.upper(), url.path, parse_qs(url.query), version, headers)


def _canonical_scheme(value: str) -> str:
    """``bearer x`` as ``Bearer x``: an authentication scheme is case-insensitive (RFC 9110
    11.1), and the token check compares the whole value."""
    scheme, sep, rest = value.partition(" ")
    if scheme.lower() == "bearer":
        return f"Bearer{sep}{rest.strip()}"
    return value
