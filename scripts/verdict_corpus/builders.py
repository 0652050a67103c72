"""Real work for the decorator cases: a slow local HTTP backend, CPU, ``git``, and the runner.

Hops in the decorator cases do real work (HTTP round trips to a local server that takes a few
milliseconds, SQLite queries, file writes, ``git`` in a temporary repository, CPU loops) and
pass real values on, so the traces carry what ``@trace`` really records.  tracelens is imported
lazily: the OTel cases and the parent process never configure it.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse
from urllib.request import urlopen

CITIES = ["Oslo", "Lima", "Porto", "Hanoi", "Quito"]
USERS = ["u-48213", "u-51907", "u-60442", "u-73318", "u-80951"]
TOPICS = ["semiconductors", "rail strikes", "monsoon season", "chess olympiad", "bird flu"]
SECRETS = ["s3cr3t-alpha-7", "s3cr3t-bravo-9", "s3cr3t-charl-2", "s3cr3t-delta-4"]


class _Slow(BaseHTTPRequestHandler):
    """A local backend: ``GET /any?ms=N`` answers after N ms (the hop's network time)."""

    def do_GET(self) -> None:
        query = parse_qs(urlparse(self.path).query)
        time.sleep(int(query.get("ms", ["10"])[0]) / 1000)
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


_server: list[ThreadingHTTPServer] = []


def _port() -> int:
    if not _server:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        _server.append(server)
    return int(_server[0].server_address[1])


def net(ms: int) -> None:
    """A real HTTP round trip to the local backend that takes about ``ms`` milliseconds."""
    with urlopen(f"http://127.0.0.1:{_port()}/x?ms={ms}", timeout=5) as response:
        response.read()


async def anet(ms: int) -> None:
    """The same round trip over asyncio streams (what an async HTTP client awaits)."""
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", _port())
    writer.write(f"GET /x?ms={ms} HTTP/1.0\r\nHost: backend\r\n\r\n".encode())
    await writer.drain()
    await reader.read()  # HTTP/1.0: the server closes after the response
    writer.close()
    await writer.wait_closed()


def burn(ms: float, data: str = "") -> str:
    """Real CPU for about ``ms`` milliseconds (hashing ``data`` over and over)."""
    import hashlib

    digest = data.encode() or b"seed"
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        for _ in range(200):
            digest = hashlib.blake2b(digest).digest()
    return digest.hex()[:16]


def sqlite(*tables: tuple[str, list[tuple[Any, ...]]]) -> sqlite3.Connection:
    """An in-memory SQLite database the agent's threads share, each table ``("name (columns)",
    rows)`` created and filled."""
    db = sqlite3.connect(":memory:", check_same_thread=False)
    for table, rows in tables:
        db.execute(f"CREATE TABLE {table}")
        marks = ", ".join("?" * len(rows[0]))
        db.executemany(f"INSERT INTO {table.split()[0]} VALUES ({marks})", rows)
    return db


def traced() -> Any:
    """tracelens' ``@trace``, imported only inside a decorator case's own process."""
    from tracelens import trace

    return trace


def git(repo: str, *args: str) -> str:
    """``git -C repo ARGS...`` with a fixed identity; its output, stripped."""
    done = subprocess.run(
        ["git", "-C", repo, *args], capture_output=True, text=True, check=True,
        env={**os.environ, "GIT_AUTHOR_NAME": "bot", "GIT_AUTHOR_EMAIL": "bot@example.com",
             "GIT_COMMITTER_NAME": "bot", "GIT_COMMITTER_EMAIL": "bot@example.com"},
    )  # fmt: skip
    return done.stdout.strip()


def run_decorator_case(name: str, run: Callable[[], None], path: Path) -> None:
    """In a fresh process: configure tracelens to write ``path`` and run the agent."""
    from tracelens import configure, flush

    configure(service_name=f"verdict-{name}", file=path)
    random.seed(name)
    with tempfile.TemporaryDirectory(prefix="verdict-") as scratch:
        tempfile.tempdir = scratch  # the repositories and files the agents write
        run()
        flush()
    tempfile.tempdir = None
