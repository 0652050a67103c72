"""``tracelens collect``: receive OTLP traces into the store until stopped (a thin wrapper over
``tracelens.api.collect``: every option is one of its parameters)."""

from __future__ import annotations

from typing import Any

import click

from tracelens.cli._errors import service_errors
from tracelens.cli._options import db_option, file_option, number_option


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
@file_option("--token-file", "Read the token from the first line of this file (not shown in `ps`).")
@number_option(
    "--memory-mb",
    click.IntRange(512, 1 << 20),
    2048,
    "Memory budget: DuckDB, the queue, request bodies, gRPC messages and decoding all "
    "share it (see README: Hostile input and limits).",
)
@number_option(
    "--max-body-mb",
    click.IntRange(1, 4096),
    None,
    "Largest HTTP request body, also after decompression "
    "[default: 64, at most (--memory-mb - 192)/28].",
)
@number_option(
    "--grpc-max-mb",
    click.FloatRange(0.01, 4096),
    None,
    "Largest gRPC message; gRPC holds each whole, so the budget admits fewer at once "
    "the larger this is [default: 4, at most --max-body-mb].",
)
@number_option(
    "--queue-mb",
    click.FloatRange(0.01, 65536),
    None,
    "Decoded spans not yet in the store; beyond it requests get 503/UNAVAILABLE "
    "[default: a quarter of --memory-mb].",
)
@click.option(
    "--span-metrics/--no-span-metrics",
    "span_metrics",
    default=True,
    show_default=True,
    help="Span metrics (RED, latency, critical path by kind) in GET /metrics, from complete "
    "traces; --no-span-metrics serves the ingest metrics only.",
)
@number_option(
    "--metrics-quiet-s",
    click.FloatRange(0, 86400, min_open=True),
    10.0,
    "Span metrics count a trace once it is complete: its root arrived and no span came for "
    "it for this many seconds.",
)
@number_option(
    "--metrics-max-operations",
    click.IntRange(1, 100_000),
    200,
    "Cap on distinct (service, operation) label pairs in /metrics; later ones are "
    "counted as operation 'other'.",
)
@number_option(
    "--metrics-max-open-traces",
    click.IntRange(1, 10_000_000),
    100_000,
    "Cap on traces waiting to be complete (about 400 bytes each); past it the one quiet the "
    "longest is counted at once, with the spans it has.",
)
def collect(**options: Any) -> None:
    """Receive spans over OTLP (HTTP and gRPC) into the store.

    A request is answered only after its spans are durable (fsynced to the store's
    journal, merged into DuckDB about once a second); when the queue is full, exporters are
    told to retry later.  While this runs, `tracelens analyze --db` and `report --db` on the same
    store read through it.  Stop with Ctrl-C or SIGTERM: it drains, commits and closes.
    """
    from tracelens.api import collect as run

    with service_errors("start the collector"):
        run(**options)
