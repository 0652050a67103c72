"""``tracelens size``: a thin wrapper over ``tracelens.api.size``."""

from __future__ import annotations

import json

import click

from tracelens.cli._errors import input_errors
from tracelens.cli._options import db_option, input_format_option


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--concurrency", type=click.IntRange(min=1), required=True, help="Requests in flight."
)
@click.option(
    "--latency-target-ms",
    type=click.FloatRange(min=0, min_open=True),
    required=True,
    help="End-to-end latency each request should meet (ms).",
)
@db_option
@input_format_option
@click.option("--cores", type=click.IntRange(min=1), default=None, help="CPU cores today.")
@click.option(
    "--model-slots",
    type=click.IntRange(min=1),
    default=None,
    help="Model calls served at once today.",
)
@click.option(
    "--format", "format_", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def size(
    files: tuple[str, ...],
    concurrency: int,
    latency_target_ms: float,
    db: str | None,
    input_format: str | None,
    cores: int | None,
    model_slots: int | None,
    format_: str,
) -> None:
    """CPU cores and model-server capacity for CONCURRENCY requests at a latency target, from
    the measured CPU and model seconds per request of the traces in FILES or the store."""
    from tracelens.api import size as run

    with input_errors(usage=False):
        result = run(
            files,
            concurrency=concurrency,
            latency_target_ms=latency_target_ms,
            db=db,
            input_format=input_format,
            cores=cores,
            model_slots=model_slots,
        )
    if format_ == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(result.to_text())
