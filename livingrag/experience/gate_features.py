"""The features of a write-back candidate that the learned gate calibrates (beyond the paper;
see :mod:`livingrag.experience.calibration`).

Every candidate that passes the novelty gate gets them, and ``writeback_log.details.features``
keeps them, so a person's later verdict on the answer labels exactly what the gate saw:

================== ===========================================================================
``ns``             NS of eq. 18 (novelty against the active experiences)
``gs``             GS of eq. 17 (the grounding score; 0 when no claim could be checked)
``answer_claim``   the answer claim's support g_i (eq. 15), 0 without one
``explanation_min`` / ``explanation_mean``: the explanation claims' supports (1 without any)
``claims``         how many claims were checked
``form_fits``      the answer-form check's word rules accept the answer (1/0)
``type_fits``      the answer-type rule (NER labels of the answer) accepts it too (1/0)
``found_any``      the answer's words appear in a cited passage (1/0)
``found_count``    in how many cited passages
``first_rank``     1 / rank of the first cited passage holding them (0 if none)
``echo``           share of the answer's content words that are in the question
``answer_words``   the answer's content words
``yes_no``         the answer is yes or no (1/0)
``hedge``          the model says the passages do not tell (1/0)
``question_coverage``: share of the question's entities found in the cited passages
``cooccurrence``   the best share of the question's entities named by a passage holding the answer
================== ===========================================================================

Text heuristics over the candidate and its passages (the offline verifier's word helpers); no
database, no model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from livingrag.experience.types import ClaimVerdict, UsedPassage
from livingrag.experience.verifiers.offline import (
    answer_found,
    content_words,
    entity_word_sets,
    question_entity_coverage,
)

__all__ = ["FEATURES", "candidate_features"]

FEATURES: tuple[str, ...] = (
    "ns",
    "gs",
    "answer_claim",
    "explanation_min",
    "explanation_mean",
    "claims",
    "form_fits",
    "type_fits",
    "found_any",
    "found_count",
    "first_rank",
    "echo",
    "answer_words",
    "yes_no",
    "hedge",
    "question_coverage",
    "cooccurrence",
)
"""The features, in the order the calibrator's weights are stored."""

HEDGE = re.compile(
    r"\b(not (mentioned|stated|provided|specified|given|clear)|no (information|mention)|"
    r"does not (say|mention|state|specify)|unknown|cannot be determined|unclear)\b",
    re.I,
)


def candidate_features(
    *,
    query: str,
    answer: str,
    explanation: str,
    passages: Sequence[UsedPassage],
    verdicts: Sequence[ClaimVerdict],
    ns: float,
    gs: float | None,
    form_fits: bool,
    type_fits: bool,
) -> dict[str, float]:
    """The :data:`FEATURES` of one candidate (module docstring), each a float."""
    answer_scores = [v.score for v in verdicts if v.source == "answer"]
    explanation_scores = [v.score for v in verdicts if v.source != "answer"]
    texts = [f"{p.title} {p.text}" for p in passages]
    found = [answer_found(answer, t) for t in texts]
    rank = next((i + 1 for i, hit in enumerate(found) if hit), 0)
    a_words, q_words, q_entities = content_words(answer), content_words(query), entity_word_sets(query)
    cooccurrence = 0.0
    for t, hit in zip(texts, found, strict=True):
        if hit:
            p_words = content_words(t)
            share = sum(1 for e in q_entities if e <= p_words) / len(q_entities) if q_entities else 1.0
            cooccurrence = max(cooccurrence, share)
    return {
        "ns": float(ns),
        "gs": float(gs or 0.0),
        "answer_claim": max(answer_scores) if answer_scores else 0.0,
        "explanation_min": min(explanation_scores) if explanation_scores else 1.0,
        "explanation_mean": sum(explanation_scores) / len(explanation_scores) if explanation_scores else 1.0,
        "claims": float(len(verdicts)),
        "form_fits": float(form_fits),
        "type_fits": float(type_fits),
        "found_any": float(any(found)),
        "found_count": float(sum(found)),
        "first_rank": 1.0 / rank if rank else 0.0,
        "echo": len(a_words & q_words) / len(a_words) if a_words else 0.0,
        "answer_words": float(len(a_words)),
        "yes_no": float(answer.strip().lower().rstrip(".") in ("yes", "no")),
        "hedge": float(bool(HEDGE.search(f"{explanation} {answer}"))),
        "question_coverage": question_entity_coverage(query, " ".join(texts)) if texts else 0.0,
        "cooccurrence": cooccurrence,
    }
