"""How the library's errors end a command, spelled once for every command.

A bad option (``OptionError``) is a usage error, as click reports its own; any other library
error either is bad input (``input_errors``: ``error: ...`` on stderr, exit status 2, the
commands that read traces) or stops a service (``service_errors``: click's ``Error: ...``, exit
status 1).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

# Exit status for bad input (click uses 2 for bad usage too: both mean "fix what you passed").
EXIT_INPUT_ERROR = 2


@contextmanager
def input_errors(*, usage: bool = True) -> Iterator[None]:
    """Library errors as bad input; ``usage=False``: a bad option too."""
    from tracelens.errors import OptionError, TracelensError

    try:
        yield
    except TracelensError as exc:
        if usage and isinstance(exc, OptionError):
            raise click.UsageError(str(exc)) from None
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INPUT_ERROR)


@contextmanager
def service_errors(what: str | None = None) -> Iterator[None]:
    """Library errors as click's errors; with ``what``, an ``OSError`` or ``ValueError`` too, as
    ``cannot WHAT: ...``."""
    from tracelens.errors import OptionError, TracelensError

    try:
        yield
    except OptionError as exc:
        raise click.UsageError(str(exc)) from None
    except TracelensError as exc:
        raise click.ClickException(str(exc)) from None
    except (OSError, ValueError) as exc:
        if what is None:
            raise
        raise click.ClickException(f"cannot {what}: {exc}") from None
