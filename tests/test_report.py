"""The HTML report: figures match the analysis, hostile text stays text, output is deterministic,
big traces are capped, and the page references nothing outside itself."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spans import make_spans

from tracelens.analysis import Analysis, analyze_spans
from tracelens.analysis.findings.finding import (
    CacheDetails,
    Confidence,
    Evidence,
    Finding,
    FindingType,
)
from tracelens.api import write_report
from tracelens.cli import main
from tracelens.render.html import fmt, render_report
from tracelens.render.html.model import latency_histogram
from tracelens.render.html.waterfall import waterfall

MS = 1_000_000
T0 = 1_764_547_200 * 10**9  # 2025-12-01T00:00:00Z
XSS = "<script>alert(1)</script>"


def _trace(k: int, total_ms: int, *, tool_ms: int = 20, name: str = "handle_request") -> list[dict]:
    """A root with a model call then a tool call, one after the other."""
    trace = f"{k + 1:032x}"
    t = T0 + k * 60_000 * MS
    model_ms = max(total_ms - tool_ms - 4, 1)
    return [
        {"trace": trace, "id": 0, "start": t, "end": t + total_ms * MS, "name": name},
        {
            "trace": trace,
            "id": 1,
            "parent": 0,
            "start": t + 1 * MS,
            "end": t + (1 + model_ms) * MS,
            "name": "chat",
            "span_kind": "client",
            "attributes": {"gen_ai.operation.name": "chat"},
        },
        {
            "trace": trace,
            "id": 2,
            "parent": 0,
            "start": t + (2 + model_ms) * MS,
            "end": t + (2 + model_ms + tool_ms) * MS,
            "name": "search_docs",
            "span_kind": "client",
            "attributes": {"http.request.method": "GET", "url.full": "http://127.0.0.1/docs"},
        },
    ]


def _analysis(durations_ms: list[int]) -> Analysis:
    rows = [r for k, d in enumerate(durations_ms) for r in _trace(k, d)]
    return analyze_spans(make_spans(rows))


def _finding(
    type_: FindingType,
    names: list[str],
    *,
    saving: tuple[float, float] = (0.0, 0.0),
    projected: tuple[float, float] = (0.0, 0.0),
    traces: int = 1,
    occurrences: int = 1,
    parent: str | None = None,
    parent_service: str | None = None,
    evidence: str = "seen",
    confidence: Confidence = "medium",
    details: CacheDetails | None = None,
) -> Finding:
    return Finding(
        type=type_,
        names=names,
        services=["svc"] * len(names),
        parent=parent,
        parent_service=parent_service,
        traces=traces,
        occurrences=occurrences,
        saving_ms={"p50": saving[0], "p95": saving[1]},
        projected_latency_ms={"p50": projected[0], "p95": projected[1]},
        total_saving_ms=saving[0] * traces,
        traces_on_critical_path=traces,
        confidence=confidence,
        evidence=[Evidence("sequential", evidence)],
        details=details,
    )


class _Doc(HTMLParser):
    """Tags, attributes and element text by id: enough to read a report back."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.by_id: dict[str, str] = {}
        self.titles: list[str] = []
        self._open: list[tuple[str, str | None]] = []
        self._text: dict[str, list[str]] = {}
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        a = dict(attrs)
        self.attrs.update(a)
        if a.get("title"):
            self.titles.append(a["title"] or "")
        el_id = a.get("id")
        if tag not in ("meta", "line", "rect", "circle", "br", "polyline"):
            self._open.append((tag, el_id))
        if el_id:
            self._text[el_id] = []

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            t, el_id = self._open.pop()
            if el_id:
                self.by_id[el_id] = "".join(self._text.pop(el_id)).strip()
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _, el_id in self._open:
            if el_id and el_id in self._text:
                self._text[el_id].append(data)


def parse(page: str) -> _Doc:
    doc = _Doc()
    doc.feed(page)
    doc.close()
    return doc


