"""The grounding gate's claim extraction and aggregation (paper eq. 15-16, 19).

    g_i = max_{p_j in D_used} P_NLI(entail | p_j, cl_i)          (eq. 15)
    GS  = (1/M) sum_i 1[g_i >= tau_nli]                           (eq. 16)
    store only if GS >= tau_gs; conf = GS                         (eq. 19, grounding half)

Atomic claims come from the explanation (one per sentence or semicolon clause, discourse markers
stripped, questions and meta sentences such as "Let's find..." dropped) and from the answer (a
declarative "The answer to <question> is <answer>." claim; yes/no answers add none since only the
explanation can ground them). Following appendix C, the premises are not whole passages but
evidence units: windows of up to two consecutive sentences of a used passage, prefixed by its
title, of which a verifier keeps the ``K_g`` nearest per claim.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from livingrag.experience.sentences import split_sentences

_MARKERS = re.compile(
    r"^(?:(?:step\s*\d+\s*[:.)-]|\d+[.)]|[-*•]|first(?:ly)?|second(?:ly)?|third(?:ly)?|next|then|finally|so|thus|"
    r"therefore|hence|also|additionally|moreover|furthermore|however|in conclusion|in summary|overall|"
    r"(?:we|i) (?:know|see|find|found|learn|note|can see) that|it is (?:known|stated|mentioned) that|"
    r"(?:based on|according to|from) (?:the )?(?:passage|passages|context|evidence|document|text)s?(?: \d+)?"
    r"(?: above)?|this means(?: that)?)\s*[,:]?\s+)+",
    re.IGNORECASE,
)
_META = re.compile(
    r"^(?:let'?s|let me|let us|we need|i need|we must|i must|to answer|to determine|to find|the question|"
    r"this question|now,? (?:we|i|let)|i will|we will|i'll|we'll|i think|i'm not sure|we should|i should|"
    r"answer\s*:|final answer|reasoning\s*:|explanation\s*:|thought\s*:|none of the passages|"
    r"the passages? (?:do|does) not)",
    re.IGNORECASE,
)
_YES_NO = {"yes", "no", "yes.", "no.", "true", "false"}
MIN_CLAIM_WORDS = 3


@dataclass(frozen=True)
class Claim:
    """One atomic claim to verify. ``source`` is "explanation" or "answer"; an answer claim also
    carries the question and the bare answer so that verifiers can check them separately."""

    text: str
    source: str = "explanation"
    question: str | None = None
    answer: str | None = None


@dataclass(frozen=True)
class EvidenceUnit:
    """A premise: up to two consecutive sentences of one used passage, prefixed by its title."""

    passage_id: int
    text: str


def _clean(sentence: str) -> str:
    s = _MARKERS.sub("", sentence.strip()).strip()
    return s[:1].upper() + s[1:] if s else s


def extract_claims(
    explanation: str, answer: str, question: str, max_claims: int, *, yes_no_answer_claim: bool = False
) -> list[Claim]:
    """Atomic claims from the explanation and the answer, at most ``max_claims`` (the answer
    claim is always kept). ``yes_no_answer_claim`` gives a yes/no answer its answer claim too (for
    a verifier that judges the answer against the question, such as the judge)."""
    answer = " ".join((answer or "").split())
    question = " ".join((question or "").split())
    answer_claim: Claim | None = None
    if answer and (yes_no_answer_claim or answer.lower() not in _YES_NO):
        answer_claim = Claim(
            text=f'The answer to "{question}" is {answer.rstrip(".")}.',
            source="answer",
            question=question,
            answer=answer,
        )
    budget = max_claims - (1 if answer_claim else 0)
    seen: set[str] = set()
    claims: list[Claim] = []
    for sentence in split_sentences(explanation or ""):
        for clause in sentence.split(";"):
            if _META.match(clause.strip()):
                continue
            text = _clean(clause)
            if not text or text.endswith("?") or _META.match(text):
                continue
            if len(re.findall(r"\w+", text)) < MIN_CLAIM_WORDS:
                continue
            key = text.lower().rstrip(".")
            if key in seen:
                continue
            seen.add(key)
            claims.append(Claim(text=text))
    claims = claims[: max(budget, 0)]
    if answer_claim is not None:
        claims.append(answer_claim)
    return claims


def evidence_units(passages: Sequence[tuple[int, str, str]]) -> list[EvidenceUnit]:
    """Windows of up to two consecutive sentences of each ``(passage_id, title, text)``, each
    prefixed by the title unless the window already names it."""
    units: list[EvidenceUnit] = []
    for pid, title, text in passages:
        sentences = split_sentences(text)
        if not sentences:
            continue
        windows = [" ".join(sentences[i : i + 2]) for i in range(max(len(sentences) - 1, 1))]
        title = (title or "").strip()
        for w in windows:
            prefix = f"{title}. " if title and title.lower() not in w.lower() else ""
            units.append(EvidenceUnit(passage_id=int(pid), text=prefix + w))
    return units


def claim_support(probabilities: Sequence[Sequence[float]]) -> np.ndarray:
    """Eq. 15: ``g_i = max_j P(entail | premise_j, claim_i)``; a claim with no premise scores 0."""
    return np.array([max(row) if len(row) else 0.0 for row in probabilities], dtype=np.float64)


def grounding_score(g: Sequence[float] | np.ndarray, tau_nli: float) -> float:
    """Eq. 16: the share of claims with ``g_i >= tau_nli``; 0 when there is no claim (nothing
    supports a candidate that states nothing checkable)."""
    arr = np.asarray(g, dtype=np.float64)
    if arr.size == 0:
        return 0.0
    return float(np.mean(arr >= tau_nli))


def passes_grounding(gs: float, tau_gs: float) -> bool:
    """Eq. 19 (grounding half): ``GS >= tau_gs``."""
    return gs >= tau_gs
