"""Where each span's own time went: cpu, gpu, io, wait or unknown.

A span's kind is what the instrumentation measured (``tracelens.kind``) or, for spans from other
instrumentation, inferred from its attributes with the rules of ``docs/attributes.md``
(first match wins; nothing is silently counted as CPU).  Each span also gets a *mix*: the
fractions of its self time per kind, so a critical-path section can be split where the span's
on-CPU time (``tracelens.cpu_ns``) or vLLM's queue/model timings are known.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import polars as pl
from tracelens_instrumentation import attributes as A

KINDS = A.KINDS

_WAIT_NAME = (
    r"(?i)(^|[^a-z])(queue|queued|lock|semaphore|sleep|rate[ _.-]?limit|throttle|backoff"
    r"|wait|waiting)([^a-z]|$)"
)
_VLLM_REQUEST = "llm_request"


# The attributes the rules read, pulled out of the map once into temporary columns.
_READ = (
    A.GEN_AI_OPERATION_NAME,
    A.OPENINFERENCE_SPAN_KIND,
    A.GEN_AI_LATENCY_TIME_IN_QUEUE,
    A.GEN_AI_USAGE_INPUT_TOKENS,
    A.GEN_AI_USAGE_OUTPUT_TOKENS,
    A.GEN_AI_USAGE_PROMPT_TOKENS,
    A.GEN_AI_USAGE_COMPLETION_TOKENS,
    A.HTTP_REQUEST_METHOD,
    A.HTTP_METHOD,
    A.DB_SYSTEM,
    A.DB_SYSTEM_NAME,
    A.RPC_SYSTEM,
    A.RPC_SYSTEM_NAME,
    A.MESSAGING_SYSTEM,
    A.IO_NS,
    A.WAIT_NS,
    A.GPU_NS,
    A.GPU_WAIT_NS,
)
_TMP = "_attr:"
# Every attribute key ``resolve_kinds`` (so ``analyze_traces``) reads: a reader that needs only
# the analysis can leave the rest of the map in the store (the collector's /metrics loop).
ANALYSIS_ATTRIBUTES: Final = _READ


def _attr(key: str) -> pl.Expr:
    if key in _READ:
        return pl.col(_TMP + key)
    return pl.col("attributes").map.get(key)


def attribute_columns(spans: pl.DataFrame, keys: Sequence[str]) -> list[pl.Series]:
    """The value of each of ``keys`` in every row's attribute map, one column per key (null
    where absent; a key repeated in one map gives its first value, as ``map.get`` does).

    One pass over the flattened map instead of one ``map.get`` per key, each of which scans
    every entry: for the 16 keys the rules read, 0.16 s instead of 0.41 s on 1M spans of eight
    attributes each.
    """
    n = spans.height
    wanted = list(dict.fromkeys(keys))
    attrs = spans["attributes"]
    lens = attrs.map.len().fill_null(0).to_numpy()
    flat_keys = attrs.map.keys().explode(empty_as_null=False, keep_nulls=False)
    hit = flat_keys.is_in(wanted).to_numpy()
    # The row of each wanted entry: the first row whose entries end after it (no per-entry array).
    rows = np.searchsorted(np.cumsum(lens, dtype=np.int64), np.flatnonzero(hit), side="right")
    code = flat_keys.filter(hit).cast(pl.Enum(wanted)).to_physical().to_numpy()
    values = attrs.map.values().explode(empty_as_null=False, keep_nulls=False).filter(hit)
    out = []
    for j, key in enumerate(wanted):
        at = np.flatnonzero(code == j)  # entries of this key, in row order
        r = rows[at]
        first = np.ones(len(r), dtype=bool)
        first[1:] = r[1:] != r[:-1]
        col = pl.Series(key, dtype=pl.String).extend_constant(None, n)
        if len(at):
            col = col.scatter(r[first], values.gather(at[first]))
        out.append(col)
    return out


def _with_read_attributes(df: pl.DataFrame) -> pl.LazyFrame:
    cols = attribute_columns(df, _READ)
    return df.with_columns(c.alias(_TMP + c.name) for c in cols).lazy()


def _has(*keys: str) -> pl.Expr:
    expr = pl.lit(False)
    for key in keys:
        expr = expr | _attr(key).is_not_null()
    return expr


def _seconds(key: str) -> pl.Expr:
    return _attr(key).cast(pl.Float64, strict=False)


def model_call() -> pl.Expr:
    """Whether a span is a call to a model: the one rule for the whole code base (kinds call its
    time ``gpu``; the findings treat its output as what may feed every later hop).

    A span declared ``gpu`` by the instrumentation (model inference), the spec's operation
    names, OpenInference's LLM kinds, vLLM's ``llm_request``, and beyond them a span that
    reports model token usage for itself (any-agent's "call_llm", LiteLLM, ...) unless it is
    an agent or a tool step that merely sums its children's usage.
    """
    op = _attr(A.GEN_AI_OPERATION_NAME)
    oi = _attr(A.OPENINFERENCE_SPAN_KIND).str.to_uppercase()
    is_vllm = (pl.col("name") == _VLLM_REQUEST) & _has(A.GEN_AI_LATENCY_TIME_IN_QUEUE)
    usage = _has(
        A.GEN_AI_USAGE_INPUT_TOKENS,
        A.GEN_AI_USAGE_OUTPUT_TOKENS,
        A.GEN_AI_USAGE_PROMPT_TOKENS,
        A.GEN_AI_USAGE_COMPLETION_TOKENS,
    ) & ~op.fill_null("").is_in(["invoke_agent", "create_agent", "execute_tool"])
    # @trace(kind="gpu"): inference.  A kind the decorator *measured* gpu (a step waiting for
    # the device, docs/attributes.md "GPU activity") carries tracelens.io_ns and is no model call.
    declared = (pl.col("kind").str.to_lowercase() == A.GPU) & ~_has(A.IO_NS)
    return (
        is_vllm
        | declared.fill_null(False)
        | op.is_in(sorted(A.GEN_AI_MODEL_OPERATIONS)).fill_null(False)
        | oi.is_in(sorted(A.OPENINFERENCE_MODEL_KINDS)).fill_null(False)
        | usage
    )


def inferred_kind(model: pl.Expr | None = None) -> pl.Expr:
    """The attributes.md inference table as one vectorised expression; ``model``: the
    ``model_call()`` column where the caller has it already."""
    span_kind = pl.col("span_kind")
    oi = _attr(A.OPENINFERENCE_SPAN_KIND).str.to_uppercase()
    model = model_call() if model is None else model
    http_client = _has(A.HTTP_REQUEST_METHOD, A.HTTP_METHOD) & (span_kind == "client")
    # A SERVER or CONSUMER span of an RPC or a message is the receiver's own work, not IO.
    receiving = span_kind.is_in(["server", "consumer"])
    io = (
        _has(A.DB_SYSTEM, A.DB_SYSTEM_NAME)
        | (_has(A.RPC_SYSTEM, A.RPC_SYSTEM_NAME, A.MESSAGING_SYSTEM) & ~receiving)
        | http_client
        | (oi == A.OPENINFERENCE_RETRIEVER)
        | span_kind.is_in(["client", "producer"])
    )
    wait = pl.col("name").str.contains(_WAIT_NAME)
    return (
        pl.when(model)
        .then(pl.lit(A.GPU))
        .when(io)
        .then(pl.lit(A.IO))
        .when(wait)
        .then(pl.lit(A.WAIT))
        .otherwise(pl.lit(A.UNKNOWN))
    )


def resolve_kinds(spans: pl.DataFrame, parent: pl.Series) -> pl.DataFrame:
    """Add ``kind_resolved``, ``kind_source``, ``self_ns`` and the ``mix_*`` columns.

    ``parent`` is each row's parent row (-1 for roots), as ``tree.build_forest`` resolved it.
    """
    explicit = pl.col("kind").str.to_lowercase()
    lazy = (
        _with_read_attributes(spans)
        .with_columns(model_call().alias("model_call"))
        .with_columns(
            pl.when(explicit.is_in(list(A.MEASURED_KINDS)))
            .then(explicit)
            .otherwise(inferred_kind(pl.col("model_call")))
            .alias("kind_resolved"),
            pl.when(explicit.is_in(list(A.MEASURED_KINDS)))
            .then(pl.lit("measured"))
            .otherwise(pl.lit("inferred"))
            .alias("kind_source"),
            parent.alias("_parent"),
        )
    )
    df = _with_self_time(lazy.collect())
    temporary = [c for c in df.columns if c.startswith(_TMP)]
    return _with_gpu_kind(_with_mix(df.lazy())).collect().drop(temporary)


def _with_self_time(df: pl.DataFrame) -> pl.DataFrame:
    """Self time = duration minus the union of the children's windows clamped to the span's.

    Vectorised: children sorted by (parent, clamped start), a segmented running max of their
    clamped ends gives each child's newly covered time, summed per parent with ``bincount``.
    """
    parent = df["_parent"].to_numpy()
    start = df["start_ns"].to_numpy()
    end = df["end_ns"].to_numpy()
    n = len(parent)
    kid = np.flatnonzero(parent >= 0)
    p = parent[kid]
    cs = np.maximum(start[kid], start[p])
    ce = np.minimum(end[kid], end[p])
    keep = ce > cs
    kid, p, cs, ce = kid[keep], p[keep], cs[keep], ce[keep]
    order = np.lexsort((cs, p))
    p, cs, ce = p[order], cs[order], ce[order]
    covered_by_kids: np.ndarray = np.zeros(n, dtype=np.float64)
    if len(p):
        first = np.ones(len(p), dtype=bool)
        first[1:] = p[1:] != p[:-1]
        group = np.cumsum(first) - 1
        rel = ce - start[p]  # >= 0, at most the parent's duration
        width = int(rel.max()) + 1
        if width * (int(group[-1]) + 1) < 2**62:
            run = np.maximum.accumulate(rel + group * width) - group * width
        else:  # pragma: no cover - astronomically long windows: fall back to Polars
            run = (
                pl.DataFrame({"g": group, "r": rel})
                .select(pl.col("r").cum_max().over("g"))["r"]
                .to_numpy()
            )
        prev = np.empty_like(run)
        prev[1:] = run[:-1]
        prev_abs = np.where(first, cs, prev + start[p])
        newly = np.clip(ce - np.maximum(cs, prev_abs), 0, None)
        covered_by_kids = np.bincount(p, weights=newly, minlength=n)
    cpu = df["cpu_ns"].fill_null(0).to_numpy()
    all_kids = np.flatnonzero(parent >= 0)
    kids_cpu = np.bincount(parent[all_kids], weights=cpu[all_kids], minlength=n)
    self_ns = (end - start) - covered_by_kids.astype(np.int64)
    self_cpu = np.clip(cpu - kids_cpu.astype(np.int64), 0, None)
    return df.with_columns(
        pl.Series("self_ns", self_ns, dtype=pl.Int64),
        pl.when(pl.col("cpu_ns").is_not_null())
        .then(pl.Series("self_cpu_ns", self_cpu, dtype=pl.Int64))
        .otherwise(None)
        .alias("self_cpu_ns"),
    )


def _with_mix(df: pl.LazyFrame) -> pl.LazyFrame:
    """Fractions of each span's self time per kind (they sum to 1).

    * Our decorator's measured kinds write ``tracelens.io_ns`` / ``tracelens.wait_ns``: the
      span's own off-CPU time blocked on io and waiting.  Those are taken as they are; the rest
      of the self time is the CPU side (on-CPU, or runnable and waiting for the GIL).
    * Otherwise, with ``tracelens.cpu_ns`` known, the on-CPU share of self time (the span's CPU
      minus its children's) is ``cpu`` and the rest goes to the span's own off-CPU kind, or to
      ``unknown`` when the span itself is cpu-kind.
    * vLLM ``llm_request``: time in queue is ``wait``, the rest of the request is the model.
    * Otherwise the whole self time is the span's kind.

    GPU activity (``tracelens.gpu_ns`` / ``gpu_wait_ns``, docs/attributes.md "Kinds") comes
    first: the device-side share :func:`gpu_fraction` is ``gpu``, and the rules above share out
    only what is left of the self time (io and wait scaled into it, on-CPU capped by it).
    """
    kind = pl.col("kind_resolved")
    self_ns = pl.col("self_ns").cast(pl.Float64)
    io_m = _attr(A.IO_NS).cast(pl.Float64, strict=False)
    wait_m = _attr(A.WAIT_NS).cast(pl.Float64, strict=False)
    has_split = (io_m.is_not_null() | wait_m.is_not_null()) & (self_ns > 0)
    gpu_f = gpu_fraction()
    left = 1.0 - gpu_f  # what the device side leaves of the self time
    io_raw = (io_m.fill_null(0.0) / self_ns).clip(0.0, 1.0)
    wait_raw = (wait_m.fill_null(0.0) / self_ns).clip(0.0, 1.0)
    over = pl.max_horizontal((io_raw + wait_raw) / left.clip(1e-12), pl.lit(1.0))
    io_f, wait_f = io_raw / over, wait_raw / over
    on_cpu = pl.when(self_ns > 0).then((pl.col("self_cpu_ns") / self_ns).clip(0.0, 1.0))
    cpu_f = pl.min_horizontal(on_cpu, left)
    has_cpu = pl.col("self_cpu_ns").is_not_null() & on_cpu.is_not_null()
    rest = left - cpu_f
    off_kind = pl.when(kind == A.CPU).then(pl.lit(A.UNKNOWN)).otherwise(kind)
    q = _seconds(A.GEN_AI_LATENCY_TIME_IN_QUEUE) * 1e9
    dur = (pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64)
    vllm_wait = pl.when(dur > 0).then((q / dur).clip(0.0, 1.0)).otherwise(0.0)
    is_vllm = (pl.col("name") == _VLLM_REQUEST) & q.is_not_null() & ~has_split & ~has_cpu

    def share(k: str) -> pl.Expr:
        device = gpu_f if k == A.GPU else pl.lit(0.0)
        if k == A.CPU:
            split = left - io_f - wait_f
        elif k == A.IO:
            split = io_f
        elif k == A.WAIT:
            split = wait_f
        else:
            split = pl.lit(0.0)
        cpu_only = cpu_f if k == A.CPU else (off_kind == k).cast(pl.Float64) * rest
        vllm = vllm_wait if k == A.WAIT else (1.0 - vllm_wait if k == A.GPU else pl.lit(0.0))
        whole = (kind == k).cast(pl.Float64)
        by_rules = (
            pl.when(has_split)
            .then(split)
            .when(has_cpu)
            .then(cpu_only)
            .when(is_vllm)
            .then(vllm)
            .otherwise(whole)
            .fill_null(0.0)
        )
        gpu_rest = (
            pl.when(has_split | has_cpu).then(by_rules).otherwise(_rest_without_cpu(k, kind) * left)
        )
        return (
            pl.when(gpu_f > 0)
            .then(device + gpu_rest)
            .otherwise(by_rules)
            .fill_null(0.0)
            .alias(f"mix_{k}")
        )

    return df.with_columns([share(k) for k in KINDS])


def _rest_without_cpu(k: str, kind: pl.Expr) -> pl.Expr:
    """Where the self time the device does not explain goes when nothing else was measured:
    to the span's kind, except that a gpu-kind span's unexplained rest is ``unknown`` (the
    device measured it busy only so much; the rest is not device time)."""
    own = pl.when(kind == A.GPU).then(pl.lit(A.UNKNOWN)).otherwise(kind)
    return (own == k).cast(pl.Float64)


def gpu_fraction(
    busy: pl.Expr | None = None, waited: pl.Expr | None = None, self_ns: pl.Expr | None = None
) -> pl.Expr:
    """The device side of a span's self time, as a fraction (docs/attributes.md, "Kinds").

    Device-side time is time the device worked for the span (``tracelens.gpu_ns``: the union
    of the device intervals its own launches produced, inside its window) or the span's thread
    waited for the device (``tracelens.gpu_wait_ns``, on-CPU spinning or asleep in the
    driver).  A wait is for device work, so it lies inside device-busy time unless the device
    works for someone else: the union is taken as the larger of the two, capped at the self
    time.  0 where neither was measured.  ``busy`` / ``waited`` / ``self_ns``: those columns
    where the caller has them (default: read from the attributes inside ``resolve_kinds``).
    """
    self_ns = (pl.col("self_ns") if self_ns is None else self_ns).cast(pl.Float64)
    busy = _attr(A.GPU_NS) if busy is None else busy
    waited = _attr(A.GPU_WAIT_NS) if waited is None else waited
    device = pl.max_horizontal(
        busy.cast(pl.Float64, strict=False).fill_null(0.0),
        waited.cast(pl.Float64, strict=False).fill_null(0.0),
    )
    return pl.when(self_ns > 0).then((device / self_ns).clip(0.0, 1.0)).otherwise(0.0)


def _with_gpu_kind(df: pl.LazyFrame) -> pl.LazyFrame:
    """A span with device-side time measured gets the kind its split says: the largest share
    of its self time (ties in ``KINDS`` order), measured.  The host spinning in a
    synchronise is on-CPU, but its time is the device's, so the thread clock alone must not
    decide (docs/attributes.md, "Kinds")."""
    measured = gpu_fraction() > 0
    largest = pl.max_horizontal([pl.col(f"mix_{k}") for k in KINDS])
    pick = pl.lit(None, dtype=pl.String)
    for k in reversed(KINDS):
        pick = pl.when(pl.col(f"mix_{k}") >= largest).then(pl.lit(k)).otherwise(pick)
    return df.with_columns(
        pl.when(measured).then(pick).otherwise(pl.col("kind_resolved")).alias("kind_resolved"),
        pl.when(measured)
        .then(pl.lit("measured"))
        .otherwise(pl.col("kind_source"))
        .alias("kind_source"),
    )
