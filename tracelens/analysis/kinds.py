"""Where each span's own time went: cpu, gpu, io, wait or unknown.

A span's kind is what the instrumentation measured (``tracelens.kind``) or, for spans from other
instrumentation, inferred from its attributes with the rules of ``shared/spec/attributes.md``
(first match wins; nothing is silently counted as CPU).  Each span also gets a *mix*: the
fractions of its self time per kind, so a critical-path section can be split where the span's
on-CPU time (``tracelens.cpu_ns``) or vLLM's queue/model timings are known.
"""

from __future__ import annotations

import polars as pl
from tracelens_instrumentation import attributes as a

KINDS = a.KINDS
MIX_COLUMNS = tuple(f"mix_{k}" for k in KINDS)

_WAIT_NAME = (
    r"(?i)(^|[^a-z])(queue|queued|lock|semaphore|sleep|rate[ _.-]?limit|throttle|backoff"
    r"|wait|waiting)([^a-z]|$)"
)
_VLLM_REQUEST = "llm_request"


def _attr(key: str) -> pl.Expr:
    return pl.col("attributes").map.get(key)


def _has(*keys: str) -> pl.Expr:
    expr = pl.lit(False)
    for key in keys:
        expr = expr | _attr(key).is_not_null()
    return expr


def _seconds(key: str) -> pl.Expr:
    return _attr(key).cast(pl.Float64, strict=False)


def inferred_kind() -> pl.Expr:
    """The attributes.md inference table as one vectorised expression."""
    op = _attr(a.GEN_AI_OPERATION_NAME)
    oi = _attr(a.OPENINFERENCE_SPAN_KIND).str.to_uppercase()
    span_kind = pl.col("span_kind")
    is_vllm = (pl.col("name") == _VLLM_REQUEST) & _has(a.GEN_AI_LATENCY_TIME_IN_QUEUE)
    model = op.is_in(sorted(a.GEN_AI_MODEL_OPERATIONS)) | oi.is_in(
        sorted(a.OPENINFERENCE_MODEL_KINDS)
    )
    http_client = _has(a.HTTP_REQUEST_METHOD, a.HTTP_METHOD) & (span_kind == "client")
    # A SERVER or CONSUMER span of an RPC or a message is the receiver's own work, not IO.
    receiving = span_kind.is_in(["server", "consumer"])
    io = (
        _has(a.DB_SYSTEM, a.DB_SYSTEM_NAME)
        | (_has(a.RPC_SYSTEM, a.RPC_SYSTEM_NAME, a.MESSAGING_SYSTEM) & ~receiving)
        | http_client
        | (oi == a.OPENINFERENCE_RETRIEVER)
        | span_kind.is_in(["client", "producer"])
    )
    wait = pl.col("name").str.contains(_WAIT_NAME)
    return (
        pl.when(is_vllm | model)
        .then(pl.lit(a.GPU))
        .when(io)
        .then(pl.lit(a.IO))
        .when(wait)
        .then(pl.lit(a.WAIT))
        .otherwise(pl.lit(a.UNKNOWN))
    )


def resolve_kinds(spans: pl.DataFrame, parent: pl.Series) -> pl.DataFrame:
    """Add ``kind_resolved``, ``kind_source``, ``self_ns`` and the ``mix_*`` columns.

    ``parent`` is each row's parent row (-1 for roots), as ``tree.build_forest`` resolved it.
    """
    explicit = pl.col("kind").str.to_lowercase()
    df = spans.with_columns(
        pl.when(explicit.is_in(list(a.MEASURED_KINDS)))
        .then(explicit)
        .otherwise(inferred_kind())
        .alias("kind_resolved"),
        pl.when(explicit.is_in(list(a.MEASURED_KINDS)))
        .then(pl.lit("measured"))
        .otherwise(pl.lit("inferred"))
        .alias("kind_source"),
        parent.alias("_parent"),
    )
    df = _with_self_time(df)
    return _with_mix(df)


