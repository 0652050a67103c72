"""The ``tracelens`` command.  Each subcommand is a thin wrapper over one library call of
``tracelens.api`` whose parameters are named as its options (tests/test_cli_mirror.py).

Subcommands live in their own modules and are imported only when run, so ``tracelens --help``
stays fast and a command's heavy dependencies load only for that command.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

# name -> "module:attribute"
_COMMANDS: dict[str, str] = {
    "analyze": "tracelens.cli.analyze:analyze",
    "import": "tracelens.cli.import_:import_",
    "collect": "tracelens.cli.collect:collect",
    "report": "tracelens.cli.report:report",
    "demo": "tracelens.cli.demo:demo",
    "size": "tracelens.cli.size:size",
    "export": "tracelens.cli.export:export",
    "diff": "tracelens.cli.diff:diff",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        command: Any = getattr(importlib.import_module(module), attr)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tracelens")
def main() -> None:
    """Why is my agent slow?  Critical paths, cpu/gpu/io/wait attribution, fixable bottlenecks."""
