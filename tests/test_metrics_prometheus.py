"""A real Prometheus scrapes a real ``tracelens collect`` that received the demo agent's spans.

Everything runs as its own process: the collector (with a token, which Prometheus sends from a
credentials file), the demo agent exporting over OTLP/HTTP, ``tracelens analyze`` reading the
store through the collector, and Debian's ``prometheus`` (``.ci/run`` installs it) scraping
``/metrics`` every second and evaluating the repo's alert rules.  The truth the metrics are held
to is ``tracelens analyze``'s own output on the same spans.  The dashboard and the alert rules are
checked against the names a real scrape exposes (parsed with a PromQL parser), and every panel
query is evaluated by the Prometheus server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tracelens.collector.config import DEFAULT_METRICS_QUIET_S
from tracelens.collector.metrics import MAX_INTERVAL_S
from tracelens.demo.pipeline import tracelens_cmd

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "tracelens-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "tracelens-rules.yml"
REQUESTS = 24
FIRST_RUN = 4  # of which the agent's first run sends this many
# The collector runs with its defaults: span metrics on, a trace counted 10 s after it went quiet.
QUIET_S = DEFAULT_METRICS_QUIET_S
LOOP_S = min(MAX_INTERVAL_S, QUIET_S / 2)  # how often the metrics loop looks
TOKEN = "metrics-test-token"
TP99_THRESHOLD_S = 30  # the example alert's line (deploy/prometheus/tracelens-rules.yml)
# Grafana's variables, as a test evaluates the panels: every service, every root operation.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__range": "5m",
    "$service": ".*",
    "$root_operation": ".*",
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("TRACELENS_VLLM_MODEL", None)
    env.pop("TRACELENS_TOKEN", None)
    return env


def _wait(what: str, check: Callable[[], Any], timeout_s: float, log: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s\n{log()}")
        time.sleep(0.2)


@dataclass
class Collector:
    proc: subprocess.Popen[str]
    url: str = ""
    lines: list[str] = field(default_factory=list)

    def log(self) -> str:
        return "\n".join(self.lines[-20:])

    def get(self, path: str, token: str | None = TOKEN) -> tuple[int, str, str]:
        request = urllib.request.Request(self.url + path)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body = response.read().decode()
                return response.status, response.headers["Content-Type"], body
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers["Content-Type"], exc.read().decode()

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        status, _, text = self.get("/metrics")
        assert status == 200, text
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }


def _total(samples: dict, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text()[-3000:]

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as r:
            data = json.loads(r.read())
        assert data["status"] == "success", data
        return data["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def value(self, expr: str) -> float:
        result = self.query(expr)
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_prometheus(binary: str, tmp: Path, target: str, token_file: Path) -> Prometheus:
    """Prometheus scraping ``target`` every second with the token, evaluating the repo's rules
    and a copy whose TP99 threshold is 0 s (so that alert must go pending on the demo)."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        group["name"] += "-at-zero"
        for rule in group["rules"]:
            rule["expr"] = rule["expr"].replace(f"> {TP99_THRESHOLD_S}", "> 0")
    at_zero = tmp / "rules-at-zero.yml"
    at_zero.write_text(yaml.safe_dump(rules))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES), str(at_zero)],
        "scrape_configs": [
            {
                "job_name": "tracelens",
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [target]}],
                "authorization": {"credentials_file": str(token_file)},
            }
        ],
    }
    config_path = tmp / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    port = _free_port()
    log_path = tmp / "prometheus.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                binary, f"--config.file={config_path}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return Prometheus(f"http://127.0.0.1:{port}", proc, log_path)


def _scraping(prom: Prometheus) -> bool:
    try:
        up = prom.query('up{job="tracelens"}')
    except OSError:
        return False  # not listening yet
    return bool(up) and up[0]["value"][1] == "1"


def _counted(collector: Collector, traces: int) -> bool:
    return _total(collector.samples(), "tracelens_metrics_traces_counted_total") >= traces


