"""What a collector is told: addresses, limits, the token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DEFAULT_HTTP: Final = "127.0.0.1:4318"
DEFAULT_GRPC: Final = "127.0.0.1:4317"
MiB: Final = 1 << 20


@dataclass(frozen=True)
class CollectorConfig:
    db: str
    http: str = DEFAULT_HTTP
    grpc: str | None = DEFAULT_GRPC  # None: no gRPC listener
    token: str | None = None
    max_body_bytes: int = 64 * MiB  # per request, after decompression too
    max_inflight_bytes: int = 256 * MiB  # request bodies being read or decoded at once
    max_queue_bytes: int = 512 * MiB  # decoded spans not yet in DuckDB (Arrow bytes)
    max_batch_rows: int = 100_000  # spans per journal commit
    max_connections: int = 2048
    retry_after_s: int = 1
    duckdb_memory: str = "1GB"  # DuckDB's own memory limit (its default is 80% of RAM)
    duckdb_threads: int = 1  # more only compete with decoding for the same cores
    decode_threads: int = 1  # decoding holds the GIL: more threads only add switching
    max_grpc_rpcs: int = 64  # gRPC holds each message whole before the handler sees it
    drain_timeout_s: float = 30.0


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
