"""The outputs a result can be written as, by name: the renderers register themselves here.

Results hold data and import no renderer (as pyinstrument's session imports none): the
``tracelens.render`` package reads the results and, when imported, registers its renderer of
each result type and output here (``"text"``, ``"json"``, ``"dict"`` for the JSON document as
Python values, ``"html"``), so that the thin conveniences ``Analysis.to_text``/``to_json``/
``to_dict`` and ``Diff``'s find it without an import circle.  ``tracelens.analyze`` and
``tracelens.diff`` (``api``) import ``tracelens.render``; code that builds a result another way
imports it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracelens.errors import TracelensError

_RENDERERS: dict[tuple[type | str, str], Callable[..., Any]] = {}


def register(kind: type | str, output: str, renderer: Callable[..., Any]) -> None:
    """``renderer(result, **options)`` writes a ``kind`` as ``output`` (e.g. ``"text"``): a
    string, or for ``"dict"`` the JSON document as Python values.  ``kind`` is the result's
    class, or its qualified name (``"tracelens.analysis.sizing.Sizing"``), so that registering
    a renderer does not import a result module the output may never need."""
    _RENDERERS[(kind, output)] = renderer


def render(result: object, output: str, **options: Any) -> str:
    """``result`` written as ``output`` by the renderer registered for its type."""
    text: str = _renderer(result, output)(result, **options)
    return text


def document(result: object) -> dict[str, Any]:
    """``result``'s JSON document as Python values (the ``"dict"`` output)."""
    doc: dict[str, Any] = _renderer(result, "dict")(result)
    return doc


def registered() -> list[tuple[str, str]]:
    """(the result class's qualified name, output) of every renderer registered, sorted."""
    names = [
        (kind if isinstance(kind, str) else f"{kind.__module__}.{kind.__qualname__}", output)
        for kind, output in _RENDERERS
    ]
    return sorted(names)


def _renderer(result: object, output: str) -> Callable[..., Any]:
    for kind in type(result).__mro__:
        renderer = _RENDERERS.get((kind, output)) or _RENDERERS.get(
            (f"{kind.__module__}.{kind.__qualname__}", output)
        )
        if renderer is not None:
            return renderer
    raise TracelensError(
        f"no {output} renderer for {type(result).__name__}: import tracelens.render first "
        "(tracelens.analyze and tracelens.diff do)"
    )


__all__ = ["document", "register", "registered", "render"]