TEMPLATE_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "footer", "div", "span",
    "section", "h1", "h2", "h3", "p", "b", "a", "ul", "li", "table", "thead", "tbody", "tr", "th",
    "td", "svg", "line", "rect", "text", "circle", "polyline", "g", "figure", "figcaption",
    "strong", "code",  # the flame graphs and model plots
}  # fmt: skip


def test_headline_figures_match_the_analysis() -> None:
    durations = [100, 200, 300, 400, 500, 600, 700, 800, 900, 2000]
    doc = parse(render_report(_analysis(durations)))
    p = np.percentile(np.array(durations, dtype=float), [50, 95, 99])
    assert doc.by_id["fig-traces"] == "10"
    assert doc.by_id["fig-p50"] == fmt.ms(p[0]) == "550 ms"
    assert doc.by_id["fig-p95"] == fmt.ms(p[1]) == "1.50 s"
    assert doc.by_id["fig-p99"] == fmt.ms(p[2])
    # Model time dominates these traces' critical paths.
    assert doc.by_id["fig-dominant"].endswith("GPU / model")


def test_page_is_self_contained() -> None:
    page = render_report(_analysis([100, 200, 300]))
    assert "Content-Security-Policy" in page
    assert "default-src 'none'" in page
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
    assert not re.search(r"url\(", page, re.I)  # no CSS fetches either
    assert "@import" not in page


def test_hostile_names_and_attributes_come_out_escaped() -> None:
    rows = _trace(0, 500)
    rows[1]["name"] = XSS
    rows[1]["service"] = "<b>svc</b>"
    rows[2]["attributes"] = {
        "http.request.method": "GET",
        "url.full": '"><img src=x onerror=alert(2)>',
    }
    analysis = analyze_spans(make_spans(rows))
    analysis.findings = [
        _finding(
            FindingType.CACHEABLE,
            [XSS],
            saving=(5.0, 6.0),
            parent=XSS,
            parent_service="<u>x</u>",
            evidence="<i>same args</i>",
            details=CacheDetails(identical_results=None, suggested_ttl_s=60.0, changed_results=0),
        )
    ] * 4
    page = render_report(analysis, title=XSS)
    assert XSS not in page
    assert "<img" not in page and "<b>svc" not in page and "<i>same" not in page
    assert "<u>x" not in page and html.escape("<u>x</u>") in page
    assert html.escape(XSS) in page
    doc = parse(page)
    assert doc.tags <= TEMPLATE_TAGS
    assert not any(a.startswith("on") for a in doc.attrs)
    text = "".join(doc.text)
    assert XSS in text  # shown to the reader as text
    assert any('"><img src=x onerror=alert(2)>' in t for t in doc.titles)


@pytest.mark.system
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.text(min_size=1, max_size=40),
    value=st.text(max_size=40),
    service=st.text(min_size=1, max_size=20),
)
def test_any_text_stays_text(name: str, value: str, service: str) -> None:
    """Whatever a span is called, the page's elements are the template's own."""
    rows = _trace(0, 300)
    rows[2].update(name=name, service=service)
    rows[2]["attributes"] = {"http.request.method": "GET", "x": value}
    page = render_report(analyze_spans(make_spans(rows)))
    doc = parse(page)
    assert doc.tags <= TEMPLATE_TAGS
    assert not any(a.startswith("on") for a in doc.attrs)
    assert name in "".join(doc.text)


def test_same_input_same_bytes() -> None:
    durations = [120, 340, 560, 780, 910, 1500]
    assert render_report(_analysis(durations)) == render_report(_analysis(durations))


