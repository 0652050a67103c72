"""The sample reports committed under reports/ are what the code makes today."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_committed_sample_reports_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/make_sample_report.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for path in (ROOT / "reports").rglob("*.html"):
        assert path.stat().st_size < 1_000_000, f"{path} is over 1 MB"
