"""A small JSON-over-HTTP/1.1 server and client on asyncio streams (standard library only).

Why not ``http.server`` or httpx: the demo agent is an asyncio program, and its tool calls must
really wait on sockets inside the event loop (that is what the decorator measures as ``io``); a
blocking client in a worker thread would look like waiting on a future.  And ``tracelens demo``
must run on a plain install, where httpx (a dev extra) may be missing.

One request per connection (``Connection: close``): simple, and still real TCP on 127.0.0.1.
The server never dies of a request: malformed ones get a JSON 4xx, a failing handler a 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger("tracelens.demo")

MAX_LINE: Final = 8192
MAX_HEADERS: Final = 64
MAX_BODY: Final = 1 << 20
READ_TIMEOUT_S: Final = 10.0
REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    500: "Internal Server Error",
}


class HttpError(Exception):
    """A request the demo's client could not complete, or that did not answer 2xx."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class BadRequest(Exception):
    """A handler's answer to arguments it cannot use (becomes a 400 naming the field)."""


@dataclass(frozen=True)
class Request:
    """One parsed request as the handlers see it: read whole before any handler runs."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError as exc:
            raise BadRequest(f"body: not JSON ({exc})") from None

    def arg(self, name: str) -> str:
        value = self.query.get(name, "").strip()
        if not value:
            raise BadRequest(f"query parameter {name!r} is required")
        return value


Handler = Callable[[Request], Awaitable[Any]]


@dataclass
class JsonServer:
    """Routes ``(method, path)`` to coroutines returning JSON-able values."""

    routes: Mapping[tuple[str, str], Handler]
    name: str = "demo server"
    requests: int = 0
    errors: int = 0
    _server: asyncio.Server | None = field(default=None, repr=False)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_LINE * 2)
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, payload = await self._answer(reader)
            body = json.dumps(payload, separators=(",", ":")).encode()
            head = (
                f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(head.encode("ascii") + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass  # the client went away: nothing to answer
        except Exception:
            log.exception("%s: answering a request failed", self.name)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, Any]:
        self.requests += 1
        try:
            request = await asyncio.wait_for(read_request(reader), READ_TIMEOUT_S)
        except BadRequest as exc:
            self.errors += 1
            return 400, {"error": str(exc)}
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            self.errors += 1
            if any(path == request.path for _, path in self.routes):
                return 405, {"error": f"method {request.method} not allowed"}
            return 404, {"error": f"no such endpoint: {request.path}"}
        try:
            return 200, await handler(request)
        except BadRequest as exc:
            self.errors += 1
            return 400, {"error": str(exc)}
        except Exception as exc:
            self.errors += 1
            log.exception("%s: %s %s failed", self.name, request.method, request.path)
            return 500, {"error": f"{type(exc).__name__}: {exc}"}


async def _line(reader: asyncio.StreamReader) -> str:
    try:
        raw = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise BadRequest(f"a request line or header is longer than {MAX_LINE} bytes") from None
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise
        raise BadRequest("the request ended in the middle of a line") from None
    if len(raw) > MAX_LINE:
        raise BadRequest(f"a request line or header is longer than {MAX_LINE} bytes")
    try:
        return raw.decode("latin-1").rstrip("\r\n")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise BadRequest("undecodable request line") from None


async def read_request(reader: asyncio.StreamReader) -> Request:
    """Parses one HTTP/1.1 request; ``BadRequest`` names what is wrong with it."""
    parts = (await _line(reader)).split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        raise BadRequest("request line: expected 'METHOD /path HTTP/1.1'")
    method, target = parts[0].upper(), parts[1]
    headers: dict[str, str] = {}
    while True:
        line = await _line(reader)
        if not line:
            break
        if len(headers) >= MAX_HEADERS:
            raise BadRequest(f"more than {MAX_HEADERS} headers")
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise BadRequest(f"header line without a name: {line[:60]!r}")
        headers[name.strip().lower()] = value.strip()
    body = await _body(reader, headers)
    split = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
    return Request(method, split.path or "/", query, headers, body)


async def _body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if "transfer-encoding" in headers:
        raise BadRequest("header Transfer-Encoding: not supported; send Content-Length")
    raw = headers.get("content-length", "0")
    try:
        length = int(raw)
    except ValueError:
        raise BadRequest(f"header Content-Length: not a number: {raw[:40]!r}") from None
    if length < 0:
        raise BadRequest("header Content-Length: negative")
    if length > MAX_BODY:
        raise BadRequest(f"header Content-Length: body over {MAX_BODY} bytes")
    try:
        return await reader.readexactly(length) if length else b""
    except asyncio.IncompleteReadError:
        raise BadRequest(f"body: shorter than Content-Length {length}") from None


async def request_json(
    method: str,
    url: str,
    *,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> Any:
    """One HTTP request over a fresh connection; the decoded JSON answer, or ``HttpError``."""
    split = urlsplit(url)
    if split.scheme != "http" or not split.hostname:
        raise HttpError(f"not an http:// URL: {url!r}")
    try:
        return await asyncio.wait_for(
            _exchange(method, split.hostname, split.port or 80, url, body, headers), timeout_s
        )
    except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
        raise HttpError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc


async def _exchange(
    method: str,
    host: str,
    port: int,
    url: str,
    body: Any,
    headers: Mapping[str, str] | None,
) -> Any:
    split = urlsplit(url)
    target = split.path or "/"
    if split.query:
        target += "?" + split.query
    data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    reader, writer = await asyncio.open_connection(host, port, limit=MAX_BODY)
    try:
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
        await writer.drain()
        status, answer = await _response(reader)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    if not 200 <= status < 300:
        detail = answer.get("error") if isinstance(answer, dict) else answer
        raise HttpError(f"{method} {url}: HTTP {status}: {detail}", status)
    return answer


async def _response(reader: asyncio.StreamReader) -> tuple[int, Any]:
    status_line = (await reader.readline()).decode("latin-1").split(" ", 2)
    if len(status_line) < 2 or not status_line[1].isdigit():
        raise HttpError(f"not an HTTP response: {' '.join(status_line)[:60]!r}")
    length: int | None = None
    while True:
        line = (await reader.readline()).decode("latin-1").strip()
        if not line:
            break
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    raw = await (reader.readexactly(length) if length is not None else reader.read())
    try:
        return int(status_line[1]), json.loads(raw or b"null")
    except ValueError:
        raise HttpError(f"the answer is not JSON: {raw[:60]!r}") from None
