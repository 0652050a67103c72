"""``tracelens report``: a thin wrapper over ``tracelens.api.write_report``."""

from __future__ import annotations

import sys
from typing import Any

import click

from tracelens.cli._errors import EXIT_INPUT_ERROR, input_errors
from tracelens.cli._options import (
    db_option,
    engine_options,
    file_option,
    findings_option,
    input_format_option,
    memory_option,
    store_source,
    value_option,
    what_if_options,
)


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@db_option
@input_format_option
@file_option("--out", "The HTML file to write (one report over everything loaded).", writable=True)
@click.option(
    "--weekly",
    is_flag=True,
    help="One report per ISO week (UTC) with traces in the store, plus an index page.",
)
@value_option("--week", "YYYY-Www", "Only this ISO week, e.g. 2026-W48 (implies --weekly).")
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
@what_if_options
@memory_option
@engine_options
def report(**options: Any) -> None:
    """A self-contained HTML report of the traces in FILES or the store.

    \b
    tracelens report traces.json --out report.html
    tracelens report --db tracelens.duckdb --out report.html
    tracelens report --weekly --db tracelens.duckdb --out-dir reports/
    tracelens report --weekly --week 2026-W48 --db tracelens.duckdb
    tracelens report traces.json --what-if co-locate=1 --out report.html

    The page needs no network and runs no script: mail it, attach it, print it.
    """
    from tracelens.api import write_report
    from tracelens.progress import Progress

    options = store_source(options)
    with input_errors(), Progress() as bar:
        written = write_report(**options, bar=bar)
    for p in written.paths:
        click.echo(f"wrote {p} ({p.stat().st_size / 1024:,.0f} KiB)")
    for err in written.errors:
        click.echo(f"error: {err}", err=True)
    if written.errors:
        sys.exit(EXIT_INPUT_ERROR)
