"""Question templates for scaffold selection (paper eq. 11).

    T(q) = Mask(q): entity mentions, quoted spans and numeric expressions -> placeholders.  (eq. 11)

Masking order: quoted spans, then entity mentions (longest first, case-insensitive, whole words),
then dates, then other numbers. ``"Where was the director of 'Titanic' born in 1997?"`` becomes
``"Where was the director of [QUOTE] born in [DATE]?"``. When the caller has no NER mentions
(e.g. an experience stored without them), :func:`guess_mentions` finds capitalised spans.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ENT, QUOTE, NUM, DATE = "[ENT]", "[QUOTE]", "[NUM]", "[DATE]"

_QUOTED = re.compile(r"\"[^\"]+\"|“[^”]+”|‘[^’]+’|«[^»]+»|(?<![\w])'[^']+'(?![\w])")
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DATE = re.compile(
    r"\b(?:"
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+\d{{3,4}}"  # 3 March 1990, 3rd of March, 1990
    rf"|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{3,4}}"  # March 3, 1990
    rf"|{_MONTH}\s+\d{{3,4}}"  # March 1990
    r"|\d{4}-\d{2}-\d{2}"  # 1990-03-03
    r"|\d{1,2}/\d{1,2}/\d{2,4}"  # 3/3/1990
    r"|(?:1[0-9]|20)\d{2}s?"  # 1990, 1990s
    r")\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:st|nd|rd|th|%)?(?![\w])"
    r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|"
    r"hundred|thousand|million|billion)\b",
    re.IGNORECASE,
)
# Capitalised words that start questions or sentences and are not entities.
_NOT_ENTITY = {
    "who", "whom", "whose", "what", "when", "where", "which", "why", "how", "is", "are", "was", "were",
    "did", "do", "does", "has", "have", "had", "can", "could", "would", "will", "should", "the", "a",
    "an", "in", "on", "of", "for", "and", "or", "if", "i", "it", "this", "that", "these", "those",
    "name", "find", "tell", "give", "list", "between", "both", "he", "she", "his", "her", "hers", "they",
    "their", "its", "there", "then", "after", "before", "however", "also", "so", "thus", "therefore",
}  # fmt: skip
_TITLE_ARTICLES = {"The", "A", "An"}
_CAP_SPAN = re.compile(
    r"[A-Z][\w'’.\-]*(?:\s+(?:(?:of|the|de|del|da|di|von|van|der|la|le|du|and|&)\s+)*[A-Z0-9][\w'’.\-]*)*"
)


def guess_mentions(text: str) -> list[str]:
    """Capitalised spans ("University of Chicago", "Tom Hanks") that are not question words; a
    fallback for NER mentions. A capitalised article inside a sentence starts a title ("first,
    The Salt Road or ..."); at a sentence's start it is only the sentence's first word."""
    out: list[str] = []
    text = text or ""
    for m in _CAP_SPAN.finditer(text):
        span = m.group(0).rstrip(".'’-")
        words = span.split()
        before = text[: m.start()].rstrip()
        mid_sentence = bool(before) and before[-1] not in '.!?:;"“(['
        if mid_sentence and len(words) > 1 and words[0] in _TITLE_ARTICLES:
            out.append(" ".join(words))
            continue
        while words and words[0].lower() in _NOT_ENTITY:
            words = words[1:]
        if words:
            out.append(" ".join(words))
    return out


def mask(question: str, mentions: Iterable[str] | None = None) -> str:
    """Eq. 11: the question with quoted spans, entity mentions, dates and numbers replaced by
    ``[QUOTE]``, ``[ENT]``, ``[DATE]`` and ``[NUM]``; whitespace collapsed.

    ``mentions=None`` guesses them with :func:`guess_mentions`; an explicit empty list masks none.
    """
    text = " ".join((question or "").split())
    text = _QUOTED.sub(QUOTE, text)
    found = guess_mentions(text) if mentions is None else list(mentions)
    for mention in sorted({m.strip() for m in found if m and m.strip()}, key=len, reverse=True):
        if mention in (ENT, QUOTE, NUM, DATE):
            continue
        pattern = re.compile(r"(?<![\w\[])" + re.escape(mention) + r"(?![\w\]])", re.IGNORECASE)
        text = pattern.sub(ENT, text)
    text = _DATE.sub(DATE, text)
    text = _NUMBER.sub(NUM, text)
    return " ".join(text.split())


def has_placeholder(text: str) -> bool:
    """Whether ``text`` holds one of the masks' placeholders (``[ENT]``, ``[QUOTE]``, ``[NUM]``, ``[DATE]``)."""
    return any(p in (text or "") for p in (ENT, QUOTE, NUM, DATE))


_YES_NO = {"yes", "no"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def mask_scaffold(question: str, reasoning: str, answer: str) -> tuple[str, str, str]:
    """A scaffold (eq. 6's ``(q_k, KeySent, a_k)``) reduced to its reasoning pattern: every entity
    mention of the three parts (guessed as in :func:`guess_mentions`, plus the answer itself),
    quoted span, date and number becomes a placeholder, with the same rules as eq. 11's ``Mask``.
    A yes/no answer is kept (it names no entity). ``("Where was the director of Heat born?",
    "Heat was directed by Michael Mann. Michael Mann was born in Chicago.", "Chicago")`` becomes
    ``("Where was the director of [ENT] born?", "[ENT] was directed by [ENT]. [ENT] was born in
    [ENT].", "[ENT]")``."""
    a = " ".join((answer or "").split())
    keep_answer = a.lower().rstrip(".!") in _YES_NO
    # sentence by sentence, so that a name ending one sentence does not run into the next one's
    mentions = [m for part in (question, *_SENTENCE_END.split(reasoning or "")) for m in guess_mentions(part)]
    if a and not keep_answer:
        mentions.append(a)
    masked_answer = a if keep_answer else mask(a, mentions)
    return mask(question, mentions), mask(reasoning, mentions), masked_answer
