"""Options several commands share, spelled once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from tracelens.formats import NAMES

Decorator = Callable[[Any], Any]


def number_option(flag: str, kind: click.ParamType, default: float | None, help: str) -> Decorator:
    """A number within ``kind``'s range; ``--help`` shows the default when there is one."""
    return click.option(
        flag, type=kind, default=default, show_default=default is not None, help=help
    )


def file_option(flag: str, help: str, *, writable: bool = False) -> Decorator:
    """A file's path (not a directory's), none by default."""
    return click.option(
        flag, type=click.Path(dir_okay=False, writable=writable), default=None, help=help
    )


def value_option(flag: str, metavar: str, help: str) -> Decorator:
    """A string shown as ``metavar`` in ``--help``, none by default."""
    return click.option(flag, default=None, metavar=metavar, help=help)


db_option = click.option(
    "--db",
    "db",
    type=click.Path(dir_okay=False),
    default=None,
    envvar="TRACELENS_DB",
    show_envvar=True,
    help="DuckDB store (default ./tracelens.duckdb).",
)

# The formats' table (pure data: options load no importer).
INPUT_FORMATS = NAMES

input_format_option = click.option(
    "--input-format",
    type=click.Choice(INPUT_FORMATS),
    default=None,
    help="Skip format detection: every file is in this format.",
)

out_option = file_option(
    "--out", "Write the result here instead of standard output.", writable=True
)


def write_out(text: str, out: str | None) -> None:
    """A command's result to ``out`` (a file) or standard output, ending in one newline."""
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)  # not ``text + "\n"``: a copy of an output of hundreds of MB
            if not text.endswith("\n"):
                fh.write("\n")
    else:
        click.echo(text, nl=not text.endswith("\n"))


memory_option = number_option(
    "--memory-mb",
    click.IntRange(min=1),
    None,
    "Memory budget of the analysis in MiB (default: half the machine's memory): a store or "
    "files estimated to need more (384 MiB + 2,400 bytes a span + 100 an attribute) are refused, "
    "exit 2.",
)
findings_option = click.option(
    "--findings/--no-findings",
    default=True,
    help="Run the bottleneck finder (--no-findings: critical paths only).",
)
# Parquet span sets and engines (tracelens.parquet, tracelens.engines), spelled here for analyze
# and report.
parquet_option = value_option(
    "--parquet",
    "DIR",
    "Read a Parquet span set (`tracelens export --parquet`) or any Parquet with the span "
    "columns; with --engine spark, any path or URI Spark reads.",
)
engine_option = click.option(
    "--engine",
    type=click.Choice(["embedded", "spark"]),
    default="embedded",
    show_default=True,
    help="Where the analysis runs: here, or on Apache Spark (pip install 'tracelens[spark]').",
)
master_option = value_option(
    "--master", "URL", "Spark master, e.g. local[*] (default: spark-submit's, else local[*])."
)
spark_table_option = value_option(
    "--spark-table",
    "NAME",
    "With --engine spark: a table of Spark's catalog with the span columns.",
)


def engine_options(f: Any) -> Any:
    """``--parquet``, ``--engine``, ``--master`` and ``--spark-table`` at once."""
    for option in (spark_table_option, master_option, engine_option, parquet_option):
        f = option(f)
    return f


what_if_option = click.option(
    "--what-if",
    "what_if",
    multiple=True,
    metavar="KIND[=VALUE]",
    help="A latency-model what-if, repeatable: trim-context=0.5, cap-output=256, model-queue, "
    "stream, co-locate=1 (ms), prefetch.",
)

what_if_threshold_option = number_option(
    "--what-if-threshold-ms",
    click.FloatRange(min=0),
    None,
    "Report a what-if when it saves at least this at p50 (default 10).",
)


def what_if_options(f: Any) -> Any:
    """``--what-if`` and ``--what-if-threshold-ms`` at once (``analyze`` and ``report``)."""
    return what_if_option(what_if_threshold_option(f))


def store_source(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with ``db`` dropped when a Parquet span set or a Spark table is the source:
    for ``analyze`` and ``report``, whose ``--db`` may come from TRACELENS_DB and is then only
    the default source.  The library calls take ``db`` as given and refuse it beside another
    source."""
    if options.get("parquet") or options.get("spark_table"):
        return {**options, "db": None}
    return options
