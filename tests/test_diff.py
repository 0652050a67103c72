"""``tracelens diff``: the bootstrap against literal resampling, verdicts and attribution on
hand-built traces whose answer is known by construction, the --fail-on grammar, the sources
(stores, windows of one store, directories), the JSON contract, the HTML page, and an A/A test.

The demo-agent acceptance runs (a delay injected into one tool) are in tests/test_diff_demo.py.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import ROOT
from spans import make_spans

from tracelens.analysis import analyze_spans
from tracelens.analysis.diff import Verdict, compare, parse_rules, profile
from tracelens.analysis.diff.bootstrap import percentile, resampled_percentiles
from tracelens.analysis.diff.compare import band, needed
from tracelens.analysis.diff.window import parse_instant
from tracelens.api import diff
from tracelens.cli import main
from tracelens.errors import OptionError
from tracelens.render.html.diff import render_diff
from tracelens.store import DuckDBStore

MS = 1_000_000
T0 = 1_764_547_200 * 10**9  # Monday 2025-12-01 00:00 UTC
N = 30


def _traces(a_ms: int, *, t0: int = T0, bump_from: int | None = None, name: str = "a") -> list:
    """N traces: root ``handle`` = 1 ms, ``a`` (a_ms), 1 ms, ``b`` (50 + k ms), 8 ms: the
    root's latency is a_ms + 60 + k ms; with ``bump_from``, traces k >= it get 1 ms more of
    root self time at the end."""
    rows = []
    for k in range(N):
        t = t0 + k * 60 * 10**9
        tid = f"{t0 // 10**9 % 2**32:08x}{k:024x}"
        end_b = 2 + a_ms + 50 + k
        extra = 1 if bump_from is not None and k >= bump_from else 0
        rows += [
            {"trace": tid, "id": 0, "start": t, "end": t + (end_b + 8 + extra) * MS,
             "name": "handle"},
            {"trace": tid, "id": 1, "parent": 0, "start": t + MS, "end": t + (1 + a_ms) * MS,
             "name": name},
            {"trace": tid, "id": 2, "parent": 0, "start": t + (2 + a_ms) * MS,
             "end": t + end_b * MS, "name": "b"},
        ]  # fmt: skip
    return rows


@cache
def _profile(a_ms: int, bump_from: int | None = None, name: str = "a") -> Any:
    return profile(analyze_spans(make_spans(_traces(a_ms, bump_from=bump_from, name=name))))


# --- the bootstrap ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 40, 301])
@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_resampled_percentiles_match_literal_resampling(n: int, q: float) -> None:
    """The order-statistic draws have the distribution of the percentile of literal resamples
    (np.random.choice + np.percentile): their quantiles agree within Monte Carlo error."""
    rng = np.random.default_rng(n)
    x = np.sort(rng.lognormal(3.0, 0.8, n))
    assert percentile(x, q) == pytest.approx(float(np.percentile(x, q * 100)), abs=1e-9)
    fast = resampled_percentiles(x, q, 40_000, np.random.default_rng(7))
    literal = np.percentile(x[rng.integers(0, n, (40_000, n))], q * 100, axis=1)
    levels = [0.025, 0.25, 0.5, 0.75, 0.975]
    spread = float(np.quantile(literal, 0.975) - np.quantile(literal, 0.025)) or 1.0
    got, want = np.quantile(fast, levels), np.quantile(literal, levels)
    assert np.all(np.abs(got - want) <= 0.05 * spread + 1e-9), (got, want)
    assert abs(fast.mean() - literal.mean()) <= 0.02 * spread + 1e-9


def test_needed_traces_per_percentile() -> None:
    assert [needed(q) for q in (0.5, 0.95, 0.99)] == [20, 100, 500]
    assert needed(0.5, min_traces=5) == 10


def test_the_band_is_the_traces_around_the_percentile() -> None:
    lat = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 8.0, 7.0, 6.0, 0.0, 10.0])  # 0..10 shuffled
    # p50 of 11 values: rank 5; d = 0.1 -> ranks 4..6 widened to 5 traces: values 3..7
    assert sorted(lat[band(lat, 0.5)]) == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert sorted(lat[band(lat, 0.99)]) == [6.0, 7.0, 8.0, 9.0, 10.0]  # clipped at the top


# --- verdicts and attribution on traces built by hand -----------------------------------------


@pytest.mark.smoke
def test_a_slower_operation_is_the_regression_and_the_whole_cause() -> None:
    """``a`` takes 50 ms more in every trace, nothing else changes: by construction the root's
    p50 rises by exactly 50 ms (114.5 -> 164.5: latency 100 + k + a), all of it from ``a``."""
    d = compare(_profile(40), _profile(90), rules=parse_rules("p50>+40%,p50>+45%,p95>+1%"))
    (root,) = d.roots
    p50, p95, p99 = root.latency
    assert (p50.base_ms, p50.new_ms) == (pytest.approx(114.5), pytest.approx(164.5))
    assert p50.verdict is Verdict.REGRESSION and p50.ci_low_ms is not None and p50.ci_low_ms > 0
    assert p95.verdict is Verdict.TOO_FEW and p99.verdict is Verdict.TOO_FEW  # 30 < 100
    att = root.attribution[0]
    assert att.operations[0].name == "a" and att.operations[0].kind == "unknown"
    assert att.operations[0].delta_ms == pytest.approx(50.0)
    assert att.operations[0].share == pytest.approx(1.0)
    assert [c.name for c in att.operations] == ["a"]  # b and the root's own time: no change
    assert att.unattributed_ms == pytest.approx(0.0, abs=1e-9)
    assert att.headline() == "p50 +50 ms: +50 ms from a on the critical path"
    assert att.kinds["unknown"][1] - att.kinds["unknown"][0] == pytest.approx(50.0)
    ops = {o.name: o for o in root.operations}
    assert ops["a"].changes[0].verdict is Verdict.REGRESSION
    assert ops["a"].changes[0].ci_low_ms == pytest.approx(50.0)  # constant 40 -> 90
    assert ops["b"].changes[0].verdict is Verdict.UNCHANGED
    assert ops["handle"].changes[0].verdict is Verdict.UNCHANGED
    # 50 / 114.5 = 43.7%: over 40%, under 45%; p95 is not judged with 30 traces
    assert [(r.rule, r.tripped) for r in d.rules] == [
        ("p50>+40%", True),
        ("p50>+45%", False),
        ("p95>+1%", False),
    ]
    assert d.failed and len(d.regressions()) == 2  # the root's p50 and a's p50
    assert d.method.comparisons == 4  # p50 of the root, a, b and handle's own time


def test_faster_is_an_improvement_and_trips_nothing() -> None:
    d = compare(_profile(90), _profile(40), rules=parse_rules("p50>+0ms"))
    assert d.roots[0].latency[0].verdict is Verdict.IMPROVEMENT
    assert not d.failed and d.regressions() == []


def test_a_change_within_noise_is_not_a_regression() -> None:
    """Half the traces 1 ms slower: p50 moves by 0.5 ms (114.5 -> 115: the middle pair becomes
    114 and 116), well inside the traces' own spread, so the verdict is noise and no rule
    trips, however small its threshold."""
    d = compare(_profile(40), _profile(40, bump_from=15), rules=parse_rules("p50>+0ms"))
    p50 = d.roots[0].latency[0]
    assert p50.delta_ms == pytest.approx(0.5)
    assert p50.verdict is Verdict.UNCHANGED
    assert p50.ci_low_ms is not None and p50.ci_low_ms < 0 < (p50.ci_high_ms or 0)
    assert not d.failed and d.regressions() == []


def test_identical_runs_change_nothing() -> None:
    d = compare(_profile(40), _profile(40))
    changes = [c for r in d.roots for c in r.latency] + [
        c for r in d.roots for o in r.operations for c in o.changes
    ]
    assert {c.verdict for c in changes} <= {Verdict.UNCHANGED, Verdict.TOO_FEW}
    assert not d.operation_churn.appeared and not d.operation_churn.vanished


def test_renamed_operation_is_new_and_vanished() -> None:
    d = compare(_profile(40), _profile(40, name="a2"))
    assert [(c.name, c.count) for c in d.operation_churn.appeared] == [("a2", N)]
    assert [(c.name, c.count) for c in d.operation_churn.vanished] == [("a", N)]
    ops = {o.name: o for o in d.roots[0].operations}
    assert (ops["a"].base_traces, ops["a"].new_traces) == (N, 0)
    assert (ops["a2"].base_traces, ops["a2"].new_traces) == (0, N)


def test_the_same_seed_gives_the_same_diff() -> None:
    a = compare(_profile(40), _profile(41), seed=3).to_dict()
    b = compare(_profile(40), _profile(41), seed=3).to_dict()
    assert a == b


# --- --fail-on grammar ------------------------------------------------------------------------


def test_rules_grammar() -> None:
    rules = parse_rules(" p95>+10% , P99 > 250ms,p50>1.5s")
    assert [(r.metric, r.threshold, r.relative, r.text) for r in rules] == [
        ("p95", 0.10, True, "p95>+10%"),
        ("p99", 250.0, False, "p99>+250ms"),
        ("p50", 1500.0, False, "p50>+1.5s"),
    ]
    assert rules[0].exceeded(100.0, 10.5) and not rules[0].exceeded(100.0, 10.0)
    assert rules[1].exceeded(1.0, 251.0) and not rules[1].exceeded(1.0, 250.0)
    assert parse_rules("") == () and parse_rules(None) == ()
    for bad in ("p90>+10%", "p95>10", "p95<+10%", "p95>+10%,", "latency>+1ms"):
        with pytest.raises(OptionError, match="is not a rule like"):
            parse_rules(bad)


# --- sources: stores, windows, directories ----------------------------------------------------


@pytest.fixture()
def two_weeks(tmp_path: Path) -> str:
    """One store: a week of traces, then a week later the same traces with ``a`` 50 ms slower."""
    week = 7 * 86_400 * 10**9
    path = tmp_path / "two.duckdb"
    with DuckDBStore(path) as db:
        db.append(make_spans(_traces(40)))
        db.append(make_spans(_traces(90, t0=T0 + week)))
    return str(path)


def test_windows_of_one_store(two_weeks: str) -> None:
    d = diff(
        db=two_weeks,
        base_since="2025-12-01",
        base_until="2025-12-08T00:00:00Z",
        since="2025-12-08T00:00:00+00:00",
        fail_on="p50>+10%",
    )
    assert (d.base.traces, d.new.traces) == (N, N)
    assert d.roots[0].latency[0].delta_ms == pytest.approx(50.0)
    assert d.failed
    assert "[2025-12-08 00:00:00, …)" in d.new.label


def test_stores_as_base_and_new(tmp_path: Path) -> None:
    paths = []
    for a_ms in (40, 90):
        path = tmp_path / f"s{a_ms}.db"  # found by its header, whatever its name
        with DuckDBStore(path) as db:
            db.append(make_spans(_traces(a_ms)))
        paths.append(str(path))
    res = CliRunner().invoke(main, ["diff", *paths, "--fail-on", "p50>+10%", "--format", "json"])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["failed"] and doc["roots"][0]["attribution"][0]["operations"][0]["name"] == "a"
    assert "--fail-on p50>+10% tripped by handle" in res.stderr


def test_relative_instants() -> None:
    now = 1_800_000_000 * 10**9
    assert parse_instant("--since", "24h", now) == now - 86_400 * 10**9
    assert parse_instant("--since", "90s", now) == now - 90 * 10**9
    assert parse_instant("--since", "2026-03-01T12:00:00+01:00", now) == 1_772_362_800 * 10**9
    with pytest.raises(OptionError, match="--until: 'yesterday' is neither"):
        parse_instant("--until", "yesterday", now)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give BASE and NEW"),
        (["only-base.json"], "give both BASE and NEW"),
        (["{a}", "{b}", "--since", "1d"], "time windows apply to stores only"),
        (["{a}", "{b}", "--fail-on", "p95>10"], "'p95>10' is not a rule"),
        (["--db", "{s}", "--since", "2026-01-02", "--until", "2026-01-01"], "ends before"),
        (["{a}", "{b}", "--db", "{s}"], "--db names the store"),
        (["{a}", "missing.json"], "does not exist"),
    ],
)
def test_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    a = ROOT / "fixtures" / "otlp" / "hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"
    filled = [x.format(a=a, b=a, s=tmp_path / "s.duckdb") for x in args]
    res = CliRunner().invoke(main, ["diff", *filled])
    assert res.exit_code == 2 and message in res.output, res.output


def test_an_empty_window_says_so(two_weeks: str) -> None:
    res = CliRunner().invoke(
        main, ["diff", "--db", two_weeks, "--base-until", "2025-01-01", "--since", "2025-12-08"]
    )
    assert res.exit_code == 2 and "base: no traces in store" in res.output


def test_a_directory_is_its_files(tmp_path: Path) -> None:
    """Directories of real trace files (the agent fixtures) against themselves: same traces,
    nothing new, nothing significant, exit 0."""
    res = CliRunner().invoke(
        main, ["diff", str(ROOT / "fixtures" / "agent"), str(ROOT / "fixtures" / "agent")]
    )
    assert res.exit_code == 0, res.output
    assert "no significant regression" in res.stdout
    assert "New operations" not in res.stdout


# --- the JSON contract and the page -----------------------------------------------------------


@cache
def _diff_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((ROOT / "docs" / "analysis.schema.json").read_text(encoding="utf-8"))
    sub = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/diff"}
    cls = jsonschema.validators.validator_for(sub)
    cls.check_schema(sub)
    return cls(sub)


def _errors(doc: dict[str, Any]) -> list[str]:
    return [e.message for e in _diff_validator().iter_errors(doc)]


def test_the_document_matches_the_schema() -> None:
    d = compare(_profile(40), _profile(90, name="a"), rules=parse_rules("p50>+5%")).to_dict()
    assert _errors(d) == []
    renamed = compare(_profile(40), _profile(40, name="a2")).to_dict()
    assert _errors(renamed) == []
    assert d["schema"] == "tracelens.diff/1"
    bad = json.loads(json.dumps(d))
    bad["roots"][0]["latency_ms"][0]["verdict"] = "worse"
    del bad["method"]
    assert len(_errors(bad)) == 2


def test_the_contract_documents_every_field() -> None:
    text = (ROOT / "docs" / "analysis-json.md").read_text(encoding="utf-8")
    section = text.split("## `tracelens diff --format json`", 1)[1]
    d = compare(_profile(40), _profile(90), rules=parse_rules("p50>+5%")).to_dict()
    root = d["roots"][0]
    keys = (
        set(d)
        | set(d["method"])
        | set(root)
        | set(root["latency_ms"][0])
        | set(root["attribution"][0])
        | set(root["attribution"][0]["operations"][0])
        | set(root["operations"][0])
        | set(d["rules"][0])
    )
    missing = sorted(k for k in keys if f"`{k}`" not in section)
    assert missing == []


def test_the_page_escapes_names_and_forbids_scripts() -> None:
    evil = "<script>alert(1)</script>"
    d = compare(_profile(40), _profile(90, name=evil))
    html = render_diff(d, title="<b>t</b>")
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;t&lt;/b&gt;" in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert 'id="new-ops"' in html and 'id="gone-ops"' in html


def test_text_and_html_formats(two_weeks: str, tmp_path: Path) -> None:
    out = tmp_path / "diff.html"
    args = ["diff", "--db", two_weeks, "--base-until", "2025-12-08", "--since", "2025-12-08"]
    res = CliRunner().invoke(main, [*args, "--format", "html", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "p50 +50 ms: +50 ms from a on the critical path" in out.read_text()
    res = CliRunner().invoke(main, args)
    assert "p50 +50 ms: +50 ms from a on the critical path" in res.stdout
    assert "REGRESSION" in res.stdout


# --- A/A --------------------------------------------------------------------------------------


@pytest.mark.system
def test_aa_twenty_seeds_report_no_regression_in_at_least_18() -> None:
    """A/A: two independent samples of the same agent, 20 times with different seeds.

    Generated traces (bench/synth.py: ~50 spans per trace, every duration log-normal, 26
    operations), 100 traces per run, not the demo agent: 40 demo runs would take minutes.  Each
    diff makes ~50 comparisons (p50 and p95 of the root and of every critical-path operation),
    so uncorrected intervals flag a regression in most of these diffs (12 of these 20 when
    measured with each interval at 95%), the corrected ones in none."""
    sys.path.insert(0, str(ROOT / "bench"))
    from synth import make_traces

    flagged = []
    for s in range(20):
        a = profile(analyze_spans(make_traces(100, seed=1000 + 2 * s), findings=False))
        b = profile(analyze_spans(make_traces(100, seed=1001 + 2 * s), findings=False))
        d = compare(a, b, seed=s)
        assert d.method.comparisons >= 40
        if d.regressions():
            flagged.append(
                (s, [(o.name if o else "root", c.metric) for _, o, c in d.regressions()])
            )
    assert len(flagged) <= 2, flagged
