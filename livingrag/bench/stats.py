"""Figures the benchmarks print (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from livingrag.experience.calibration import roc_auc


def percentile(values: Sequence[float], q: float, *, empty: float = 0.0) -> float:
    """numpy's linear-interpolation percentile ``q`` of ``values``, rounded to 3 decimals
    (``empty`` when there are none)."""
    return round(float(np.percentile(np.asarray(values, dtype=np.float64), q)), 3) if len(values) else empty


def paired_t_interval(diffs: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, lo, hi) of paired differences d_1..d_n: mean ± t_{(1+c)/2, n-1} · s / sqrt(n), s the
    sample standard deviation (the t interval of the mean difference, the right one for a few
    pairs); lo and hi are NaN for a single pair, and equal the mean when every difference is."""
    if not len(diffs):
        raise ValueError("no paired differences")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    from scipy import stats  # not at import: the other figures here need only numpy

    d = np.asarray(diffs, dtype=np.float64)
    mean = float(d.mean())
    if d.size < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf((1 + confidence) / 2, d.size - 1)) * float(d.std(ddof=1)) / float(np.sqrt(d.size))
    return mean, mean - half, mean + half


__all__ = ["paired_t_interval", "percentile", "roc_auc"]
