"""``tracelens report``: a thin wrapper over ``tracelens.api.write_report``."""

from __future__ import annotations

import sys

import click

from tracelens.cli._errors import EXIT_INPUT_ERROR, input_errors
from tracelens.cli._options import (
    db_option,
    engine_options,
    findings_option,
    input_format_option,
)


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@db_option
@input_format_option
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="The HTML file to write (one report over everything loaded).",
)
@click.option(
    "--weekly",
    is_flag=True,
    help="One report per ISO week (UTC) with traces in the store, plus an index page.",
)
@click.option(
    "--week",
    metavar="YYYY-Www",
    default=None,
    help="Only this ISO week, e.g. 2026-W48 (implies --weekly).",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False),
    default="reports",
    show_default=True,
    help="Where --weekly writes WEEK.html and index.html.",
)
@click.option("--title", default=None, help="The report's title.")
@click.option("--keep-going", is_flag=True, help="Report on the other files when one is bad.")
@findings_option
@engine_options
def report(
    files: tuple[str, ...],
    db: str | None,
    input_format: str | None,
    out: str | None,
    weekly: bool,
    week: str | None,
    out_dir: str,
    title: str | None,
    keep_going: bool,
    findings: bool,
    parquet: str | None,
    engine: str,
    master: str | None,
    spark_table: str | None,
) -> None:
    """A self-contained HTML report of the traces in FILES or the store.

    \b
    tracelens report traces.json --out report.html
    tracelens report --db tracelens.duckdb --out report.html
    tracelens report --weekly --db tracelens.duckdb --out-dir reports/
    tracelens report --weekly --week 2026-W48 --db tracelens.duckdb

    The page needs no network and runs no script: mail it, attach it, print it.
    """
    from tracelens.api import write_report
    from tracelens.progress import Progress

    with input_errors(), Progress() as bar:
        written = write_report(
            files,
            db=db,
            input_format=input_format,
            out=out,
            weekly=weekly,
            week=week,
            out_dir=out_dir,
            title=title,
            keep_going=keep_going,
            findings=findings,
            bar=bar,
            parquet=parquet,
            engine=engine,
            master=master,
            spark_table=spark_table,
        )
    for p in written.paths:
        click.echo(f"wrote {p} ({p.stat().st_size / 1024:,.0f} KiB)")
    for err in written.errors:
        click.echo(f"error: {err}", err=True)
    if written.errors:
        sys.exit(EXIT_INPUT_ERROR)