def test_the_summary_is_computed_once_per_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page, the JSON and the text all read the one summary cached on the analysis."""
    from tracelens.analysis import summary as s

    calls: list[int] = []
    real = s.summary

    def counted(ta: object) -> s.Summary:
        calls.append(1)
        return real(ta)  # type: ignore[arg-type]

    monkeypatch.setattr(s, "summary", counted)
    analysis = _analysis([120, 340, 560])
    page = render_report(analysis)
    doc = analysis.to_dict()
    analysis.to_text()
    assert len(calls) == 1
    assert doc["summary"]["traces"] == 3 and 'id="fig-traces">3<' in page


def test_findings_lead_the_page() -> None:
    analysis = _analysis([400, 500, 600])
    analysis.findings = [
        _finding(
            FindingType.PARALLELIZABLE,
            ["fetch_schema", "fetch_logs", "search_docs"],
            parent="handle_request",
            traces=1800,
            saving=(95.0, 140.0),
            projected=(717.0, 2000.1),
            evidence="sequential on the critical path in 1800 traces",
        ),
        _finding(
            FindingType.CACHEABLE, ["fetch_schema"], traces=20, occurrences=40, saving=(50.0, 80.0)
        ),
        _finding(FindingType.RETRY, ["GetDriver"], occurrences=3),
        _finding(FindingType.N_PLUS_ONE, ["get_document"], saving=(1.0, 1.0)),
        _finding(FindingType.POLLING, ["llm"], saving=(0.5, 0.5)),
    ]
    page = render_report(analysis)
    doc = parse(page)
    changes = doc.by_id["changes"]
    assert "Run fetch_schema, fetch_logs, search_docs in parallel under handle_request" in changes
    assert "−95.0 ms" in changes and "2.00 s" in changes
    assert "Cache fetch_schema" in changes
    assert "Stop the retries of GetDriver" in changes
    # The fourth is in the full list, not the top three; a type without a title of its own
    # is named by its type.
    assert "Batch the repeated get_document calls" not in changes
    assert "Batch the repeated get_document calls" in doc.by_id["findings"]
    assert "Polling: llm" in doc.by_id["findings"]


def test_no_findings_says_so_and_points_at_the_top_operation() -> None:
    analysis = _analysis([400, 500])
    analysis.findings = []
    doc = parse(render_report(analysis))
    assert "No bottleneck findings" in doc.by_id["changes"]
    assert "chat" in doc.by_id["changes"]


def test_waterfall_highlights_the_critical_path() -> None:
    """Case 2 of the official suite: X[1,101] with A[10,50] and C[20,60] -> X, C, X."""
    rows = [
        {"id": 0, "start": T0 + 1 * MS, "end": T0 + 101 * MS, "name": "X"},
        {"id": 1, "parent": 0, "start": T0 + 10 * MS, "end": T0 + 50 * MS, "name": "A"},
        {"id": 2, "parent": 0, "start": T0 + 20 * MS, "end": T0 + 60 * MS, "name": "C"},
    ]
    analysis = analyze_spans(make_spans(rows))
    w = waterfall(analysis, analysis.traces.traces["trace_id"][0], "test")
    by_name = {r["name"]: r for r in w["rows"]}
    assert [r["name"] for r in w["rows"]] == ["X", "A", "C"]
    assert by_name["A"]["on_path"] is False and by_name["A"]["sections"] == []
    assert by_name["C"]["critical_ms"] == pytest.approx(40.0)
    assert by_name["C"]["sections"] == [{"left": pytest.approx(19.0), "width": pytest.approx(40.0)}]
    assert [s["left"] for s in by_name["X"]["sections"]] == [
        pytest.approx(0.0),
        pytest.approx(59.0),
    ]
    assert by_name["X"]["critical_ms"] == pytest.approx(60.0)


def test_waterfall_order_is_depth_first_by_start_with_the_main_root_first() -> None:
    """Hand-ordered: R is the main root (the longest root); O, an orphan root that starts
    earlier, comes after R's whole subtree; R's children by start (B before A), ties by input
    order (C before D, same start); a CONSUMER under a PRODUCER (not waited for) is still
    shown under it."""
    rows = [
        {"id": 0, "start": T0, "end": T0 + 100 * MS, "name": "R"},
        {"id": 1, "parent": 0, "start": T0 + 30 * MS, "end": T0 + 40 * MS, "name": "A"},
        {"id": 2, "parent": 0, "start": T0 + 10 * MS, "end": T0 + 20 * MS, "name": "B",
         "span_kind": "producer"},
        {"id": 3, "parent": 1, "start": T0 + 31 * MS, "end": T0 + 32 * MS, "name": "C"},
        {"id": 4, "parent": 1, "start": T0 + 31 * MS, "end": T0 + 33 * MS, "name": "D"},
        {"id": 5, "parent": 2, "start": T0 + 50 * MS, "end": T0 + 60 * MS, "name": "Q",
         "span_kind": "consumer"},
        {"id": 6, "parent": "00000000000000ff", "start": T0 - 5 * MS, "end": T0, "name": "O"},
    ]  # fmt: skip
    analysis = analyze_spans(make_spans(rows))
    w = waterfall(analysis, analysis.traces.traces["trace_id"][0], "order")
    assert [(r["name"], r["depth"]) for r in w["rows"]] == [
        ("R", 0), ("B", 1), ("Q", 2), ("A", 1), ("C", 2), ("D", 2), ("O", 0),
    ]  # fmt: skip


def test_deep_trace_waterfall_is_capped_and_iterative() -> None:
    depth = 6000
    rows = [
        {"id": i, "parent": (i - 1 if i else None), "start": T0 + i, "end": T0 + 2 * depth - i}
        for i in range(depth)
    ]
    analysis = analyze_spans(make_spans(rows))
    w = waterfall(analysis, analysis.traces.traces["trace_id"][0], "deep", max_rows=150)
    assert w["spans"] == depth and w["shown"] == 150
    assert max(r["indent"] for r in w["rows"]) == 12
    page = render_report(analysis)
    assert "Showing 150 of 6,000 spans" in page


@settings(deadline=None)
@given(st.lists(st.floats(min_value=0.001, max_value=1e7), min_size=1, max_size=300))
def test_histogram_accounts_for_every_trace(values: list[float]) -> None:
    h = latency_histogram(np.array(values))
    assert sum(b["count"] for b in h["bars"]) == len(values)
    for b in h["bars"]:
        assert 0 <= b["x"] <= 100 + 1e-6 and 0 <= b["h"] <= 100
    assert all(0 <= m["x"] <= 100 + 1e-6 for m in h["marks"])


def test_empty_input_renders() -> None:
    from tracelens.schema import empty_spans

    doc = parse(render_report(analyze_spans(empty_spans())))
    assert doc.by_id["fig-traces"] == "0"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.4213, "0.42 ms"),
        (9.94, "9.9 ms"),
        (9.96, "10 ms"),
        (81.24, "81.2 ms"),
        (812.4, "812 ms"),
        (2140.5, "2.14 s"),
        (42999.0, "43.0 s"),
        (150_000.0, "2.5 min"),
        (9_000_000.0, "2.5 h"),
    ],
)
def test_ms_format(value: float, text: str) -> None:
    assert fmt.ms(value) == text


def test_tick_and_share_format() -> None:
    assert [fmt.tick(v) for v in (0, 250, 1000, 1500)] == ["0", "250 ms", "1 s", "1.5 s"]
    assert fmt.pct(0.001) == "<1%" and fmt.pct(0.4) == "40%" and fmt.delta(0.123) == "+12%"


HOTROD = FIXTURES / "otlp" / "hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"


def test_write_report_from_fixture_files(tmp_path: Path) -> None:
    files = [HOTROD, *sorted((FIXTURES / "agent").glob("*.json"))]
    written = write_report(files, out=tmp_path / "sub" / "r.html")
    [out], analysis = written.paths, written.analysis
    assert analysis is not None and written.errors == []
    doc = parse(out.read_text(encoding="utf-8"))
    assert doc.by_id["fig-traces"] == str(analysis.traces.traces.height) == "8"
    assert "GetDriver" in doc.by_id["operations"]
    slowest = analysis.traces.traces.sort("duration_ns")["trace_id"][-1]
    assert f"{slowest}" in doc.by_id["waterfalls"]
    assert str(HOTROD) in doc.by_id["notes"]


def test_report_command(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", str(HOTROD), "--out", str(out), "--title", "HotROD"])
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output
    assert "\r" not in res.output  # no progress bar when stderr is not a terminal
    doc = parse(out.read_text(encoding="utf-8"))
    assert doc.by_id["fig-traces"] == "1"
    assert "<title>HotROD</title>" in out.read_text(encoding="utf-8")


def test_report_command_from_store(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    runner = CliRunner()
    assert runner.invoke(main, ["import", str(HOTROD), "--db", str(db)]).exit_code == 0
    out = tmp_path / "r.html"
    res = runner.invoke(main, ["report", "--db", str(db), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert parse(out.read_text(encoding="utf-8")).by_id["fig-traces"] == "1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--out FILE.html"),
        (["x.json", "--weekly"], "import the files first"),
        (["--weekly", "--out", "x.html"], "use --out-dir"),
        (["--week", "2026-W60"], "no ISO week 60"),
        (["--week", "last week"], "not an ISO week"),
    ],
)
def test_report_command_usage_errors(args: list[str], message: str) -> None:
    res = CliRunner().invoke(main, ["report", *args])
    assert res.exit_code == 2
    assert message in res.output


def test_report_command_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", str(bad), "--out", str(out)])
    assert res.exit_code == 2
    assert str(bad) in res.output and not out.exists()
    res = CliRunner().invoke(
        main, ["report", str(bad), str(HOTROD), "--keep-going", "--out", str(out)]
    )
    assert res.exit_code == 2 and out.exists()
    assert parse(out.read_text(encoding="utf-8")).by_id["fig-traces"] == "1"


def _cpu_bound(n: int) -> Analysis:
    """n requests, one starting every second, each 1000 ms long with 500 ms of measured CPU
    (a ``plan`` child whose thread was on the CPU its whole 500 ms)."""
    from tracelens_instrumentation import attributes as A

    ms = 1_000_000
    rows: list[dict[str, object]] = []
    for k in range(n):
        t0 = 10**18 + k * 1000 * ms
        rows += [
            {"id": 2 * k, "trace": f"{k + 1:032x}", "start": t0, "end": t0 + 1000 * ms,
             "name": "handle_request", "attributes": {A.KIND: "io"}},
            {"id": 2 * k + 1, "trace": f"{k + 1:032x}", "parent": 2 * k, "start": t0,
             "end": t0 + 500 * ms, "name": "plan",
             "attributes": {A.KIND: "cpu", A.CPU_NS: 500 * ms, A.IO_NS: 0, A.WAIT_NS: 0}},
        ]  # fmt: skip
    return analyze_spans(make_spans(rows), findings=False)


def test_sizing_section_at_the_observed_load() -> None:
    """10 requests over 10 s (1/s), each 1 s (the p95 target): Little's law puts 1 request in
    flight; 0.5 s of CPU each is 0.5 cores offered, 1 core at 30 % headroom, 50 % busy, and
    M/M/1 waits with probability 0.5 for 0.5 x 0.5 / (1 - 0.5) = 0.5 s."""
    from tracelens.render.html.model import sizing_view

    view = sizing_view(_cpu_bound(10))
    assert view["reason"] is None
    assert view["observed_arrival_per_s"] == pytest.approx(1.0)
    assert view["latency_target_ms"] == pytest.approx(1000.0)
    assert view["concurrency"] == 1
    cpu = next(r for r in view["resources"] if r["name"] == "cpu")
    assert cpu["demand_ms"] == pytest.approx(500.0, rel=1e-3)
    assert cpu["needed"] == 1 and cpu["utilisation"] == pytest.approx(0.5, rel=1e-3)
    assert cpu["wait_probability"] == pytest.approx(0.5, rel=1e-3)
    assert cpu["expected_wait_ms"] == pytest.approx(500.0, rel=1e-2)
    assert view["binding"] == "cpu"
    doc = parse(render_report(_cpu_bound(10)))
    assert "sizing-omitted" not in doc.by_id


def test_sizing_is_left_out_with_its_reason() -> None:
    doc = parse(render_report(_cpu_bound(4)))
    assert doc.by_id["sizing-omitted"] == (
        "No sizing: 4 request traces: sizing needs at least 10 to tell the load."
    )
