"""``tracelens import``: trace files into the store (a thin wrapper over ``read_files``)."""

from __future__ import annotations

import click

from tracelens.cli._options import db_option, input_format_option

# Exit status for bad input (click uses 2 for bad usage too: both mean "fix what you passed").
EXIT_INPUT_ERROR = 2


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
    import pyarrow as pa
    import pyarrow.compute as pc

    from tracelens.errors import InputError, StoreError
    from tracelens.ingest import read_files
    from tracelens.parquet import is_span_set, read_parquet
    from tracelens.store import open_store

    sets = [f for f in files if is_span_set(f)]
    try:
        result = read_files(
            [f for f in files if f not in sets], input_format=input_format, keep_going=keep_going
        )
        if sets:
            result.spans = pa.concat_tables([result.spans, *(read_parquet(d) for d in sets)])
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(EXIT_INPUT_ERROR) from None
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    for error in result.errors:
        click.echo(f"error: {error}", err=True)
    spans = result.spans
    traces = pc.count_distinct(spans["trace_id"]).as_py() if spans.num_rows else 0
    try:
        with open_store(db) as store:
            added = store.append(spans)
            where = store.path
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    read = len(files) - len(result.errors)
    click.echo(
        f"read {spans.num_rows} spans in {traces} trace{_s(traces)} from {read} "
        f"file{_s(read)}; {added} new in {where}"
    )
    if result.errors:
        click.echo(f"{len(result.errors)} of {len(files)} files failed", err=True)
        raise SystemExit(EXIT_INPUT_ERROR)


def _s(n: int) -> str:
    return "" if n == 1 else "s"
