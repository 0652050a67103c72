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
