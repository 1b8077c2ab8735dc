"""A gate that learns from feedback: a regularised logistic calibrator over the write-back
candidate's features, validated in time order (beyond the paper; the paper's gate is the fixed
rule GS >= tau_gs of eq. 17).

People's verdicts label the write-back candidates of the questions they judged (right = 1,
wrong = 0). Over a tenant's labels, oldest first:

* **the model** (:func:`fit_logistic`): features standardised with the training labels' mean and
  standard deviation, ``z = (x - mu) / sd``, then

      P(right | x) = sigmoid(b + w . z),   minimising   -sum log-likelihood + (l2 / 2) |w|^2

  by Newton's method (the bias is not penalised);
* **honest validation** (:func:`forward_predictions`): the labels after the first ``n0`` are cut
  into blocks in time order; each block is scored by a model fitted only on the labels before it.
  Every held-out probability comes from a model that never saw that label or any later one;
* **thresholds from the held-out predictions** (:func:`threshold_for_precision`): the lowest
  probability ``t`` such that the held-out labels with ``p >= t`` number at least ``min_support``
  and are right at least ``target`` of the time. The write gate stores at the threshold of
  ``gates.store_min_precision``; answers are served from memory without feedback (trust
  ``auto_verified``) only at the threshold of ``gates.serve_min_precision``;
* **earned** (:func:`assess`): the held-out ROC AUC is at least ``min_auc`` and a store threshold
  exists; otherwise the fixed gate decides.

Pure: numpy only; no database, settings or model import.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "GateAssessment",
    "LogisticModel",
    "assess",
    "fit_logistic",
    "forward_predictions",
    "precision_recall_at",
    "roc_auc",
    "threshold_for_precision",
]


def roc_auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(score of a positive > score of a negative), ties counting one half (the Mann-Whitney
    form of the ROC AUC; 0.5 = no better than chance); NaN when either side is empty."""
    if not len(positive) or not len(negative):
        return float("nan")
    p = np.asarray(positive, dtype=np.float64)[:, None]
    n = np.asarray(negative, dtype=np.float64)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


def _sigmoid(t: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(t, -500.0, 500.0)))
    return out


@dataclass(frozen=True)
class LogisticModel:
    """``P(right | x) = sigmoid(bias + weights . (x - mean) / scale)`` over the named features."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """The model's P(right) of each row of ``x`` (columns in :attr:`features` order)."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return _sigmoid(z @ np.asarray(self.weights) + self.bias)

    def probability(self, values: Mapping[str, float]) -> float:
        """P(right) of one candidate's features by name (a missing feature counts as its mean)."""
        row = [float(values.get(f, m)) for f, m in zip(self.features, self.mean, strict=True)]
        return float(self.probabilities(np.asarray([row]))[0])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"features": list(self.features)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LogisticModel:
        return cls(
            features=tuple(str(f) for f in d["features"]),
            mean=tuple(float(v) for v in d["mean"]),
            scale=tuple(float(v) for v in d["scale"]),
            weights=tuple(float(v) for v in d["weights"]),
            bias=float(d["bias"]),
        )


