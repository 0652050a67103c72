"""Reduces the recorded H200 CUPTI records to what the attribution tests read (fixtures/gpu/).

Kept: every record whose API call (RUNTIME/DRIVER, by correlation id) began within the traced
requests (first span start .. last span end), with the fields the join reads; dropped: kernel
names, stream/context ids, and the records of the warm-up and of the tiny-kernel loop that ran
outside any span.  No figure is computed here: the tests join these records to the spans.
Format (gzip, tab-separated, one record a line, sorted by start): kind (K kernel, C memcpy,
S memset, Y synchronization, R runtime, D driver), start minus the previous line's start
(the first line: absolute), duration, correlation id, then device id (K C S) or thread id and
API name (R D).  Usage: python scripts/make_gpu_fixture.py SHARED_GPU_DIR fixtures/gpu
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

KINDS = {
    "CONCURRENT_KERNEL": "K", "MEMCPY": "C", "MEMSET": "S", "SYNCHRONIZATION": "Y",
    "RUNTIME": "R", "DRIVER": "D",
}  # fmt: skip


def main(src: Path, dst: Path) -> None:
    spans = []
    for line in (src / "h200_cupti.spans.jsonl").open():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                spans += ss["spans"]
    lo = min(int(s["startTimeUnixNano"]) for s in spans)
    hi = max(int(s["endTimeUnixNano"]) for s in spans)
    with gzip.open(src / "h200_cupti.records.jsonl.gz", "rt") as fh:
        rows = [json.loads(x) for x in fh]
    keep = {
        r["correlation_id"]
        for r in rows
        if r["kind"] in ("RUNTIME", "DRIVER") and lo <= r["start"] <= hi
    }
    rows = sorted((r for r in rows if r["correlation_id"] in keep), key=lambda r: r["start"])
    out = []
    prev = 0
    for r in rows:
        k = KINDS[r["kind"]]
        f = [k, str(r["start"] - prev), str(r["end"] - r["start"]), str(r["correlation_id"])]
        prev = r["start"]
        if k in "RD":
            f += [str(r["thread_id"]), r.get("api", "")]
        elif k in "KCS":
            f.append(str(r.get("device_id", 0)))
        out.append("\t".join(f))
    dst.mkdir(parents=True, exist_ok=True)
    with gzip.open(dst / "h200_cupti.records.tsv.gz", "wt", compresslevel=9) as fh:
        fh.write("\n".join(out) + "\n")
    shutil.copy(src / "h200_cupti.spans.jsonl", dst / "h200_cupti.spans.jsonl")
    shutil.copy(src / "h200_cupti.summary.json", dst / "h200_cupti.summary.expected.json")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
