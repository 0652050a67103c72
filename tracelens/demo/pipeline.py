"""The README's main job: demo agent -> ``tracelens collect`` -> analysis -> HTML report.

Every step is the real command a user would type, run as its own process, so the job exercises
exactly what the README promises: the agent exports over OTLP/HTTP to a running collector,
``tracelens analyze`` and ``tracelens report`` read the store through that collector while it
still runs, and the collector is stopped with SIGTERM and must drain and exit cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

START_TIMEOUT_S: Final = 60.0
STORE_TIMEOUT_S: Final = 60.0
STOP_TIMEOUT_S: Final = 60.0
_LISTENING = re.compile(r"OTLP/HTTP listening on (http://\S+)")


class StepFailed(Exception):
    """A step of the job failed; the message says which and why."""


def tracelens_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracelens", *args]


@dataclass
class CollectorProcess:
    """``tracelens collect`` on a fresh port of 127.0.0.1, its stderr kept for diagnosis."""

    db: Path
    proc: subprocess.Popen[str] | None = None
    url: str = ""
    lines: list[str] = field(default_factory=list)
    _ready: threading.Event = field(default_factory=threading.Event)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        cmd = tracelens_cmd(
            "collect", "--db", str(self.db), "--http", "127.0.0.1:0", "--grpc", "off"
        )
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        threading.Thread(target=self._drain, name="collector-stderr", daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None:
                raise StepFailed(
                    f"tracelens collect exited with {self.proc.returncode}:\n{self.log()}"
                )
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"tracelens collect was not ready in {timeout_s:.0f} s:\n{self.log()}"
                )
        if not self.url:
            raise StepFailed(f"tracelens collect did not say where it listens:\n{self.log()}")
        return self.url

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.rstrip("\n")
            self.lines.append(line)
            found = _LISTENING.search(line)
            if found:
                self.url = found.group(1)
            if line.endswith(": ready"):
                self._ready.set()

    def log(self, last: int = 20) -> str:
        return "\n".join(f"    {line}" for line in self.lines[-last:])

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/stats", timeout=10) as response:
            data: dict[str, Any] = json.loads(response.read())
        return data

    def wait_stored(self, spans: int, timeout_s: float = STORE_TIMEOUT_S) -> dict[str, Any]:
        """Polls ``/stats`` until ``spans`` spans are in the store (merged, not just journaled)."""
        deadline = time.monotonic() + timeout_s
        while True:
            stats = self.stats()
            if stats["spans_stored"] + stats["spans_duplicate"] >= spans:
                return stats
            if stats["spans_rejected"]:
                raise StepFailed(f"the collector rejected {stats['spans_rejected']} spans")
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"only {stats['spans_stored']} of {spans} spans stored after {timeout_s:.0f} s"
                )
            time.sleep(0.1)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then wait for the drain; a collector that hangs is killed (and fails)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise StepFailed(f"tracelens collect did not stop within {timeout_s:.0f} s") from None


@dataclass
class JobOptions:
    out: Path
    requests: int = 36
    concurrency: int = 6
    seed: int = 0
    speed: float = 1.0


@dataclass
class JobResult:
    report: Path
    analysis: Path
    flamegraph: Path  # the critical-path CPU stacks, folded (flamegraph.pl, speedscope)
    summary: dict[str, Any]
    timings: dict[str, float]


def _fresh(out: Path, name: str) -> Path:
    """``out/name`` with every file a previous run left for it (store, WAL, journal) removed."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{name}*"):
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()
    return out / name


def _run(step: str, cmd: list[str]) -> None:
    print(f"$ tracelens {' '.join(cmd[3:])}", flush=True)
    rc = subprocess.call(cmd)
    if rc != 0:
        raise StepFailed(f"{step} failed (exit status {rc})")


