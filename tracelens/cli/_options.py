"""Options several commands share, spelled once."""

from __future__ import annotations

import click

db_option = click.option(
    "--db",
    "db",
    type=click.Path(dir_okay=False),
    default=None,
    envvar="TRACELENS_DB",
    show_envvar=True,
    help="DuckDB store (default ./tracelens.duckdb).",
)

# tracelens.ingest.FORMATS, spelled here so that options load no importer (a test keeps them equal).
INPUT_FORMATS = ("otlp-json", "otlp-proto", "jaeger", "zipkin")

input_format_option = click.option(
    "--input-format",
    type=click.Choice(INPUT_FORMATS),
    default=None,
    help="Skip format detection: every file is in this format.",
)

findings_option = click.option(
    "--findings/--no-findings",
    default=True,
    help="Run the bottleneck finder (--no-findings: critical paths only).",
)