def _with_self_time(df: pl.DataFrame) -> pl.DataFrame:
    """Self time = duration minus the union of the children's windows clamped to the span's."""
    parents = df.select(
        pl.col("_i").alias("_parent"),
        pl.col("start_ns").alias("_ps"),
        pl.col("end_ns").alias("_pe"),
    )
    kids = (
        df.filter(pl.col("_parent") >= 0)
        .select("_parent", "start_ns", "end_ns", "cpu_ns")
        .join(parents, on="_parent", how="inner")
        .with_columns(
            pl.max_horizontal("start_ns", "_ps").alias("_s"),
            pl.min_horizontal("end_ns", "_pe").alias("_e"),
        )
        .filter(pl.col("_e") > pl.col("_s"))
        .sort(["_parent", "_s"])
        .with_columns(
            pl.col("_e").cum_max().shift(1).over("_parent").alias("_prev"),
        )
        .with_columns(
            (pl.col("_e") - pl.max_horizontal("_s", pl.col("_prev").fill_null(pl.col("_s"))))
            .clip(lower_bound=0)
            .alias("_covered")
        )
        .group_by("_parent")
        .agg(pl.col("_covered").sum(), pl.col("cpu_ns").sum().alias("_kids_cpu"))
    )
    all_kids_cpu = (
        df.filter(pl.col("_parent") >= 0)
        .group_by("_parent")
        .agg(pl.col("cpu_ns").sum().alias("_kids_cpu_all"))
    )
    out = (
        df.join(kids.rename({"_parent": "_i"}), on="_i", how="left", maintain_order="left")
        .join(all_kids_cpu.rename({"_parent": "_i"}), on="_i", how="left", maintain_order="left")
        .with_columns(
            (pl.col("end_ns") - pl.col("start_ns") - pl.col("_covered").fill_null(0)).alias(
                "self_ns"
            ),
            (pl.col("cpu_ns") - pl.col("_kids_cpu_all").fill_null(0))
            .clip(lower_bound=0)
            .alias("self_cpu_ns"),
        )
        .drop("_covered", "_kids_cpu", "_kids_cpu_all")
    )
    return out


def _with_mix(df: pl.DataFrame) -> pl.DataFrame:
    kind = pl.col("kind_resolved")
    self_ns = pl.col("self_ns").cast(pl.Float64)
    # Measured split: on-CPU share of self time, the rest to io / wait as measured, else to the
    # span's own off-CPU kind (or unknown when the span itself is cpu-kind).
    cpu_f = pl.when(self_ns > 0).then((pl.col("self_cpu_ns") / self_ns).clip(0.0, 1.0))
    io_m = _attr(a.IO_NS).cast(pl.Float64, strict=False)
    wait_m = _attr(a.WAIT_NS).cast(pl.Float64, strict=False)
    off_total = io_m.fill_null(0.0) + wait_m.fill_null(0.0)
    has_split = (io_m.is_not_null() | wait_m.is_not_null()) & (off_total > 0)
    rest = 1.0 - cpu_f
    io_f = pl.when(has_split).then(rest * io_m.fill_null(0.0) / off_total)
    wait_f = pl.when(has_split).then(rest * wait_m.fill_null(0.0) / off_total)
    # vLLM llm_request: queueing is wait, the rest of the request is the model.
    q = _seconds(a.GEN_AI_LATENCY_TIME_IN_QUEUE) * 1e9
    dur = (pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64)
    vllm_wait = pl.when(dur > 0).then((q / dur).clip(0.0, 1.0)).otherwise(0.0)
    is_vllm = (pl.col("name") == _VLLM_REQUEST) & q.is_not_null() & pl.col("cpu_ns").is_null()

    measured = pl.col("self_cpu_ns").is_not_null() & cpu_f.is_not_null()
    off_kind = pl.when(kind == a.CPU).then(pl.lit(a.UNKNOWN)).otherwise(kind)

    def share(k: str) -> pl.Expr:
        base = (kind == k).cast(pl.Float64)
        m: pl.Expr
        if k == a.CPU:
            m = cpu_f
        elif k == a.IO:
            m = pl.when(has_split).then(io_f).otherwise((off_kind == k).cast(pl.Float64) * rest)
        elif k == a.WAIT:
            m = pl.when(has_split).then(wait_f).otherwise((off_kind == k).cast(pl.Float64) * rest)
        else:
            m = pl.when(has_split).then(0.0).otherwise((off_kind == k).cast(pl.Float64) * rest)
        v = pl.when(measured).then(m).otherwise(base)
        if k == a.WAIT:
            v = pl.when(is_vllm).then(vllm_wait).otherwise(v)
        elif k == a.GPU:
            v = pl.when(is_vllm).then(1.0 - vllm_wait).otherwise(v)
        else:
            v = pl.when(is_vllm).then(0.0).otherwise(v)
        return v.fill_null(0.0).alias(f"mix_{k}")

    return df.with_columns([share(k) for k in KINDS])
