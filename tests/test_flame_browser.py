"""Flame graphs in a real headless Chromium, and the folded export in a real flame-graph tool.

* The three flame graphs (``render.html.flame.flame_section``), in the real report page
  (``render_report``) under its Content-Security-Policy, render boxes with no console error,
  no request and no script, a hostile span or function name stays text (in the hover titles),
  and the page prints.
* The ``--flamegraph-out`` file (``render.folded.write_folded``) is imported by speedscope (the npm
  package, run from its own ``index.html`` in Chromium, the way its CLI does): the profile
  loads, and speedscope's Sandwich table shows the totals and self times this analysis computed.
  Needs speedscope unpacked (``.ci/run`` does it: ``npm pack speedscope``); set
  ``TRACELENS_SPEEDSCOPE`` to its ``dist/release/index.html``, else the test skips.

The folded file's format itself is checked byte by byte in ``test_hotspots.py``.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import pytest
from spans import make_spans
from test_report_browser import ARTIFACTS, CHROMIUM, XSS_NAME, Browser, browser
from tracelens_instrumentation import attributes as A

from tracelens.analysis import analyze_spans
from tracelens.analysis.hotspots import cpu_hotspots
from tracelens.render.folded import write_folded
from tracelens.render.html import flame, render_report

__all__ = ["browser"]  # fixture, imported for pytest

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
    ),
]
MS = 1_000_000
HOSTILE_FN = '<img src=x onerror="alert(3)">:run'
SPEEDSCOPE = Path(
    os.environ.get("TRACELENS_SPEEDSCOPE")
    or Path.home() / ".cache/tracelens/speedscope/package/dist/release/index.html"
)


def cpu(stacks: list[str]) -> dict[str, object]:
    return {A.KIND: "cpu", A.IO_NS: 0, A.WAIT_NS: 0, A.CPU_STACKS: stacks}


def traces(n: int = 20) -> list[dict[str, object]]:
    """n traces: plan (CPU, profiled) then a search whose length grows with the trace number,
    a hostile-named tool in every trace and, in the slow ones, a retry."""
    rows: list[dict[str, object]] = []
    for t in range(n):
        tid = f"{t + 1:032x}"
        base = t * 100
        search = 100 + 20 * t
        end = 200 + search + (300 if t >= n - 2 else 0)
        rows += [
            {"id": base, "trace": tid, "start": 0, "end": end * MS, "name": "handle_request"},
            {"id": base + 1, "trace": tid, "parent": base, "start": 0, "end": 150 * MS,
             "name": "plan", "attributes": cpu(["app.plan:plan;json:dumps 700",
                                                 "app.plan:plan;logging:Logger.info 200",
                                                 f"app.plan:plan;{HOSTILE_FN} 100"])},
            {"id": base + 2, "trace": tid, "parent": base, "start": 150 * MS,
             "end": (150 + search) * MS, "name": "search_docs"},
            {"id": base + 3, "trace": tid, "parent": base + 2, "start": 160 * MS,
             "end": (140 + search) * MS, "name": XSS_NAME},
        ]  # fmt: skip
        if t >= n - 2:
            rows.append(
                {"id": base + 4, "trace": tid, "parent": base, "start": (150 + search) * MS,
                 "end": (450 + search) * MS, "name": "retry_search"}
            )  # fmt: skip
    return rows


@pytest.mark.smoke
def test_flame_graphs_render_in_chromium(browser: Browser, tmp_path: Path) -> None:
    analysis = analyze_spans(make_spans(traces()), findings=False)
    page_html = render_report(analysis, title="flame graphs")  # the real report
    assert page_html.count('<section class="card" id="flames">') == 1
    assert str(flame.flame_section(analysis.traces, analysis.cpu_hotspots)) in page_html
    out = tmp_path / "flame.html"
    out.write_text(page_html, encoding="utf-8")
    page = browser.open(out.as_uri())
    assert page.errors() == []
    assert page.requests() == []
    assert page.eval("document.scripts.length") == 0
    assert page.eval("document.querySelectorAll('img').length") == 0
    for fig in ("flame-median", "flame-slow", "flame-cpu"):
        boxes = page.eval(
            f"[...document.querySelectorAll('#{fig} svg rect')]"
            ".map(r => r.getBoundingClientRect().width)"
        )
        assert len(boxes) >= 3 and all(w > 0 for w in boxes), (fig, boxes)
        # the root box spans the figure
        assert max(boxes) >= 0.9 * page.eval(
            f"document.querySelector('#{fig} svg').getBoundingClientRect().width"
        )
    titles = page.eval(
        "[...document.querySelectorAll('#flames svg title')].map(t => t.textContent)"
    )
    assert any(t.startswith(XSS_NAME + "\n") for t in titles)
    assert any(t.startswith(HOSTILE_FN + "\n") for t in titles)
    slow = page.eval(
        "[...document.querySelectorAll('#flame-slow svg title')].map(t => t.textContent)"
    )
    assert any(t.startswith("retry_search\n") for t in slow)  # the slow traces' own shape
    median = page.eval(
        "[...document.querySelectorAll('#flame-median svg title')].map(t => t.textContent)"
    )
    assert not any(t.startswith("retry_search\n") for t in median)
    assert page.eval("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.screenshot(ARTIFACTS / "report-flames.png")
    pdf = page.pdf()
    assert pdf.startswith(b"%PDF")
    (ARTIFACTS / "report-flames.pdf").write_bytes(pdf)


@pytest.mark.skipif(
    not SPEEDSCOPE.is_file(),
    reason=f"speedscope is not unpacked at {SPEEDSCOPE} (.ci/run; or TRACELENS_SPEEDSCOPE)",
)
def test_folded_export_loads_in_speedscope(browser: Browser, tmp_path: Path) -> None:
    ta = analyze_spans(make_spans(traces(4)), findings=False).traces
    hot = cpu_hotspots(ta)
    folded = tmp_path / "cpu.folded"
    assert write_folded(hot, str(folded)) == 3
    # the speedscope CLI's way of handing a file to the page: a script that calls its loader
    loader = tmp_path / "load.js"
    data = base64.b64encode(folded.read_bytes()).decode()
    loader.write_text(f"speedscope.loadFileFromBase64({json.dumps(folded.name)}, '{data}')")
    page = browser.open(f"{SPEEDSCOPE.as_uri()}#localProfilePath={loader}&view=sandwich")
    deadline = time.monotonic() + 20
    while page.eval("document.title") != f"{folded.name} - speedscope":
        assert time.monotonic() < deadline, page.eval("document.body.innerText")[:500]
        time.sleep(0.1)
    assert page.errors() == []
    # Sandwich: rows of "total (share)", "self (share)", symbol
    cells = page.eval("document.body.innerText").split("Symbol Name", 1)[1].split("\n")
    cells = [c.strip() for c in cells if c.strip()]
    rows = {cells[i + 2]: (cells[i], cells[i + 1]) for i in range(0, len(cells) - 2, 3)}
    cp = hot.critical_path

    def us(text: str) -> int:
        return int(text.split(" ", 1)[0].replace(",", ""))

    for name in ("app.plan:plan", "json:dumps", "logging:Logger.info", HOSTILE_FN):
        fn = cp.function(name)
        assert fn is not None and name in rows, (name, rows)
        total, own = rows[name]
        assert us(total) == pytest.approx(fn.inclusive_ms * 1000, abs=2), (name, rows[name])
        assert us(own) == pytest.approx(fn.self_ms * 1000, abs=2), (name, rows[name])
