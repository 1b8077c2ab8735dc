"""Answer reuse for repeated questions (beyond the paper): a question that repeats an earlier, grounded
one is answered from that experience without an LLM call.

    key(q)      = the words of casefold(q) with every character that is neither a letter, a digit nor
                  white space removed, joined by single spaces
    repeat(q,e) = key(q) == key(q_e)

A repeat is answered from experience e when e is also active (not stale: none of the passages it
cited has changed since; not retracted; not expired), is trusted enough
(``experience.reuse_answers_from``: verified by a person by default; see
:mod:`livingrag.experience.trust`), its answer was not marked wrong for this question (the same key
compares answers: ``key(a)``), and it belongs to the question's corpus; :func:`pick_repeat` applies
the text test to the top-K matches of eq. 7, the repository the rest. Only the text decides what is
a repeat: an embedding threshold cannot tell a rephrasing from a question of the same template
about other entities (2Wiki's "Who was born first, A or B?"), whose answers differ. Pure: no
database, no model.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["pick_repeat", "question_key"]


def question_key(question: str) -> str:
    """``key(q)`` of the module docstring: case, punctuation and spacing removed."""
    kept = "".join(ch for ch in question.casefold() if ch.isalnum() or ch.isspace())
    return " ".join(kept.split())


def pick_repeat(question: str, candidates: Iterable[tuple[int, str]]) -> int | None:
    """The id of the first candidate (id, earlier question) that ``question`` repeats, else None."""
    key = question_key(question)
    if not key:
        return None
    for experience_id, earlier in candidates:
        if question_key(earlier) == key:
            return experience_id
    return None
