"""``tracelens collect``: receive OTLP traces into the store until stopped."""

from __future__ import annotations

import click

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
    help="Require 'Authorization: Bearer TOKEN' on every request (both transports).",
)
@click.option(
    "--max-body-mb",
    type=click.IntRange(1, 4096),
    default=64,
    show_default=True,
    help="Largest request body, also after decompression.",
)
@click.option(
    "--queue-mb",
    type=click.FloatRange(0.01, 65536),
    default=512,
    show_default=True,
    help="Decoded spans not yet in the store; beyond it requests get 503/UNAVAILABLE.",
)
def collect(
    db: str | None, http: str, grpc: str, token: str | None, max_body_mb: int, queue_mb: float
) -> None:
    """Receive spans over OTLP (HTTP and gRPC) into the store.

    A request is answered only after its spans are durable (fsynced to the store's
    journal, merged into DuckDB about once a second); when the queue is full, exporters are
    told to retry later.  While this runs, `tracelens analyze --db` and `report --db` on the same
    store read through it.  Stop with Ctrl-C or SIGTERM: it drains, commits and closes.
    """
    from tracelens.collector import CollectorConfig, run_collector
    from tracelens.collector.config import MiB
    from tracelens.errors import StoreError
    from tracelens.store import default_db_path

    config = CollectorConfig(
        db=db or default_db_path(),
        http=http,
        grpc=None if grpc.strip().lower() in ("", "off", "none") else grpc,
        token=token or None,
        max_body_bytes=max_body_mb * MiB,
        max_queue_bytes=int(queue_mb * MiB),
    )
    try:
        run_collector(config)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot start the collector: {exc}") from None
