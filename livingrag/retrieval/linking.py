"""Query entity linking (pure numpy): each question mention -> its nearest graph entity.

LinearRAG links every mention to the graph entity with the highest cosine between their
embeddings and uses that cosine as the seed's activation. Entity embeddings are embeddings of the
normalised names, so a mention whose normalised name equals an entity's has cosine exactly 1:
those are linked by a dictionary lookup, and only the other mentions need an embedding and a
product with the entity matrix. Mentions whose best cosine is below ``min_score`` are dropped.

Mentions come from the extractor (spaCy NER) and from a gazetteer pass over the question that
finds spans naming a graph entity exactly; NER misses many titles ("3 Dots", "Dying God").

The base activation a_base (eq. 7) is {entity: max score over the mentions linked to it}.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
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


_TOKEN = re.compile(r"\S+")
_ARTICLES = frozenset({"the", "a", "an"})
QUESTION_STOPWORDS = frozenset(
    {
        "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "did", "do", "does", "is", "are",
        "was", "were", "will", "would", "can", "could", "the", "a", "an", "in", "on", "of", "for", "to", "from",
        "by", "with", "at", "and", "or", "but", "as", "than", "that", "this", "these", "those",
    }
)  # fmt: skip


def gazetteer_mentions(
    question: str,
    key_to_entity: Mapping[str, int],
    normalize: Callable[[str], str],
    *,
    max_tokens: int = 8,
    skip: Callable[[int], bool] | None = None,
) -> list[tuple[str, int, int]]:
    """Spans (text, start, end) of the question that name a graph entity exactly (after normalisation).

    Greedy longest match, left to right, over whitespace tokens. A span must start and end with a
    capitalised word or a number and must not start with an article, nor with a question word
    unless that word is inside the question and the span is longer than it (a title such as
    "Where Does It Hurt?" in "... first, The Glass Wall or Where Does It Hurt?"); ``skip``
    can reject entities (e.g. very frequent ones). Complements NER, which misses many titles
    ("Which film came out first, 3 Dots or Dying God?").
    """
    spans = [m.span() for m in _TOKEN.finditer(question)]
    words = [question[a:b] for a, b in spans]

    def named(w: str) -> bool:
        c = next((ch for ch in w if ch.isalnum()), "")
        return c.isupper() or c.isdigit()

    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(words):
        found = 0
        # a span may start with a capitalised question word inside the question (a title: "... or
        # Where Does It Hurt?"), when it is more than that word; never at the question's start, and
        # never with an article (the key drops a leading article: the span after it is the same name)
        first = normalize(words[i])
        stop_start = first in QUESTION_STOPWORDS
        if named(words[i]) and (not stop_start or (i > 0 and first not in _ARTICLES)):
            for j in range(min(len(words), i + max_tokens), i + (1 if stop_start else 0), -1):
                if not named(words[j - 1]):
                    continue
                text = question[spans[i][0] : spans[j - 1][1]]
                row = key_to_entity.get(normalize(text))
                if row is not None and not (skip is not None and skip(row)):
                    out.append((text, spans[i][0], spans[j - 1][1]))
                    found = j - i
                    break
        i += found or 1
    return out


def merge_mentions(
    question: str,
    ner_mentions: Sequence[str],
    gazetteer: Sequence[tuple[str, int, int]],
    key_to_entity: Mapping[str, int],
    normalize: Callable[[str], str],
) -> list[str]:
    """NER mentions plus gazetteer spans, one per normalised name.

    A NER mention that is not itself a graph entity and overlaps a gazetteer span is dropped (the
    exact span is the better reading, e.g. NER "Lothair Ii's mother" vs. the entity "Lothair II").
    """
    kept: list[str] = []
    lowered = question.lower()
    for m in ner_mentions:
        if normalize(m) in key_to_entity:
            kept.append(m)
            continue
        start = lowered.find(m.lower())
        end = start + len(m)
        if start >= 0 and any(a < end and start < b for _, a, b in gazetteer):
            continue
        kept.append(m)
    seen = {normalize(m) for m in kept}
    for text, _, _ in gazetteer:
        key = normalize(text)
        if key not in seen:
            seen.add(key)
            kept.append(text.strip(" ,.;:?!\"'()[]"))
    return kept


def base_activation(links: Sequence[Link | None]) -> dict[int, float]:
    """a_base: {entity row: max link score}, over the linked mentions."""
    act: dict[int, float] = {}
    for link in links:
        if link is not None and link.score > act.get(link.entity, -np.inf):
            act[link.entity] = link.score
    return act


__all__ = ["Link", "base_activation", "exact_links", "gazetteer_mentions", "merge_mentions", "nearest_links"]
