"""The collector's one authorization rule, for OTLP/HTTP, OTLP/gRPC and the read endpoints."""

from __future__ import annotations

import hmac


def bearer_matches(header: str, token: str) -> bool:
    """Whether an ``Authorization`` value carries ``token``: the scheme is case-insensitive
    (RFC 9110 11.1: ``bearer`` is ``Bearer``), the token compared in constant time."""
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())
