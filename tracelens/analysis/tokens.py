"""What a model call costs per token: T = a + L_in·T_prefill + L_out·T_decode, per (model, server).

Trimming context and capping output are the cheapest latency fixes, but only with a model's
per-token costs known.  Every model call (``kinds.model_call``, the one rule) that reports its
token counts becomes one observation:

* ``L_in`` / ``L_out``: ``gen_ai.usage.input_tokens`` / ``output_tokens`` (or the older
  ``prompt_tokens`` / ``completion_tokens``, as vLLM writes them);
* its queueing: vLLM's ``gen_ai.latency.time_in_queue``, else the ``wait`` time of the call's
  direct children (a bounded model queue traced inside the call);
* ``T``, the time the model worked for it: vLLM's own ``time_in_model_prefill`` +
  ``time_in_model_decode`` when the span carries them, else the span's duration minus its
  queueing (the client-side view);
* TTFT: ``gen_ai.latency.time_to_first_token`` or ``gen_ai.response.time_to_first_chunk``.

Calls are grouped by (model, server): ``gen_ai.request.model`` (else the span name) and the
span's service.  A client span and the engine span it called are two groups, so a model's
engine time and what its callers see are both reported, never mixed.

The fit is a Huber regression (iteratively reweighted least squares, MAD scale, k = 1.345), so a
few calls slowed by something else do not bend it; a coefficient that comes out negative is
dropped (fixed at 0) and the rest refitted.  A group needs ``MIN_CALLS`` calls and both token
counts spread by at least ``MIN_SPREAD``x to separate prefill from decode; otherwise the report
says which is missing and fits what it can (``status``).

**Warm-up calls are set aside** (:func:`warmup_mask`).  Engines compile, autotune, allocate or
capture per shape: the first call at an input length (its prefill shape) or decoding through
positions no earlier call of the group reached (its decode shapes) may run several times slower
than the same shape later.  Such a *first-seen* call is a warm-up when it took more than
``WARMUP_RATIO`` times what the group's other calls predict (a fit on the calls that met no new
shape, when there are ``WARMUP_REFERENCE`` of them, else on all calls if there are
``MIN_CALLS``; with fewer, nothing is set aside).  The fit is made without the
warm-ups and says how many it set aside.  A first-seen call that ran as predicted stays in: real
traffic meets new lengths all the time.

**No reliable fit.**  When what is left still explains too little, the coefficients are not
stated (``reliable`` false, ``reason``): fewer than ``MIN_CALLS`` calls, an in-sample MdAPE above
``MDAPE_MAX``, or, where a per-token cost was fitted, R² under ``R2_MIN`` (with only the mean
fitted R² measures nothing, so MdAPE alone decides).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from tracelens_instrumentation import attributes as A

from tracelens.analysis.core import TraceAnalysis

MIN_CALLS = 8
MIN_SPREAD = 2.0  # max/min of a token count needed to fit its per-token cost
HUBER_K = 1.345
MAX_POINTS = 400  # scatter points kept per model for the report
WARMUP_RATIO = 2.0  # a first-seen call slower than this times its prediction is a warm-up
WARMUP_REFERENCE = 3  # calls that met no new shape needed to predict the first-seen ones
R2_MIN = 0.5  # a fit with per-token costs must explain at least this share of the variance
MDAPE_MAX = 0.25  # and predict its own calls within this median error
MAX_SHAPE_POSITIONS = 1 << 20  # decode positions tracked per group (longer: input lengths only)

TTFT = "gen_ai.latency.time_to_first_token"
TTFC = "gen_ai.response.time_to_first_chunk"
RESPONSE_MODEL = "gen_ai.response.model"


def calls(trace_analysis: TraceAnalysis) -> pl.DataFrame:
    """One row per model call with token counts: model, server, L_in, L_out and timings (s)."""
    sp = trace_analysis.spans
    n = sp.height
    parent = sp["_parent"].to_numpy().astype(np.int64)
    dur = (sp["end_ns"] - sp["start_ns"]).to_numpy().astype(np.float64) / 1e9
    wait_kid = (sp["kind_resolved"] == A.WAIT).to_numpy() & (parent >= 0)
    kid_wait = np.bincount(parent[wait_kid], weights=dur[wait_kid], minlength=n)
    attrs = pl.col("attributes")

    def num(*keys: str) -> pl.Expr:
        return pl.coalesce([attrs.map.get(k).cast(pl.Float64, strict=False) for k in keys])

    # Attribute lookups only on the model calls (a few of a million spans, usually).
    rows = np.flatnonzero(sp["model_call"].to_numpy())
    sp, dur, kid_wait = sp[rows], dur[rows], kid_wait[rows]
    df = sp.select(
        "_i",
        "_trace",
        "start_ns",
        "trace_id",
        "span_id",
        "name",
        pl.col("service").alias("server"),
        "model_call",
        pl.coalesce(
            attrs.map.get(A.GEN_AI_REQUEST_MODEL), attrs.map.get(RESPONSE_MODEL), pl.col("name")
        ).alias("model"),
        num(A.GEN_AI_USAGE_INPUT_TOKENS, A.GEN_AI_USAGE_PROMPT_TOKENS).alias("l_in"),
        num(A.GEN_AI_USAGE_OUTPUT_TOKENS, A.GEN_AI_USAGE_COMPLETION_TOKENS).alias("l_out"),
        num(A.GEN_AI_LATENCY_TIME_IN_QUEUE).alias("_engine_queue"),
        num(A.GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL).alias("prefill_s"),
        num(A.GEN_AI_LATENCY_TIME_IN_MODEL_DECODE).alias("decode_s"),
        num(TTFT, TTFC).alias("ttft_s"),
        pl.Series("duration_s", dur),
        pl.Series("_kid_wait", kid_wait),
    )
    engine = pl.col("prefill_s").is_not_null() & pl.col("decode_s").is_not_null()
    return (
        df.filter(
            pl.col("model_call") & pl.col("l_in").is_not_null() & pl.col("l_out").is_not_null()
        )
        .with_columns(
            pl.coalesce("_engine_queue", "_kid_wait").clip(0.0).alias("queue_s"),
            engine.alias("engine_timings"),
        )
        .with_columns(
            pl.when(engine)
            .then(pl.col("prefill_s") + pl.col("decode_s"))
            .otherwise((pl.col("duration_s") - pl.col("queue_s")).clip(0.0))
            .alias("model_s")
        )
        .drop("_engine_queue", "_kid_wait", "model_call")
    )


@dataclass(frozen=True)
class Coefficients:
    """T (s) = intercept + l_in * prefill + l_out * decode."""

    intercept: float
    prefill: float
    decode: float

    def predict(self, l_in: np.ndarray, l_out: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.intercept + l_in * self.prefill + l_out * self.decode
        return out


def huber_fit(x: np.ndarray, y: np.ndarray, k: float = HUBER_K) -> tuple[np.ndarray, np.ndarray]:
    """Huber IRLS of y on the columns of x: (coefficients, final weights)."""
    w = np.ones(len(y))
    beta = np.zeros(x.shape[1])
    for _ in range(50):
        sw = np.sqrt(w)
        beta_new, *_ = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)
        r = y - x @ beta_new
        scale = 1.4826 * float(np.median(np.abs(r - np.median(r))))
        if scale <= 0:
            scale = float(np.mean(np.abs(r))) or 1e-12
        u = np.abs(r) / (k * scale)
        w = np.where(u <= 1, 1.0, 1.0 / np.maximum(u, 1e-12))
        if np.allclose(beta_new, beta, rtol=1e-7, atol=1e-12):
            beta = beta_new
            break
        beta = beta_new
    return beta, w


def fit_tokens(l_in: np.ndarray, l_out: np.ndarray, t: np.ndarray) -> tuple[Coefficients, str]:
    """Robust fit of ``t`` (s); ``status`` says which per-token cost the data could support."""
    l_in = np.asarray(l_in, dtype=np.float64)
    l_out = np.asarray(l_out, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    if len(t) < MIN_CALLS:
        return Coefficients(float(np.median(t)) if len(t) else 0.0, 0.0, 0.0), "too_few_calls"
    cols = {"intercept": np.ones(len(t)), "prefill": l_in, "decode": l_out}
    status = "ok"
    for name, v in (("prefill", l_in), ("decode", l_out)):
        lo = float(v.min())
        if float(v.max()) < MIN_SPREAD * max(lo, 1.0):
            cols.pop(name)
            status = f"no_{'input' if name == 'prefill' else 'output'}_spread"
    if len(cols) == 1 and status != "ok":
        status = "no_token_spread"
    while True:
        names = list(cols)
        beta, _ = huber_fit(np.column_stack([cols[c] for c in names]), t)
        negative = [c for c, b in zip(names, beta, strict=True) if c != "intercept" and b < 0]
        if not negative:
            break
        cols.pop(negative[0])
    got = dict(zip(names, (float(b) for b in beta), strict=True))
    return Coefficients(
        got.get("intercept", 0.0), got.get("prefill", 0.0), got.get("decode", 0.0)
    ), status


def mdape(pred: np.ndarray, actual: np.ndarray) -> float:
    """Median absolute percentage error (a fraction)."""
    ok = actual > 0
    return float(np.median(np.abs(pred[ok] - actual[ok]) / actual[ok])) if ok.any() else 0.0


def first_seen(l_in: np.ndarray, l_out: np.ndarray) -> np.ndarray:
    """Per call, in the order given (time order): it met a shape no earlier call did, an input
    length not seen before (prefill) or a decode position (L_in+1 .. L_in+L_out) no earlier call
    reached."""
    n = len(l_in)
    out = np.zeros(n, dtype=bool)
    li = np.maximum(l_in, 0).astype(np.int64)
    lo = np.maximum(l_out, 0).astype(np.int64)
    top = int((li + lo).max()) + 2 if n else 0
    covered = np.zeros(top, dtype=bool) if top <= MAX_SHAPE_POSITIONS else None
    inputs: set[int] = set()
    for k in range(n):
        a, b = int(li[k]), int(li[k] + lo[k])
        new = a not in inputs
        inputs.add(a)
        if covered is not None:
            new = new or not bool(covered[a + 1 : b + 1].all())
            covered[a + 1 : b + 1] = True
        out[k] = new
    return out


def warmup_mask(l_in: np.ndarray, l_out: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per call (time order): a warm-up, first at a shape (:func:`first_seen`) and slower than
    ``WARMUP_RATIO`` times what the other calls predict."""
    new = first_seen(l_in, l_out)
    if int((~new).sum()) >= WARMUP_REFERENCE:
        ref = ~new
    elif len(t) >= MIN_CALLS:  # every shape new: outliers of the robust fit on all calls
        ref = np.ones(len(t), dtype=bool)
    else:  # too few calls to tell a warm-up from an ordinary slow call
        return np.zeros(len(t), dtype=bool)
    if not new.any():
        return new
    coef, _ = fit_tokens(l_in[ref], l_out[ref], t[ref])
    pred = coef.predict(l_in, l_out)
    if int(ref.sum()) < MIN_CALLS:  # no per-token fit: compare with the reference's median
        pred = np.full(len(t), float(np.median(t[ref])))
    out: np.ndarray = new & (t > WARMUP_RATIO * np.maximum(pred, 0.0)) & (pred > 0)
    return out


