"""Start, run and stop a collector: store, writer, listeners, discovery file, signals.

Start-up first merges what a killed predecessor left in the journal.  Shutdown (SIGINT/SIGTERM)
runs in order: new exports are refused (503 / UNAVAILABLE, which exporters retry), requests in
progress finish, the writer journals and answers everything queued, the merger moves everything
into the store, the store is checkpointed and closed, and only then is the discovery file
removed.  A second signal exits at
once; what was acknowledged is committed already.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable

from tracelens.collector import discovery
from tracelens.collector.config import CollectorConfig, split_address
from tracelens.collector.grpc_server import GrpcServer
from tracelens.collector.http import Budget, HttpServer
from tracelens.collector.ingest import Ingest
from tracelens.collector.journal import journal_dir
from tracelens.collector.merger import recover
from tracelens.collector.routes import Routes
from tracelens.collector.stats import Stats
from tracelens.collector.writer import BatchWriter
from tracelens.store import DuckDBStore

log = logging.getLogger("tracelens.collector")

Announce = Callable[[str], None]


def run_collector(config: CollectorConfig, announce: Announce | None = None) -> None:
    """Serve until SIGINT or SIGTERM.  ``announce`` gets one line per listener, then ``ready``."""
    asyncio.run(_serve(config, announce or _stderr))


def _stderr(line: str) -> None:
    print(f"tracelens collect: {line}", file=sys.stderr, flush=True)


async def _serve(config: CollectorConfig, announce: Announce) -> None:
    store = DuckDBStore(config.db)
    store.set_memory_limit(config.duckdb_memory)
    store.set_threads(config.duckdb_threads)
    stats = Stats()
    recovered = await asyncio.get_running_loop().run_in_executor(None, recover, store, config.db)
    if recovered:
        stats.add(spans_recovered=recovered)
        announce(f"recovered {recovered} spans from the journal of a previous run")
    reader = DuckDBStore(config.db)  # a second connection: reads never wait for the writer's lock
    writer = BatchWriter(
        store,
        config.db,
        stats,
        max_queue_bytes=config.max_queue_bytes,
        max_batch_rows=config.max_batch_rows,
    )
    ingest = Ingest(config, writer, stats)
    routes = Routes(ingest, reader, config.token)
    budget = Budget(config.max_inflight_bytes)
    http = HttpServer(config, routes, routes.refuse, stats, budget)
    grpc_server: GrpcServer | None = None
    try:
        host, port = split_address(config.http, 4318)
        http_port = await http.start(host, port)
        http_url = f"http://{_url_host(host)}:{http_port}"
        grpc_address = None
        if config.grpc:
            ghost, gport = split_address(config.grpc, 4317)
            grpc_server = GrpcServer(ingest, config.token, budget)
            grpc_address = f"{_url_host(ghost)}:{await grpc_server.start(ghost, gport)}"
        discovery.publish(
            config.db, discovery.CollectorInfo(os.getpid(), http_url, grpc_address, config.token)
        )
        announce(f"store {os.path.abspath(config.db)}")
        announce(f"OTLP/HTTP listening on {http_url}")
        if grpc_address:
            announce(f"OTLP/gRPC listening on {grpc_address}")
        announce("ready")
        await _wait_for_signal()
        announce("stopping: draining requests in progress")
    finally:
        routes.draining = True
        ingest.accepting = False
        await http.close(config.drain_timeout_s)
        if grpc_server is not None:
            await grpc_server.stop(config.drain_timeout_s)
        await asyncio.get_running_loop().run_in_executor(None, ingest.close)
        await asyncio.get_running_loop().run_in_executor(None, writer.close)
        try:
            store.checkpoint()
        finally:
            reader.close()
            store.close()
            with contextlib.suppress(OSError):
                journal_dir(config.db).rmdir()  # empty after the last merge
            discovery.withdraw(config.db)
    snapshot = stats.snapshot()
    announce(
        f"stopped: {snapshot['spans_stored']} spans stored, {snapshot['spans_rejected']} rejected"
    )


async def _wait_for_signal() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            _stderr("second signal: exiting now (acknowledged spans are committed)")
            os._exit(130)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    await stop.wait()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
