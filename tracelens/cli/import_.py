"""``tracelens import``: trace files into the store (a thin wrapper over ``read_files``)."""

from __future__ import annotations

import click

from tracelens.cli._options import db_option, input_format_option

# Exit status for bad input (click uses 2 for bad usage too: both mean "fix what you passed").
EXIT_INPUT_ERROR = 2


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
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
    """Import OTLP (JSON, JSON Lines, protobuf), Jaeger or Zipkin trace files, gzipped or not.

    Spans already in the store (same trace and span id) are not added twice, so importing a file
    again is harmless.
    """
    from tracelens.errors import InputError, StoreError
    from tracelens.ingest import spool_files
    from tracelens.store import open_store

    # Spooled to disk, a chunk at a time (memory stays bounded for files of any size); nothing
    # is stored unless every file decoded (or --keep-going).
    try:
        with spool_files(files, input_format=input_format, keep_going=keep_going) as result:
            for warning in result.warnings:
                click.echo(f"warning: {warning}", err=True)
            for error in result.errors:
                click.echo(f"error: {error}", err=True)
            try:
                with open_store(db) as store:
                    added = sum(store.append(chunk) for chunk in result.tables())
                    where = store.path
            except StoreError as exc:
                raise click.ClickException(str(exc)) from None
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(EXIT_INPUT_ERROR) from None
    read, traces = len(files) - len(result.errors), result.traces
    click.echo(
        f"read {result.num_rows} spans in {traces} trace{_s(traces)} from {read} "
        f"file{_s(read)}; {added} new in {where}"
    )
    if result.errors:
        click.echo(f"{len(result.errors)} of {len(files)} files failed", err=True)
        raise SystemExit(EXIT_INPUT_ERROR)


def _s(n: int) -> str:
    return "" if n == 1 else "s"