def reliability(status: str, n: int, r2: float, err: float, warmups: int = 0) -> str | None:
    """Why a fit cannot be trusted (None: it can): the thresholds of the module docstring."""
    if status == "too_few_calls":
        left = f" after setting {warmups} warm-up{'' if warmups == 1 else 's'} aside"
        return f"{n} call{'' if n == 1 else 's'}{left if warmups else ''}, fewer than {MIN_CALLS}"
    if err > MDAPE_MAX:
        return f"MdAPE {err:.0%} above {MDAPE_MAX:.0%}"
    if status != "no_token_spread" and r2 < R2_MIN:
        return f"R2 {r2:.2f} under {R2_MIN:.2f}: the token counts explain too little"
    return None


@dataclass(frozen=True)
class ModelFit:
    """The per-token latency model of one (model, server)."""

    model: str
    server: str
    n: int
    status: str  # ok | too_few_calls | no_input_spread | no_output_spread | no_token_spread
    source: str  # engine (vLLM's own timings) | client (span duration minus queueing)
    coefficients: Coefficients
    r2: float
    mdape: float
    queue_ms: dict[str, float]
    ttft_ms: dict[str, float] | None
    output_tokens_per_s: float
    points: list[tuple[float, float, float]] = field(default_factory=list)  # l_in, l_out, ms
    warmup_calls: int = 0  # first-seen-shape calls set aside (not in the fit, n or points)
    reason: str | None = None  # why there is no reliable fit; None: the fit is reliable

    @property
    def reliable(self) -> bool:
        return self.reason is None

    @property
    def prefill_ms_per_token(self) -> float:
        return self.coefficients.prefill * 1e3

    @property
    def decode_ms_per_token(self) -> float:
        return self.coefficients.decode * 1e3

    def predict_s(self, l_in: np.ndarray, l_out: np.ndarray) -> np.ndarray:
        return self.coefficients.predict(np.asarray(l_in, float), np.asarray(l_out, float))

    def note(self) -> str:
        if self.reason is not None:
            return f"no reliable fit: {self.reason}"
        return {
            "ok": "fitted",
            "too_few_calls": f"fewer than {MIN_CALLS} calls: no per-token costs",
            "no_input_spread": "input lengths too alike to tell prefill cost: prefill not fitted",
            "no_output_spread": "output lengths too alike to tell decode cost: decode not fitted",
            "no_token_spread": "token counts too alike: only the mean latency is known",
        }[self.status]

    def to_dict(self) -> dict[str, Any]:
        c = self.coefficients
        fitted = self.reliable
        return {
            "model": self.model,
            "server": self.server,
            "calls": self.n,
            "status": self.status,
            "note": self.note(),
            "source": self.source,
            "intercept_ms": round(c.intercept * 1e3, 3) if fitted else None,
            "prefill_ms_per_token": round(c.prefill * 1e3, 4) if fitted else None,
            "decode_ms_per_token": round(c.decode * 1e3, 4) if fitted else None,
            "r2": round(self.r2, 4),
            "mdape": round(self.mdape, 4),
            "queue_ms": self.queue_ms,
            "ttft_ms": self.ttft_ms,
            "output_tokens_per_s": round(self.output_tokens_per_s, 2),
            "warmup_calls": self.warmup_calls,
            "reliable": self.reliable,
            "reason": self.reason,
        }


