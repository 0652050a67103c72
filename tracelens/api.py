"""The library calls the CLI wraps: one per command, with the command's option names as
parameter names (``--input-format`` is ``input_format``), so a script and a shell line read
alike.  ``tests/test_cli_mirror.py`` checks the names and the defaults.

Orchestration lives here (load, analyse, store, write); ``tracelens.render.html`` only renders and
``tracelens.collector`` only serves.  The HTML report calls are in ``tracelens._reports``.  Each
call imports what it needs when it runs, so ``collect`` does not load Polars or Jinja into the
collector's memory budget.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracelens.errors import InputError, OptionError, TracelensError
from tracelens.progress import Progress
from tracelens.store import default_db_path

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa

    from tracelens._reports import Library, Written
    from tracelens.analysis import Analysis
    from tracelens.analysis.diff import Diff
    from tracelens.analysis.sizing import Sizing
    from tracelens.collector.service import Announce
    from tracelens.demo import DemoSummary
    from tracelens.ingest import Decoded, IngestResult
    from tracelens.parquet import Exported
    from tracelens.store import DuckDBStore


__all__ = [
    "Imported",
    "Written",
    "analyze",
    "collect",
    "diff",
    "export",
    "import_files",
    "load_spans",
    "run_demo",
    "size",
    "weeks_in",
    "write_report",
    "write_weekly",
]


def load_spans(
    files: Sequence[str | os.PathLike[str]] = (),
    *,
    db: str | None = None,
    input_format: str | None = None,
    keep_going: bool = False,
    columns: Sequence[str] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    bar: Progress | None = None,
    parquet: str | os.PathLike[str] | None = None,
) -> IngestResult:
    """Spans from files when any are given, from the Parquet span set ``parquet`` when given,
    else from the store (through a running collector when one holds it).  Files are read one by
    one so ``bar`` can show how far it got."""
    import pyarrow as pa

    from tracelens.ingest import IngestResult, read_files

    bar = bar or Progress(enabled=False)
    if parquet is not None:
        from tracelens.parquet import read_parquet

        if files or db:
            raise OptionError("read spans from files, a store or a Parquet span set, not several")
        bar.set_label(f"reading {os.fspath(parquet)}")
        return IngestResult(spans=read_parquet(parquet, columns))
    if not files:
        from tracelens.collector.reader import read_store

        bar.set_label(f"reading the store {db or default_db_path()}")
        table: pa.Table = read_store(db, columns=columns, start_ns=start_ns, end_ns=end_ns)
        return IngestResult(spans=table)
    tables: list[pa.Table] = []
    loaded = IngestResult(spans=pa.table({}))
    bar.total = len(files)
    for i, path in enumerate(files):
        bar.set_label(f"reading {os.fspath(path)}")
        got = read_files([path], input_format=input_format, keep_going=keep_going)
        tables.append(got.spans.select(list(columns)) if columns else got.spans)
        loaded.warnings.extend(got.warnings)
        loaded.errors.extend(got.errors)
        bar.done = i + 1
    bar.total = None
    loaded.spans = pa.concat_tables(tables)
    return loaded


def _check_sources(
    files: Sequence[str | os.PathLike[str]],
    parquet: str | os.PathLike[str] | None,
    engine: str,
    spark_table: str | None,
) -> None:
    """The sources that go together, for ``analyze`` and ``report`` alike (their commands
    rely on it: the rule lives here only)."""
    if parquet and files:
        raise OptionError("--parquet reads a span set: give no FILES")
    if engine == "spark":
        if files:
            raise OptionError(
                "--engine spark reads --parquet or --spark-table; export or import the files "
                "first (`tracelens import FILES --db F`, `tracelens export --db F --parquet DIR`)"
            )
        if not parquet and not spark_table:
            raise OptionError("--engine spark needs --parquet PATH or --spark-table NAME")
        if parquet and spark_table:
            raise OptionError("give --parquet or --spark-table, not both")
    elif spark_table:
        raise OptionError("--spark-table needs --engine spark")


def analyze(
    files: Sequence[str | os.PathLike[str]] = (),
    *,
    db: str | None = None,
    input_format: str | None = None,
    top: int | None = None,
    keep_going: bool = False,
    findings: bool = True,
    start_ns: int | None = None,
    end_ns: int | None = None,
    bar: Progress | None = None,
    what_if: Sequence[str] = (),
    what_if_threshold_ms: float | None = None,
    parquet: str | os.PathLike[str] | None = None,
    engine: str = "embedded",
    master: str | None = None,
    spark_table: str | None = None,
    flamegraph_out: str | os.PathLike[str] | None = None,
    memory_mb: int | None = None,
) -> Analysis:
    """Where each trace's end-to-end latency went: the library form of ``tracelens analyze``.

    Errors in files raise ``InputError`` unless ``keep_going``, in which case they are listed in
    ``Analysis.errors`` (and its warnings) and the other files are analysed.  ``start_ns`` /
    ``end_ns`` keep the store's traces that started in that window.  ``what_if`` (e.g.
    ``["trim-context=0.5", "stream"]``) adds the latency model's what-if findings that save at
    least ``what_if_threshold_ms`` at p50.  ``parquet`` reads a Parquet span set instead
    (``tracelens.parquet``).  ``engine="spark"`` runs the analysis on Apache Spark
    (``tracelens.engines.spark``, master URL ``master``) over ``parquet`` or the catalog table
    ``spark_table``, with the same result.  ``flamegraph_out`` writes the critical-path CPU
    stacks (``Analysis.cpu_hotspots``) there in flamegraph.pl's folded format, for
    flamegraph.pl, speedscope or Pyroscope (``docs/analysis-json.md``, "cpu_hotspots").
    ``memory_mb`` (default: half the machine's memory) is the embedded analysis' budget: a
    read estimated to need more is refused with ``BudgetError`` (``tracelens.analysis.budget``),
    a store's before it is read.
    """
    import tracelens.render  # noqa: F401  (registers the result's to_text)
    from tracelens.analysis import ANALYSIS_COLUMNS
    from tracelens.analysis.budget import check as check_budget
    from tracelens.analysis.budget import table_counts
    from tracelens.analysis.whatif import parse_all
    from tracelens.engines import ParquetSpans, Source, SpanTable, SparkTable, get_engine

    bar = bar or Progress(enabled=False)
    _check_sources(files, parquet, engine, spark_table)
    whats = parse_all(what_if)
    if engine != "embedded" and (db or start_ns is not None or end_ns is not None):
        raise OptionError(f"engine {engine!r} reads a Parquet span set or a Spark table only")
    if parquet is not None and db:
        raise OptionError("read spans from files, a store or a Parquet span set, not several")
    runner = get_engine(engine, master=master)
    source: Source
    notes: list[str] = []
    errors: list[InputError] = []
    if spark_table:
        source = SparkTable(spark_table)
    elif parquet is not None:
        if engine == "embedded":
            from tracelens.parquet import count_parquet

            rows = count_parquet(parquet)
            if rows is not None:
                check_budget((rows, 0), memory_mb, *_budget_source(files, db, parquet))
        source = ParquetSpans.at(parquet)
        bar.set_label(f"reading {source.path}")
    else:
        named, narrow = _budget_source(files, db, parquet)
        if not files:
            from tracelens.collector.reader import count_store

            counted = count_store(db, start_ns=start_ns, end_ns=end_ns)
            if counted is not None:
                check_budget(counted, memory_mb, named, narrow)
        loaded = load_spans(
            files,
            db=db,
            input_format=input_format,
            keep_going=keep_going,
            columns=ANALYSIS_COLUMNS,
            start_ns=start_ns,
            end_ns=end_ns,
            bar=bar,
        )
        check_budget(table_counts(loaded.spans), memory_mb, named, narrow)
        source = SpanTable(loaded.spans)
        notes = [*loaded.warnings, *(f"skipped {e}" for e in loaded.errors)]
        errors = list(loaded.errors)
        bar.set_label(f"analysing {loaded.spans.num_rows:,} spans")
    if engine != "embedded":
        bar.set_label(f"analysing on {engine}")
    result = runner.analyze(
        source,
        top=top,
        findings=findings,
        warnings=notes,
        what_ifs=whats,
        what_if_threshold_ms=what_if_threshold_ms,
    )
    result.errors = list(errors)
    return _flamegraph(result, flamegraph_out)


def _budget_source(
    files: Sequence[str | os.PathLike[str]],
    db: str | None,
    parquet: str | os.PathLike[str] | None,
) -> tuple[str, str]:
    """What a memory-budget refusal names: the source, and how to read less of it."""
    if parquet is not None:
        return os.fspath(parquet), "a smaller span set"
    if files:
        return f"{len(files)} file(s)", "fewer files at a time"
    return f"the store {db or default_db_path()}", "a time window: start_ns/end_ns in the library"


def _flamegraph(result: Analysis, path: str | os.PathLike[str] | None) -> Analysis:
    """Writes the folded critical-path CPU stacks to ``path`` (when given)."""
    if path is not None:
        from tracelens.render.folded import write_folded

        try:
            write_folded(result.cpu_hotspots, os.fspath(path))
        except OSError as exc:
            raise OptionError(f"--flamegraph-out {os.fspath(path)}: {exc.strerror}") from exc
    return result


def export(db: str | None = None, *, parquet: str | os.PathLike[str]) -> Exported:
    """The store as a Parquet span set (layout: ``docs/design.md``, "Parquet span sets"): the
    library form of ``tracelens export``."""
    from tracelens.parquet import write_parquet
    from tracelens.store import file_mode

    spans = load_spans(db=db).spans
    # The export is as private as the store (a collector's is 0600).
    return write_parquet(spans, parquet, mode=file_mode(db or default_db_path()))


@dataclass
class Imported:
    """What ``import_files`` did: ``spans`` rows in ``traces`` traces read from ``files`` files
    (those in ``errors`` not counted), ``added`` of them new in the store at ``db``."""

    files: int
    spans: int
    traces: int
    added: int
    db: str
    warnings: list[str] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)


def import_files(
    files: Sequence[str | os.PathLike[str]],
    *,
    db: str | None = None,
    input_format: str | None = None,
    keep_going: bool = False,
) -> Imported:
    """Trace files into the store: the library form of ``tracelens import``.

    Spans already there (same trace and span id) are not added twice.  A bad file raises
    ``InputError`` before anything is stored, unless ``keep_going``: then the readable files are
    imported and the others listed in ``errors``.
    """
    import pyarrow.compute as pc

    from tracelens.ingest import Decoded, streamable
    from tracelens.parquet import is_span_set, read_parquet
    from tracelens.store import open_store

    # Parquet span sets (`tracelens export --parquet` directories) are read as they are, before
    # anything is stored.  Files are decoded a chunk at a time, so memory stays bounded for files
    # of any size, and nothing of a file is stored unless it decoded whole (without keep_going,
    # nothing unless every file did): up to ``STREAM_BYTES`` they stream into one store
    # transaction (one a file with keep_going); a larger import is spooled to disk first.
    sets = [f for f in files if is_span_set(f)]
    plain = [f for f in files if f not in sets]
    tables = [read_parquet(d) for d in sets]
    decoded = Decoded()
    errors: list[InputError] = []
    path = db or default_db_path()
    fresh = path != ":memory:" and not os.path.exists(path)
    try:
        with open_store(path) as store:
            store.set_threads(1)  # the decoder takes the other core
            new = store.count() == 0
            added = 0
            if streamable(plain):
                groups = [[f] for f in plain] if keep_going else [plain] if plain else []
                for group in groups:
                    try:
                        added += _store_files(store, group, input_format, decoded, new)
                    except InputError as exc:
                        if not keep_going:
                            raise
                        errors.append(exc)
            else:
                added += _store_spooled(
                    store, plain, input_format, keep_going, decoded, errors, new
                )
            added += sum(store.append(t) for t in tables)
            where = store.path
    except BaseException:
        if fresh:  # nothing was stored: no empty store is left behind either
            for leftover in (path, f"{path}.wal"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(leftover)
        raise
    traces = decoded.traces + sum(
        pc.count_distinct(t["trace_id"]).as_py() for t in tables if t.num_rows
    )
    return Imported(
        files=len(files) - len(errors),
        spans=decoded.num_rows + sum(t.num_rows for t in tables),
        traces=traces,
        added=added,
        db=where,
        warnings=decoded.warnings,
        errors=errors,
    )


def _store_spooled(
    store: DuckDBStore,
    paths: Sequence[str | os.PathLike[str]],
    input_format: str | None,
    keep_going: bool,
    decoded: Decoded,
    errors: list[InputError],
    new: bool,
) -> int:
    """A large import: every file decoded into an on-disk spool first, then stored a chunk (and
    a transaction) at a time; the spans added.  Into an empty store (``new``) a chunk goes in
    without a look-up (``append_new``: with one if a span was not new)."""
    from tracelens.ingest import spool_files

    append = store.append_new if new else store.append
    with spool_files(paths, input_format=input_format, keep_going=keep_going) as result:
        added = sum(append(chunk) for chunk in result.tables())
    decoded.num_rows += result.num_rows
    decoded.spooled_traces += result.traces
    decoded.warnings.extend(result.warnings)
    errors.extend(result.errors)
    return added


def _store_files(
    store: DuckDBStore,
    paths: Sequence[str | os.PathLike[str]],
    input_format: str | None,
    decoded: Decoded,
    new: bool,
) -> int:
    """Decode ``paths`` into ``store`` in one transaction; the spans added.  Into an empty store
    (``new``) spans are expected new, and inserted without looking for them first; if one was
    not (a span repeated in the files), the transaction rolled back and the files are decoded
    again with the store looking."""
    from tracelens.ingest import Decoded, decode_files
    from tracelens.store import NotNew

    for expect_new in (True, False) if new else (False,):
        attempt = Decoded()
        # closed at once when storing fails: its decoding thread stops before a retry starts
        with contextlib.closing(decode_files(paths, attempt, input_format=input_format)) as chunks:
            try:
                added = store.append_all(chunks, new=expect_new)
            except NotNew:
                continue
        decoded.num_rows += attempt.num_rows
        decoded.trace_ids |= attempt.trace_ids
        decoded.warnings.extend(attempt.warnings)
        return added
    raise AssertionError("unreachable: the second attempt does not expect new spans")


PathArg = str | os.PathLike[str]


def diff(
    base: PathArg | Sequence[PathArg] | None = None,
    new: PathArg | Sequence[PathArg] | None = None,
    *,
    db: str | None = None,
    base_since: str | None = None,
    base_until: str | None = None,
    since: str | None = None,
    until: str | None = None,
    input_format: str | None = None,
    keep_going: bool = False,
    findings: bool = True,
    fail_on: str | None = None,
    confidence: float = 0.95,
    resamples: int = 20_000,
    seed: int = 0,
    min_traces: int = 20,
    min_delta_ms: float = 1.0,
    bar: Progress | None = None,
) -> Diff:
    """What got slower from ``base`` to ``new``, why, and whether it is real: the library form
    of ``tracelens diff``.

    ``base`` and ``new`` are each a trace file, a list of them, a directory (its files) or a
    DuckDB store; with neither, both are time windows of the store ``db``: ``base_since`` /
    ``base_until`` and ``since`` / ``until`` (ISO 8601 instants, UTC unless they say otherwise,
    or ``30m``, ``24h``, ``7d`` meaning that long ago; a window holds the traces that started in
    it, until excluded).  Windows also apply to a store given as ``base`` or ``new``.

    ``fail_on`` rules (``"p95>+10%,p99>+200ms"``, see ``tracelens.analysis.diff.rules``) set
    ``Diff.failed`` when a significant regression of a root operation exceeds one.
    ``OptionError`` for parameters that cannot work, ``InputError`` for a bad file (unless
    ``keep_going``).
    """
    import time

    import tracelens.render  # noqa: F401  (registers the result's to_text)
    from tracelens.analysis.diff import compare, parse_rules, profile

    rules = parse_rules(fail_on)
    if not 0 < confidence < 1:
        raise OptionError(f"--confidence: {confidence} is not between 0 and 1")
    if resamples < 100:
        raise OptionError(f"--resamples: {resamples} is fewer than 100")
    if min_traces < 2:
        raise OptionError(f"--min-traces: {min_traces} is fewer than 2")
    if min_delta_ms < 0:
        raise OptionError(f"--min-delta-ms: {min_delta_ms} is negative")
    now_ns = time.time_ns()
    sides = _diff_sides(base, new, db, (base_since, base_until), (since, until), now_ns)
    bar = bar or Progress(enabled=False)
    profiles, labels, errors = [], [], []
    for which, (files, store, window) in zip(("base", "new"), sides, strict=True):
        bar.set_label(f"{which}: loading")
        analysis = analyze(
            files,
            db=store,
            input_format=input_format,
            keep_going=keep_going,
            findings=findings,
            start_ns=window[0],
            end_ns=window[1],
            bar=bar,
        )
        if analysis.traces.traces.height == 0:
            raise TracelensError(f"{which}: no traces in {_side_label(files, store, window)}")
        profiles.append(profile(analysis))
        labels.append(_side_label(files, store, window))
        errors.extend(analysis.errors)
        del analysis  # only the small profile is kept: one analysis in memory at a time
    bar.set_label("comparing")
    result = compare(
        profiles[0],
        profiles[1],
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        min_traces=min_traces,
        min_delta_ms=min_delta_ms,
        rules=rules,
        base_label=labels[0],
        new_label=labels[1],
    )
    result.errors = errors
    return result


Side = tuple[list[str], str | None, tuple[int | None, int | None]]


def _diff_sides(
    base: PathArg | Sequence[PathArg] | None,
    new: PathArg | Sequence[PathArg] | None,
    db: str | None,
    base_window: tuple[str | None, str | None],
    new_window: tuple[str | None, str | None],
    now_ns: int,
) -> tuple[Side, Side]:
    """(files, store, window) for each side; ``OptionError`` for what cannot be compared."""
    from tracelens.analysis.diff.window import parse_window

    bw = parse_window(("--base-since", "--base-until"), base_window, now_ns)
    nw = parse_window(("--since", "--until"), new_window, now_ns)
    if base is None and new is None:
        if bw == (None, None) and nw == (None, None):
            raise OptionError(
                "give BASE and NEW (files, directories or stores), or time windows of one "
                "store: --base-since/--base-until and --since/--until"
            )
        return ([], db, bw), ([], db, nw)
    if base is None or new is None:
        raise OptionError("give both BASE and NEW, or neither (time windows of --db)")
    if db is not None:
        raise OptionError(
            "--db names the store whose windows are compared; with BASE and NEW given, name "
            "the stores as BASE and NEW"
        )
    return _side("BASE", base, bw), _side("NEW", new, nw)


def _side(
    what: str, arg: PathArg | Sequence[PathArg], window: tuple[int | None, int | None]
) -> Side:
    from pathlib import Path

    from tracelens.store import is_store

    paths: list[PathArg] = [arg] if isinstance(arg, (str, os.PathLike)) else list(arg)
    if not paths:
        raise OptionError(f"{what}: no files")
    if len(paths) == 1:
        path = Path(os.fspath(paths[0]))
        if path.is_dir():
            paths = sorted(
                (p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")),
                key=str,
            )
            if not paths:
                raise OptionError(f"{what}: {path} holds no files")
        elif is_store(path):
            return [], str(path), window
        elif not path.exists():
            raise OptionError(f"{what}: {path} does not exist")
    if window != (None, None):
        raise OptionError(f"{what} is a file set: time windows apply to stores only")
    return [os.fspath(p) for p in paths], None, (None, None)


def _side_label(files: list[str], store: str | None, window: tuple[int | None, int | None]) -> str:
    from tracelens.analysis.diff.window import describe_window

    if store is not None or not files:
        where = f"store {store or default_db_path()}"
        return where if window == (None, None) else f"{where} {describe_window(window)}"
    if len(files) == 1:
        return files[0]
    return f"{len(files)} files ({files[0]}, …)"


def _announce(line: str) -> None:
    print(f"tracelens collect: {line}", file=sys.stderr, flush=True)


def collect(
    db: str | None = None,
    *,
    http: str = "127.0.0.1:4318",
    grpc: str = "127.0.0.1:4317",
    token: str | None = None,
    token_file: str | None = None,
    memory_mb: int = 2048,
    max_body_mb: int | None = None,
    grpc_max_mb: float | None = None,
    queue_mb: float | None = None,
    span_metrics: bool = True,
    metrics_quiet_s: float = 10.0,
    metrics_max_operations: int = 200,
    metrics_max_open_traces: int = 100_000,
    announce: Announce = _announce,
) -> None:
    """Receive OTLP spans (HTTP and gRPC) into the store until SIGINT or SIGTERM: the library
    form of ``tracelens collect``.  ``grpc="off"`` serves HTTP only; ``announce`` gets the
    listening addresses and warnings, one line each.  ``GET /metrics`` carries span metrics
    unless ``span_metrics=False``: a trace is counted ``metrics_quiet_s`` after its last span
    (its root in), or at once when more than ``metrics_max_open_traces`` traces are open, with
    at most ``metrics_max_operations`` operation label pairs.

    ``OptionError`` for parameters that cannot work, ``StoreError`` when the store cannot be
    opened, ``OSError`` when an address cannot be bound.
    """
    if "polars" not in sys.modules:
        # The span metrics' analysis runs on one Polars thread: on the collector's cores a
        # pool only competes with decoding and costs more CPU per span (README, Metrics: Cost).
        # Only where Polars is not loaded yet (``tracelens collect``), never changed under it.
        os.environ.setdefault("POLARS_MAX_THREADS", "1")
    from tracelens.collector import run_collector
    from tracelens.collector.options import config_from_options

    config = config_from_options(
        db or default_db_path(),
        http=http,
        grpc=grpc,
        token=token,
        token_file=token_file,
        memory_mb=memory_mb,
        max_body_mb=max_body_mb,
        grpc_max_mb=grpc_max_mb,
        queue_mb=queue_mb,
        metrics_quiet_s=metrics_quiet_s,
        metrics_max_operations=metrics_max_operations,
        announce=announce,
        span_metrics=span_metrics,
        metrics_max_open_traces=metrics_max_open_traces,
    )
    run_collector(config, announce)


def run_demo(
    *,
    requests: int = 36,
    concurrency: int = 6,
    endpoint: str | None = None,
    file: str | None = None,
    seed: int = 0,
    model_slots: int = 2,
    speed: float = 1.0,
    vllm: bool = True,
    echo: Callable[[str], None] = print,
) -> DemoSummary:
    """Run the demo agent and export its spans: the library form of ``tracelens demo``.

    Spans go to the OTLP/HTTP collector at ``endpoint`` (``http://127.0.0.1:4318`` when neither
    it nor ``file`` is given) and/or are appended to ``file`` as OTLP JSON Lines.  ``vllm=False``
    uses the simulated model even if vLLM is there.  ``TracelensError`` when nothing listens at
    ``endpoint`` (before any request runs); ``echo`` gets the demo's progress lines.
    """
    from tracelens.collector.probe import check_reachable
    from tracelens.demo import DEFAULT_ENDPOINT, DemoOptions
    from tracelens.demo import run_demo as run

    if endpoint is None and file is None:
        endpoint = DEFAULT_ENDPOINT
    if endpoint is not None:
        check_reachable(endpoint)
    options = DemoOptions(
        requests=requests,
        concurrency=concurrency,
        seed=seed,
        endpoint=endpoint,
        file=file,
        model_slots=model_slots,
        speed=speed,
        use_vllm=vllm,
    )
    return run(options, echo=echo)


def size(
    files: Sequence[str | os.PathLike[str]] = (),
    *,
    concurrency: int,
    latency_target_ms: float,
    db: str | None = None,
    input_format: str | None = None,
    cores: int | None = None,
    model_slots: int | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> Sizing:
    """Cores and model-server capacity for ``concurrency`` requests at ``latency_target_ms``,
    from measured per-request demand: the library form of ``tracelens size``."""
    import tracelens.render  # noqa: F401  (registers the result's to_text)
    from tracelens.analysis.core import ANALYSIS_COLUMNS
    from tracelens.analysis.sizing import size_traces
    from tracelens.engines import SpanTable, get_engine

    loaded = load_spans(
        files,
        db=db,
        input_format=input_format,
        columns=ANALYSIS_COLUMNS,
        start_ns=start_ns,
        end_ns=end_ns,
    )
    return size_traces(
        get_engine("embedded").traces(SpanTable(loaded.spans)),
        concurrency=concurrency,
        latency_target_ms=latency_target_ms,
        cores=cores,
        model_slots=model_slots,
    )


def write_report(
    files: Sequence[str | os.PathLike[str]] = (),
    *,
    db: str | None = None,
    input_format: str | None = None,
    out: str | os.PathLike[str] | None = None,
    weekly: bool = False,
    week: str | None = None,
    out_dir: str | os.PathLike[str] = "reports",
    title: str | None = None,
    keep_going: bool = False,
    findings: bool = True,
    what_if: Sequence[str] = (),
    what_if_threshold_ms: float | None = None,
    bar: Progress | None = None,
    parquet: str | os.PathLike[str] | None = None,
    engine: str = "embedded",
    master: str | None = None,
    spark_table: str | None = None,
    memory_mb: int | None = None,
) -> Written:
    """A self-contained HTML report of ``files`` (or the store ``db``, or the Parquet span set
    ``parquet``, or with ``engine="spark"`` the Spark table ``spark_table``: as for
    ``analyze``) written to ``out``; with ``weekly`` (implied by ``week``), one page per ISO
    week of the store plus an index in ``out_dir`` (see ``write_weekly``).  ``what_if`` and
    ``what_if_threshold_ms`` add the what-if findings, as for ``analyze``, to the report (and
    to every week's).  ``bar`` shows the phases when given.  ``memory_mb``: the analysis' memory
    budget, as for ``analyze`` (each week's, with ``weekly``).

    ``OptionError`` for a combination that cannot work, ``InputError`` for a bad file (unless
    ``keep_going``: the file is skipped and listed in ``errors``).  The work is
    ``tracelens._reports.write_report``'s (loaded on first use: it brings Polars and Jinja).
    """
    from tracelens import _reports

    return _reports.write_report(
        _library(),
        files,
        db=db,
        input_format=input_format,
        out=out,
        weekly=weekly,
        week=week,
        out_dir=out_dir,
        title=title,
        keep_going=keep_going,
        findings=findings,
        what_if=what_if,
        what_if_threshold_ms=what_if_threshold_ms,
        bar=bar,
        parquet=parquet,
        engine=engine,
        master=master,
        spark_table=spark_table,
        memory_mb=memory_mb,
    )


def write_weekly(
    db: str | None = None,
    out_dir: str | os.PathLike[str] = "reports",
    week: str | None = None,
    *,
    findings: bool = True,
    what_if: Sequence[str] = (),
    what_if_threshold_ms: float | None = None,
    title: str | None = None,
    threshold: float | None = None,
    min_samples: int | None = None,
    bar: Progress | None = None,
    memory_mb: int | None = None,
) -> list[Path]:
    """One report per ISO week with traces in the store, plus ``index.html``; or, with ``week``,
    that week's report only (compared with the latest earlier week that has traces).
    ``threshold`` and ``min_samples`` (None: ``analysis.weekly.THRESHOLD``, ``MIN_SAMPLES``) say
    which week-over-week changes are flagged; ``memory_mb`` is each week's analysis' memory
    budget, as for ``analyze``.  Returns the paths written, the index last."""
    from tracelens import _reports

    return _reports.write_weekly(
        _library(),
        db,
        out_dir,
        week,
        findings=findings,
        what_if=what_if,
        what_if_threshold_ms=what_if_threshold_ms,
        title=title,
        threshold=threshold,
        min_samples=min_samples,
        bar=bar,
        memory_mb=memory_mb,
    )


def weeks_in(db: str | None = None) -> list[tuple[str, int]]:
    """(ISO week, traces) for every week with a trace in the store, oldest first."""
    from tracelens import _reports

    return _reports.weeks_in(_library(), db)


def _library() -> Library:
    from tracelens._reports import Library

    return Library(analyze=analyze, load_spans=load_spans)


def __getattr__(name: str) -> Any:
    if name == "Written":  # loaded on first use: it brings Polars and Jinja
        from tracelens._reports import Written

        return Written
    raise AttributeError(f"module 'tracelens.api' has no attribute {name!r}")
