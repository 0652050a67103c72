"""The bootstrap distribution of a percentile, drawn without building the resamples.

Resampling n traces with replacement and taking a percentile of each resample is the textbook
bootstrap; done literally it costs ``resamples * n`` draws and a partition per resample.  The
same distribution can be drawn exactly in ``O(resamples)`` after one sort:

* a resample is ``x[floor(n * U_i)]`` for n uniforms ``U_i`` (``x`` sorted), a non-decreasing
  map of the uniforms, so its k-th smallest value is ``x[floor(n * U_(k))]`` where ``U_(k)``
  is the k-th smallest uniform, which is Beta(k, n + 1 - k) distributed;
* given ``U_(k) = u``, the other ``n - k`` larger uniforms are uniform on (u, 1), so
  ``U_(k+1) = u + (1 - u) * Beta(1, n - k)``;
* NumPy's (linear) percentile is ``X_(k) + f * (X_(k+1) - X_(k))`` with ``k = floor(h) + 1``,
  ``f = h - floor(h)``, ``h = (n - 1) q``; so one Beta draw per resample (two when f > 0)
  gives the resample's percentile exactly.

``tests/test_diff.py`` checks it against literal resampling.
"""

from __future__ import annotations

import math

import numpy as np


def percentile(sorted_x: np.ndarray, q: float) -> float:
    """NumPy's linear percentile of an already sorted sample (``q`` in 0..1)."""
    n = len(sorted_x)
    h = (n - 1) * q
    lo = math.floor(h)
    frac = h - lo
    if frac == 0 or lo + 1 >= n:
        return float(sorted_x[lo])
    return float(sorted_x[lo] + frac * (sorted_x[lo + 1] - sorted_x[lo]))


def resampled_percentiles(
    sorted_x: np.ndarray, q: float, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """``resamples`` draws of the ``q`` percentile of a resample (with replacement, same size)
    of ``sorted_x``: the bootstrap distribution of that percentile."""
    n = len(sorted_x)
    if n == 0:
        raise ValueError("no values to resample")
    h = (n - 1) * q
    lo = math.floor(h)
    frac = h - lo
    k = lo + 1  # the lower order statistic, counted from 1
    u = rng.beta(k, n + 1 - k, size=resamples)
    low = sorted_x[np.minimum((u * n).astype(np.int64), n - 1)]
    if frac == 0 or k >= n:
        return low.astype(np.float64)
    u_next = u + (1.0 - u) * rng.beta(1.0, n - k, size=resamples)
    high = sorted_x[np.minimum((u_next * n).astype(np.int64), n - 1)]
    return (low + frac * (high - low)).astype(np.float64)


__all__ = ["percentile", "resampled_percentiles"]
