"""The README says what the code does: every command and every option is in its command
reference (the Datasette habit), and the ``tracelens analyze`` output it shows is what the
command prints today on the same fixture.

The truth is click's description of the command line and a real run of the command in a
subprocess; ``scripts/readme_sample.py`` regenerates the sample when the output changes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import click
import pytest
from conftest import ROOT

from tracelens.cli import main

README = (ROOT / "README.md").read_text(encoding="utf-8")
FIXTURE = "fixtures/otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole line) up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    start = lines.index(heading)
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if re.match(rf"#{{1,{level}}} ", lines[i]) and not lines[i - 1].startswith("```")
        ),
        len(lines),
    )
    return "\n".join(lines[start + 1 : end])


def _mentions(text: str, option: str) -> bool:
    """``option`` as a whole option name: ``--out`` is not found in ``--out-dir``."""
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(main)
    pairs = []
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert command is not None
        pairs.append((name, command))
    return pairs


REFERENCE = _section(README, "## Command reference")


def test_the_top_level_options_are_in_the_reference() -> None:
    for param in main.params:
        for option in param.opts + param.secondary_opts:
            assert _mentions(REFERENCE, option), f"README Command reference: tracelens {option}"


@pytest.mark.parametrize(("name", "command"), _commands(), ids=[n for n, _ in _commands()])
def test_every_command_and_option_is_in_the_readme(name: str, command: click.Command) -> None:
    headings = [h for h in REFERENCE.splitlines() if h.startswith(f"### `tracelens {name}")]
    assert headings, f"README Command reference: no '### `tracelens {name}' heading"
    section = _section(REFERENCE, headings[0])
    for param in command.params:
        if isinstance(param, click.Argument) or param.name == "help":
            continue  # arguments are in the heading; --help is said once for all
        for option in param.opts + param.secondary_opts:
            assert _mentions(section, option), f"README: `tracelens {name} {option}` undocumented"
        if param.envvar:
            assert str(param.envvar) in section, f"README: tracelens {name} {param.envvar}"


def test_the_mention_check_is_strict() -> None:
    assert _mentions("use `--out-dir DIR` or --out FILE", "--out")
    assert not _mentions("use `--out-dir DIR`", "--out")
    assert not _mentions("--token-file F", "--token")


def test_the_analyze_sample_is_what_the_command_prints() -> None:
    """The sample between the markers is `$ tracelens analyze FIXTURE` and its whole output."""
    found = re.search(
        r"<!-- analyze sample: begin [^\n]*-->\n```text\n(.*?)```\n<!-- analyze sample: end -->",
        README,
        re.DOTALL,
    )
    assert found, "README: the analyze sample markers are missing"
    shown = found.group(1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELENS_")}
    proc = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", "analyze", FIXTURE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    prompt, _, printed = shown.partition("\n")
    assert prompt == f"$ tracelens analyze {FIXTURE}"
    assert printed.rstrip("\n").splitlines() == proc.stdout.rstrip("\n").splitlines(), (
        "README's analyze sample is stale: run `python scripts/readme_sample.py`"
    )
    # It is the full picture the section describes, not a stub.
    assert "1 traces, 40 spans" in printed and "Findings (most total saving first)" in printed
