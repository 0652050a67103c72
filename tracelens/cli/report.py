"""``tracelens report``: a thin wrapper over ``write_report`` and ``write_weekly``."""

from __future__ import annotations

import sys

import click

from tracelens.cli._options import (
    check_engine_options,
    db_option,
    engine_options,
    input_format_option,
)

EXIT_INPUT_ERROR = 2


def _check_week(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    from tracelens.report.weekly import week_bounds

    try:
        week_bounds(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value.strip()


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
    callback=_check_week,
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
@click.option("--no-findings", is_flag=True, help="Critical paths only, no bottleneck finder.")
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
    no_findings: bool,
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
    weekly = weekly or week is not None
    check_engine_options(files, parquet, engine, spark_table)
    if weekly and (parquet or spark_table):
        raise click.UsageError("--weekly reads the store; --parquet makes one report (--out)")
    if weekly and files:
        raise click.UsageError(
            "--weekly reads the store; import the files first (`tracelens import FILES --db ...`)"
        )
    if weekly and out:
        raise click.UsageError("--weekly writes one file per week: use --out-dir, not --out")
    if not weekly and not out:
        raise click.UsageError("say where to write the report: --out FILE.html (or --weekly)")

    from tracelens.errors import TracelensError
    from tracelens.progress import Progress

    with Progress() as bar:
        try:
            if weekly:
                from tracelens.report import write_weekly

                paths = write_weekly(
                    db, out_dir, week, findings=not no_findings, title=title, bar=bar
                )
                errors: list[Exception] = []
            else:
                from tracelens.report import write_report

                assert out is not None
                path, analysis = write_report(
                    files,
                    db=None if parquet or spark_table else db,
                    out=out,
                    input_format=input_format,
                    keep_going=keep_going,
                    findings=not no_findings,
                    title=title,
                    bar=bar,
                    parquet=parquet,
                    engine=engine,
                    master=master,
                    spark_table=spark_table,
                )
                paths, errors = [path], list(analysis.errors)
        except TracelensError as exc:
            bar.close()
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_INPUT_ERROR)
    for p in paths:
        click.echo(f"wrote {p} ({p.stat().st_size / 1024:,.0f} KiB)")
    for err in errors:
        click.echo(f"error: {err}", err=True)
    if errors:
        sys.exit(EXIT_INPUT_ERROR)
