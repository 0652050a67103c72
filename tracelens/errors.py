"""Errors that tell the user what is wrong with their input, and where."""

from __future__ import annotations


class TracelensError(Exception):
    """Base of every error tracelens raises on purpose."""


class InputError(TracelensError):
    """Bad input: names the source (file), and the line or field where that is known."""

    def __init__(
        self, source: str, message: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.source = source
        self.message = message
        self.line = line
        self.field = field
        where = source
        if line is not None:
            where += f":{line}"
        if field is not None:
            where += f": field {field}"
        super().__init__(f"{where}: {message}")


class StoreError(TracelensError):
    """The store cannot be opened or written (newer schema, locked, corrupt)."""


class BudgetError(TracelensError):
    """The work would need more memory than its budget (``tracelens.analysis.budget``): the
    message names the budget, the estimate and the option that raises it."""


class OptionError(TracelensError, ValueError):
    """A parameter (the CLI option of the same name) or a combination of them that cannot work;
    the command line shows it as a usage error."""
