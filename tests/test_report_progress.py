"""Progress bars: drawn on a real terminal (a pty), silent on anything else."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from tracelens.progress import Progress, progress_enabled, track


def _read_all(fd: int, wait: float = 0.5) -> str:
    chunks = []
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def test_bar_draws_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACELENS_PROGRESS", raising=False)
    master, slave = pty.openpty()
    with os.fdopen(slave, "w") as term:
        assert progress_enabled(term)
        with Progress(4, "loading", stream=term) as bar:
            bar.advance()
            bar.advance(label="analysing")
        out = _read_all(master)
    os.close(master)
    assert "loading" in out and "analysing" in out
    assert "[############............] 2/4" in out
    assert out.endswith("\r")  # the line is wiped at the end, the cursor back at its start


def test_ticker_shows_elapsed_time_during_one_long_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACELENS_PROGRESS", raising=False)
    master, slave = pty.openpty()
    with os.fdopen(slave, "w") as term, Progress(label="analysing", stream=term):
        time.sleep(0.7)  # no call into the bar: only the ticker draws
        out = _read_all(master, 0.3)
    os.close(master)
    assert out.count("analysing") >= 3


def test_silent_when_not_a_terminal() -> None:
    sink = io.StringIO()
    with Progress(3, "loading", stream=sink) as bar:
        bar.advance()
    assert list(track([1, 2, 3], "x", stream=sink)) == [1, 2, 3]
    assert sink.getvalue() == ""


def test_switched_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELENS_PROGRESS", "0")
    master, slave = pty.openpty()
    with os.fdopen(slave, "w") as term:
        assert not progress_enabled(term)
        with Progress(2, "loading", stream=term) as bar:
            bar.advance()
        out = _read_all(master, 0.2)
    os.close(master)
    assert out == ""


def test_report_command_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    """The real command, with stderr on a pty: phases appear there, stdout stays clean."""
    master, slave = pty.openpty()
    out = tmp_path / "r.html"
    env = {**os.environ, "TRACELENS_PROGRESS": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracelens",
            "report",
            str(FIXTURES / "otlp" / "hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"),
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    os.close(slave)
    err = _read_all(master, 0.5)
    os.close(master)
    assert proc.returncode == 0
    assert "reading" in err and "\r" in err
    assert proc.stdout.decode().startswith("wrote ") and "\r" not in proc.stdout.decode()
    assert out.exists()
