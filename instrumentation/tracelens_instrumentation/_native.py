"""The one switch for the compiled parts (``_speedups``, ``_record``): ``TRACELENS_NO_NATIVE=1``
runs the pure Python references instead, which give the same results."""

from __future__ import annotations

import os


def allowed() -> bool:
    return os.environ.get("TRACELENS_NO_NATIVE", "") in ("", "0")
