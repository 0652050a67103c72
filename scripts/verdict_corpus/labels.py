"""What a case is: its pattern tags, how it is built, its labels and the reasoning behind them.

A case is one entry of the table (the ``cases_*`` modules): the builder that makes its traces,
the verdict a careful engineer gives its data flow (``parallel``, ``cache``, ``saving_ms``,
``expect_one_finding``: the labels written to ``fixtures/verdicts/labels.json``) and, right next
to them, the ``reasoning`` that justifies them (written to ``docs/verdicts.md``).  Labels are
never derived from what tracelens reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Label = dict[str, Any]
Source = Literal["decorator", "otel"]


@dataclass(frozen=True)
class Case:
    """One labelled agent pattern.

    ``build`` runs the agent under ``@trace`` (``source="decorator"``: no argument, run in its
    own process) or returns the traces to export through the OpenTelemetry SDK
    (``source="otel"``: takes the case's seeded ``random.Random``).
    """

    name: str
    pattern: list[str]
    source: Source
    build: Callable[..., Any]
    reasoning: str
    parallel: list[Label] = field(default_factory=list)
    cache: list[Label] = field(default_factory=list)
    saving_ms: Label | None = None
    expect_one_finding: bool = False

    @property
    def why(self) -> str:
        """The reasoning as one paragraph (the table wraps it for reading)."""
        return " ".join(self.reasoning.split())

    def label(self) -> Label:
        """The case's entry in ``labels.json``."""
        doc: Label = {
            "case": self.name,
            "pattern": self.pattern,
            "source": self.source,
            "parallel": self.parallel,
            "cache": self.cache,
        }
        if self.saving_ms is not None:
            doc["saving_ms"] = self.saving_ms
        if self.expect_one_finding:
            doc["expect_one_finding"] = True
        return doc


def dep(parent: str, a: str, b: str | None, why: str, **extra: Any) -> Label:
    """``harmful=...``: running them together would do damage (state-changing, consumed...):
    no parallelizable finding at any confidence may cover the pair."""
    names = [a] if b is None else [a, b]
    return {"parent": parent, "names": names, "truth": "dependent", "why": why, **extra}


def ind(parent: str, a: str, b: str | None, why: str) -> Label:
    names = [a] if b is None else [a, b]
    return {"parent": parent, "names": names, "truth": "independent", "why": why}


def cache(name: str, truth: str, why: str, **extra: Any) -> Label:
    return {"name": name, "truth": truth, "why": why, **extra}


def nc(name: str, why: str, **extra: Any) -> Label:
    """``harmful=...``: a cache would do damage (state-changing, tenant-keyed, volatile,
    consumed): no cacheable finding at any confidence."""
    return cache(name, "not_cacheable", why, **extra)


ROOT_NC = "one call per trace, each trace a different request: nothing repeats"
