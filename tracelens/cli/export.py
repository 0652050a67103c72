"""``tracelens export``: the store as a Parquet span set (thin over ``tracelens.api.export``)."""

from __future__ import annotations

import sys

import click

from tracelens.cli._options import db_option

EXIT_INPUT_ERROR = 2


@click.command()
@db_option
@click.option(
    "--parquet",
    required=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Write a Parquet span set here (a new or empty directory).",
)
def export(db: str | None, parquet: str) -> None:
    """Write the store's spans as Hive-partitioned Parquet (day=YYYY-MM-DD of each trace's start).

    \b
    tracelens export --db tracelens.duckdb --parquet spans/
    tracelens analyze --parquet spans/ --engine spark --master 'local[*]'

    The layout is stated in DIR/_tracelens_layout.json (docs/design.md, "Parquet span sets").
    `tracelens import DIR` reads it back.
    """
    from tracelens.api import export as run
    from tracelens.errors import TracelensError

    try:
        done = run(db, parquet=parquet)
    except TracelensError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INPUT_ERROR)
    click.echo(
        f"wrote {done.spans} spans in {done.traces} traces to {done.path} "
        f"({done.partitions} day partition{'' if done.partitions == 1 else 's'})"
    )
