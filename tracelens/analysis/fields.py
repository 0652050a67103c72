"""A result dataclass's fields as its JSON document holds them, for the ``to_dict`` methods.

Most results' JSON is their fields in order under their own names, some rounded: one helper
spells that once, instead of every class naming each field twice; ``Record`` gives a class
that is all fields its ``to_dict``, rounded as its ``DIGITS`` say.  What a document renames or
nests stays written out in the class's ``to_dict``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any, ClassVar


def fields_dict(obj: Any, *names: str, digits: Mapping[str, int] | None = None) -> dict[str, Any]:
    """``obj``'s fields ``names`` (all of the dataclass's fields when none are named), in that
    order: a field named in ``digits`` rounded to that many decimals, an enum as its value, a
    dataclass (or a list or tuple of them) as its ``to_dict()``, or its fields if it has none."""
    out: dict[str, Any] = {}
    for name in names or [f.name for f in fields(obj)]:
        value = getattr(obj, name)
        if digits and name in digits:
            value = round(value, digits[name])
        out[name] = _plain(value)
    return out


class Record:
    """A result (a dataclass) whose JSON is all its fields, in order: ``fields_dict``, each
    field named in the class's ``DIGITS`` rounded to that many decimals."""

    DIGITS: ClassVar[Mapping[str, int]] = {}

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self, digits=self.DIGITS)


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)) and value and _is_record(value[0]):
        return [_record(v) for v in value]
    return _record(value) if _is_record(value) else value


def _is_record(value: Any) -> bool:
    return is_dataclass(value) and not isinstance(value, type)


def _record(value: Any) -> dict[str, Any]:
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if to_dict is not None else fields_dict(value)
