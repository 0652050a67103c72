"""``tracelens import``: trace files into the store (a thin wrapper over ``import_files``)."""

from __future__ import annotations

import click

from tracelens.cli._errors import EXIT_INPUT_ERROR
from tracelens.cli._options import db_option, input_format_option


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@db_option
@input_format_option
@click.option(
    "--keep-going",
    is_flag=True,
    help="Import the files that can be read; report the others (exit status 2 if any failed).",
)
def import_(
    files: tuple[str, ...], db: str | None, input_format: str | None, keep_going: bool
) -> None:
    """Import OTLP (JSON, JSON Lines, protobuf), Jaeger or Zipkin trace files, gzipped or not,
    and Parquet span sets (directories written by `tracelens export --parquet`).

    Spans already in the store (same trace and span id) are not added twice, so importing a file
    again is harmless.
    """
    from tracelens.api import import_files
    from tracelens.errors import InputError, StoreError

    try:
        done = import_files(files, db=db, input_format=input_format, keep_going=keep_going)
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(EXIT_INPUT_ERROR) from None
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    for warning in done.warnings:
        click.echo(f"warning: {warning}", err=True)
    for error in done.errors:
        click.echo(f"error: {error}", err=True)
    click.echo(
        f"read {done.spans} spans in {done.traces} trace{_s(done.traces)} from {done.files} "
        f"file{_s(done.files)}; {done.added} new in {done.db}"
    )
    if done.errors:
        click.echo(f"{len(done.errors)} of {len(files)} files failed", err=True)
        raise SystemExit(EXIT_INPUT_ERROR)


def _s(n: int) -> str:
    return "" if n == 1 else "s"
