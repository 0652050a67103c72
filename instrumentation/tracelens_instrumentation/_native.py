"""The one rule for compiled code: whether it may be used, and loading a compiled module.

Every compiled part of tracelens (``_speedups``, ``_record``, the OTLP protobuf decoder, the
critical-path walk) is optional and has a pure Python equivalent that gives the same results.
``TRACELENS_NO_NATIVE`` set to anything but empty or ``0`` switches them all off; an install
without a C compiler simply has none of them.  Read at import time of each module that uses one.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def allowed() -> bool:
    """Whether compiled code may be used (``TRACELENS_NO_NATIVE`` unset, empty or ``0``)."""
    return os.environ.get("TRACELENS_NO_NATIVE", "") in ("", "0")


def load(name: str) -> ModuleType | None:
    """The compiled module ``name`` (a full dotted name), or None where it is switched off or
    not built (installed without a C compiler, or on a platform it does not support)."""
    if not allowed():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
