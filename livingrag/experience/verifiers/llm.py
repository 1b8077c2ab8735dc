"""The LLM verifier: entailment asked of the configured chat model.

For each claim the model sees its K_g evidence units and answers yes / no (or a probability);
``yes`` counts as P(entail) = 1, ``no`` as 0, a number in [0, 1] as itself, anything else as 0.
The prompt is the versioned template ``grounding_entailment`` in ``livingrag/generation/prompts``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from livingrag.experience.grounding import Claim
from livingrag.experience.types import ClaimVerdict, UsedPassage
from livingrag.experience.verifiers.base import EvidenceSelector, TextEncoder
from livingrag.generation.llm import LLM

_NUMBER = re.compile(r"(?<![\d.])(?:0(?:\.\d+)?|1(?:\.0+)?|\.\d+)(?![\d.])")


def parse_entailment(reply: str) -> float | None:
    """Map a reply to P(entail): yes/entailed -> 1, no/not entailed/contradiction -> 0, a number in
    [0, 1] -> itself; ``None`` when the reply says none of these."""
    text = (reply or "").strip().lower()
    word = re.match(r"[\W_]*([a-z]+)", text)
    first = word.group(1) if word else ""
    if first in {"yes", "entailed", "entails", "entailment", "supported", "true"}:
        return 1.0
    if first in {"no", "not", "contradiction", "contradicted", "unsupported", "false", "neutral", "unclear"}:
        return 0.0
    m = _NUMBER.search(text)
    if m:
        return float(m.group(0))
    if re.search(r"\bnot (?:entailed|supported)\b|\bcontradict", text):
        return 0.0
    if re.search(r"\b(?:entailed|supported)\b", text):
        return 1.0
    return None


class LLMVerifier:
    """Asks ``llm`` whether the evidence entails each claim."""

    def __init__(self, llm: LLM, *, encoder: TextEncoder, evidence_k: int, max_tokens: int = 8) -> None:
        from livingrag.generation.prompts import get_prompt

        self.llm = llm
        self.prompt = get_prompt("grounding_entailment")
        self.name = f"llm:{llm.name}"
        self.max_tokens = max_tokens
        self.selector = EvidenceSelector(encoder, evidence_k)

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        units, _sims, top = self.selector.select(claims, passages)
        verdicts: list[ClaimVerdict] = []
        for c, idx in zip(claims, top, strict=True):
            if not idx:
                verdicts.append(ClaimVerdict(claim=c.text, source=c.source, score=0.0))
                continue
            evidence = "\n".join(f"[{n + 1}] {units[j].text}" for n, j in enumerate(idx))
            reply = self.llm.complete(
                self.prompt.render(evidence=evidence, claim=c.text), max_tokens=self.max_tokens, temperature=0.0
            )
            p = parse_entailment(reply.text)
            best = units[idx[0]]
            verdicts.append(
                ClaimVerdict(
                    claim=c.text,
                    source=c.source,
                    score=0.0 if p is None else p,
                    passage_id=best.passage_id,
                    evidence=best.text,
                )
            )
        return verdicts
