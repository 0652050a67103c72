"""Regenerate, or check, the ``tracelens analyze`` sample output shown in README.md.

    python scripts/readme_sample.py          # rewrite the sample in README.md
    python scripts/readme_sample.py --check  # exit 1 if the README shows other output

The sample is the real command on a fixture (HotROD, one trace, 40 spans), run from the
repository root as a user would type it; its output is deterministic (same input, same text), so
``tests/test_readme.py`` compares it line for line.  It sits between the two ``analyze sample``
marker comments in the README.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FIXTURE = "fixtures/otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"
COMMAND = ["analyze", FIXTURE]

BEGIN = "<!-- analyze sample: begin (python scripts/readme_sample.py) -->"
END = "<!-- analyze sample: end -->"
BLOCK = re.compile(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), re.DOTALL)


def run_sample() -> str:
    """The command's output, as the README shows it: the prompt line, then what it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELENS_")}
    proc = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", *COMMAND],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return f"$ tracelens {' '.join(COMMAND)}\n{proc.stdout}"


def render_block(output: str) -> str:
    return f"```text\n{output.rstrip()}\n```\n"


def readme_block(text: str) -> str:
    found = BLOCK.search(text)
    if found is None:
        raise SystemExit(f"README.md: no sample between {BEGIN!r} and {END!r}")
    return found.group(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that README is current")
    args = parser.parse_args()
    text = README.read_text(encoding="utf-8")
    fresh = render_block(run_sample())
    if args.check:
        if readme_block(text) != fresh:
            print(
                "README.md: the analyze sample is stale; regenerate it with "
                "`python scripts/readme_sample.py` and commit the result",
                file=sys.stderr,
            )
            return 1
        print("README.md: the analyze sample is current")
        return 0
    readme_block(text)  # the markers are there
    README.write_text(BLOCK.sub(lambda _: f"{BEGIN}\n{fresh}{END}", text), encoding="utf-8")
    print(f"README.md: wrote the output of `tracelens {' '.join(COMMAND)}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
