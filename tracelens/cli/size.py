"""``tracelens size``: a thin wrapper over ``tracelens.api.size``."""

from __future__ import annotations

from typing import Any

import click

from tracelens.cli._errors import input_errors
from tracelens.cli._options import db_option, input_format_option, number_option


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
@number_option("--cores", click.IntRange(min=1), None, "CPU cores today.")
@number_option("--model-slots", click.IntRange(min=1), None, "Model calls served at once today.")
@click.option(
    "--format", "format_", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def size(format_: str, **options: Any) -> None:
    """CPU cores and model-server capacity for CONCURRENCY requests at a latency target, from
    the measured CPU and model seconds per request of the traces in FILES or the store."""
    from tracelens.api import size as run

    with input_errors(usage=False):
        result = run(**options)
    if format_ == "json":
        click.echo(result.to_json())
    else:
        click.echo(result.to_text())
