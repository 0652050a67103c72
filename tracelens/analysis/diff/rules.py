"""``--fail-on`` rules: when a comparison should fail a CI job.

Grammar (spaces allowed anywhere, case-insensitive)::

    RULES  := RULE ("," RULE)*
    RULE   := METRIC ">" CHANGE
    METRIC := "p50" | "p95" | "p99"
    CHANGE := ["+"] NUMBER ("%" | "ms" | "s")

``p95>+10%`` trips when a root operation's end-to-end p95 rose by more than 10% of the base
value, ``p99>+250ms`` when it rose by more than 250 ms.  Only a change the comparison judged
significant (a regression) can trip a rule, so noise never fails a build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracelens.errors import OptionError

QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}
_RULE = re.compile(
    r"^\s*(?P<metric>p50|p95|p99)\s*>\s*\+?\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>%|ms|s)\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Rule:
    metric: str  # p50 | p95 | p99
    threshold: float  # a fraction of the base value when relative, else milliseconds
    relative: bool
    text: str  # as written, normalised: "p95>+10%"

    def exceeded(self, base_ms: float, delta_ms: float) -> bool:
        """Whether a change of ``delta_ms`` from ``base_ms`` is more than the rule allows."""
        if self.relative:
            return delta_ms > self.threshold * base_ms if base_ms > 0 else delta_ms > 0
        return delta_ms > self.threshold


def parse_rules(text: str | None) -> tuple[Rule, ...]:
    """The rules in ``text``; ``OptionError`` naming the part that is not a rule."""
    if text is None or not text.strip():
        return ()
    rules = []
    for part in text.split(","):
        m = _RULE.match(part)
        if m is None:
            raise OptionError(
                f"--fail-on: {part.strip()!r} is not a rule like p95>+10% or p99>+200ms "
                "(p50|p95|p99, '>', a change in %, ms or s; several rules comma-separated)"
            )
        metric, num, unit = m["metric"].lower(), float(m["num"]), m["unit"].lower()
        if unit == "%":
            rule = Rule(metric, num / 100, True, f"{metric}>+{m['num']}%")
        else:
            ms = num * 1000 if unit == "s" else num
            rule = Rule(metric, ms, False, f"{metric}>+{m['num']}{unit}")
        rules.append(rule)
    return tuple(rules)


__all__ = ["QUANTILES", "Rule", "parse_rules"]
