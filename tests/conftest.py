from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
sys.path.insert(0, str(Path(__file__).parent))

import os  # noqa: E402

from hypothesis import settings  # noqa: E402

# CI explores the same examples every run, so a red build is the change's doing; locally each
# run explores new ones.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
