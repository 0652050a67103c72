"""A rendered report opened in a real headless Chromium, driven over the DevTools protocol.

Checks what only a browser can: the page loads with no console error, sends no request beyond
itself, runs no injected script, and shows the key figures in its DOM.  A full-page screenshot is
saved under ``test-artifacts/``.  Needs Debian's ``chromium`` (``.ci/run`` installs it) and the
``websockets`` package; skipped with the reason when either is missing.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, ROOT

CHROMIUM = os.environ.get("TRACELENS_CHROMIUM") or next(
    (p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None
)
ARTIFACTS = ROOT / "test-artifacts"
XSS_NAME = "<script>alert(1)</script>"
XSS_ATTR = '<img src=x onerror="alert(2)">'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
    ),
]


class Browser:
    """Just enough of the DevTools protocol: commands, and the events that arrive meanwhile."""

    def __init__(self, profile: Path) -> None:
        from websockets.sync.client import connect

        assert CHROMIUM is not None
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(
            connect(
                f"ws://127.0.0.1:{port}{path}", max_size=64 * 2**20, proxy=None, open_timeout=20
            )
        )
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> Any:
        msg_id = next(self.ids)
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv(timeout=30))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for ev in self.events:
            if ev["method"] == method:
                return ev
        while time.monotonic() < deadline:
            reply = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if "method" in reply:
                self.events.append(reply)
                if reply["method"] == method:
                    return reply
        raise TimeoutError(method)

    def open(self, url: str) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired")
        # Let late resources (lazy images, fonts) show themselves before judging.
        self.call(
            "Runtime.evaluate",
            {"expression": "new Promise(r => setTimeout(r, 300))", "awaitPromise": True},
            session=session,
        )
        return Page(self, session, url)

    def close(self) -> None:
        try:
            if getattr(self, "_stack", None) is not None:
                self._stack.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Page:
    def __init__(self, browser: Browser, session: str, url: str) -> None:
        self.browser = browser
        self.session = session
        self.url = url

    def eval(self, expression: str) -> Any:
        got = self.browser.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            session=self.session,
        )
        if "exceptionDetails" in got:
            raise RuntimeError(got["exceptionDetails"])
        return got["result"].get("value")

    def _events(self, method: str) -> list[dict[str, Any]]:
        return [
            e["params"]
            for e in self.browser.events
            if e["method"] == method and e.get("sessionId") == self.session
        ]

    def errors(self) -> list[str]:
        out = [
            f"console.{p['type']}: {p['args']}"
            for p in self._events("Runtime.consoleAPICalled")
            if p["type"] in ("error", "assert")
        ]
        out += [
            f"exception: {p['exceptionDetails']}" for p in self._events("Runtime.exceptionThrown")
        ]
        out += [
            f"log {p['entry']['level']}: {p['entry']['text']}"
            for p in self._events("Log.entryAdded")
            if p["entry"]["level"] == "error"
        ]
        out += [f"dialog: {p['message']}" for p in self._events("Page.javascriptDialogOpening")]
        return out

    def requests(self) -> list[str]:
        """URLs the page asked for besides itself (inline data: URIs do not leave the page)."""
        return [
            p["request"]["url"]
            for p in self._events("Network.requestWillBeSent")
            if p["request"]["url"] != self.url and not p["request"]["url"].startswith("data:")
        ]

    def resize(self, width: int, height: int = 800) -> None:
        self.browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )

    def pdf(self) -> bytes:
        """The page as printed (A4-ish defaults, backgrounds on)."""
        got = self.browser.call("Page.printToPDF", {"printBackground": True}, session=self.session)
        return base64.b64decode(got["data"])

    def screenshot(self, path: Path) -> None:
        width = int(self.eval("document.documentElement.scrollWidth"))
        height = int(self.eval("document.documentElement.scrollHeight"))
        shot = self.browser.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
            },
            session=self.session,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    pytest.importorskip("websockets", reason="the websockets package drives Chromium")
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()


def _hostile_analysis() -> Any:
    from spans import make_spans

    from tracelens.analysis import analyze_spans

    rows = [
        {"id": 0, "start": 10**18, "end": 10**18 + 900_000_000, "name": "handle_request"},
        {
            "id": 1,
            "parent": 0,
            "start": 10**18 + 1_000_000,
            "end": 10**18 + 800_000_000,
            "name": XSS_NAME,
            "service": "<b>svc</b>",
            "span_kind": "client",
            "attributes": {"http.request.method": "GET", "url.full": XSS_ATTR},
        },
    ]
    return analyze_spans(make_spans(rows))


def test_harness_sees_requests_and_errors(browser: Browser, tmp_path: Path) -> None:
    """The checks below mean something: a page that misbehaves is caught by them."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><body><img src='http://127.0.0.1:9/leak.png'>"
        "<script>console.error('boom')</script></body></html>"
    )
    page = browser.open(bad.as_uri())
    assert any("127.0.0.1:9/leak.png" in u for u in page.requests())
    assert any("boom" in e for e in page.errors())


