"""Activation fusion (paper eq. 8-10).

    w̄_k = exp(s_k / tau_s) / sum_j exp(s_j / tau_s)                         (eq. 9)
    w_k = w̄_k * conf_k            (not renormalised)                          (eq. 10)
    a0  = normalize(a_base + beta * sum_k w_k * top_H(a~_k))                   (eq. 8)

``normalize`` is not defined by the paper. Here it rescales the fused vector so that its largest
entry equals the largest entry of ``a_base``: ``a0 = raw * max(a_base) / max(raw)``. The seed scale
(and so the retriever's activation threshold) keeps its meaning, the base's relative order among
base entities is kept, and experiences contribute in proportion to their weights. With an empty
store, no selected experience, ``beta = 0`` or no seed entity, ``a0`` is exactly ``a_base``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from livingrag.experience.similarity import SparseVector


def softmax_weights(scores: np.ndarray, tau_s: float) -> np.ndarray:
    """Eq. 9: softmax of ``scores / tau_s`` (shifted by the max for numerical stability)."""
    if tau_s <= 0:
        raise ValueError(f"tau_s must be positive, got {tau_s}")
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return s
    z = (s - s.max()) / tau_s
    e = np.exp(z)
    weights: np.ndarray = e / e.sum()
    return weights


def fusion_weights(scores: np.ndarray, confidences: np.ndarray, tau_s: float) -> np.ndarray:
    """Eq. 10: ``w_k = softmax(s / tau_s)_k * conf_k``, deliberately not renormalised."""
    c = np.asarray(confidences, dtype=np.float64)
    w = softmax_weights(scores, tau_s)
    if w.shape != c.shape:
        raise ValueError(f"{w.size} scores but {c.size} confidences")
    return w * c


def cut_top_h(activation: SparseVector, h: int | None) -> dict[int, float]:
    """Keep the ``h`` strongest entries (ties: smaller entity id); ``None`` keeps all."""
    if h is None or len(activation) <= h:
        return dict(activation)
    ranked = sorted(activation.items(), key=lambda kv: (-kv[1], kv[0]))[:h]
    return dict(ranked)


def normalize_to_base(raw: SparseVector, base: SparseVector) -> dict[int, float]:
    """``raw * max(base) / max(raw)``: the fused vector on the base's scale (see module doc)."""
    if not raw:
        return {}
    top_raw = max(raw.values())
    top_base = max(base.values()) if base else 0.0
    if top_raw <= 0.0 or top_base <= 0.0:
        return dict(raw)
    scale = top_base / top_raw
    return {k: v * scale for k, v in raw.items()}


def fuse(
    base: SparseVector,
    maps: Sequence[SparseVector],
    weights: Sequence[float] | np.ndarray,
    beta: float,
    top_h: int | None = None,
) -> dict[int, float]:
    """Eq. 8: ``normalize(a_base + beta * sum_k w_k * top_H(a~_k))``.

    Returns a copy of ``base`` itself when there is nothing to fuse: no map, ``beta == 0``, or no
    seed entity (an empty or all-zero base activation).
    """
    if len(maps) != len(weights):
        raise ValueError(f"{len(maps)} maps but {len(weights)} weights")
    if not maps or beta == 0.0 or not base or max(base.values()) <= 0.0:
        return dict(base)
    raw: dict[int, float] = dict(base)
    for m, w in zip(maps, weights, strict=True):
        if w == 0.0:
            continue
        for ent, val in cut_top_h(m, top_h).items():
            raw[ent] = raw.get(ent, 0.0) + beta * float(w) * val
    return normalize_to_base(raw, base)


def newly_active(base: SparseVector, fused: SparseVector, threshold: float = 0.0) -> tuple[int, ...]:
    """Entities active in ``fused`` but not in ``base`` (ascending ids), where active means a
    positive weight at or above ``threshold``: what fusion added to the retriever's active set."""

    def active(v: float) -> bool:
        return v > 0.0 and v >= threshold

    return tuple(sorted(e for e, v in fused.items() if active(v) and not active(base.get(e, 0.0))))
