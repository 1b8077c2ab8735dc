"""Seed entities that are common words of the corpus, not names (pure Python and numpy).

The question gazetteer links every span that spells an entity's name, and the small NER model
makes entities of common words that a passage capitalised once ("Film" in "a magazine devoted to
Film, DVD and Games"; the "Film" and the year of 2Wiki's "Palo Alto (2013 Film)"). Such a seed
activates the few passages whose entity it is and pulls them to the top of unrelated questions
(measured on 2Wiki: one horror film's passage was in the top 5 of 74 of the 1,000 questions).

A one-word entity key that the corpus writes as a lower-case word (or a number) in at least a
share s_min of its passages, and in at least ``MIN_PASSAGES`` of them, is a common word:

    c(e) = |{p : key(e) is a word of text(p)}|      for a one-word key (else 0)
    common(e)  <=>  c(e) >= s_min * n_p  and  c(e) >= MIN_PASSAGES

(keys are case-folded, so a word equal to one is lower case or digits; "American" is always
capitalised and keeps c = 0; the floor keeps a small corpus, where one mention is a large share,
from losing its years). A link to a common word is not a seed (``retrieval.common_word_share`` is
s_min; 0 keeps every link).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

MIN_PASSAGES = 20
"""A word is common only when at least this many passages write it (whatever the share)."""

_WORD = re.compile(r"\w+")


def word_passages(entity_keys: Sequence[str], passage_texts: Sequence[str]) -> np.ndarray:
    """c(e) for every entity key (see the module docstring): int64 (n_e,), 0 for keys of more than
    one word."""
    counts = np.zeros(len(entity_keys), dtype=np.int64)
    single = {k: i for i, k in enumerate(entity_keys) if k and " " not in k}
    if not single:
        return counts
    for text in passage_texts:
        rows = {single[w] for w in _WORD.findall(text) if w in single}
        if rows:
            counts[list(rows)] += 1
    return counts


def is_common_word(passages: int, n_passages: int, min_share: float) -> bool:
    """common(e) for an entity written as a lower-case word by ``passages`` of the corpus's
    ``n_passages``: c >= s_min * n_p and c >= MIN_PASSAGES (always False when ``min_share`` is 0 or
    less: the filter is off)."""
    return min_share > 0 and passages >= MIN_PASSAGES and passages >= min_share * n_passages


__all__ = ["MIN_PASSAGES", "is_common_word", "word_passages"]
