"""One renderer per output, over the results (``tracelens/render/``): importing the package
registers exactly the outputs the results offer, each keyed by a class that exists, and a
result module imports no renderer (``tests/test_architecture.py`` holds the import rules)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import tracelens.render  # noqa: F401  (registers the renderers)
from tracelens.analysis import outputs


def test_the_registered_outputs() -> None:
    assert outputs.registered() == [
        ("tracelens.analysis.diff.result.Diff", "dict"),
        ("tracelens.analysis.diff.result.Diff", "html"),
        ("tracelens.analysis.diff.result.Diff", "json"),
        ("tracelens.analysis.diff.result.Diff", "text"),
        ("tracelens.analysis.result.Analysis", "dict"),
        ("tracelens.analysis.result.Analysis", "json"),
        ("tracelens.analysis.result.Analysis", "text"),
        ("tracelens.analysis.sizing.Sizing", "json"),
        ("tracelens.analysis.sizing.Sizing", "text"),
    ]
    for name, _ in outputs.registered():  # a name registered as a string names a real class
        module, _, cls = name.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), cls), type), name


def test_importing_the_renderers_loads_no_page_and_no_sizing() -> None:
    """The lazily registered outputs stay unloaded until used: Jinja2 for the pages, the
    sizing model for ``tracelens size`` (``tracelens analyze`` pays for neither)."""
    code = (
        "import sys, tracelens.render; "
        "print(sorted(m for m in ('jinja2', 'tracelens.render.html', "
        "'tracelens.analysis.sizing') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
