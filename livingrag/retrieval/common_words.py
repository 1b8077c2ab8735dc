"""Seed entities that are common words of the corpus, not names (pure Python: the standard library only).

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

import math
import re
from collections.abc import Sequence

MIN_PASSAGES = 20
"""A word is common only when at least this many passages write it (whatever the share)."""


def common_word_threshold(n_passages: int, min_share: float) -> int | None:
    """The passages a common word needs, max(MIN_PASSAGES, ceil(s_min * n_p)); None when
    ``min_share`` is 0 or less (the filter is off)."""
    if min_share <= 0:
        return None
    return max(MIN_PASSAGES, math.ceil(min_share * n_passages - 1e-9))


def writes_at_least(key: str, passage_texts: Sequence[str], limit: int) -> bool:
    """Whether at least ``limit`` passages write the one-word ``key`` as a word of its own (c(e) >=
    limit, counted until the limit is reached); False for a key of several words or an empty one.

    The graph asks it once per entity and version when the entity is about to seed a question
    (a scan of the texts: about 2 ms for 6,000 passages when the word is rare, less when it is
    common), instead of counting every word of the corpus whenever the graph loads."""
    if not key or " " in key:
        return False
    if limit <= 0:
        return True
    word = re.compile(r"(?<!\w)" + re.escape(key) + r"(?!\w)")
    found = 0
    for text in passage_texts:
        if key in text and word.search(text):
            found += 1
            if found >= limit:
                return True
    return False


__all__ = ["MIN_PASSAGES", "common_word_threshold", "writes_at_least"]
