"""Whether anything listens at an OTLP/HTTP endpoint, before spans are sent there (``tracelens
demo``): a clear error at once instead of exporting into the void and retrying for half a
minute at exit."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from tracelens.errors import OptionError, TracelensError


def check_reachable(endpoint: str, timeout_s: float = 5.0) -> None:
    """Returns when a TCP connection to ``endpoint``'s host and port opens; ``OptionError`` for
    an endpoint that is not an http(s) URL, ``TracelensError`` naming it (and how to start a
    collector there) when nothing listens."""
    split = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    if split.scheme not in ("http", "https") or not split.hostname:
        raise OptionError(f"--endpoint: not an OTLP/HTTP URL: {endpoint!r}")
    port = split.port or (443 if split.scheme == "https" else 80)
    try:
        socket.create_connection((split.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise TracelensError(
            f"no collector at {endpoint} ({exc}); start one with "
            f"`tracelens collect --http {split.hostname}:{port}` or pass --file PATH"
        ) from None


__all__ = ["check_reachable"]
