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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from tracelens.collector.config import CollectorConfig
from tracelens.collector.stats import Stats

log = logging.getLogger("tracelens.collector")

HEADER_LIMIT = 64 * 1024
HEADER_TIMEOUT_S = 30.0
BODY_TIMEOUT_S = 120.0
IDLE_TIMEOUT_S = 120.0


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    version: str
    headers: dict[str, str]
    body: bytes = b""

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

    def head(self, keep_alive: bool) -> bytes:
        reason = HTTPStatus(self.status).phrase
        lines = [
            f"HTTP/1.1 {self.status} {reason}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
        ]
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
        self._closing = False

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
        deadline = asyncio.get_running_loop().time() + timeout
        while self._busy and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        for writer in list(self._connections):
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= self._config.max_connections or self._closing:
            with contextlib.suppress(Exception):
                self._busy_response("too many connections").send(writer, False)
                await writer.drain()
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
            writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = True
        while not self._closing:
            timeout = HEADER_TIMEOUT_S if first else IDLE_TIMEOUT_S
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
            except asyncio.LimitOverrunError:
                self._refuse(431, "request headers too large").send(writer, False)
                return
            except asyncio.IncompleteReadError:
                return
            first = False
            self._busy.add(writer)
            try:
                response, keep = await self._one(head, reader, writer)
            finally:
                self._busy.discard(writer)
            response.send(writer, keep)
            await writer.drain()
            if not keep:
                return

    async def _one(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[Response, bool]:
        try:
            request = _parse_head(head)
        except ValueError as exc:
            return self._refuse(400, f"malformed HTTP request: {exc}"), False
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
        limit = self._config.max_body_bytes
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = 0
        if not chunked:
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                raise HttpError(self._refuse(400, "bad Content-Length")) from None
            if length < 0:
                raise HttpError(self._refuse(400, "bad Content-Length"))
            if length > limit:
                raise HttpError(self._refuse(413, f"body over the limit of {limit} bytes"))
            if not self._budget.take(length):
                raise HttpError(self._busy_response("too much request data in flight"))
        try:
            if headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await writer.drain()
            if not chunked:
                body = await asyncio.wait_for(reader.readexactly(length), BODY_TIMEOUT_S)
                return body, length
        except BaseException:
            self._budget.give(length)
            raise
        return await self._read_chunked(reader, limit)

    async def _read_chunked(self, reader: asyncio.StreamReader, limit: int) -> tuple[bytes, int]:
        parts: list[bytes] = []
        held = 0
        try:
            while True:
                line = await asyncio.wait_for(reader.readuntil(b"\r\n"), BODY_TIMEOUT_S)
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise HttpError(self._refuse(400, "bad chunk size")) from None
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                        pass
                    return b"".join(parts), held
                if held + size > limit:
                    raise HttpError(self._refuse(413, f"body over the limit of {limit} bytes"))
                if not self._budget.take(size):
                    raise HttpError(self._busy_response("too much request data in flight"))
                held += size
                parts.append(await asyncio.wait_for(reader.readexactly(size), BODY_TIMEOUT_S))
                if await reader.readexactly(2) != b"\r\n":
                    raise HttpError(self._refuse(400, "bad chunk framing"))
        except BaseException:
            self._budget.give(held)
            raise

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


def _has_body(headers: dict[str, str]) -> bool:
    return headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers


def _parse_head(head: bytes) -> Request:
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("bad request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ValueError(f"bad header line {line[:40]!r}")
        headers[name.lower()] = value.strip()
    if "transfer-encoding" in headers and "content-length" in headers:
        raise ValueError("both Transfer-Encoding and Content-Length")
    url = urlsplit(target)
    return Request(method.upper(), url.path, parse_qs(url.query), version, headers)
