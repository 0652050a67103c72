"""The outputs a result can be written as, by name: the renderers register themselves here.

Results hold data and import no renderer (as pyinstrument's session imports none): the
``tracelens.render`` package reads the results and, when imported, registers its renderer of
each result type here, so that the thin conveniences ``Analysis.to_text`` and ``Diff.to_text``
find it without an import circle (the JSON is the results' own: ``to_dict``, ``to_json``).
``tracelens.analyze`` and ``tracelens.diff`` (``api``) import ``tracelens.render``; code that
builds a result another way imports it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracelens.errors import TracelensError

_RENDERERS: dict[tuple[type, str], Callable[..., str]] = {}


def register(kind: type, output: str, renderer: Callable[..., str]) -> None:
    """``renderer(result, **options)`` writes a ``kind`` as ``output`` (e.g. ``"text"``)."""
    _RENDERERS[(kind, output)] = renderer


def render(result: object, output: str, **options: Any) -> str:
    """``result`` written as ``output`` by the renderer registered for its type."""
    for kind in type(result).__mro__:
        renderer = _RENDERERS.get((kind, output))
        if renderer is not None:
            return renderer(result, **options)
    raise TracelensError(
        f"no {output} renderer for {type(result).__name__}: import tracelens.render first "
        "(tracelens.analyze and tracelens.diff do)"
    )


__all__ = ["register", "render"]