def fit_logistic(
    x: np.ndarray, y: Sequence[bool] | np.ndarray, features: Sequence[str], *, l2: float = 1.0, max_iter: int = 100
) -> LogisticModel:
    """L2-regularised logistic regression on standardised features, by Newton's method (module
    docstring). A feature constant over the labels gets scale 1 (and so weight 0 in effect).
    Raises :class:`ValueError` without both right and wrong labels, or for mismatched shapes."""
    x = np.asarray(x, dtype=np.float64)
    yv = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != yv.shape[0] or x.shape[1] != len(features):
        raise ValueError(f"features {x.shape} do not match {yv.shape[0]} labels and {len(features)} feature names")
    if not 0 < yv.sum() < len(yv):
        raise ValueError("a calibrator needs both right and wrong labels")
    if l2 < 0 or not math.isfinite(l2):
        raise ValueError(f"l2 must be a non-negative number, got {l2}")
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    z = np.hstack([np.ones((x.shape[0], 1)), (x - mu) / sd])
    penalty = np.full(z.shape[1], float(l2))
    penalty[0] = 1e-9  # the bias is not penalised (a tiny ridge keeps the Hessian invertible)
    theta = np.zeros(z.shape[1])
    for _ in range(max_iter):
        p = _sigmoid(z @ theta)
        grad = z.T @ (p - yv) + penalty * theta
        hess = (z * (p * (1.0 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        theta -= step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return LogisticModel(
        features=tuple(features),
        mean=tuple(float(v) for v in mu),
        scale=tuple(float(v) for v in sd),
        weights=tuple(float(v) for v in theta[1:]),
        bias=float(theta[0]),
    )


def forward_predictions(
    x: np.ndarray,
    y: Sequence[bool] | np.ndarray,
    features: Sequence[str],
    *,
    first: int,
    blocks: int = 5,
    l2: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Held-out probabilities in time order (module docstring): the labels after the first ``first``
    are cut into ``blocks`` consecutive blocks (as equal as possible); block ``k`` is scored by
    :func:`fit_logistic` of every label before it, or by the share of right labels before it when
    those are all right or all wrong. Returns (probabilities, labels) of the held-out labels."""
    x = np.asarray(x, dtype=np.float64)
    yv = np.asarray(y, dtype=bool)
    n = len(yv)
    if not 1 <= first < n:
        return np.zeros(0), np.zeros(0, dtype=bool)
    cuts = np.linspace(first, n, min(blocks, n - first) + 1).round().astype(int)
    probs = np.zeros(n - first)
    for lo, hi in itertools.pairwise(int(c) for c in cuts):
        train_y = yv[:lo]
        if 0 < train_y.sum() < len(train_y):
            probs[lo - first : hi - first] = fit_logistic(x[:lo], train_y, features, l2=l2).probabilities(x[lo:hi])
        else:
            probs[lo - first : hi - first] = float(train_y.mean())
    return probs, yv[first:]


def precision_recall_at(probs: np.ndarray, labels: np.ndarray, threshold: float) -> tuple[float, float, int]:
    """(precision, recall, count) of the rule ``p >= threshold`` over held-out ``labels``:
    precision = right / kept, recall = right kept / right; NaN where a denominator is 0."""
    probs, labels = np.asarray(probs, dtype=np.float64), np.asarray(labels, dtype=bool)
    kept = probs >= threshold
    n_kept, n_right = int(kept.sum()), int(labels.sum())
    hits = int((kept & labels).sum())
    precision = hits / n_kept if n_kept else float("nan")
    recall = hits / n_right if n_right else float("nan")
    return precision, recall, n_kept


def threshold_for_precision(probs: np.ndarray, labels: np.ndarray, target: float, *, min_support: int) -> float | None:
    """The lowest held-out probability ``t`` such that at least ``min_support`` held-out labels have
    ``p >= t`` and their precision is at least ``target``; None when no ``t`` qualifies."""
    probs, labels = np.asarray(probs, dtype=np.float64), np.asarray(labels, dtype=bool)
    order = np.argsort(-probs, kind="stable")
    p_sorted, y_sorted = probs[order], labels[order]
    hits = np.cumsum(y_sorted)
    best: float | None = None
    for i in range(len(p_sorted)):
        if i + 1 < len(p_sorted) and p_sorted[i + 1] == p_sorted[i]:
            continue  # a threshold keeps every label of its probability
        kept = i + 1
        if kept >= min_support and hits[i] / kept >= target:
            best = float(p_sorted[i])
    return best


@dataclass(frozen=True)
class GateAssessment:
    """What the held-out predictions say of a calibrator: its ROC AUC, the store and serve
    thresholds with their held-out precision and recall, and whether it earned deciding."""

    labels: int
    right: int
    held_out: int
    auc: float | None
    store_threshold: float | None
    store_precision: float | None
    store_recall: float | None
    serve_threshold: float | None
    serve_precision: float | None
    serve_recall: float | None
    earned: bool
    why: str
    settings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _finite(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v), 6)


def assess(
    probs: np.ndarray,
    labels: np.ndarray,
    *,
    total: int,
    right: int,
    min_auc: float,
    store_min_precision: float,
    serve_min_precision: float,
    min_support: int,
) -> GateAssessment:
    """The calibrator's held-out figures (module docstring): ``earned`` when AUC >= ``min_auc`` and a
    store threshold reaches ``store_min_precision``; the serve threshold (``serve_min_precision``)
    exists only for an earned calibrator. ``total``/``right``: every label, held out or not."""
    probs, labels = np.asarray(probs, dtype=np.float64), np.asarray(labels, dtype=bool)
    settings = {
        "min_auc": min_auc,
        "store_min_precision": store_min_precision,
        "serve_min_precision": serve_min_precision,
        "min_support": float(min_support),
    }
    auc = roc_auc(probs[labels], probs[~labels]) if len(labels) else float("nan")
    store_t = threshold_for_precision(probs, labels, store_min_precision, min_support=min_support)
    serve_t = threshold_for_precision(probs, labels, serve_min_precision, min_support=min_support)
    if not math.isfinite(auc):
        why = "the held-out labels are all right or all wrong: no AUC yet"
    elif auc < min_auc:
        why = f"held-out AUC {auc:.3f} is below {min_auc}"
    elif store_t is None:
        why = f"no threshold keeps {min_support}+ held-out labels at precision {store_min_precision}"
    else:
        why = f"held-out AUC {auc:.3f} >= {min_auc}; precision {store_min_precision} at p >= {store_t:.3f}"
    earned = math.isfinite(auc) and auc >= min_auc and store_t is not None
    if not earned:
        serve_t = None
    sp, sr, _ = precision_recall_at(probs, labels, store_t) if store_t is not None else (math.nan, math.nan, 0)
    vp, vr, _ = precision_recall_at(probs, labels, serve_t) if serve_t is not None else (math.nan, math.nan, 0)
    return GateAssessment(
        labels=int(total),
        right=int(right),
        held_out=len(labels),
        auc=_finite(auc),
        store_threshold=store_t,
        store_precision=_finite(sp),
        store_recall=_finite(sr),
        serve_threshold=serve_t,
        serve_precision=_finite(vp),
        serve_recall=_finite(vr),
        earned=earned,
        why=why,
        settings=settings,
    )
