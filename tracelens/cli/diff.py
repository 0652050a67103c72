"""``tracelens diff``: a thin wrapper over ``tracelens.api.diff``."""

from __future__ import annotations

import sys
from typing import Any

import click

from tracelens.cli._errors import input_errors
from tracelens.cli._options import (
    db_option,
    findings_option,
    input_format_option,
    number_option,
    out_option,
    write_out,
)

_WHEN = "An ISO 8601 instant (UTC unless it says otherwise) or a duration ago: 30m, 24h, 7d."


@click.command()
@click.argument("base", required=False, type=click.Path())
@click.argument("new", required=False, type=click.Path())
@db_option
@click.option("--base-since", default=None, help=f"BASE: traces that started from then. {_WHEN}")
@click.option("--base-until", default=None, help="BASE: traces that started before then.")
@click.option("--since", default=None, help="NEW: traces that started from then.")
@click.option("--until", default=None, help="NEW: traces that started before then.")
@input_format_option
@click.option(
    "--fail-on",
    default=None,
    metavar="RULES",
    help="Exit 1 when a root's significant regression exceeds a rule: p95>+10%, p99>+200ms, "
    "several comma-separated.",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="text: for a terminal; json: the diff document of docs/analysis-json.md; html: a page.",
)
@out_option
@number_option(
    "--confidence",
    click.FloatRange(0, 1, min_open=True, max_open=True),
    0.95,
    "Confidence for all the intervals together (Bonferroni-corrected).",
)
@number_option("--resamples", click.IntRange(min=100), 20_000, "Bootstrap resamples of the traces.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@number_option(
    "--min-traces",
    click.IntRange(min=2),
    20,
    "Traces a run needs before its percentiles are judged (p95 needs 100, p99 500).",
)
@number_option(
    "--min-delta-ms",
    click.FloatRange(min=0),
    1.0,
    "Smaller changes are never significant, however sure.",
)
@click.option("--keep-going", is_flag=True, help="Compare the other files when one is bad.")
@findings_option
def diff(format_: str, out: str | None, **options: Any) -> None:
    """What got slower from BASE to NEW, why, and whether it is real.

    BASE and NEW are each a trace file, a directory of trace files or a DuckDB store.  With
    neither, two time windows of the store --db are compared.  Exit status: 0, or 1 when a
    --fail-on rule tripped, 2 for bad input.
    """
    from tracelens.api import diff as run
    from tracelens.progress import Progress

    with input_errors(), Progress() as bar:  # on stderr, only when it is a terminal
        result = run(**options, bar=bar)
    if format_ == "json":
        text = result.to_json()
    elif format_ == "html":
        text = result.to_html()
    else:
        text = result.to_text()
    write_out(text, out)
    for err in result.errors:
        click.echo(f"error: {err}", err=True)
    if result.errors:
        sys.exit(2)
    for rule in result.rules:
        if rule.tripped:
            click.echo(
                f"tracelens diff: --fail-on {rule.rule} tripped by {rule.name} ({rule.service}): "
                f"{rule.change.metric} {rule.change.delta_ms:+,.1f} ms",
                err=True,
            )
    if result.failed:
        sys.exit(1)
