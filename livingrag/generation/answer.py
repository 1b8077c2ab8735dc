"""Parse a model's reply into a short final answer and the reasoning that led to it.

Contract (what :func:`parse_answer` guarantees):

* ``answer`` is one line, stripped of markdown emphasis, surrounding quotes, a trailing full stop and
  trailing explanation ("..., because ...", a second sentence starting "This ..."). It is never
  longer than the reply itself and is empty only when the reply is empty.
* The last explicit answer marker wins: ``Answer:``, ``Final answer:``, ``**Answer:**``,
  ``Answer -``, ``### Answer`` followed by the answer on the next line, full-width colons, any case.
* ``explanation`` is the reasoning text before that marker with its ``Thought:`` / ``Evidence:`` /
  ``Reasoning:`` label removed (``<think>`` blocks of reasoning models included); empty when the
  model gave none.
* Without a marker (``marker_found`` is False) the answer falls back, in order, to the phrase after
  "the answer is", a concluding sentence ("Therefore, ..."), a reply that is one short line, and
  finally the whole reply on one line (LinearRAG's own fallback), so that nothing the model said is
  lost. Yes/no answers are reduced to "Yes" / "No".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ParsedAnswer", "parse_answer", "parse_verdict"]


@dataclass(frozen=True)
class ParsedAnswer:
    """A reply split into the final answer and the explanation before it."""

    answer: str
    explanation: str
    marker_found: bool
    raw: str


_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S | re.I)
# An answer marker at the start of a line or after sentence punctuation / whitespace:
# "Answer:", "Final Answer:", "**Answer**:", "**Answer:**", "Answer -", "### Answer", "ANSWER：".
_MARKER = re.compile(
    r"""(?:^|(?<=[\s.!?*#>\-|]))           # start of text, or after whitespace/punctuation/markdown
        [*_#>\s]*                          # markdown emphasis or heading marks
        (?:final|short|correct)?\s*answer  # the word, optionally qualified
        (?:\s*\(\s*short\s*\))?            # "Answer (short):"
        [*_]*                              # closing emphasis before the colon
        \s*(?::|：|-\s|–\s|—\s|=)\s*       # the separator
        [*_]*                              # closing emphasis after the colon
      | ^[ \t]*[#*_]+[ \t]*(?:final\s+)?answer[ \t]*[*_]*[ \t]*$  # a heading line "### Answer"
    """,
    re.I | re.M | re.X,
)
_LABEL = re.compile(
    r"^\s*[*_#]*\s*(?:thought|thoughts|reasoning|evidence|explanation|analysis)\s*[*_]*\s*[:：]\s*", re.I
)
_ANSWER_IS = re.compile(
    r"\b(?:the\s+)?(?:final\s+|correct\s+|short\s+)?answer\s+(?:is|would be|should be|was)\s*[:：]?\s*(.+)", re.I
)
_CONCLUDING = re.compile(r"^(?:therefore|thus|hence|so|in conclusion|in summary|consequently)\b[,:]?\s*", re.I)
_QUOTES = "\"'`“”‘’«»"
# A new sentence that explains rather than answers ("X. This is because ...").
_TRAILING_SENTENCE = re.compile(
    r"[.!;]\s+(?:this|that|it|these|the|they|he|she|his|her|both|because|since|as|therefore|thus|so|"
    r"explanation|note|reason|according|based|from|in the|which)\b.*$",
    re.I,
)
_TRAILING_CLAUSE = re.compile(
    r"(?:,|;|\s[-–—])\s*(?:because|since|as (?:stated|mentioned|shown|per|noted)|according to|which (?:is|was)|"
    r"based on|as the passage|per the passage|as indicated)\b.*$",
    re.I,
)
_YES_NO = re.compile(r"^(yes|no)\b[\s,.;:!-]", re.I)
_ABBREV_END = re.compile(r"(?:\b[A-Z]|\b(?:Jr|Sr|St|Dr|Mr|Mrs|Ms|Inc|Ltd|Co|Corp|Bros|vs|etc))\.$")


def _strip_think(text: str) -> tuple[str, str]:
    thoughts = [m.group(1).strip() for m in _THINK.finditer(text)]
    return _THINK.sub(" ", text).strip(), "\n".join(t for t in thoughts if t)


def _clean_explanation(text: str) -> str:
    lines = [_LABEL.sub("", ln).rstrip() for ln in text.strip().splitlines()]
    return "\n".join(lines).strip()


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not re.fullmatch(r"[*_#>\-\s]+", line):
            return line
    return ""


def _clean_answer(ans: str) -> str:
    ans = ans.strip()
    ans = re.sub(r"^[\s>*\-•]+", "", ans)  # bullets, quotes, emphasis at the start
    ans = ans.replace("**", "").replace("__", "").strip()
    ans = re.sub(r"^(?:the\s+)?(?:final\s+|short\s+)?answer\s+(?:is|would be|was)\s*[:：]?\s*", "", ans, flags=re.I)
    ans = _TRAILING_CLAUSE.sub("", ans).strip()
    ans = _TRAILING_SENTENCE.sub("", ans).strip()
    # A trailing parenthetical is an aside: "Phoolwari (released in 1955)".
    if not ans.startswith("("):
        ans = re.sub(r"\s*\([^()]*\)\s*[.!]?$", "", ans).strip()
    for _ in range(3):
        before = ans
        ans = ans.strip().strip(_QUOTES).strip()
        if ans.endswith((".", "!")) and not _ABBREV_END.search(ans):
            ans = ans[:-1]
        ans = ans.rstrip(",;:").strip("*_` ")
        if ans == before:
            break
    m = _YES_NO.match(ans + " ")
    if m:
        return m.group(1).capitalize()
    return ans


def _fallback(body: str) -> tuple[str, str]:
    """(answer, explanation) when the model gave no marker."""
    matches = list(_ANSWER_IS.finditer(body))
    if matches:
        m = matches[-1]
        return _clean_answer(_first_line(m.group(1))), _clean_explanation(body[: m.start()])
    flat = " ".join(body.split())
    sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“])", flat) if s]
    for sentence in reversed(sentences):
        if _CONCLUDING.match(sentence):
            return _clean_answer(_CONCLUDING.sub("", sentence)), _clean_explanation(body)
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    if len(lines) == 1 and len(lines[0].split()) <= 12:
        return _clean_answer(_LABEL.sub("", lines[0])), ""
    return flat, _clean_explanation(body)


def parse_answer(text: str | None) -> ParsedAnswer:
    """Split a reply into (answer, explanation); see the module docstring for the contract."""
    raw = text or ""
    body, thinking = _strip_think(raw)
    markers = list(_MARKER.finditer(body))
    # The last marker followed by some text wins; a marker with nothing after it is ignored.
    for m in reversed(markers):
        answer = _clean_answer(_first_line(body[m.end() :]))
        if answer:
            explanation = _clean_explanation(body[: m.start()])
            if thinking:
                explanation = (thinking + "\n" + explanation).strip()
            return ParsedAnswer(answer=answer, explanation=explanation, marker_found=True, raw=raw)
    if body:
        answer, explanation = _fallback(body)
        explanation = (thinking + "\n" + explanation).strip()
    else:
        answer, explanation = _clean_answer(_first_line(thinking)), thinking
    return ParsedAnswer(answer=answer, explanation=explanation, marker_found=False, raw=raw)


_VERDICT = re.compile(r"\b(incorrect|not correct|wrong|correct|right)\b", re.I)


def parse_verdict(text: str | None) -> bool | None:
    """A judge's reply (figures 6 and 7) as True (correct), False (incorrect) or None (no verdict)."""
    m = _VERDICT.search(text or "")
    if not m:
        return None
    return m.group(1).lower() in ("correct", "right")
