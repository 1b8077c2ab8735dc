"""The passage about an activated entity rises with it (pure numpy).

In an encyclopaedic corpus a passage's title names the entity it is about (*Michael Curtiz*), and
that passage is the second hop a multi-hop question needs: "the director of *God's Gift to
Women*" reaches the entity Michael Curtiz through the film's sentence, but the entity's bonus in
the passage reset is spread over every passage that mentions him (all his films), so his own
page ranked 17th. Each entity e whose key equals a passage's normalised title has that passage as
its title page t(e); after the PPR the scores become

    s'(p) = s(p) / max_q s(q) + c * max_{e : t(e) = p} w(e) / max_e' w(e')

over the entities e activated by this question (seeds and those the bridging reached, with
their accumulated weights w of eq. 5), and 0 for a passage that is no activated entity's page.
c = ``retrieval.title_boost`` (0: off). A corpus whose titles name no entity (file names, section
headings) is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from livingrag.retrieval.scoring import max_scaled


def title_pages(entity_keys: Sequence[str], passage_title_keys: Sequence[str]) -> np.ndarray:
    """t(e) for every entity: the first passage row whose title key equals the entity's key, -1 when
    none (int64 (n_e,)); empty title keys match nothing."""
    first: dict[str, int] = {}
    for row, key in enumerate(passage_title_keys):
        if key:
            first.setdefault(key, row)
    return np.array([first.get(k, -1) for k in entity_keys], dtype=np.int64)


def title_boost(scores: np.ndarray, weights: Mapping[int, float], pages: np.ndarray, boost: float) -> np.ndarray:
    """s' of the module docstring for the passage ``scores`` (all passages), the activated entities'
    ``weights`` ({entity row: w}) and their ``pages`` (t(e), -1: none); ``scores`` unchanged when
    ``boost`` is 0, no entity is active or none has a page."""
    if boost <= 0 or not weights or scores.size == 0:
        return scores
    top_w = max(weights.values())
    if top_w <= 0:
        return scores
    bonus = np.zeros(scores.shape[0], dtype=np.float64)
    for e, w in weights.items():
        p = int(pages[e]) if 0 <= e < len(pages) else -1
        if p >= 0 and w > 0:
            bonus[p] = max(bonus[p], w / top_w)
    if not bonus.any():
        return scores
    out: np.ndarray = max_scaled(scores) + boost * bonus
    return out


__all__ = ["title_boost", "title_pages"]
