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
  no; and an answer of "yes"/"no" to a question that is neither that nor a choice is a mismatch;
* answer types, when the caller passes ``answer_labels`` (the spaCy NER labels found in the answer
  text, OntoNotes scheme): a question whose opening asks for a kind of thing (:data:`ANSWER_TYPES`)
  is a mismatch only when every label of its answer is one that kind cannot be. An answer with no
  entity, with a label the kind neither wants nor excludes (WORK_OF_ART, EVENT, PRODUCT, LAW, ...),
  or with labels of two sorts of which one could fit, fits. The kinds:

  - *a person or group* ("who", "whom", "whose"): wants PERSON, ORG, NORP; cannot be GPE, LOC,
    FAC, a date, a time, a number or a language. When the question's verb is one a state or an army
    can do (won, defeated, invaded, ruled, colonised, allied, ...: :data:`COLLECTIVE_VERBS`), GPE,
    LOC and FAC are allowed too ("Who won the war?" "France");
  - *a place* ("where", "in which/what country|city|county|...", "what is the place of birth",
    "what is the birthplace"): wants GPE, LOC, FAC, ORG (ORG because "Where did she study?" is
    answered "Harvard University", and hospitals, universities and companies are places of work,
    birth and death); cannot be PERSON, a date, a time, a number or a language. NORP ("French") is
    neither: a nationality is a poor place but may name one, so it fits;
  - *a nationality or country* ("what nationality", "what is the nationality"): wants NORP, GPE;
    cannot be PERSON, FAC, a date, a time or a number (LOC, ORG, LANGUAGE fit: "English");
  - *a time* ("what is/was the date|year|day of ...", which the "when" rule above does not read):
    wants DATE, TIME; cannot be PERSON, NORP, FAC, ORG, GPE, LOC, LANGUAGE, WORK_OF_ART or PRODUCT,
    and an answer that holds a number, a month or a time word always fits (EVENT fits: "during the
    Second World War").

  "when" and "how many" questions keep their word rules above (a label adds nothing there), and the
  labels are not read for choices and yes/no questions, which the first rules decide.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
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

_NUMERIC_LABELS = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})
COLLECTIVE_VERBS = frozenset({
    "won", "win", "wins", "defeated", "defeat", "defeats", "beat", "beaten", "invaded", "invade", "invades",
    "ruled", "rule", "rules", "colonized", "colonised", "colonize", "colonise", "conquered", "conquer",
    "occupied", "occupy", "annexed", "annex", "controlled", "control", "controls", "allied", "ally", "allies",
    "fought", "fight", "attacked", "attack", "declared", "signed", "sign", "hosted", "host", "hosts",
    "surrendered", "lost", "bombed", "captured", "recognized", "recognised", "owns", "owned", "bought",
})  # fmt: skip
"""Verbs of a "who" question whose subject may be a state or an army (then GPE, LOC, FAC fit)."""


@dataclass(frozen=True)
class AnswerType:
    """One kind of answer a question's opening asks for: the NER labels that kind may carry
    (``wants``, named in messages) and those it cannot (``excludes``); other labels are unknown."""

    name: str
    wants: tuple[str, ...]
    excludes: frozenset[str]

    @property
    def expected(self) -> str:
        """What a mismatch says was wanted, e.g. ``a place (GPE, LOC, FAC, ORG)``."""
        return f"{self.name} ({', '.join(self.wants)})"


