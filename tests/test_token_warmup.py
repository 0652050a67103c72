"""Honest per-token fits (issue 24, item 5): warm-up calls set aside, and "no reliable fit".

The recorded case: the 12 ``llm_generate`` calls of ``fixtures/gpu/h200_spin_llm.spans.jsonl``
(GPT-2-size model, HF ``generate`` on an H200).  Read in time order, a call meets a new shape
when its input length is new (prefill) or it decodes through positions no earlier call reached
(L_in+1 .. L_in+L_out).  By hand from the recorded lengths and times (s):

====  =====  ======  =====  ==========================================================
span  L_in   L_out   T      shape
====  =====  ======  =====  ==========================================================
6e7d   64     32     2.159  new input 64 (positions 65..96)
337f   64     48     1.587  new positions 97..112
fd2f  160     48     3.675  new input 160 (161..208)
763a  160     48     0.513  seen
1084  256     64     5.450  new input 256 (257..320)
0c1d  256     48     0.575  seen (257..304)
4135  352     32     2.023  new input 352 (353..384)
a722  352     48     1.632  new positions 385..400
e327   64     48     0.590  seen
e403   64     48     0.545  seen
b60a  160     64     1.497  new positions 209..224
cbdb  160     48     0.623  seen
====  =====  ======  =====  ==========================================================

The 5 calls that met no new shape take 0.513-0.623 s (median 0.575); each of the 7 first-seen
calls took 2.6-9.5x that, over the 2x threshold: 7 warm-ups, 5 calls left, fewer than the 8 a
fit needs, so no coefficients (the old output printed a 861 ms, R2 0.03, MdAPE 65%).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from spans import make_spans
from tracelens_instrumentation import attributes as A

from tracelens.analysis import analyze_spans
from tracelens.analysis.tokens import MDAPE_MAX, R2_MIN, first_seen, token_fits, warmup_mask
from tracelens.api import analyze
from tracelens.render.html.render import render_report

ROOT = Path(__file__).resolve().parent.parent
SPIN = ROOT / "fixtures/gpu/h200_spin_llm.spans.jsonl"
MS = 1_000_000
WARMUPS = {"6e7d", "337f", "fd2f", "1084", "4135", "a722", "b60a"}


def test_first_seen_shapes_by_hand() -> None:
    l_in = np.array([64, 64, 160, 160, 64, 100])
    l_out = np.array([32, 48, 48, 48, 16, 4])
    # 64 new; 97..112 new; 160 new; seen; 65..80 seen; 100 new input (positions 101..104 seen).
    assert first_seen(l_in, l_out).tolist() == [True, True, True, False, False, True]


def test_recorded_warmups_are_set_aside_and_the_fit_refused() -> None:
    result = analyze([SPIN], findings=False)
    (fit,) = result.models
    table_calls = 12
    assert fit.warmup_calls == len(WARMUPS) == 7
    assert fit.n == table_calls - 7
    assert not fit.reliable
    assert fit.reason is not None and "fewer than 8" in fit.reason
    # Without the warm-ups the rest is tight: the 5 calls within 10% of their median.
    assert fit.mdape < 0.10
    d = fit.to_dict()
    assert d["reliable"] is False and d["warmup_calls"] == 7
    assert d["intercept_ms"] is None and d["prefill_ms_per_token"] is None
    assert d["decode_ms_per_token"] is None
    text = result.to_text()
    line = next(x for x in text.splitlines() if "gpt2-random @" in x)
    assert "no reliable fit" in line and "7 warm-up calls set aside" in line
    assert "ms/token" not in line and " a 861" not in line
    html = render_report(result)
    assert "no reliable fit" in html and "7 warm-up calls set aside" in html


def test_the_warmups_found_are_the_first_seen_slow_calls() -> None:
    from tracelens.analysis.tokens import calls

    result = analyze([SPIN], findings=False)
    table = calls(result.traces).sort("start_ns")
    warm = warmup_mask(
        table["l_in"].to_numpy(), table["l_out"].to_numpy(), table["model_s"].to_numpy()
    )
    got = {sid[:4] for sid, w in zip(table["span_id"].to_list(), warm, strict=True) if w}
    assert got == WARMUPS


def _calls(rows: list[tuple[int, int, float]]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    t0 = 0
    for k, (l_in, l_out, ms) in enumerate(rows):
        out.append(
            {
                "id": 0,
                "trace": f"{k + 1:032x}",
                "start": t0,
                "end": t0 + int(ms * MS),
                "name": "chat",
                "attributes": {
                    A.GEN_AI_OPERATION_NAME: "chat",
                    A.GEN_AI_REQUEST_MODEL: "m",
                    A.GEN_AI_USAGE_INPUT_TOKENS: l_in,
                    A.GEN_AI_USAGE_OUTPUT_TOKENS: l_out,
                },
            }
        )
        t0 += int(ms * MS) + MS
    return out


def test_fit_without_warmups_recovers_the_costs() -> None:
    # T = 5 + 0.2 L_in + 3 L_out ms; the first call at each input length ran 4x slower.
    rng = np.random.default_rng(7)
    lengths = [100, 200, 400, 800, 1600]
    rows = []
    seen: set[int] = set()
    for _ in range(40):
        li = int(rng.choice(lengths))
        lo = int(rng.choice([10, 20, 40]))
        ms = 5 + 0.2 * li + 3 * lo
        rows.append((li, lo, ms * (4 if li not in seen else 1)))
        seen.add(li)
    (fit,) = token_fits(analyze_spans(make_spans(_calls(rows)), findings=False).traces)
    assert fit.warmup_calls == 5  # exactly the slowed ones; first-seen decode shapes ran as fit
    assert fit.n == 35 and fit.reliable and fit.status == "ok"
    assert fit.prefill_ms_per_token == pytest.approx(0.2, rel=1e-3)
    assert fit.decode_ms_per_token == pytest.approx(3.0, rel=1e-3)
    assert fit.coefficients.intercept * 1e3 == pytest.approx(5.0, rel=1e-2)


def test_a_fit_that_explains_too_little_is_refused() -> None:
    # Times unrelated to the token counts (a shared engine's load decides them).
    rng = np.random.default_rng(3)
    rows = [
        (int(li), int(lo), float(ms))
        for li, lo, ms in zip(
            rng.integers(50, 2000, 30),
            rng.integers(5, 300, 30),
            rng.uniform(200, 900, 30),
            strict=True,
        )
    ]
    (fit,) = token_fits(analyze_spans(make_spans(_calls(rows)), findings=False).traces)
    assert not fit.reliable and fit.to_dict()["intercept_ms"] is None
    assert fit.r2 < R2_MIN or fit.mdape > MDAPE_MAX
    assert fit.reason is not None and ("R2" in fit.reason or "MdAPE" in fit.reason)
