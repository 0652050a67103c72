"""Start, run and stop a collector: store, writer, listeners, discovery file, signals.

Start-up first merges what a killed predecessor left in the journal; when the store cannot take
it (a full disk), the collector says so in one line, starts anyway with ``/health`` degraded, and
the merger retries in the background.  Shutdown (SIGINT/SIGTERM) runs in order: new exports are
refused (503 / UNAVAILABLE, which exporters retry), requests in progress finish, the writer
journals and answers everything queued, the merger moves everything into the store (for at most
``CLOSE_MERGE_S`` if the store keeps failing: the rest stays journaled for the next start), the
store is checkpointed and closed, and only then is the discovery file removed.  Whatever wedges,
the process exits within ``drain_timeout_s + SHUTDOWN_GRACE_S`` of the first signal (a watchdog
ends it, exit status 1); a second signal exits at once.  Either way what was acknowledged is in
the journal already.

The collector's files (journal, store, its WAL, the discovery file) are created mode 0600: it runs
with umask 077.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable

from tracelens.collector import discovery
from tracelens.collector.config import CollectorConfig, split_address
from tracelens.collector.grpc_server import GrpcServer
from tracelens.collector.http import Budget, HttpServer
from tracelens.collector.journal import journal_dir, segments
from tracelens.collector.merger import CLOSE_MERGE_S, recover
from tracelens.collector.metrics import CollectorMetrics
from tracelens.collector.receive import Receiver
from tracelens.collector.routes import Routes
from tracelens.collector.stats import Stats
from tracelens.collector.writer import BatchWriter
from tracelens.errors import StoreError
from tracelens.store import DuckDBStore

log = logging.getLogger("tracelens.collector")

Announce = Callable[[str], None]

SHUTDOWN_GRACE_S = 30.0  # beyond drain_timeout_s: the most a stop may take before the watchdog
FD_RESERVE_MIN = 128  # descriptors kept from HTTP connections: journal, store, gRPC, threads
FD_RESERVE_MAX = 512


def descriptor_headroom(wanted_connections: int) -> tuple[int, int]:
    """``(connections, soft limit)``: raise the soft ``RLIMIT_NOFILE`` toward the hard limit (as
    far as ``wanted_connections`` and a reserve need), then the HTTP connections that fit under
    it with a quarter of it (128-512) kept for the journal, the store, gRPC's connections and
    the threads.  Idle connections are evicted against this number, so sockets can never take
    the descriptors the journal needs (an ``EMFILE`` there refuses every export)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = wanted_connections + FD_RESERVE_MAX
    if soft != resource.RLIM_INFINITY and soft < want:
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if target > soft:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return wanted_connections, -1
    reserve = min(FD_RESERVE_MAX, max(FD_RESERVE_MIN, soft // 4))
    return max(16, min(wanted_connections, soft - reserve)), soft


def run_collector(config: CollectorConfig, announce: Announce | None = None) -> None:
    """Serve until SIGINT or SIGTERM.  ``announce`` gets one line per listener, then ``ready``."""
    umask = os.umask(0o077)
    try:
        asyncio.run(_serve(config, announce or _stderr))
    finally:
        os.umask(umask)


def _stderr(line: str) -> None:
    print(f"tracelens collect: {line}", file=sys.stderr, flush=True)


async def _serve(config: CollectorConfig, announce: Announce) -> None:
    stop = _on_signals()
    connections, fd_limit = descriptor_headroom(config.max_connections)
    if connections < config.max_connections:
        announce(
            f"at most {connections} HTTP connections (the open-file limit is {fd_limit}; raise "
            "`ulimit -n` for more): idle ones are closed first when a new one needs room"
        )
        config = dataclasses.replace(config, max_connections=connections)
    store = DuckDBStore(config.db)
    store.set_memory_limit(config.duckdb_memory)
    store.set_threads(config.duckdb_threads)
    stats = Stats()
    try:
        recovered = await asyncio.get_running_loop().run_in_executor(
            None, recover, store, config.db
        )
    except (StoreError, OSError) as exc:
        recovered = 0
        announce(
            f"degraded: cannot merge the journal of a previous run into the store yet ({exc}); "
            "serving, and retrying in the background"
        )
    if recovered:
        stats.add(spans_recovered=recovered)
        announce(f"recovered {recovered} spans from the journal of a previous run")
    writer = BatchWriter(
        store,
        config.db,
        stats,
        max_queue_bytes=config.max_queue_bytes,
        max_batch_rows=config.max_batch_rows,
        backlog=segments(config.db),  # what recovery could not merge (the writer's come later)
    )
    metrics = CollectorMetrics(config, stats, store)
    writer.merger.on_merged = metrics.merged  # before any export is accepted
    metrics.start()
    receiver = Receiver(config, writer, stats)
    # Reads (and the metrics' read-back) use the store's second connection.
    routes = Routes(receiver, store, config.token, metrics)
    budget = Budget(config.max_inflight_bytes)
    http = HttpServer(config, routes, routes.refuse, stats, budget)
    grpc_server: GrpcServer | None = None
    publisher: asyncio.Task[None] | None = None
    try:
        host, port = split_address(config.http, 4318)
        http_port = await http.start(host, port)
        http_url = f"http://{_url_host(host)}:{http_port}"
        grpc_address = None
        if config.grpc:
            ghost, gport = split_address(config.grpc, 4317)
            grpc_server = GrpcServer(receiver, config.token, budget)
            grpc_address = f"{_url_host(ghost)}:{await grpc_server.start(ghost, gport)}"
        info = discovery.CollectorInfo(os.getpid(), http_url, grpc_address, config.token)
        try:
            discovery.publish(config.db, info)
        except OSError as exc:  # a full disk: serve anyway, and publish once there is room
            announce(f"degraded: cannot write {discovery.info_path(config.db)} yet ({exc})")
            publisher = asyncio.create_task(_publish_later(config.db, info))
        announce(f"store {os.path.abspath(config.db)}")
        announce(f"OTLP/HTTP listening on {http_url}")
        announce(f"Prometheus metrics on {http_url}/metrics")
        if grpc_address:
            announce(f"OTLP/gRPC listening on {grpc_address}")
        announce("ready")
        await stop.wait()
        announce("stopping: draining requests in progress")
    finally:
        stopped = _watchdog(config.drain_timeout_s + SHUTDOWN_GRACE_S, config.db)
        if publisher is not None:
            publisher.cancel()
        routes.draining = True
        receiver.accepting = False
        await http.close(config.drain_timeout_s)
        if grpc_server is not None:
            await grpc_server.stop(config.drain_timeout_s)
        await asyncio.get_running_loop().run_in_executor(None, receiver.close)
        await asyncio.get_running_loop().run_in_executor(None, writer.close, CLOSE_MERGE_S)
        await asyncio.get_running_loop().run_in_executor(None, metrics.close)
        try:
            store.checkpoint()
        except StoreError as exc:  # what is not merged stays in the journal for the next start
            announce(f"could not checkpoint the store: {exc}")
        finally:
            store.close()
            with contextlib.suppress(OSError):
                journal_dir(config.db).rmdir()  # empty after the last merge
            discovery.withdraw(config.db)
            stopped.set()
    snapshot = stats.snapshot()
    announce(
        f"stopped: {snapshot['spans_stored']} spans stored, {snapshot['spans_rejected']} rejected"
    )


async def _publish_later(db: str, info: discovery.CollectorInfo) -> None:
    while True:
        await asyncio.sleep(1.0)
        with contextlib.suppress(OSError):
            discovery.publish(db, info)
            return


def _watchdog(seconds: float, db: str) -> threading.Event:
    """End the process ``seconds`` from now unless the returned event is set first (the orderly
    stop finished): a wedged disk or store must not keep it alive, and acknowledged spans are
    journaled already, so nothing is lost."""
    stopped = threading.Event()

    def watch() -> None:
        if stopped.wait(seconds):
            return
        _stderr(f"could not stop in {seconds:.0f} s: exiting now (acknowledged spans are safe)")
        with contextlib.suppress(OSError):
            discovery.withdraw(db)
        os._exit(1)

    threading.Thread(target=watch, name="tracelens-watchdog", daemon=True).start()
    return stopped


def _on_signals() -> asyncio.Event:
    """Set on SIGINT/SIGTERM.  Installed before anything is announced: a signal sent as soon as
    ``ready`` is read must still stop the collector in order, not kill it."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            _stderr("second signal: exiting now (acknowledged spans are committed)")
            os._exit(130)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    return stop


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
