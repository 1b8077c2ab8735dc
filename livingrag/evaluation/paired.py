"""Paired comparison of two systems on the same questions: mean difference with a bootstrap interval,
and the questions one fixed and broke relative to the other. Pure (numpy only).

For per-question values a_i (LivingRAG) and b_i (LinearRAG) on the same n questions, d_i = a_i - b_i:

    diff = (1/n) sum_i d_i
    interval = the (1-c)/2 and (1+c)/2 quantiles of mean(d*) over R resamples d* of d drawn with
               replacement (the paired percentile bootstrap; c = 0.95 by default)

Resampling the differences, not the two systems apart, keeps each question's pairing, so the interval
reflects how consistently one system beats the other question by question. For correctness (0/1):

    fixed = |{i : a_i = 1, b_i = 0}|,  broke = |{i : a_i = 0, b_i = 1}|,  diff = (fixed - broke) / n
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PairedDiff", "fixed_and_broke", "paired_bootstrap"]


@dataclass(frozen=True)
class PairedDiff:
    """``diff`` = mean(a) - mean(b) over ``n`` paired questions, and its bootstrap interval [lo, hi]."""

    n: int
    mean_a: float
    mean_b: float
    diff: float
    lo: float
    hi: float
    confidence: float
    resamples: int

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0."""
        return self.lo > 0 or self.hi < 0


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedDiff:
    """Mean paired difference of ``a`` and ``b`` with a percentile bootstrap interval (module docstring)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    if not a:
        raise ValueError("paired samples are empty")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    xa = np.asarray(a, dtype=np.float64)
    xb = np.asarray(b, dtype=np.float64)
    d = xa - xb
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(resamples, len(d)))
    means = d[idx].mean(axis=1)
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail])
    return PairedDiff(
        n=len(d),
        mean_a=float(xa.mean()),
        mean_b=float(xb.mean()),
        diff=float(d.mean()),
        lo=float(lo),
        hi=float(hi),
        confidence=confidence,
        resamples=resamples,
    )


def fixed_and_broke(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> tuple[int, int]:
    """(questions ``a`` got right and ``b`` wrong, questions ``a`` got wrong and ``b`` right)."""
    if len(a_correct) != len(b_correct):
        raise ValueError(f"paired samples differ in length: {len(a_correct)} and {len(b_correct)}")
    fixed = sum(1 for x, y in zip(a_correct, b_correct, strict=True) if x and not y)
    broke = sum(1 for x, y in zip(a_correct, b_correct, strict=True) if y and not x)
    return fixed, broke
