"""The whole table, in the order of ``labels.json`` and ``docs/verdicts.md``."""

from __future__ import annotations

from . import (
    cases_held_out,
    cases_issue25,
    cases_round1_decorator_a,
    cases_round1_decorator_b,
    cases_round1_otel_a,
    cases_round1_otel_b,
)
from .labels import Case

PARTS = (
    cases_round1_decorator_a,
    cases_round1_decorator_b,
    cases_round1_otel_a,
    cases_round1_otel_b,
    cases_issue25,
    cases_held_out,
)
CASES: dict[str, Case] = {case.name: case for part in PARTS for case in part.CASES}
