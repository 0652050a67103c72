"""``tracelens collect``: receive OTLP traces into the store until stopped (a thin wrapper over
``tracelens.api.collect``)."""

from __future__ import annotations

import click

from tracelens.cli._errors import service_errors
from tracelens.cli._options import db_option


@click.command()
@db_option
@click.option(
    "--http",
    "http",
    default="127.0.0.1:4318",
    show_default=True,
    help="OTLP/HTTP address (host:port; port 0 picks a free one, printed at start).",
)
@click.option(
    "--grpc",
    "grpc",
    default="127.0.0.1:4317",
    show_default=True,
    help="OTLP/gRPC address, or 'off'.",
)
@click.option(
    "--token",
    "token",
    default=None,
    envvar="TRACELENS_TOKEN",
    show_envvar=True,
    help="Require 'Authorization: Bearer TOKEN' on every request (both transports). "
    "Prefer --token-file or the environment variable: a command-line token shows in `ps`.",
)
@click.option(
    "--token-file",
    "token_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Read the token from the first line of this file (not shown in `ps`).",
)
@click.option(
    "--memory-mb",
    type=click.IntRange(512, 1 << 20),
    default=2048,
    show_default=True,
    help="Memory budget: DuckDB, the queue, request bodies, gRPC messages and decoding all "
    "share it (see README: Hostile input and limits).",
)
@click.option(
    "--max-body-mb",
    type=click.IntRange(1, 4096),
    default=None,
    help="Largest HTTP request body, also after decompression "
    "[default: 64, at most (--memory-mb - 192)/28].",
)
@click.option(
    "--grpc-max-mb",
    type=click.FloatRange(0.01, 4096),
    default=None,
    help="Largest gRPC message; gRPC holds each whole, so the budget admits fewer at once "
    "the larger this is [default: 4, at most --max-body-mb].",
)
@click.option(
    "--queue-mb",
    type=click.FloatRange(0.01, 65536),
    default=None,
    help="Decoded spans not yet in the store; beyond it requests get 503/UNAVAILABLE "
    "[default: a quarter of --memory-mb].",
)
@click.option(
    "--metrics-quiet-s",
    type=click.FloatRange(0, 86400),
    default=0.0,
    show_default=True,
    help="Span metrics in GET /metrics (off by default): count a trace once it is complete, "
    "its root arrived and no span came for it for this many seconds (e.g. 30).  0: ingest "
    "metrics only.",
)
@click.option(
    "--metrics-max-operations",
    type=click.IntRange(1, 100_000),
    default=200,
    show_default=True,
    help="Cap on distinct (service, operation) label pairs in /metrics; later ones are "
    "counted as operation 'other'.",
)
def collect(
    db: str | None,
    http: str,
    grpc: str,
    token: str | None,
    token_file: str | None,
    memory_mb: int,
    max_body_mb: int | None,
    grpc_max_mb: float | None,
    queue_mb: float | None,
    metrics_quiet_s: float,
    metrics_max_operations: int,
) -> None:
    """Receive spans over OTLP (HTTP and gRPC) into the store.

    A request is answered only after its spans are durable (fsynced to the store's
    journal, merged into DuckDB about once a second); when the queue is full, exporters are
    told to retry later.  While this runs, `tracelens analyze --db` and `report --db` on the same
    store read through it.  Stop with Ctrl-C or SIGTERM: it drains, commits and closes.
    """
    from tracelens.api import collect as run

    with service_errors("start the collector"):
        run(
            db,
            http=http,
            grpc=grpc,
            token=token,
            token_file=token_file,
            memory_mb=memory_mb,
            max_body_mb=max_body_mb,
            grpc_max_mb=grpc_max_mb,
            queue_mb=queue_mb,
            metrics_quiet_s=metrics_quiet_s,
            metrics_max_operations=metrics_max_operations,
        )
