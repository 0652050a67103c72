"""The main job, end to end (``make demo``): demo agent -> collector -> analysis -> report.

Starts ``tracelens collect`` on a fresh store under out/, runs ``tracelens demo`` against it,
prints ``tracelens analyze``, writes out/report.html and out/analysis.json, then stops the
collector with SIGTERM.  Exits non-zero if any step fails.  ``--help`` for the options.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this tree's tracelens, installed or not
    from tracelens.demo.pipeline import main

    sys.exit(main(sys.argv[1:], root=ROOT))
