"""Answer reuse for repeated questions (beyond the paper): a question that repeats an earlier, grounded
one is answered from that experience without an LLM call.

    key(q)      = the words of casefold(q) with every character that is neither a letter, a digit nor
                  white space removed, joined by single spaces
    repeat(q,e) = key(q) == key(q_e)

A repeat is answered from experience e when e is also active (not stale: none of the passages it
cited has changed since; not expired), was stored through the gates (GS >= tau_gs, eq. 19) and
belongs to the question's corpus; :func:`pick_repeat` applies the text test to the top-K matches of
eq. 7, the repository the rest. Only the text decides what is a repeat: an embedding threshold
cannot tell a rephrasing from a question of the same template about other entities (2Wiki's "Who
was born first, A or B?"), whose answers differ. :class:`BoundedIdSet` remembers the experiences
found stored without the gates (a verdict written once, at the insert), so that a repeat of one of
them is not looked up again. Pure: no database, no model.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["BoundedIdSet", "pick_repeat", "question_key"]


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


class BoundedIdSet:
    """A thread-safe set of at most ``capacity`` ids: adding one more forgets the id added or found
    longest ago (a membership test counts as finding it)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._ids: OrderedDict[int, None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, item: object) -> bool:
        with self._lock:
            if item in self._ids:
                self._ids.move_to_end(item)  # type: ignore[arg-type]  # present, so an int
                return True
            return False

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)

    def add_all(self, ids: Iterable[int]) -> None:
        with self._lock:
            for i in ids:
                self._ids[int(i)] = None
                self._ids.move_to_end(int(i))
            while len(self._ids) > self.capacity:
                self._ids.popitem(last=False)
