"""Reads one mode's run of scripts/gpu_agent.py and prints tracelens's view beside the truth.

    python scripts/gpu_check.py OUT_DIR MODE [--expect-cupti] [--findings]

Per step: tracelens's kind (over the traced calls), its GPU busy share (``gpu_ns`` +
``gpu_after_ns`` over wall), host wait for the device (``gpu_wait_ns`` over wall), CPU share
(``cpu_ns`` over wall) and source; beside them the truth: kernel time per call from
``torch.profiler`` (a session per call, untraced) over that call's wall time, and the thread
clock (CPU over wall) of the traced calls themselves.  Then the checks of issue 24; each prints
PASS or FAIL, and the exit status is the number of FAILs (a missing figure is a FAIL: nothing
is assumed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

STEPS = ("llm_generate", "cpu_tool", "search_tool", "gpu_matmul", "gpu_matmul_declared")


def spans_of(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    attrs = {}
                    for a in s.get("attributes", []):
                        attrs[a["key"]] = value_of(a["value"])
                    s["attrs"] = attrs
                    out.append(s)
    return out


def value_of(v: dict[str, Any]) -> Any:
    """An OTLP JSON AnyValue as Python (int64 arrives as a string)."""
    if not v:
        return None
    key, raw = next(iter(v.items()))
    if key == "arrayValue":
        return [value_of(x) for x in raw.get("values", [])]
    if key == "intValue":
        return int(raw)
    return raw


def num(v: Any) -> float:
    return float(v) if v is not None else 0.0


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def check(self, ok: bool, what: str) -> None:
        print(f"{'PASS' if ok else 'FAIL'}  {what}")
        self.failed += 0 if ok else 1


def main(argv: list[str]) -> int:
    out, mode = Path(argv[0]), argv[1]
    expect_cupti = "--expect-cupti" in argv
    spans_file = out / f"spans_{mode}.jsonl"
    truth = json.loads((out / f"truth_{mode}.json").read_text())
    spans = spans_of(spans_file)
    c = Checks()
    print(f"== mode {mode}: {truth['gpu']}, torch {truth['torch']}, collector "
          f"{truth['collector_state']}, fraction {truth['fraction']}, "
          f"traced pass {truth['traced_s']:.1f} s")  # fmt: skip
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in spans:
        by[s["name"]].append(s)
    prof: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for n, w, cpu, d in truth["profiled"]:
        prof[n].append((w, cpu, d))
    traced: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for n, w, cpu in truth["traced"]:
        traced[n].append((w, cpu))
    head = (f"{'step':20s} {'n':>2s} {'kind':14s} {'gpu busy':>8s} {'gpu wait':>8s} "
            f"{'cpu':>6s} {'source':8s} | {'truth busy':>10s} {'thread cpu':>10s} "
            f"{'gpu ms/call':>11s} {'truth ms/call':>13s}")  # fmt: skip
    print(head)
    figures: dict[str, dict[str, float]] = {}
    for name in STEPS:
        ss = by.get(name, [])
        wall = sum(int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"]) for s in ss)
        kinds = Counter(s["attrs"].get("tracelens.kind") for s in ss)
        busy = sum(num(s["attrs"].get("tracelens.gpu_ns")) + num(s["attrs"].get(
            "tracelens.gpu_after_ns")) for s in ss)  # fmt: skip
        wait = sum(num(s["attrs"].get("tracelens.gpu_wait_ns")) for s in ss)
        cpu = sum(num(s["attrs"].get("tracelens.cpu_ns")) for s in ss)
        sources = sorted({str(s["attrs"].get("tracelens.gpu_source", "-")) for s in ss})
        measured = sum(1 for s in ss if s["attrs"].get("tracelens.gpu_measured") is True)
        p = prof.get(name, [])
        t_wall = sum(w for w, _, _ in p)
        t_dev = sum(d for _, _, d in p)
        tr = traced.get(name, [])
        tr_wall, tr_cpu = sum(w for w, _ in tr), sum(cu for _, cu in tr)
        f = figures[name] = {
            "n": len(ss), "measured": measured, "busy": busy / wall if wall else float("nan"),
            "wait": wait / wall if wall else float("nan"), "cpu": cpu / wall if wall else 0.0,
            "truth_busy": t_dev / t_wall if t_wall else float("nan"),
            "thread_cpu": tr_cpu / tr_wall if tr_wall else float("nan"),
            "gpu_ms": busy / len(ss) / 1e6 if ss else float("nan"),
            "truth_ms": t_dev / len(p) / 1e6 if p else float("nan"),
        }  # fmt: skip
        kind = ",".join(f"{k}x{v}" for k, v in kinds.most_common())
        print(f"{name:20s} {len(ss):2d} {kind:14s} {f['busy']:8.1%} {f['wait']:8.1%} "
              f"{f['cpu']:6.1%} {'/'.join(sources):8s} | {f['truth_busy']:10.1%} "
              f"{f['thread_cpu']:10.1%} {f['gpu_ms']:11.2f} {f['truth_ms']:13.2f}")  # fmt: skip

    def kind_of(name: str) -> str | None:
        kinds = Counter(s["attrs"].get("tracelens.kind") for s in by.get(name, []))
        return kinds.most_common(1)[0][0] if kinds else None

    c.check(all(figures[n]["n"] > 0 for n in STEPS), "every step has spans")
    c.check(kind_of("gpu_matmul") == "gpu", f"gpu_matmul kind gpu (got {kind_of('gpu_matmul')})")
    if expect_cupti:
        c.check(truth["collector"] is True, f"CUPTI collector ran ({truth['collector_state']})")
        g, t = figures["gpu_matmul"]["gpu_ms"], figures["gpu_matmul"]["truth_ms"]
        c.check(abs(g - t) <= 0.10 * t, f"gpu_matmul GPU time {g:.1f} ms/call within 10% of "
                f"the device time {t:.1f} ms/call")  # fmt: skip
        b, tb = figures["llm_generate"]["busy"], figures["llm_generate"]["truth_busy"]
        c.check(abs(b - tb) <= 0.05, f"llm_generate GPU busy {b:.1%} within 5 points of the "
                f"profiler's {tb:.1%}")  # fmt: skip
        c.check(all(s["attrs"].get("tracelens.gpu_measured") is True for n in STEPS
                    for s in by.get(n, [])), "every step span marked gpu_measured")  # fmt: skip
    sync_us = 0
    cpu_us = 0
    for s in spans:
        for line in s["attrs"].get("tracelens.cpu_stacks") or []:
            stack, _, us = str(line).rpartition(" ")
            cpu_us += int(us)
            if "torch.cuda:synchronize" in stack:
                sync_us += int(us)
    c.check(cpu_us > 0 and sync_us <= 0.01 * cpu_us,
            f"torch.cuda.synchronize not a CPU hotspot ({sync_us / 1e3:.1f} ms of "
            f"{cpu_us / 1e3:.1f} ms of CPU stacks)")  # fmt: skip
    c.check(kind_of("cpu_tool") == "cpu", f"cpu_tool kind cpu (got {kind_of('cpu_tool')})")
    c.check(kind_of("search_tool") == "io", f"search_tool kind io (got {kind_of('search_tool')})")
    if "--findings" in argv:
        res = subprocess.run(
            [sys.executable, "-m", "tracelens", "analyze", str(spans_file), "--format", "json"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if res.returncode != 0:
            c.check(False, f"tracelens analyze ran (exit {res.returncode}: {res.stderr[-300:]})")
        else:
            doc = json.loads(res.stdout)
            found = [f for f in doc.get("findings", []) if "launch" in str(f.get("type", ""))]
            names = {n for f in found for n in f.get("names", [])}
            c.check("llm_generate" in names or any(f.get("name") == "llm_generate"
                                                   for f in found),
                    f"launch-bound finding on llm_generate ({len(found)} launch findings)")  # fmt: skip
            idle = doc.get("gpu_idle", doc.get("summary", {}).get("gpu_idle"))
            print(f"info  request-level gpu_idle: {idle}")
    print(f"== mode {mode}: {c.failed} FAIL")
    return c.failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
