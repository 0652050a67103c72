"""The main job, end to end.  Until the demo agent lands: analyse the fixture traces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    files = [
        "fixtures/otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json",
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "fixtures/agent").glob("*.json")),
    ]
    cmd = [sys.executable, "-m", "tracelens", "analyze", *files]
    print("$", " ".join(["tracelens", *cmd[3:]]), flush=True)
    return subprocess.call(cmd, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