def run_job(options: JobOptions) -> JobResult:
    """Runs the five steps; ``StepFailed`` names the one that failed."""
    out = options.out
    db = _fresh(out, "demo.duckdb")
    report = _fresh(out, "report.html")
    analysis = _fresh(out, "analysis.json")
    flamegraph = _fresh(out, "cpu.folded")
    summary_path = _fresh(out, "demo-summary.json")
    timings: dict[str, float] = {}
    collector = CollectorProcess(db)
    try:
        t = time.perf_counter()
        _banner(1, "start the collector")
        url = collector.start()
        print(f"tracelens collect: store {db}, OTLP/HTTP on {url}", flush=True)
        timings["collector_start_s"] = time.perf_counter() - t

        t = time.perf_counter()
        _banner(2, "run the demo agent, exporting to the collector")
        demo = tracelens_cmd(
            "demo", "--endpoint", url, "--requests", str(options.requests),
            "--concurrency", str(options.concurrency), "--seed", str(options.seed),
            "--speed", str(options.speed), "--summary-json", str(summary_path),
        )  # fmt: skip
        _run("the demo agent", demo)
        summary = json.loads(summary_path.read_text())
        if summary["spans"] <= 0:
            raise StepFailed("the demo agent exported no spans (is OTEL_SDK_DISABLED set?)")
        stats = collector.wait_stored(int(summary["spans"]))
        print(f"collector: {stats['spans_stored']} spans stored", flush=True)
        timings["demo_s"] = time.perf_counter() - t

        t = time.perf_counter()
        _banner(3, "analyse the store (read through the running collector)")
        _run("tracelens analyze", tracelens_cmd("analyze", "--db", str(db)))
        _run(
            "tracelens analyze --format json",
            tracelens_cmd(
                "analyze",
                "--db",
                str(db),
                "--format",
                "json",
                "--out",
                str(analysis),
                "--flamegraph-out",
                str(flamegraph),
            ),
        )
        timings["analyze_s"] = time.perf_counter() - t

        t = time.perf_counter()
        _banner(4, "write the HTML report")
        title = f"Demo agent: {summary['requests']} requests, model {summary['model']}" + (
            " (SIMULATED: modelled prefill/decode time)" if summary["simulated"] else " (vLLM)"
        )
        _run(
            "tracelens report",
            tracelens_cmd("report", "--db", str(db), "--out", str(report), "--title", title),
        )
        timings["report_s"] = time.perf_counter() - t

        t = time.perf_counter()
        _banner(5, "stop the collector (SIGTERM: drain, commit, close)")
        rc = collector.stop()
        print("\n".join(collector.lines[-2:]), flush=True)
        if rc != 0:
            raise StepFailed(f"tracelens collect exited with {rc} on SIGTERM:\n{collector.log()}")
        timings["collector_stop_s"] = time.perf_counter() - t
    finally:
        if collector.proc is not None and collector.proc.poll() is None:
            with contextlib.suppress(StepFailed):
                collector.stop(timeout_s=30)  # drains; killed if it hangs
    if not report.is_file():
        raise StepFailed(f"tracelens report did not write {report}")
    return JobResult(report, analysis, flamegraph, summary, timings)


def _banner(n: int, text: str) -> None:
    print(f"\n== {n}/5 {text}", flush=True)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def parse_args(argv: Sequence[str] | None, root: Path) -> JobOptions:
    parser = argparse.ArgumentParser(
        description="The main job: demo agent -> tracelens collect -> analysis -> HTML report."
    )
    parser.add_argument("--out", type=Path, default=root / "out", help="default: ./out")
    parser.add_argument("--requests", type=_positive, default=36)
    parser.add_argument("--concurrency", type=_positive, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speed", type=float, default=1.0, help="scale simulated delays")
    args = parser.parse_args(argv)
    return JobOptions(args.out, args.requests, args.concurrency, args.seed, args.speed)


def main(argv: Sequence[str] | None = None, root: Path | None = None) -> int:
    options = parse_args(argv, root or Path.cwd())
    t0 = time.perf_counter()
    try:
        result = run_job(options)
    except StepFailed as exc:
        print(f"\nmain job FAILED: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("\nmain job interrupted", file=sys.stderr, flush=True)
        return 130
    took = time.perf_counter() - t0
    print(
        f"\nDone in {took:.1f} s.  Report: {result.report}\n"
        f"Analysis (JSON): {result.analysis}\n"
        f"CPU flame graph (folded, for flamegraph.pl or speedscope): {result.flamegraph}\n"
        f"Open the report in a browser: file://{os.path.abspath(result.report)}",
        flush=True,
    )
    return 0