PERSON_TYPE = AnswerType(
    "a person or group", ("PERSON", "ORG", "NORP"), frozenset({"GPE", "LOC", "FAC", "LANGUAGE"} | _NUMERIC_LABELS)
)
COLLECTIVE_TYPE = AnswerType(
    "a person, group or state",
    ("PERSON", "ORG", "NORP", "GPE", "LOC", "FAC"),
    frozenset({"LANGUAGE"} | _NUMERIC_LABELS),
)
PLACE_TYPE = AnswerType("a place", ("GPE", "LOC", "FAC", "ORG"), frozenset({"PERSON", "LANGUAGE"} | _NUMERIC_LABELS))
NATIONALITY_TYPE = AnswerType(
    "a nationality or country", ("NORP", "GPE"), frozenset({"PERSON", "FAC"} | _NUMERIC_LABELS)
)
TIME_TYPE = AnswerType(
    "a time",
    ("DATE", "TIME"),
    frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "LANGUAGE", "WORK_OF_ART", "PRODUCT"}),
)
_PLACE_NOUNS = (
    r"(country|countries|city|cities|town|village|county|state|province|region|continent|place|nation|island|"
    r"district|municipality|borough|neighbou?rhood|location|capital|river|mountain|lake|sea|ocean)"
)
_WHO = re.compile(r"^(who|whom|whose)\b")
_PLACE = re.compile(
    r"^(where\b|((in|of|from|at|to|into|on|near) )?(what|which) " + _PLACE_NOUNS + r"\b|"
    r"(what|which) (is|was|were|are) the ((place|city|town|location) of (birth|death|burial)|birthplace|hometown)\b)"
)
_NATIONALITY = re.compile(
    r"^((what|which) nationality\b|(what|which) (is|was|were|are) the (nationality|country of citizenship)\b)"
)
_DATE_OF = re.compile(r"^(what|which) (is|was|were|are) the ((birth|death) )?(date|year|day|month|time)\b")
ANSWER_TYPES: tuple[tuple[str, AnswerType], ...] = (
    ("who / whom / whose", PERSON_TYPE),
    ("where, in which country/city/..., what is the place of birth/death/burial", PLACE_TYPE),
    ("what nationality, what is the nationality", NATIONALITY_TYPE),
    ("what is/was the date/year/day of", TIME_TYPE),
)
"""The question openings read and the kind each asks for (documentation; :func:`answer_type` decides)."""


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


def answer_type(question: str) -> AnswerType | None:
    """The kind of answer ``question``'s opening asks for (module doc), or ``None`` for none read.

    Only the opening counts ("Where was the director of the film that was set in Paris born?" asks
    for a place, "What is the name of the airport in the city where ..." for nothing read here).
    """
    ql = " ".join((question or "").split()).lower()
    if _WHO.match(ql):
        return COLLECTIVE_TYPE if any(t in COLLECTIVE_VERBS for t in _tokens(ql)) else PERSON_TYPE
    if _NATIONALITY.match(ql):
        return NATIONALITY_TYPE
    if _PLACE.match(ql):
        return PLACE_TYPE
    if _DATE_OF.match(ql):
        return TIME_TYPE
    return None


def check_answer_type(question: str, answer: str, answer_labels: Sequence[str]) -> FormCheck:
    """The answer-type rule alone (module doc): a mismatch only when ``answer_labels`` is not empty
    and every label is one the question's kind excludes; a time question's answer that holds a
    number, a month or a time word always fits."""
    kind = answer_type(question)
    labels = [str(label).strip().upper() for label in answer_labels if str(label).strip()]
    if kind is None or not labels:
        return FormCheck(True, None if kind is None else kind.expected)
    if kind is TIME_TYPE and _holds_time(_tokens(answer)):
        return FormCheck(True, kind.expected)
    if all(label in kind.excludes for label in labels):
        found = ", ".join(dict.fromkeys(labels))
        shown = " ".join((answer or "").split())
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return FormCheck(False, kind.expected, f"the question asks for {kind.expected}, got {found} {shown!r}")
    return FormCheck(True, kind.expected)


def check_answer_form(question: str, answer: str, answer_labels: Sequence[str] | None = None) -> FormCheck:
    """The rules of the module doc, in that order; an empty answer or question always fits.

    ``answer_labels``: the NER labels found in ``answer`` (spaCy's OntoNotes labels, one per
    entity; :func:`livingrag.corpus.ner.answer_entity_labels`), or ``None`` when unknown: then the
    answer-type rule is skipped and only the word rules run.
    """
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
    if answer_labels is not None:
        return check_answer_type(q, a, answer_labels)
    return FormCheck(True)
