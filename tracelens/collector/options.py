"""The collector's configuration from ``tracelens collect``'s options (``tracelens.api.collect``
passes them through): the token given once (``--token`` or a ``--token-file`` whose permissions
are checked), the memory budget, the addresses.  ``OptionError`` names the option that cannot
work."""

from __future__ import annotations

import os
from collections.abc import Callable

from tracelens.collector.config import CollectorConfig, MiB
from tracelens.errors import OptionError


def read_token_file(path: str, announce: Callable[[str], None]) -> str:
    """The first line of ``path``, stripped; ``OptionError`` when it is missing or empty, and a
    warning through ``announce`` when other users may read it."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.readline(4096).strip()
            mode = os.fstat(f.fileno()).st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError(f"cannot read --token-file {path}: {exc}") from None
    if not token:
        raise OptionError(f"--token-file {path} is empty")
    if mode & 0o077:
        announce(
            f"warning: --token-file {path} is readable by other users "
            f"(mode {mode & 0o777:o}; chmod 600 it)"
        )
    return token


def config_from_options(
    db: str,
    *,
    http: str,
    grpc: str,
    token: str | None,
    token_file: str | None,
    memory_mb: int,
    max_body_mb: int | None,
    grpc_max_mb: float | None,
    queue_mb: float | None,
    metrics_quiet_s: float,
    metrics_max_operations: int,
    announce: Callable[[str], None],
    span_metrics: bool = True,
    metrics_max_open_traces: int = 100_000,
) -> CollectorConfig:
    """``collect``'s options as a ``CollectorConfig`` (``grpc`` "off", "none" or empty: HTTP
    only; sizes in MiB)."""
    if token_file is not None:
        if token:
            raise OptionError("give the token one way: --token-file, or --token / TRACELENS_TOKEN")
        token = read_token_file(token_file, announce)
    try:
        return CollectorConfig.from_budget(
            db,
            memory_mb,
            max_body_bytes=None if max_body_mb is None else max_body_mb * MiB,
            max_grpc_message_bytes=None if grpc_max_mb is None else int(grpc_max_mb * MiB),
            max_queue_bytes=None if queue_mb is None else int(queue_mb * MiB),
            http=http,
            grpc=None if grpc.strip().lower() in ("", "off", "none") else grpc,
            token=token or None,
            span_metrics=span_metrics,
            metrics_quiet_s=metrics_quiet_s,
            metrics_max_operations=metrics_max_operations,
            metrics_max_open_traces=metrics_max_open_traces,
        )
    except ValueError as exc:
        raise OptionError(str(exc)) from None


__all__ = ["config_from_options", "read_token_file"]
