"""The library mirrors the CLI: every command is a thin wrapper over one library call whose
parameters are named as the command's options (``--input-format`` is ``input_format``) and
default to the same values, so a shell line and a script read alike.

The truth here is click's own description of the command line (``tracelens.cli.main``), walked
command by command, against ``inspect.signature`` of the library calls.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import click
import pytest
from click.testing import CliRunner
from conftest import ROOT

from tracelens import api
from tracelens.cli import main

# The library call each command wraps.
LIBRARY: dict[str, Callable[..., Any]] = {
    "analyze": api.analyze,
    "collect": api.collect,
    "demo": api.run_demo,
    "diff": api.diff,
    "export": api.export,
    "import": api.import_files,
    "report": api.write_report,
    "size": api.size,
}

# (command, parameter) -> why the option has no library parameter.  Only switches of the
# command's own output: the library returns the result, the command prints or saves it.
CLI_ONLY: dict[tuple[str, str], str] = {
    ("analyze", "format_"): "how the command prints the Analysis it gets back: to_text() or "
    "to_json()",
    ("analyze", "out"): "where the command prints it (a file instead of standard output)",
    ("demo", "summary_json"): "the command saves the DemoSummary it gets back (to_dict()) there",
    ("size", "format_"): "how the command prints the Sizing it gets back: to_text() or to_json()",
    ("diff", "format_"): "how the command prints the Diff it gets back: to_text(), to_json() or "
    "to_html()",
    ("diff", "out"): "where the command prints it (a file instead of standard output)",
}


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(main)
    commands = []
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert command is not None, name
        commands.append((name, command))
    return commands


def _params(command: click.Command) -> list[click.Parameter]:
    return [p for p in command.params if p.name != "help"]


COMMANDS = _commands()


def test_every_command_has_a_library_call() -> None:
    assert sorted(name for name, _ in COMMANDS) == sorted(LIBRARY)


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_option_is_a_library_parameter_of_the_same_name(
    name: str, command: click.Command, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("TRACELENS_DB", "TRACELENS_TOKEN"):  # the defaults, not this shell's settings
        monkeypatch.delenv(var, raising=False)
    signature = inspect.signature(LIBRARY[name])
    # What the command's function receives for each option not given on the command line.
    given = command.make_context(name, [], resilient_parsing=True).params
    for param in _params(command):
        assert param.name is not None
        if (name, param.name) in CLI_ONLY:
            assert param.name not in signature.parameters, f"{name}: {param.name} is mirrored now"
            continue
        flag = "/".join(param.opts + param.secondary_opts)
        assert param.name in signature.parameters, (
            f"tracelens {name} {flag}: {LIBRARY[name].__qualname__} has no parameter "
            f"{param.name!r} (add it, or list the option in CLI_ONLY with the reason)"
        )
        lib = signature.parameters[param.name]
        if lib.default is inspect.Parameter.empty:
            assert param.required, f"{name} {flag}: required in the library only"
        else:
            assert given[param.name] == lib.default, (
                f"tracelens {name} {flag} defaults to {given[param.name]!r}, "
                f"{LIBRARY[name].__qualname__}({param.name}=...) to {lib.default!r}"
            )


def test_the_diff_defaults_are_the_methods_own() -> None:
    """``api.diff`` spells its method's defaults as literals (the library loads no NumPy until it
    runs); they must stay those of ``compare``, which uses them when called directly."""
    from tracelens.analysis.diff.compare import CONFIDENCE, MIN_DELTA_MS, MIN_TRACES, RESAMPLES

    defaults = {k: p.default for k, p in inspect.signature(api.diff).parameters.items()}
    assert defaults["confidence"] == CONFIDENCE
    assert defaults["resamples"] == RESAMPLES
    assert defaults["min_traces"] == MIN_TRACES
    assert defaults["min_delta_ms"] == MIN_DELTA_MS


def test_cli_only_options_exist() -> None:
    """An entry for an option that is gone would hide nothing; keep the list honest."""
    names = {(name, p.name) for name, command in COMMANDS for p in _params(command)}
    assert set(CLI_ONLY) <= names


def test_the_top_level_names_are_the_library_calls() -> None:
    import tracelens_instrumentation

    import tracelens

    assert tracelens.__all__ == [
        "analyze",
        "collect",
        "configure",
        "diff",
        "export",
        "flush",
        "import_files",
        "run_demo",
        "size",
        "trace",
        "write_report",
        "write_weekly",
    ]
    for name in (
        "analyze",
        "collect",
        "diff",
        "export",
        "import_files",
        "run_demo",
        "size",
        "write_report",
        "write_weekly",
    ):
        assert getattr(tracelens, name) is getattr(api, name)
    for name in ("configure", "flush", "trace"):
        assert getattr(tracelens, name) is getattr(tracelens_instrumentation, name)
    assert set(LIBRARY.values()) <= {getattr(tracelens, n) for n in tracelens.__all__}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = tracelens.nope


def test_import_tracelens_loads_nothing_heavy() -> None:
    """What the README promises an application: ``import tracelens`` (and the decorator) loads
    no DuckDB, Polars, Arrow or NumPy; ``tracelens.analyze`` loads them on first use."""
    code = """
