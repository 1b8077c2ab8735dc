"""The novelty gate (paper eq. 17-19), measured with the base activation (before fusion).

    eta_k = alpha * cos(Emb(q_t), v_k) + (1 - alpha) * cos(a_base, a~_k)   (eq. 17; see matching)
    NS    = 1 - max_k eta_k                                                (eq. 18)
    store only if NS >= tau_novel                                          (eq. 19, first half)

An empty store gives NS = 1 (everything is novel). Decay is not applied to novelty: an old
experience is still a duplicate.
"""

from __future__ import annotations

import numpy as np


def novelty_score(eta: np.ndarray) -> float:
    """Eq. 18: ``1 - max(eta)``, or 1.0 when there is no stored experience."""
    e = np.asarray(eta, dtype=np.float64)
    return 1.0 if e.size == 0 else float(1.0 - e.max())


def is_novel(ns: float, tau_novel: float) -> bool:
    """Eq. 19 (novelty half): ``NS >= tau_novel``."""
    return ns >= tau_novel