@pytest.mark.smoke
def test_fixture_report_in_chromium(browser: Browser, tmp_path: Path) -> None:
    from tracelens.analysis.summary import summary
    from tracelens.api import write_report
    from tracelens.render.html.fmt import ms

    files = [
        FIXTURES / "otlp" / "hotrod_dispatch_jaeger-ui_v3_getTrace-response.json",
        *sorted((FIXTURES / "agent").glob("*.json")),
        *sorted((FIXTURES / "vllm").glob("*.json")),
    ]
    written = write_report(files, out=tmp_path / "report.html")
    out, analysis = written.paths[0], written.analysis
    assert analysis is not None
    page = browser.open(out.as_uri())
    assert page.errors() == []
    assert page.requests() == []
    summ = summary(analysis.traces)
    figures = page.eval(
        "Object.fromEntries(['fig-traces','fig-p50','fig-p95','fig-p99']"
        ".map(id => [id, document.getElementById(id).textContent.trim()]))"
    )
    assert figures == {
        "fig-traces": str(summ.traces),
        "fig-p50": ms(summ.latency_ms["p50"]),
        "fig-p95": ms(summ.latency_ms["p95"]),
        "fig-p99": ms(summ.latency_ms["p99"]),
    }
    assert page.eval("document.querySelectorAll('#waterfalls .wf').length") >= 1
    assert page.eval("document.querySelectorAll('#distribution svg rect').length") >= 1
    assert page.eval("document.querySelectorAll('#operations tbody tr').length") >= 5
    # Readable on a laptop: nothing wider than the window.
    assert page.eval("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.screenshot(ARTIFACTS / "report.png")
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000
    # A narrower window (a small laptop, a split screen) still needs no sideways scrolling.
    page.resize(820)
    assert page.eval("document.documentElement.scrollWidth <= window.innerWidth + 1")
    pdf = page.pdf()
    assert pdf.startswith(b"%PDF")
    (ARTIFACTS / "report.pdf").write_bytes(pdf)


def test_hostile_names_stay_text(browser: Browser, tmp_path: Path) -> None:
    from tracelens.render.html import render_report

    out = tmp_path / "hostile.html"
    out.write_text(render_report(_hostile_analysis(), title=XSS_NAME), encoding="utf-8")
    page = browser.open(out.as_uri())
    assert page.errors() == []  # no alert dialog, no blocked inline script
    assert page.requests() == []  # the <img src=x> did not become an image
    assert page.eval("document.scripts.length") == 0
    assert page.eval("document.querySelectorAll('img').length") == 0
    assert page.eval("document.title") == XSS_NAME
    assert XSS_NAME in page.eval("document.body.innerText")
    tooltips = page.eval("[...document.querySelectorAll('.wf-row[title]')].map(e => e.title)")
    assert any(XSS_ATTR in t for t in tooltips)
    page.screenshot(ARTIFACTS / "report-hostile.png")


def test_weekly_sample_pages_in_chromium(browser: Browser) -> None:
    """The committed weekly sample (kept current by test_report_sample) opens cleanly too."""
    weekly = ROOT / "reports" / "weekly"
    pages = sorted(weekly.glob("*.html"))
    assert (weekly / "index.html") in pages and len(pages) >= 3
    for path in pages:
        page = browser.open(path.as_uri())
        assert page.errors() == [], path.name
        assert page.requests() == [], path.name
        assert page.eval("document.documentElement.scrollWidth <= window.innerWidth + 1")
    index = browser.open((weekly / "index.html").as_uri())
    hrefs = index.eval("[...document.querySelectorAll('#weeks a')].map(a => a.href)")
    assert hrefs and all((weekly / h.rsplit("/", 1)[1]).exists() for h in hrefs)
    index.screenshot(ARTIFACTS / "report-weekly-index.png")


def _hostile_model_analysis() -> Any:
    """Ten model calls of a model whose name is markup, their token counts spread enough to fit
    (so the report draws a scatter titled with the name), and a CPU stack whose frame is
    markup."""
    from spans import make_spans
    from tracelens_instrumentation import attributes as A

    from tracelens.analysis import analyze_spans

    ms = 1_000_000
    rows: list[dict[str, Any]] = []
    for k in range(10):
        t0 = 10**18 + k * 10**9
        l_in, l_out = 100 * (k + 1), 10 * (1 + k % 5)
        rows += [
            {"id": 3 * k, "trace": f"{k + 1:032x}", "start": t0, "end": t0 + 500 * ms,
             "name": "handle_request"},
            {"id": 3 * k + 1, "trace": f"{k + 1:032x}", "parent": 3 * k, "start": t0,
             "end": t0 + 100 * ms, "name": "plan",
             "attributes": {A.KIND: "cpu", A.IO_NS: 0, A.WAIT_NS: 0,
                            A.CPU_STACKS: [f"app:plan;{XSS_ATTR} 5"]}},
            {"id": 3 * k + 2, "trace": f"{k + 1:032x}", "parent": 3 * k, "start": t0 + 100 * ms,
             "end": t0 + int((110 + 0.2 * l_in + 3 * l_out) * ms), "name": "chat",
             "span_kind": "client",
             "attributes": {A.GEN_AI_OPERATION_NAME: "chat", A.GEN_AI_REQUEST_MODEL: XSS_NAME,
                            A.GEN_AI_USAGE_INPUT_TOKENS: l_in,
                            A.GEN_AI_USAGE_OUTPUT_TOKENS: l_out}},
        ]  # fmt: skip
    return analyze_spans(make_spans(rows))


def test_hostile_model_and_function_names_stay_text(browser: Browser, tmp_path: Path) -> None:
    from tracelens.render.html import render_report

    out = tmp_path / "hostile-model.html"
    out.write_text(render_report(_hostile_model_analysis()), encoding="utf-8")
    page = browser.open(out.as_uri())
    assert page.errors() == []
    assert page.requests() == []
    assert page.eval("document.scripts.length") == 0
    assert page.eval("document.querySelectorAll('img').length") == 0
    assert page.eval("document.querySelectorAll('#models svg').length") == 1
    assert page.eval("document.querySelectorAll('#models svg circle').length") == 10
    titles = page.eval("[...document.querySelectorAll('svg title')].map(t => t.textContent)")
    assert any(t.startswith(XSS_NAME + " @ svc") for t in titles), titles
    assert any(t.startswith(XSS_ATTR + "\n") for t in titles)  # the CPU flame graph's box
    assert XSS_NAME in page.eval("document.getElementById('models').innerText")


@pytest.mark.system
def test_latency_model_and_flame_sections_of_a_demo_run(browser: Browser, tmp_path: Path) -> None:
    """A real demo run (its own agent, tool server and simulated model, 12 requests): the
    report's stage table, per-model fit with its scatter, sizing table and the three flame
    graphs render, the CPU flame graph shows the demo's planning and retrieval code and none
    of the decorator's frames, with no console error and no request."""
    import subprocess

    from tracelens.api import write_report
    from tracelens.demo.pipeline import tracelens_cmd

    spans = tmp_path / "demo.jsonl"
    cmd = tracelens_cmd("demo", "--file", str(spans), "--no-vllm", "--speed", "0.3")
    subprocess.run([*cmd, "--requests", "12"], check=True, capture_output=True, timeout=120)
    written = write_report([spans], out=tmp_path / "demo.html")
    analysis = written.analysis
    assert analysis is not None
    page = browser.open(written.paths[0].as_uri())
    assert page.errors() == []
    assert page.requests() == []
    assert page.eval("document.scripts.length") == 0
    # Stages: one table per root operation, a row per stage, in the analysis' order.
    stage_rows = page.eval(
        "[...document.querySelectorAll('#stages tr.stage-row td:first-child')]"
        ".map(td => td.textContent)"
    )
    assert stage_rows == [s.stage.value for s in analysis.stages.operations[0].stages]
    assert sorted(stage_rows) == ["llm", "other", "schedule", "tool", "transfer"]
    # The model fit: a row, and its scatter with a point per call and the fitted line; or, when
    # the client-side view of the simulated model explains too little (R2 under 0.5, as it
    # often does at the demo's concurrency), "no reliable fit" and no plot.
    (fit,) = analysis.models
    assert page.eval("document.querySelectorAll('#models tr.model-row').length") == 1
    if fit.reliable:
        assert page.eval("document.querySelectorAll('#models svg circle').length") == fit.n
        assert page.eval("document.querySelectorAll('#models svg line').length") == 1
    else:
        assert page.eval("document.querySelectorAll('#models svg').length") == 0
        assert "no reliable fit" in page.eval("document.getElementById('models').innerText")
    # Sizing: the CPU and model rows (the demo measures both).
    sizing = page.eval(
        "[...document.querySelectorAll('#sizing tr.sizing-row td:first-child')]"
        ".map(td => td.textContent)"
    )
    assert [s.split(" ")[0] for s in sizing] == ["cpu", "model"]
    for fig in ("flame-median", "flame-slow", "flame-cpu"):
        boxes = page.eval(
            f"[...document.querySelectorAll('#{fig} svg rect')]"
            ".map(r => r.getBoundingClientRect().width)"
        )
        assert len(boxes) >= 3 and all(w > 0 for w in boxes), (fig, boxes)
    cpu = page.eval(
        "[...document.querySelectorAll('#flame-cpu svg title')]"
        ".map(t => t.textContent.split('\\n')[0])"
    )
    assert "tracelens.demo.agent:Agent.plan" in cpu
    assert "tracelens.demo.retrieval:Corpus.search" in cpu
    assert not [f for f in cpu if f.startswith("tracelens_instrumentation")], cpu
    assert page.eval("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.screenshot(ARTIFACTS / "report-demo.png")
