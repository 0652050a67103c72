"""``tracelens analyze``: a thin wrapper over ``tracelens.api.analyze``."""

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
    number_option,
    out_option,
    store_source,
    what_if_options,
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
@number_option(
    "--top",
    click.IntRange(min=1),
    None,
    "Keep only the N slowest traces (text output: show N rows; default 10).",
)
@click.option("--keep-going", is_flag=True, help="Analyse the other files when one is bad.")
@findings_option
@what_if_options
@file_option(
    "--flamegraph-out",
    "Also write the critical-path CPU stacks here, folded (flamegraph.pl, speedscope, Pyroscope).",
    writable=True,
)
@memory_option
@engine_options
def analyze(format_: str, out: str | None, **options: Any) -> None:
    """Critical path, latency by cpu/gpu/io/wait and bottlenecks of traces in FILES or the store.

    FILES may be OTLP JSON or JSON Lines, OTLP protobuf, Jaeger JSON or Zipkin v2 JSON, optionally
    gzip-compressed.  With no FILES, the store (--db) is analysed, or the Parquet span set
    given with --parquet; --engine spark runs the same analysis on Apache Spark.
    """
    from tracelens.api import analyze as run
    from tracelens.progress import Progress

    options = store_source(options)
    # Any library error is bad input here (exit 2), a bad --what-if included.
    with input_errors(usage=False), Progress() as bar:  # the bar: on stderr, only on a terminal
        result = run(**options, bar=bar)
    flamegraph_out = options["flamegraph_out"]
    if flamegraph_out and not result.cpu_hotspots.spans:
        click.echo(
            f"note: --flamegraph-out {flamegraph_out} is empty: no span carries "
            "tracelens.cpu_stacks",
            err=True,
        )
    write_out(result.to_json() if format_ == "json" else result.to_text(options["top"]), out)
    for err in result.errors:
        click.echo(f"error: {err}", err=True)
    if result.errors:
        sys.exit(EXIT_INPUT_ERROR)