def _has(prom: Prometheus, traces: int) -> bool:
    counts = prom.query("sum(tracelens_trace_duration_seconds_count)")
    return bool(counts) and float(counts[0]["value"][1]) == traces


@dataclass
class Run:
    collector: Collector
    demo: dict[str, int]  # traces and spans the agent sent
    analysis: dict[str, Any]
    prometheus: Prometheus | None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """A collector with no metrics flag (span metrics are on by default, a trace counted 10 s
    after it went quiet), scraped by Prometheus (when there is one) from before the demo agent
    sends its spans until the tests end."""
    tmp = tmp_path_factory.mktemp("metrics")
    token_file = tmp / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    proc = subprocess.Popen(
        tracelens_cmd(
            "collect", "--db", str(tmp / "m.duckdb"), "--http", "127.0.0.1:0", "--grpc", "off",
            "--token-file", str(token_file),
        ),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    collector = Collector(proc)
    ready = threading.Event()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            collector.lines.append(line.rstrip())
            found = re.search(r"OTLP/HTTP listening on (http://\S+)", line)
            if found:
                collector.url = found.group(1)
            if line.rstrip().endswith(": ready"):
                ready.set()

    threading.Thread(target=drain, daemon=True).start()
    prom: Prometheus | None = None
    try:
        assert ready.wait(60), collector.log()
        binary = shutil.which("prometheus")
        if binary is not None:
            target = urllib.parse.urlsplit(collector.url).netloc
            prom = _start_prometheus(binary, tmp, target, token_file)
            _wait("prometheus scrapes the collector", lambda: _scraping(prom), 90, prom.log)
        # Two runs of the agent: a series Prometheus first sees with a non-zero count has no
        # rate until it grows, so the second run's traces give the rate-based panels and the
        # alert rule something to measure (as a running agent would).
        demo: dict[str, int] = {"traces": 0, "spans": 0}
        for seed, requests in ((5, FIRST_RUN), (6, REQUESTS - FIRST_RUN)):
            summary = tmp / f"demo-{seed}.json"
            done = subprocess.run(
                tracelens_cmd(
                    "demo", "--endpoint", collector.url, "--requests", str(requests),
                    "--concurrency", "4", "--seed", str(seed), "--summary-json", str(summary),
                ),
                capture_output=True, text=True, timeout=180,
                env={**_env(), "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{TOKEN}"},
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            ran = json.loads(summary.read_text())
            assert ran["failed"] == 0 and ran["traces"] == requests
            demo = {k: demo[k] + ran[k] for k in demo}
            _wait("every trace counted", lambda n=demo["traces"]: _counted(collector, n), 60,
                  collector.log)  # fmt: skip
            if prom is not None:
                _wait("prometheus has every trace", lambda n=demo["traces"]: _has(prom, n), 30,
                      prom.log)  # fmt: skip
        analysed = subprocess.run(
            tracelens_cmd("analyze", "--db", str(tmp / "m.duckdb"), "--format", "json"),
            capture_output=True, text=True, timeout=120, env=_env(),
        )  # fmt: skip
        assert analysed.returncode == 0, analysed.stderr
        yield Run(collector, demo, json.loads(analysed.stdout), prom)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, collector.log()
    finally:
        if prom is not None:
            prom.proc.terminate()
            try:
                prom.proc.wait(30)
            except subprocess.TimeoutExpired:
                prom.proc.kill()
                prom.proc.wait(10)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.fixture()
def prometheus(run: Run) -> Prometheus:
    if run.prometheus is None:
        pytest.skip("no prometheus binary on PATH (.ci/run installs Debian's prometheus package)")
    return run.prometheus


def test_metrics_answer_only_with_the_token(run: Run) -> None:
    status, _, _ = run.collector.get("/metrics", token=None)
    assert status == 401
    status, _, _ = run.collector.get("/metrics", token="wrong")
    assert status == 401
    status, ctype, text = run.collector.get("/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    assert "# TYPE tracelens_trace_duration_seconds histogram" in text


def test_each_trace_and_span_is_counted_exactly_once(run: Run) -> None:
    time.sleep(2 * LOOP_S)  # more rounds of the loop: nothing may be added twice
    got = run.collector.samples()
    assert _total(got, "tracelens_trace_duration_seconds_count") == run.demo["traces"]
    assert _total(got, "tracelens_span_calls_total") == run.demo["spans"]
    assert _total(got, "tracelens_metrics_late_spans_total") == 0
    assert _total(got, "tracelens_metrics_traces_dropped_total") == 0
    assert _total(got, "tracelens_collector_spans_stored_total") == run.demo["spans"]
    # Calls per operation agree with the analysis' operation counts.
    calls: dict[str, float] = {}
    for (name, labels), value in got.items():
        if name == "tracelens_span_calls_total":
            op = dict(labels)["operation"]
            calls[op] = calls.get(op, 0) + value
    assert calls == {op["name"]: op["count"] for op in run.analysis["operations"]}


def _bucket_bounds(prom: Prometheus, selector: str) -> list[float]:
    """The histogram's finite ``le`` bounds, as Prometheus stored them."""
    les = {s["metric"]["le"] for s in prom.query(selector)}
    return sorted(float(le) for le in les if le != "+Inf")


@pytest.mark.smoke
def test_p95_from_prometheus_agrees_with_analyze_within_one_bucket(
    run: Run, prometheus: Prometheus
) -> None:
    roots = {t["root_name"] for t in run.analysis["traces"]}
    assert roots == {"handle_request"}, roots  # so the summary's p95 is the root operation's
    analysed = run.analysis["summary"]["latency_ms"]["p95"] / 1000
    bucket = 'tracelens_trace_duration_seconds_bucket{root_operation="handle_request"}'
    estimated = prometheus.value(f"histogram_quantile(0.95, sum by (le) ({bucket}))")
    bounds = _bucket_bounds(prometheus, bucket)

    def bucket_of(seconds: float) -> tuple[float, float]:
        upper = next(b for b in bounds if b >= seconds)
        return max([0.0, *(b for b in bounds if b < seconds)]), upper

    # "One bucket": the analysed p95's, or the estimate's when the two fall in neighbouring
    # buckets (NumPy interpolates between two order statistics that may straddle a bound).
    buckets = {bucket_of(analysed), bucket_of(estimated)}
    width = max(hi - lo for lo, hi in buckets)
    print(
        f"\np95: analyze {analysed:.4f} s, Prometheus {estimated:.4f} s, "
        f"buckets {sorted(buckets)}, width {width} s, difference {abs(estimated - analysed):.4f} s"
    )
    assert abs(estimated - analysed) <= width


def test_critical_path_counters_sum_to_the_analysed_critical_path(
    run: Run, prometheus: Prometheus
) -> None:
    analysed = {k: v / 1000 for k, v in run.analysis["summary"]["critical_path_ms"].items()}
    total = sum(analysed.values())
    by_kind = {
        s["metric"]["kind"]: float(s["value"][1])
        for s in prometheus.query(
            'sum by (kind) (tracelens_critical_path_seconds_total{root_operation="handle_request"})'
        )
    }
    scraped = sum(by_kind.values())
    print(f"\ncritical path: analyze {total:.4f} s, Prometheus {scraped:.4f} s; {by_kind}")
    assert abs(scraped - total) <= 0.01 * total
    for kind, seconds in analysed.items():  # and kind by kind
        assert abs(by_kind.get(kind, 0.0) - seconds) <= 0.01 * total, kind
    # The per-operation counters split the same total.
    per_op = prometheus.value("sum(tracelens_critical_path_operation_seconds_total)")
    assert abs(per_op - total) <= 0.01 * total


# --- the dashboard and the alert rules -------------------------------------------------------


def _dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every templating query, variables replaced."""
    dashboard = json.loads(DASHBOARD.read_text())
    out: list[tuple[str, str]] = []
    stack = list(dashboard["panels"])
    while stack:
        panel = stack.pop()
        stack.extend(panel.get("panels", []))
        for target in panel.get("targets", []):
            out.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            found = re.fullmatch(r"label_values\((.*),\s*\w+\)", var["query"]["query"])
            assert found, var["query"]
            out.append((f"variable {var['name']}", found.group(1)))
    return [(where, _substitute(expr)) for where, expr in out]


def _substitute(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"a Grafana variable this test does not know: {expr}"
    return expr


def _rule_queries() -> list[tuple[str, str]]:
    rules = yaml.safe_load(RULES.read_text())
    return [
        (f"rule {rule.get('alert') or rule.get('record')}", rule["expr"])
        for group in rules["groups"]
        for rule in group["rules"]
    ]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (raises on a selector without one)."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {expr}"
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def unknown_metrics(queries: list[tuple[str, str]], exported: set[str]) -> list[str]:
    return [
        f"{where}: {name}"
        for where, expr in queries
        for name in sorted(metric_names(expr) - exported)
    ]


def test_dashboard_and_rules_query_only_metrics_the_collector_exports(run: Run) -> None:
    exported = {name for name, _ in run.collector.samples()}
    queries = _dashboard_queries() + _rule_queries()
    assert len(queries) >= 20
    assert unknown_metrics(queries, exported) == []
    used = set().union(*(metric_names(q) for _, q in queries))
    for required in (  # what the issue asks the dashboard to show
        "tracelens_trace_duration_seconds_bucket",
        "tracelens_critical_path_seconds_total",
        "tracelens_critical_path_operation_seconds_total",
        "tracelens_collector_spans_received_total",
        "tracelens_collector_queue_bytes",
        "tracelens_collector_merge_duration_seconds_bucket",
    ):
        assert required in used, required


def test_the_name_check_catches_a_metric_that_does_not_exist(run: Run) -> None:
    exported = {name for name, _ in run.collector.samples()}
    typo = 'histogram_quantile(0.99, sum by (le) (rate(tracelens_trace_latency_bucket{a="b"}[5m])))'
    assert unknown_metrics([("typo", typo)], exported) == ["typo: tracelens_trace_latency_bucket"]


def test_every_dashboard_query_evaluates_to_data_in_prometheus(prometheus: Prometheus) -> None:
    empty = []
    for where, expr in _dashboard_queries():
        if not prometheus.query(expr):  # raises on an invalid query
            empty.append(f"{where}: {expr}")
    assert empty == []


def test_prometheus_loads_and_evaluates_the_alert_rules(prometheus: Prometheus) -> None:
    """The repo's rules load and evaluate; the TP99 rule stays inactive on the demo (its p99 is
    far below 30 s), and the same rule with the line at 0 s goes pending (it fires once it has
    held for its 10 minutes)."""
    _wait(
        "the TP99 rule at 0 s goes pending",
        lambda: any(
            a["labels"]["alertname"] == "TracelensTP99AboveThreshold"
            for a in prometheus.api("alerts")["alerts"]
        ),
        30,
        prometheus.log,
    )
    groups = {g["name"]: g for g in prometheus.api("rules")["groups"]}
    assert set(groups) == {"tracelens", "tracelens-at-zero"}
    for group in groups.values():
        for rule in group["rules"]:
            assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))
    repo = {r["name"]: r for r in groups["tracelens"]["rules"]}
    at_zero = {r["name"]: r for r in groups["tracelens-at-zero"]["rules"]}
    tp99 = repo["TracelensTP99AboveThreshold"]
    assert tp99["duration"] == 600  # for: 10m
    assert f"> {TP99_THRESHOLD_S}" in tp99["query"]
    assert tp99["state"] == "inactive"
    assert at_zero["TracelensTP99AboveThreshold"]["state"] == "pending"
    alert = at_zero["TracelensTP99AboveThreshold"]["alerts"][0]
    assert alert["labels"]["root_operation"] == "handle_request"
    assert 0 < float(alert["value"]) < TP99_THRESHOLD_S
