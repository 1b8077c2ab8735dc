"""Figures the benchmarks print (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentile(values: Sequence[float], q: float, *, empty: float = 0.0) -> float:
    """numpy's linear-interpolation percentile ``q`` of ``values``, rounded to 3 decimals
    (``empty`` when there are none)."""
    return round(float(np.percentile(np.asarray(values, dtype=np.float64), q)), 3) if len(values) else empty


__all__ = ["percentile"]
