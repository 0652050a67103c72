"""What a collector is told: addresses, limits, the token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

DEFAULT_HTTP: Final = "127.0.0.1:4318"
DEFAULT_GRPC: Final = "127.0.0.1:4317"
MiB: Final = 1 << 20
DEFAULT_MEMORY_MB: Final = 2048
MIN_MEMORY_MB: Final = 512
DEFAULT_MAX_BODY: Final = 64 * MiB
DEFAULT_GRPC_MESSAGE: Final = 4 * MiB  # grpc's own default, and the Go collector's
LARGE_BODY: Final = 1 * MiB  # decoded bodies above this take turns (see ``ingest``)
# Span metrics are on by default (``--no-span-metrics``: ingest metrics only).  A trace is counted
# once its root came and no span came for it for the quiet period (README, Metrics).
DEFAULT_METRICS_QUIET_S: Final = 10.0
DEFAULT_METRICS_MAX_OPERATIONS: Final = 200  # see ``span_metrics.OperationCap``
DEFAULT_METRICS_MAX_OPEN_TRACES: Final = 100_000  # see ``completion.CompletionTracker``


BASE_MB: Final = 192  # the interpreter, pyarrow, DuckDB, grpc: an idle collector is ~150 MiB


@dataclass(frozen=True)
class MemoryPlan:
    """How one budget (``--memory-mb``) is shared out; every part is a hard limit somewhere.

    ``BASE_MB`` is kept for the interpreter and its libraries; of the rest, in sevenths:

    - DuckDB's ``memory_limit``: two;
    - the queue (decoded spans and their bodies until journaled and merged): two;
    - request bodies being read or decoded, both transports (``Budget``): one;
    - gRPC messages, which grpc holds whole (about twice: its buffer and the handler's bytes)
      before the handler runs: one, so ``grpc_rpcs`` x 2 x ``grpc_message_bytes`` fits it
      (grpc refuses a larger message from its length prefix, before buffering it);
    - decoding (the inflated body and the tables built from it; large bodies one at a time):
      one, so 4 x ``max_body`` fits it.
    """

    memory_bytes: int
    duckdb_bytes: int
    queue_bytes: int
    inflight_bytes: int
    grpc_bytes: int
    decode_bytes: int
    max_body_bytes: int
    grpc_message_bytes: int
    grpc_rpcs: int

    @staticmethod
    def fit(
        memory_mb: int, max_body_bytes: int | None = None, grpc_message_bytes: int | None = None
    ) -> MemoryPlan:
        """The plan for ``memory_mb``; ``ValueError`` when a body or message limit cannot fit."""
        if memory_mb < MIN_MEMORY_MB:
            raise ValueError(f"a memory budget of {memory_mb} MiB is below {MIN_MEMORY_MB} MiB")
        seventh = (memory_mb - BASE_MB) * MiB // 7
        largest = seventh // 4  # the decode share holds 4 bodies
        if max_body_bytes is None:
            max_body_bytes = min(DEFAULT_MAX_BODY, largest)
        elif max_body_bytes > largest:
            raise ValueError(
                f"a body limit of {max_body_bytes // MiB} MiB does not fit a memory budget of "
                f"{memory_mb} MiB (at most {largest / MiB:.1f} MiB; raise --memory-mb)"
            )
        if grpc_message_bytes is None:
            grpc_message_bytes = min(DEFAULT_GRPC_MESSAGE, max_body_bytes)
        elif grpc_message_bytes > min(max_body_bytes, seventh // 2):
            raise ValueError(
                f"a gRPC message limit of {grpc_message_bytes // MiB} MiB does not fit a memory "
                f"budget of {memory_mb} MiB and a body limit of {max_body_bytes // MiB} MiB "
                f"(at most {min(max_body_bytes, seventh // 2) / MiB:.1f} MiB)"
            )
        return MemoryPlan(
            memory_bytes=memory_mb * MiB,
            duckdb_bytes=2 * seventh,
            queue_bytes=2 * seventh,
            inflight_bytes=seventh,
            grpc_bytes=seventh,
            decode_bytes=seventh,
            max_body_bytes=max_body_bytes,
            grpc_message_bytes=grpc_message_bytes,
            grpc_rpcs=max(1, seventh // (2 * grpc_message_bytes)),
        )


_DEFAULT_PLAN: Final = MemoryPlan.fit(DEFAULT_MEMORY_MB)


@dataclass(frozen=True)
class CollectorConfig:
    """Every limit is derived from one memory budget by ``from_budget`` (``MemoryPlan``); the
    field defaults are the default budget's."""

    db: str
    http: str = DEFAULT_HTTP
    grpc: str | None = DEFAULT_GRPC  # None: no gRPC listener
    token: str | None = None
    memory_mb: int = DEFAULT_MEMORY_MB
    max_body_bytes: int = _DEFAULT_PLAN.max_body_bytes  # per request, after decompression too
    max_inflight_bytes: int = _DEFAULT_PLAN.inflight_bytes  # bodies being read or decoded at once
    max_queue_bytes: int = _DEFAULT_PLAN.queue_bytes  # decoded spans not yet in DuckDB
    max_batch_rows: int = 100_000  # spans per journal commit
    max_connections: int = 2048
    retry_after_s: int = 1
    duckdb_memory: str = f"{_DEFAULT_PLAN.duckdb_bytes // MiB}MiB"  # DuckDB's own limit
    duckdb_threads: int = 1  # more only compete with decoding for the same cores
    # Two: a large body being decoded never holds up small ones (``ingest``); decoding holds the
    # GIL, so more would only add switching.
    decode_threads: int = 2
    decode_bytes: int = _DEFAULT_PLAN.decode_bytes  # what one JSON body may build while decoded
    max_grpc_message_bytes: int = _DEFAULT_PLAN.grpc_message_bytes
    max_grpc_rpcs: int = _DEFAULT_PLAN.grpc_rpcs  # gRPC holds each message whole first
    drain_timeout_s: float = 30.0
    # /metrics: span metrics (False: ingest metrics only); a trace is complete (analysed,
    # counted) once no span came for ``metrics_quiet_s`` after its root, or at once when more
    # than ``metrics_max_open_traces`` are open.
    span_metrics: bool = True
    metrics_quiet_s: float = DEFAULT_METRICS_QUIET_S
    metrics_max_operations: int = DEFAULT_METRICS_MAX_OPERATIONS  # the label cap
    metrics_max_open_traces: int = DEFAULT_METRICS_MAX_OPEN_TRACES

    def __post_init__(self) -> None:
        if self.span_metrics and not self.metrics_quiet_s > 0:
            raise ValueError(
                f"the metrics quiet period must be positive, not {self.metrics_quiet_s} "
                "(to turn the span metrics off: --no-span-metrics)"
            )
        if self.metrics_max_open_traces < 1:
            raise ValueError(
                f"the cap on open traces must be at least 1, not {self.metrics_max_open_traces}"
            )

    @staticmethod
    def from_budget(
        db: str,
        memory_mb: int = DEFAULT_MEMORY_MB,
        *,
        max_body_bytes: int | None = None,
        max_grpc_message_bytes: int | None = None,
        max_queue_bytes: int | None = None,
        **rest: Any,
    ) -> CollectorConfig:
        """A config whose limits share out ``memory_mb``; ``max_queue_bytes`` overrides the
        queue's share (the budget then grows or shrinks by the difference)."""
        plan = MemoryPlan.fit(memory_mb, max_body_bytes, max_grpc_message_bytes)
        return CollectorConfig(
            db=db,
            memory_mb=memory_mb,
            max_body_bytes=plan.max_body_bytes,
            max_inflight_bytes=plan.inflight_bytes,
            max_queue_bytes=plan.queue_bytes if max_queue_bytes is None else max_queue_bytes,
            duckdb_memory=f"{plan.duckdb_bytes // MiB}MiB",
            decode_bytes=plan.decode_bytes,
            max_grpc_message_bytes=plan.grpc_message_bytes,
            max_grpc_rpcs=plan.grpc_rpcs,
            **rest,
        )


def split_address(address: str, default_port: int) -> tuple[str, int]:
    """``host:port``, ``[v6]:port``, ``:port`` or ``host``; port 0 asks for a free one."""
    address = address.strip()
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
    elif address.count(":") == 1:
        host, port = address.split(":")
    else:
        host, port = address, ""
    try:
        number = int(port) if port else default_port
    except ValueError:
        raise ValueError(f"not an address: {address!r} (expected host:port)") from None
    if not 0 <= number < 65536:
        raise ValueError(f"not a port: {number}")
    return host or "127.0.0.1", number
