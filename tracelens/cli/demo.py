"""``tracelens demo``: run the demo agent and export its traces to a collector or a file (a thin
wrapper over ``tracelens.api.run_demo``)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from tracelens.cli._errors import service_errors
from tracelens.cli._options import file_option, number_option

EXIT_FAILED = 1


@click.command()
@click.option("--requests", type=click.IntRange(1, 100_000), default=36, show_default=True)
@number_option("--concurrency", click.IntRange(1, 1000), 6, "Requests in flight at once.")
@click.option(
    "--endpoint",
    default=None,
    help="OTLP/HTTP collector (default http://127.0.0.1:4318 unless --file is given).",
)
@file_option(
    "--file", "Append the spans as OTLP JSON Lines here (without --endpoint: nothing is sent)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Fixes the workload.")
@number_option(
    "--model-slots",
    click.IntRange(1, 1000),
    2,
    "Requests the model serves at once; the rest wait in its queue.",
)
@number_option(
    "--speed",
    click.FloatRange(0.01, 100),
    1.0,
    "Scale every simulated delay (0.5: twice as fast).",
)
@click.option(
    "--vllm/--no-vllm",
    default=True,
    help="Use vLLM when it is there (--no-vllm: the simulated model even then).",
)
@file_option("--summary-json", "Also write what the demo did as JSON here.", writable=True)
def demo(summary_json: str | None, **options: Any) -> None:
    """Run a demo AI agent whose traces show where agent latency goes.

    It plans (CPU), calls tools over HTTP on a local tool server one after another, repeats a
    call, searches an in-memory corpus (CPU), waits for a bounded model queue and calls a model:
    a real vLLM engine when `tracelens[vllm]` is installed and TRACELENS_VLLM_MODEL names a
    model directory, otherwise a local inference server that SIMULATES prefill and decode time.

    \b
    tracelens collect --db demo.duckdb       # in another terminal
    tracelens demo --requests 36
    tracelens analyze --db demo.duckdb
    """
    from tracelens.api import run_demo

    with service_errors():
        summary = run_demo(**options, echo=lambda line: click.echo(f"demo: {line}"))
    where = " and ".join(x for x in (summary.endpoint, summary.file) if x)
    stats = summary.stats
    click.echo(
        f"demo: {stats.requests} requests ({stats.failed} failed) in {summary.wall_s:.1f} s: "
        f"{stats.tool_calls} tool calls, {stats.model_calls} model calls "
        f"({stats.queue_waits} waited for a model slot), {summary.spans} spans in "
        f"{summary.traces} traces exported to {where}"
    )
    if summary.simulated:
        click.echo(f"demo: the model ({summary.model}) was SIMULATED: its latency is modelled")
    if summary_json:
        with open(summary_json, "w", encoding="utf-8") as fh:
            json.dump(summary.to_dict(), fh, indent=2)
    for err in stats.errors:
        click.echo(f"demo: error: {err}", err=True)
    if not summary.flushed:
        click.echo(f"demo: error: not every span reached {where} (see the log above)", err=True)
    if stats.failed or not summary.flushed:
        sys.exit(EXIT_FAILED)
