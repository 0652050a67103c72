"""Reading a store through the collector that holds it (``GET /v1/spans``, Arrow IPC)."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from urllib.parse import urlencode

import pyarrow as pa

from tracelens.collector.discovery import CollectorInfo
from tracelens.errors import StoreError


def read_spans(
    info: CollectorInfo,
    columns: Sequence[str] | None = None,
    *,
    start_ns: int | None = None,
    end_ns: int | None = None,
    timeout: float = 300.0,
) -> pa.Table:
    """Spans stored so far, as ``DuckDBStore.read`` returns them.  ``OSError`` when the collector
    cannot be reached (the caller may then open the file itself)."""
    query: dict[str, str] = {}
    if columns:
        query["columns"] = ",".join(columns)
    if start_ns is not None:
        query["start_ns"] = str(start_ns)
    if end_ns is not None:
        query["end_ns"] = str(end_ns)
    url = f"{info.http}/v1/spans" + (f"?{urlencode(query)}" if query else "")
    request = urllib.request.Request(url)
    token = info.token or os.environ.get("TRACELENS_TOKEN")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return pa.ipc.open_stream(response).read_all()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:500].decode("utf-8", "replace")
        if exc.code == 400:
            raise ValueError(detail) from None
        raise StoreError(
            f"the collector at {info.http} refused the read ({exc.code}): {detail}"
        ) from None
