"""Figures the benchmarks print (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentile(values: Sequence[float], q: float, *, empty: float = 0.0) -> float:
    """numpy's linear-interpolation percentile ``q`` of ``values``, rounded to 3 decimals
    (``empty`` when there are none)."""
    return round(float(np.percentile(np.asarray(values, dtype=np.float64), q)), 3) if len(values) else empty


def roc_auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(score of a positive > score of a negative), ties counting one half (the Mann-Whitney
    form of the ROC AUC; 0.5 = no better than chance); NaN when either side is empty."""
    if not len(positive) or not len(negative):
        return float("nan")
    p = np.asarray(positive, dtype=np.float64)[:, None]
    n = np.asarray(negative, dtype=np.float64)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


__all__ = ["percentile", "roc_auc"]
