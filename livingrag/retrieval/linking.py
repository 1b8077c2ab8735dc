"""Query entity linking (pure numpy): each question mention -> its nearest graph entity.

LinearRAG links every mention to the graph entity with the highest cosine between their
embeddings and uses that cosine as the seed's activation. Entity embeddings are embeddings of the
normalised names, so a mention whose normalised name equals an entity's has cosine exactly 1:
those are linked by a dictionary lookup, and only the other mentions need an embedding and a
product with the entity matrix. Mentions whose best cosine is below ``min_score`` are dropped.

The base activation a_base (eq. 7) is {entity: max score over the mentions linked to it}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Link:
    mention: str
    key: str
    entity: int  # row in the graph
    score: float
    exact: bool


def exact_links(mentions: Sequence[str], keys: Sequence[str], key_to_entity: Mapping[str, int]) -> list[Link | None]:
    """A :class:`Link` with score 1.0 for every mention whose key names a graph entity, else None."""
    out: list[Link | None] = []
    for m, k in zip(mentions, keys, strict=True):
        row = key_to_entity.get(k)
        out.append(Link(m, k, row, 1.0, True) if row is not None else None)
    return out


def nearest_links(
    mentions: Sequence[str],
    keys: Sequence[str],
    mention_embeddings: np.ndarray,
    entity_embeddings: np.ndarray,
    *,
    min_score: float = 0.0,
) -> list[Link | None]:
    """Link each mention to argmax_e cos(m, e) (ties: lowest row); None below ``min_score``."""
    if len(mentions) == 0 or entity_embeddings.shape[0] == 0:
        return [None] * len(mentions)
    sims = entity_embeddings @ np.asarray(mention_embeddings, dtype=entity_embeddings.dtype).T  # (n_e, m)
    best = np.argmax(sims, axis=0)
    out: list[Link | None] = []
    for j, (m, k) in enumerate(zip(mentions, keys, strict=True)):
        score = float(sims[best[j], j])
        out.append(Link(m, k, int(best[j]), score, False) if score >= min_score else None)
    return out


def base_activation(links: Sequence[Link | None]) -> dict[int, float]:
    """a_base: {entity row: max link score}, over the linked mentions."""
    act: dict[int, float] = {}
    for link in links:
        if link is not None and link.score > act.get(link.entity, -np.inf):
            act[link.entity] = link.score
    return act


__all__ = ["Link", "base_activation", "exact_links", "nearest_links"]
