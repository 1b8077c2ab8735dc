"""Repeat streams: a development stream with a share of its questions asked again later, verbatim or
differing only in case and punctuation, and what answer reuse saved on it. Pure (no database, no model).

    with_repeats(Q, s): round(s * |Q|) questions of Q, drawn at random, each asked once more at a
                        random later position, as a case/punctuation variant; the repeat's id is
                        "<id>#repeat" so that records pair it with its first asking.

Per system, over a run's records:

    llm_calls         = answers that reached the LLM (neither reused nor failed)
    completion_tokens = sum of completion tokens
    worse             = repeats answered wrong whose first asking was answered right (Contain)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from livingrag.evaluation.datasets import Question
from livingrag.evaluation.records import QueryRecord

__all__ = ["REPEAT_MARK", "RepeatStats", "repeat_stats", "variant_text", "with_repeats"]

REPEAT_MARK = "#repeat"


def variant_text(question: str, rng: random.Random) -> str:
    """``question`` verbatim or in other case, spacing and final punctuation (a repeat's wording)."""
    core = question.rstrip("?.! ")
    core = rng.choice([core, core.lower(), core.upper(), core.capitalize()])
    return rng.choice(["", " ", "  "]) + core + rng.choice(["?", "", "??", " ?", "!"])


def with_repeats(questions: Sequence[Question], share: float, *, seed: int = 0) -> tuple[Question, ...]:
    """The stream with ``round(share * len(questions))`` of its questions asked again later (docstring)."""
    if not 0 <= share <= 1:
        raise ValueError(f"repeat share must be between 0 and 1, got {share}")
    rng = random.Random(seed)
    stream = list(questions)
    k = round(share * len(stream))
    for original in rng.sample(list(questions), k):
        first = stream.index(original)
        at = rng.randint(first + 1, len(stream))
        stream.insert(
            at, replace(original, id=original.id + REPEAT_MARK, question=variant_text(original.question, rng))
        )
    return tuple(stream)


@dataclass(frozen=True)
class RepeatStats:
    """One system's run on a repeat stream (see the module docstring)."""

    system: str
    questions: int
    repeats: int
    reused: int
    llm_calls: int
    completion_tokens: int
    worse: int
    better: int


def repeat_stats(records: Sequence[QueryRecord]) -> list[RepeatStats]:
    """Per (system, order 0 or the first order) run: the figures of the module docstring."""
    out: list[RepeatStats] = []
    systems = list(dict.fromkeys(r.system for r in records))
    for system in systems:
        orders = sorted({r.order for r in records if r.system == system})
        run = [r for r in records if r.system == system and r.order == orders[0]]
        by_id = {r.question_id: r for r in run}
        repeats = [r for r in run if r.question_id.endswith(REPEAT_MARK)]
        worse = better = 0
        for r in repeats:
            first = by_id.get(r.question_id[: -len(REPEAT_MARK)])
            if first is None:
                continue
            worse += first.contain_correct and not r.contain_correct
            better += r.contain_correct and not first.contain_correct
        out.append(
            RepeatStats(
                system=system,
                questions=len(run),
                repeats=len(repeats),
                reused=sum(1 for r in run if r.reused_experience_id is not None),
                llm_calls=sum(1 for r in run if r.reused_experience_id is None and r.error is None),
                completion_tokens=sum(r.completion_tokens for r in run),
                worse=worse,
                better=better,
            )
        )
    return out
