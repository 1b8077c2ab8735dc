"""Which of the passages given to the model an answer cites, as numbered citations ``[n]``.

The passages are numbered in the prompt as ``[1] title`` (the ``passage`` template), so ``[n]``
means the same passage to the model, in the prompt and in a citation. An answer cites:

1. the passages its explanation names with ``[n]`` markers, when it has any;
2. else the passage whose title the explanation begins with ("Nordline Review, the depot ...");
3. else the passages whose text holds the answer (at most :data:`MAX_CITED`; not for yes/no);
4. else the one passage sharing most of the explanation's words, when it shares at least half;
5. else none: nothing is claimed that the text does not show.

:func:`cite` returns the numbers and the explanation without the leading title (the model's habit
of starting its evidence with the passage's title), ``[n]`` markers appended when it had none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from livingrag.generation.qa import PassageLike

MAX_CITED = 3
MAX_EXPLANATION_CHARS = 400
_MARKER = re.compile(r"\[(\d{1,3})\]")
_WORD = re.compile(r"\w{3,}")
_YES_NO = {"yes", "no", "true", "false", "unknown", ""}


@dataclass(frozen=True)
class Cited:
    """The cited passages' numbers (1-based, prompt order) and the explanation to show."""

    numbers: tuple[int, ...]
    explanation: str


def _flat(text: str) -> str:
    return " ".join(text.casefold().split())


def _strip_title(explanation: str, passages: Sequence[PassageLike]) -> tuple[str, int | None]:
    flat = explanation.lstrip()
    for n, p in enumerate(passages, start=1):
        title = p.title.strip()
        if title and flat.casefold().startswith(title.casefold()):
            rest = flat[len(title) :]
            m = re.match(r"\s*(?:\[\d+\])?\s*[,:;\-–—]\s*", rest)
            if m:
                rest = rest[m.end() :]
                return rest[:1].upper() + rest[1:], n
    return explanation, None


def _short(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_EXPLANATION_CHARS:
        return text
    cut = text[:MAX_EXPLANATION_CHARS].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " …"


def cite(answer: str, explanation: str, passages: Sequence[PassageLike]) -> Cited:
    """The citations of ``answer`` with its ``explanation`` among ``passages`` (see the module docstring)."""
    numbers = [int(m) for m in _MARKER.findall(explanation) if 1 <= int(m) <= len(passages)]
    if numbers:
        return Cited(tuple(dict.fromkeys(numbers)), _short(explanation))
    text, by_title = _strip_title(explanation, passages)
    text = _short(text)
    chosen: list[int] = []
    if by_title is not None:
        chosen = [by_title]
    elif _flat(answer) not in _YES_NO and len(_flat(answer)) >= 2:
        needle = _flat(answer)
        chosen = [n for n, p in enumerate(passages, start=1) if needle in _flat(p.text)][:MAX_CITED]
    if not chosen and text:
        words = {w.casefold() for w in _WORD.findall(text)}
        if words:
            overlap = [
                (len(words & {w.casefold() for w in _WORD.findall(f"{p.title} {p.text}")}), n)
                for n, p in enumerate(passages, start=1)
            ]
            best, n = max(overlap, default=(0, 0))
            if best * 2 >= len(words):
                chosen = [n]
    if chosen and text:
        text = f"{text.rstrip()} " + "".join(f"[{n}]" for n in chosen)
    return Cited(tuple(chosen), text)


__all__ = ["MAX_CITED", "Cited", "cite"]
