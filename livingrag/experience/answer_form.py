"""Does an answer have the form its question asks for? A check before grounding (not in the paper).

Eq. 15-19 ask whether the answer is supported by the passages, not whether it answers the
question: "When did Lothair II's mother die?" answered "Teutberga" is grounded (the passages name
her) and, stored, becomes a wrong scaffold. These rules reject only clear mismatches and accept
everything they cannot read:

* a choice between named options ("..., A or B?"): the answer must name one of them;
* "when", "what year", "what date", "which year/decade/century": the answer must hold a number, a
  year, a month, a season or a century/decade word;
* "how many", "how much", "how old", "how long", "how far": the answer must hold a number;
* a yes/no question (it opens with an auxiliary verb and has no "or"): the answer must be yes or
  no; and an answer of "yes"/"no" to a question that is neither that nor a choice is a mismatch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"[0-9]+|[^\W\d_]+")
_YES_NO = {"yes", "no"}
_AUXILIARIES = {
    "is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could", "will",
    "would", "should", "shall", "may", "might", "must",
}  # fmt: skip
_MONTHS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
}  # fmt: skip
_TIME_WORDS = {
    "century", "centuries", "decade", "bc", "bce", "ad", "ce", "today", "yesterday", "ago", "present", "spring",
    "summer", "autumn", "fall", "winter", "season", "morning", "evening", "night", "week", "year", "years",
}  # fmt: skip
_NUMBER_WORDS = {
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty",
    "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred", "thousand", "million", "billion",
    "dozen", "once", "twice", "none", "first", "second", "third", "half",
}  # fmt: skip
_ORDINAL = re.compile(r"^\d+(st|nd|rd|th|s)$")
_WHEN = re.compile(r"^(when|what (year|date|day|month|time)|which (year|date|day|month|decade|century)|in what year)\b")
_HOW_MUCH = re.compile(r"^(how (many|much|old|long|far|tall|big|large|often))\b")
_OPTIONS = re.compile(r",\s*([^,?]+?)\s+or\s+([^,?]+?)\s*\?\s*$", re.IGNORECASE)
_ARTICLES = {"the", "a", "an"}


@dataclass(frozen=True)
class FormCheck:
    """``fits``: False only for a clear mismatch; ``expected``: what the question asks for."""

    fits: bool
    expected: str | None = None
    reason: str | None = None


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _WORD.findall(text or "")]


def _content(text: str) -> set[str]:
    return {t for t in _tokens(text) if t not in _ARTICLES}


def options(question: str) -> tuple[str, str] | None:
    """The two named options of "..., A or B?" (``None`` when the question offers none)."""
    m = _OPTIONS.search(" ".join((question or "").split()))
    if m is None:
        return None
    a, b = m.group(1).strip(), m.group(2).strip()
    return (a, b) if a and b else None


def _holds_number(tokens: list[str]) -> bool:
    return any(t.isdigit() or t in _NUMBER_WORDS or _ORDINAL.match(t) for t in tokens)


def _holds_time(tokens: list[str]) -> bool:
    return _holds_number(tokens) or any(t in _MONTHS or t in _TIME_WORDS for t in tokens)


def check_answer_form(question: str, answer: str) -> FormCheck:
    """The rules of the module doc, in that order; an empty answer or question always fits."""
    q = " ".join((question or "").split())
    a = " ".join((answer or "").split()).strip(" .")
    if not q or not a:
        return FormCheck(True)
    ql = q.lower()
    first = ql.split()[0]
    toks = _tokens(a)
    is_yes_no = a.lower() in _YES_NO
    opts = options(q)
    if opts is not None:
        ans = _content(a)
        words = [w for w in (_content(o) for o in opts) if w]
        if not words:
            return FormCheck(True)  # options made of articles alone: nothing to compare
        named = any(ans and (ans <= w or w <= ans) for w in words)
        if named:
            return FormCheck(True, "one of the options")
        if is_yes_no and first in _AUXILIARIES:
            return FormCheck(True, "yes/no")  # "Is A older, B or C?" style questions: leave them be
        return FormCheck(False, "one of the options", f"the answer names neither {opts[0]!r} nor {opts[1]!r}")
    if first in _AUXILIARIES and " or " in ql:
        return FormCheck(True)  # "Was A or B born first?": a choice this rule cannot parse
    if first in _AUXILIARIES:
        if is_yes_no:
            return FormCheck(True, "yes/no")
        return FormCheck(False, "yes/no", "a yes/no question answered with neither yes nor no")
    if is_yes_no:
        return FormCheck(False, None, "a yes/no answer to a question that is not a yes/no question")
    if _WHEN.match(ql):
        if _holds_time(toks):
            return FormCheck(True, "a time")
        return FormCheck(False, "a time", "the question asks when; the answer holds no date, year or number")
    if _HOW_MUCH.match(ql):
        if _holds_number(toks):
            return FormCheck(True, "a quantity")
        return FormCheck(False, "a quantity", "the question asks how many or how much; the answer holds no number")
    return FormCheck(True)