def _pcts(v: np.ndarray) -> dict[str, float]:
    if len(v) == 0:
        return {"p50": 0.0, "p95": 0.0}
    p = np.percentile(v, (50, 95))
    return {"p50": round(float(p[0]), 3), "p95": round(float(p[1]), 3)}


def fit_group(model: str, server: str, part: pl.DataFrame) -> ModelFit:
    part = part.sort("start_ns", "span_id") if "start_ns" in part.columns else part
    warm = warmup_mask(
        part["l_in"].to_numpy().astype(np.float64),
        part["l_out"].to_numpy().astype(np.float64),
        part["model_s"].to_numpy().astype(np.float64),
    )
    n_warm = int(warm.sum())
    part = part.filter(pl.Series(~warm))
    l_in = part["l_in"].to_numpy().astype(np.float64)
    l_out = part["l_out"].to_numpy().astype(np.float64)
    t = part["model_s"].to_numpy().astype(np.float64)
    coef, status = fit_tokens(l_in, l_out, t)
    pred = coef.predict(l_in, l_out)
    ss_tot = float(((t - t.mean()) ** 2).sum()) if len(t) else 0.0
    r2 = 1.0 - float(((t - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0
    err = mdape(pred, t)
    ttft = part["ttft_s"].drop_nulls().to_numpy()
    engine = bool(part["engine_timings"].all())
    decode = part["decode_s"].to_numpy() if engine else t
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(decode > 0, l_out / decode, np.nan)
    rate = rate[np.isfinite(rate)]
    keep: list[int] = (
        np.linspace(0, len(t) - 1, min(len(t), MAX_POINTS)).astype(int).tolist() if len(t) else []
    )
    return ModelFit(
        model=model,
        server=server,
        n=len(t),
        status=status,
        source="engine" if engine else "client",
        coefficients=coef,
        r2=r2,
        mdape=err,
        queue_ms=_pcts(part["queue_s"].to_numpy() * 1e3),
        ttft_ms=_pcts(ttft * 1e3) if len(ttft) else None,
        output_tokens_per_s=float(np.median(rate)) if len(rate) else 0.0,
        points=[(float(l_in[k]), float(l_out[k]), float(t[k] * 1e3)) for k in keep],
        warmup_calls=n_warm,
        reason=reliability(status, len(t), r2, err, n_warm),
    )


def token_fits(trace_analysis: TraceAnalysis, table: pl.DataFrame | None = None) -> list[ModelFit]:
    """One fit per (model, server), most calls first."""
    table = calls(trace_analysis) if table is None else table
    out = [
        fit_group(str(model), str(server), part)
        for (model, server), part in table.group_by("model", "server", maintain_order=True)
    ]
    out.sort(key=lambda f: (-f.n, f.model, f.server))
    return out


def scatter_svg(fit: ModelFit, width: int = 420, height: int = 260) -> str:
    """Latency against tokens with the fit, as an inline SVG for the HTML report: x is the
    fitted token load (L_in·prefill + L_out·decode, in ms), y the measured ms, the line the fit.
    Text is escaped; only numbers and the escaped title are written."""
    from html import escape

    pts = fit.points
    c = fit.coefficients
    xs = [(li * c.prefill + lo * c.decode) * 1e3 for li, lo, _ in pts]
    ys = [ms for _, _, ms in pts]
    if not pts:
        return ""
    x_max = max(max(xs), 1e-9)
    y_max = max(max(ys), c.intercept * 1e3 + x_max, 1e-9)
    pad = 30

    def px(x: float) -> float:
        return pad + (width - 2 * pad) * x / x_max

    def py(y: float) -> float:
        return height - pad - (height - 2 * pad) * y / y_max

    dots = "".join(
        f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5"/>' for x, y in zip(xs, ys, strict=True)
    )
    a_ms = c.intercept * 1e3
    line = (
        f'<line x1="{px(0):.1f}" y1="{py(a_ms):.1f}" x2="{px(x_max):.1f}" '
        f'y2="{py(a_ms + x_max):.1f}" stroke="#c33" stroke-width="1.5"/>'
    )
    title = escape(f"{fit.model} @ {fit.server}: ms vs token load (n={fit.n})")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img"><title>{title}</title>'
        f'<text x="{pad}" y="16" font-size="11">{title}</text>'
        f'<g fill="#36c" fill-opacity="0.6">{dots}</g>{line}</svg>'
    )


__all__ = [
    "MDAPE_MAX",
    "MIN_CALLS",
    "R2_MIN",
    "WARMUP_RATIO",
    "Coefficients",
    "ModelFit",
    "calls",
    "first_seen",
    "fit_tokens",
    "huber_fit",
    "mdape",
    "reliability",
    "scatter_svg",
    "token_fits",
    "warmup_mask",
]
