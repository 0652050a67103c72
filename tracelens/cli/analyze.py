"""``tracelens analyze``: a thin wrapper over ``tracelens.api.analyze``."""

from __future__ import annotations

import sys

import click

from tracelens.cli._errors import EXIT_INPUT_ERROR, input_errors
from tracelens.cli._options import (
    db_option,
    engine_options,
    findings_option,
    input_format_option,
    out_option,
    write_out,
)


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@db_option
@input_format_option
@click.option(
    "--format",
    "format_",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: tables for a terminal; json: the document of docs/analysis-json.md.",
)
@out_option
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=None,
    help="Keep only the N slowest traces (text output: show N rows; default 10).",
)
@click.option("--keep-going", is_flag=True, help="Analyse the other files when one is bad.")
@findings_option
@click.option(
    "--what-if",
    "what_if",
    multiple=True,
    metavar="KIND[=VALUE]",
    help="A latency-model what-if, repeatable: trim-context=0.5, cap-output=256, model-queue, "
    "stream, co-locate=1 (ms), prefetch.",
)
@click.option(
    "--what-if-threshold-ms",
    type=click.FloatRange(min=0),
    default=None,
    help="Report a what-if when it saves at least this at p50 (default 10).",
)
@click.option(
    "--flamegraph-out",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Also write the critical-path CPU stacks here, folded (flamegraph.pl, speedscope, "
    "Pyroscope).",
)
@engine_options
def analyze(
    files: tuple[str, ...],
    db: str | None,
    input_format: str | None,
    format_: str,
    out: str | None,
    top: int | None,
    keep_going: bool,
    findings: bool,
    what_if: tuple[str, ...],
    what_if_threshold_ms: float | None,
    parquet: str | None,
    engine: str,
    master: str | None,
    spark_table: str | None,
    flamegraph_out: str | None,
) -> None:
    """Critical path, latency by cpu/gpu/io/wait and bottlenecks of traces in FILES or the store.

    FILES may be OTLP JSON or JSON Lines, OTLP protobuf, Jaeger JSON or Zipkin v2 JSON, optionally
    gzip-compressed.  With no FILES, the store (--db) is analysed, or the Parquet span set
    given with --parquet; --engine spark runs the same analysis on Apache Spark.
    """
    from tracelens.api import analyze as run
    from tracelens.progress import Progress

    # Any library error is bad input here (exit 2), a bad --what-if included.
    with input_errors(usage=False), Progress() as bar:  # the bar: on stderr, only on a terminal
        result = run(
            files,
            db=None if parquet or spark_table else db,
            input_format=input_format,
            top=top,
            keep_going=keep_going,
            findings=findings,
            bar=bar,
            what_if=what_if,
            what_if_threshold_ms=what_if_threshold_ms,
            parquet=parquet,
            engine=engine,
            master=master,
            spark_table=spark_table,
            flamegraph_out=flamegraph_out,
        )
    if flamegraph_out and not result.cpu_hotspots.spans:
        click.echo(
            f"note: --flamegraph-out {flamegraph_out} is empty: no span carries "
            "tracelens.cpu_stacks",
            err=True,
        )
    write_out(result.to_json() if format_ == "json" else result.to_text(top), out)
    for err in result.errors:
        click.echo(f"error: {err}", err=True)
    if result.errors:
        sys.exit(EXIT_INPUT_ERROR)