import json, sys
import tracelens
from tracelens import configure, flush, trace
heavy = ("duckdb", "polars", "pyarrow", "numpy", "jinja2")
before = [m for m in heavy if m in sys.modules]
tracelens.analyze
after = [m for m in heavy if m in sys.modules]
print(json.dumps([before, after]))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    before, after = json.loads(proc.stdout)
    assert before == []
    assert {"duckdb", "pyarrow"} <= set(after)  # the analysis API did load on first use


def test_collect_loads_neither_polars_nor_jinja() -> None:
    """The collector's memory budget is not spent on the analysis and report libraries."""
    code = """
import sys
from tracelens.api import collect
print([m for m in ("polars", "jinja2") if m in sys.modules])
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.strip() == "[]"


def test_reading_a_store_loads_no_server_side() -> None:
    """``analyze --db`` reads through ``collector.reader``; the receiving side (gRPC, the
    protobuf decoder, prometheus-client, and pandas, which pyarrow pulls in on first use) cost
    ~0.3 s to import and is not needed.  The package's names still resolve on first use."""
    code = """
import json, sys
from tracelens.collector.reader import read_store
server = ("grpc", "prometheus_client", "pandas", "tracelens.ingest.otlp_proto")
loaded = [m for m in server if m in sys.modules]
import tracelens.collector as c
names = [getattr(c, n).__name__ for n in c.__all__]
print(json.dumps([loaded, names]))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded, names = json.loads(proc.stdout)
    assert loaded == []
    assert names == ["CollectorConfig", "read_store", "run_collector"]


def test_collect_rejects_options_that_cannot_work_before_starting(tmp_path: Any) -> None:
    from tracelens.errors import OptionError

    db = str(tmp_path / "c.duckdb")
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    cases = [
        ({"token": "t", "token_file": str(empty)}, "give the token one way"),
        ({"token_file": str(empty)}, "is empty"),
        ({"token_file": str(tmp_path / "missing")}, "cannot read --token-file"),
        ({"memory_mb": 512, "max_body_mb": 4096}, "body"),
    ]
    for kwargs, message in cases:
        with pytest.raises(OptionError, match=message):
            api.collect(db, **kwargs)
        res = CliRunner().invoke(main, ["collect", "--db", db, *_argv(kwargs)])
        assert res.exit_code == 2 and message in res.output, res.output  # a usage error
    assert not (tmp_path / "c.duckdb").exists()  # nothing was started
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o644)
    heard: list[str] = []
    with pytest.raises(OptionError, match="body"):  # the token was read, then the budget failed
        api.collect(
            db, token_file=str(token), memory_mb=512, max_body_mb=4096, announce=heard.append
        )
    assert heard == [
        f"warning: --token-file {token} is readable by other users (mode 644; chmod 600 it)"
    ]


def _argv(kwargs: dict[str, Any]) -> list[str]:
    return [a for k, v in kwargs.items() for a in (f"--{k.replace('_', '-')}", str(v))]
