"""The judge verifier: one yes/no question per candidate, read as a probability.

The configured LLM sees the used passages (or the ``evidence_k`` evidence units nearest the answer
claim), the question and the proposed answer, and is asked whether the passages show the answer is
correct. The answer claim's support is

    g_answer = P(yes) / (P(yes) + P(no))                         (eq. 15's P(entail), judged)

over the first reply token's alternatives (``top_logprobs``), where P(yes) sums the probability of
every alternative that reads "yes" (any case, spacing or punctuation) and P(no) of every one that
reads "no". A server that reports no alternatives, or none of either word, falls back to the reply's
text (yes -> 1, no -> 0, else 0). The explanation's claims are not sent (one call per candidate);
they get the answer claim's score, so eq. 16's GS is 1 when g_answer >= tau_nli and 0 otherwise.
The prompt is the versioned template ``grounding_judge``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from livingrag.experience.grounding import Claim
from livingrag.experience.types import ClaimVerdict, UsedPassage
from livingrag.experience.verifiers.base import EvidenceSelector, TextEncoder
from livingrag.experience.verifiers.llm import parse_entailment
from livingrag.generation.llm import LLM, Completion, takes_logprobs

TOP_LOGPROBS = 10
"""Alternatives asked for the reply's first token."""

_WORD = re.compile(r"[^a-z]+")


def yes_probability(alternatives: Sequence[tuple[str, float]]) -> float | None:
    """P(yes) / (P(yes) + P(no)) over (token, natural-log probability) pairs; ``None`` when neither
    word is among them. A token counts as yes (no) when its letters, lower-cased, are "yes" ("no")."""
    yes = no = 0.0
    for token, logprob in alternatives:
        word = _WORD.sub("", token.lower())
        if word == "yes":
            yes += math.exp(logprob)
        elif word == "no":
            no += math.exp(logprob)
    if yes + no <= 0.0:
        return None
    return yes / (yes + no)


def judged_score(completion: Completion) -> float:
    """The judge's P(yes) from ``completion``: its first-token alternatives when they name yes or
    no, else its text (yes -> 1, no -> 0, anything else -> 0)."""
    p = yes_probability(completion.first_token_alternatives)
    if p is not None:
        return p
    parsed = parse_entailment(completion.text)
    return 0.0 if parsed is None else parsed


class JudgeVerifier:
    """Asks ``llm`` whether the used passages show that the answer is correct (one call)."""

    judges_answers = True
    """Asks for an answer claim even for yes/no answers (see ``extract_claims``)."""

    def __init__(
        self,
        llm: LLM,
        *,
        encoder: TextEncoder,
        evidence_k: int,
        evidence: str = "passages",
        max_passage_chars: int = 1200,
    ) -> None:
        from livingrag.generation.prompts import get_prompt

        if evidence not in ("passages", "units"):
            raise ValueError(f"evidence must be 'passages' or 'units', not {evidence!r}")
        self.llm = llm
        self.prompt = get_prompt("grounding_judge")
        self.name = f"judge:{llm.name}"
        self.evidence = evidence
        self.max_passage_chars = max_passage_chars
        self.selector = EvidenceSelector(encoder, evidence_k)

    def _evidence(self, claim: Claim, passages: Sequence[UsedPassage]) -> tuple[str, int | None, str | None]:
        """The evidence text, and the passage id and text of the unit nearest the claim."""
        units, _sims, top = self.selector.select([claim], passages)
        best = units[top[0][0]] if top and top[0] else None
        if self.evidence == "units":
            text = "\n".join(f"[{n + 1}] {units[j].text}" for n, j in enumerate(top[0])) if top else ""
        else:
            text = "\n".join(
                f"[{n + 1}] {p.title}: {p.text[: self.max_passage_chars]}" if p.title else f"[{n + 1}] {p.text}"
                for n, p in enumerate(passages)
            )
        return text, (best.passage_id if best else None), (best.text if best else None)

    def judge(self, question: str, answer: str, evidence: str) -> float:
        """P(yes) that ``evidence`` shows ``answer`` answers ``question``."""
        messages = self.prompt.render(evidence=evidence, question=question, answer=answer)
        if takes_logprobs(self.llm):
            reply = self.llm.complete(messages, max_tokens=1, temperature=0.0, top_logprobs=TOP_LOGPROBS)
        else:
            reply = self.llm.complete(messages, max_tokens=2, temperature=0.0)
        return judged_score(reply)

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        answer_claim = next((c for c in claims if c.source == "answer" and c.question and c.answer), None)
        if answer_claim is None or not passages:
            return [ClaimVerdict(claim=c.text, source=c.source, score=0.0) for c in claims]
        assert answer_claim.question is not None and answer_claim.answer is not None
        evidence, pid, best = self._evidence(answer_claim, passages)
        score = self.judge(answer_claim.question, answer_claim.answer, evidence)
        return [
            ClaimVerdict(
                claim=c.text,
                source=c.source,
                score=score,
                passage_id=pid if c is answer_claim else None,
                evidence=best if c is answer_claim else None,
            )
            for c in claims
        ]
