"""The interface every claim verifier implements, and the evidence pre-filter they share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from livingrag.experience.grounding import Claim, EvidenceUnit, evidence_units
from livingrag.experience.types import ClaimVerdict, UsedPassage


@runtime_checkable
class Verifier(Protocol):
    """Scores each claim's support g_i (eq. 15) against the used passages."""

    name: str

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        """One verdict per claim, in order; ``score`` is g_i in [0, 1]."""
        ...


class TextEncoder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class EvidenceSelector:
    """Appendix C's evidence pre-filter: for each claim, the ``k`` evidence units (sentence
    windows of the used passages) most similar to it by embedding cosine."""

    def __init__(self, encoder: TextEncoder, k: int) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.encoder = encoder
        self.k = k

    def select(
        self, claims: Sequence[Claim], passages: Sequence[UsedPassage]
    ) -> tuple[list[EvidenceUnit], np.ndarray, list[list[int]]]:
        """Returns the units, the claim x unit cosine matrix and, per claim, the indices of its
        ``k`` nearest units (best first)."""
        units = evidence_units([(p.id, p.title, p.text) for p in passages])
        if not claims or not units:
            return units, np.zeros((len(claims), len(units))), [[] for _ in claims]
        vecs = np.asarray(self.encoder.encode([c.text for c in claims] + [u.text for u in units]), dtype=np.float64)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        vecs = vecs / np.where(norms > 0, norms, 1.0)
        sims = vecs[: len(claims)] @ vecs[len(claims) :].T
        top = [list(np.argsort(-row, kind="stable")[: self.k]) for row in sims]
        return units, sims, top
