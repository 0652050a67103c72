"""Verdicts on cases written after the rules of issue 25, as a reviewer would write them.

Each case is a variant of a class the issue names, not of a corpus case: a value that flows
re-encoded or inside a compound string, an effect no verb list names, a read whose answer is
time-relative.  Each label is reasoned next to its case from the data flow of the code or the
semantics of the call, never from what tracelens reports.  The first run of these cases against
the round-two rules found seven wrong verdicts (each marked *was:* below); the rules were then
changed by principle (README, "How it decides"):

* recorded texts of uninstrumented spans are compared in every form a value takes (parts,
  decodings, lower case; a result's encodings too), and a digest-shaped argument shows no
  independence (``fingerprint.recorded_forms``, ``hops._recorded_unlinked``);
* a result token's base64 / hex encodings are fingerprinted, an argument's parts give the runs
  of their fine tokens, and strings inside container arguments get their forms too
  (``fingerprint._token_forms``, ``arg_forms``, ``nested_arg_forms``);
* a call neither known to only read nor with recorded results is no cache finding; a tool or
  outgoing call of unknown effect between two repeats counts as a write between them
  (``repeats._cacheable``, ``features._may_write``); time-relative reads (current, latest, next,
  pending, status) are volatile.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tracelens

BASE = 1_764_590_400 * 10**9
MS = 10**6
N = 30
Call = tuple[str, int, dict[str, Any], int]  # name, duration ms, attributes, OTLP span kind
GET = {"http.request.method": "GET"}
CLIENT, INTERNAL = 3, 1


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    return {"stringValue": str(v)}


def _trace(rng: random.Random, root: str, calls: list[Call], t0: int) -> dict[str, Any]:
    """One trace: a SERVER root and its calls one after another, 1 ms apart."""

    def hexid(n: int) -> str:
        return "".join(rng.choice("0123456789abcdef") for _ in range(n))

    tid, rid = hexid(32), hexid(16)
    spans, t = [], 1
    for name, dur, attrs, kind in calls:
        spans.append(
            {
                "traceId": tid,
                "spanId": hexid(16),
                "parentSpanId": rid,
                "name": name,
                "kind": kind,
                "startTimeUnixNano": str(t0 + t * MS),
                "endTimeUnixNano": str(t0 + (t + dur) * MS),
                "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()],
                "status": {},
            }
        )
        t += dur + 1
    spans.append(
        {
            "traceId": tid,
            "spanId": rid,
            "name": root,
            "kind": 2,
            "startTimeUnixNano": str(t0),
            "endTimeUnixNano": str(t0 + (t + 1) * MS),
            "attributes": [],
            "status": {},
        }
    )
    resource = {"attributes": [{"key": "service.name", "value": _value("unseen")}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def _tool(name: str, args: Any, result: Any = None) -> dict[str, Any]:
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.arguments": json.dumps(args),
    }
    if result is not None:
        attrs["gen_ai.tool.call.result"] = result if isinstance(result, str) else json.dumps(result)
    return attrs


# --- The cases: (calls of trace i, seconds between traces), with the label's reasoning. ------


def jobs_next(i: int) -> list[Call]:
    """Harmful (consumed): ``GET /api/jobs/next`` hands each worker the next job; three calls
    take three different jobs.  A cache would hand the same job out again.  *Was:* cacheable
    low (a GET, nothing named an effect)."""
    url = {**GET, "url.full": "https://q.example.com/api/jobs/next"}
    return [("GET /api/jobs/next", 20, url, CLIENT)] * 3


def orders_latest(i: int) -> list[Call]:
    """Not cacheable (volatile): the latest order of a user changes whenever one is placed.
    *Was:* cacheable low."""
    url = {**GET, "url.full": "https://api.example.com/api/orders/latest?user=u1"}
    return [("GET /api/orders/latest", 30, url, CLIENT)] * 2


def weather_current(i: int) -> list[Call]:
    """Not cacheable (volatile): current conditions are current only now.  *Was:* cacheable
    low."""
    url = {**GET, "url.full": "https://w.example.com/api/weather/current?city=paris"}
    return [("GET /api/weather/current", 40, url, CLIENT)] * 2


def stage_then_diff(i: int) -> list[Call]:
    """Harmful (write between): ``stage_files`` changes the git index that ``diff_staged``
    reads; its name matches no verb and its result was not recorded.  Neither call may be
    cached: the diff answers for the index as staged in this run.  *Was:* cacheable medium
    ``diff_staged`` and cacheable low ``stage_files``."""
    return [
        ("execute_tool stage_files", 40, _tool("stage_files", {"paths": ["a.py"]}), INTERNAL),
        ("execute_tool diff_staged", 40, _tool("diff_staged", {}, "diff --git a/a.py"), INTERNAL),
    ]


def session_upper(i: int) -> list[Call]:
    """Dependent: ``screenshot`` takes the browser id that ``open_browser`` returned inside a
    JSON string of its JSON result (an MCP ``content`` block), sent upper-cased.  *Was:*
    parallelizable medium (the recorded texts were compared as they are)."""
    sid = f"sess-{i:04d}ab{i * 7919 % 10000:04d}"
    inner = json.dumps({"browser_id": sid})
    opened = {"content": [{"type": "text", "text": inner}]}
    return [
        (
            "execute_tool open_browser",
            50,
            _tool("open_browser", {"url": "https://x.io"}, opened),
            1,
        ),
        ("execute_tool screenshot", 50, _tool("screenshot", {"browser": sid.upper()}), INTERNAL),
    ]


def proof_over_nonce(i: int) -> list[Call]:
    """Dependent: the proof is sha256(nonce + secret) over the nonce just fetched; no text
    match can show that, so nothing may claim independence.  *Was:* parallelizable medium."""
    nonce = f"n{i:03d}x{i * 31:05d}"
    proof = hashlib.sha256((nonce + "s3cret").encode()).hexdigest()
    return [
        ("execute_tool get_nonce", 30, _tool("get_nonce", {}, {"nonce": nonce}), INTERNAL),
        ("execute_tool verify_proof", 30, _tool("verify_proof", {"proof": proof}), INTERNAL),
    ]


def browser_and_weather(i: int) -> list[Call]:
    """Independent: the weather tool takes a city from the user's request, nothing of the
    browser's answer; both recorded their arguments and results.  Recall guard: the forms must
    not link everything to everything."""
    sid = f"sess-{i:04d}cd{i * 104729 % 10000:04d}"
    city = ("paris", "rome", "oslo")[i % 3]
    opened = {"content": [{"type": "text", "text": json.dumps({"browser_id": sid})}]}
    return [
        (
            "execute_tool open_browser",
            50,
            _tool("open_browser", {"url": "https://x.io"}, opened),
            1,
        ),
        ("execute_tool get_weather", 50, _tool("get_weather", {"city": city}, {"t": 20 + i}), 1),
    ]


CASES: dict[str, tuple[Callable[[int], list[Call]], int, str]] = {
    "jobs_next": (jobs_next, 5, "harmful"),
    "orders_latest": (orders_latest, 5, "harmful"),
    "weather_current": (weather_current, 60, "harmful"),
    "stage_then_diff": (stage_then_diff, 5, "harmful"),
    "session_upper": (session_upper, 5, "dependent"),
    "proof_over_nonce": (proof_over_nonce, 5, "dependent"),
    "browser_and_weather": (browser_and_weather, 5, "independent"),
}


def _findings(tmp_path: Path, case: str) -> list[dict[str, Any]]:
    build, gap_s, _ = CASES[case]
    rng = random.Random(case)
    path = tmp_path / f"{case}.jsonl"
    lines = [
        json.dumps(_trace(rng, "handle", build(i), BASE + i * gap_s * 1000 * MS)) for i in range(N)
    ]
    path.write_text("\n".join(lines) + "\n")
    doc = tracelens.analyze([path]).to_dict()
    return [f for f in doc["findings"] if f["type"] in ("parallelizable", "cacheable")]


@pytest.mark.parametrize(
    "case", [c for c, (_, _, label) in CASES.items() if label != "independent"]
)
def test_no_parallel_or_cache_finding_on_a_harmful_or_dependent_case(
    tmp_path: Path, case: str
) -> None:
    found = _findings(tmp_path, case)
    assert found == [], [(f["type"], f["confidence"], f["names"]) for f in found]


def test_independent_recorded_tools_are_still_found(tmp_path: Path) -> None:
    found = _findings(tmp_path, "browser_and_weather")
    assert [(f["type"], f["confidence"]) for f in found] == [("parallelizable", "medium")]
    assert set(found[0]["names"]) == {"execute_tool open_browser", "execute_tool get_weather"}


AGENT = textwrap.dedent(
    """
    import base64, sys, time
    from urllib.parse import quote
    import tracelens
    from tracelens import trace, configure

    configure(service_name="unseen-decorated", file=sys.argv[1])

    @trace
    def get_credentials(user: str) -> str:
        time.sleep(0.005)
        return f"{user}:pw-{user[::-1]}7731"

    @trace
    def fetch_profile(headers: dict) -> int:
        time.sleep(0.005)
        return len(headers)

    @trace
    def get_invoice_id(account: str) -> str:
        time.sleep(0.005)
        return f"INV-{account}-{len(account) * 97}"

    @trace
    def download(url: str) -> int:
        time.sleep(0.005)
        return len(url)

    @trace
    def handle(i: int) -> None:
        cred = get_credentials(f"user{i}x")
        fetch_profile({"Authorization": "Basic " + base64.b64encode(cred.encode()).decode()})
        inv = get_invoice_id(f"acct{i}")
        download("https://files.example.com/dl?name=" + quote(f"invoice {inv}.pdf"))

    for i in range(25):
        handle(i)
    tracelens.flush()
    """
)


def test_decorated_values_that_flow_encoded_or_inside_a_name(tmp_path: Path) -> None:
    """Traced by the decorator for real.  Labels from the code above: ``fetch_profile`` takes
    the credential ``get_credentials`` returned, base64-encoded inside a ``headers`` dict
    (dependent); ``download`` takes the invoice id inside a URL-encoded file name in a query
    parameter (dependent); ``get_invoice_id`` takes nothing of ``fetch_profile``'s or
    ``get_credentials``' answers (independent of both).  *Was:* parallelizable high over all
    four."""
    out = tmp_path / "spans.jsonl"
    subprocess.run([sys.executable, "-c", AGENT, str(out)], check=True, timeout=120)
    doc = tracelens.analyze([out]).to_dict()
    groups = [set(f["names"]) for f in doc["findings"] if f["type"] == "parallelizable"]
    for names in groups:
        assert not {"get_credentials", "fetch_profile"} <= names, groups
        assert not {"get_invoice_id", "download"} <= names, groups
    assert {"fetch_profile", "get_invoice_id"} in groups, groups
