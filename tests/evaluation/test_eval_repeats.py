"""Repeat streams: where repeats go, how they are worded, and what the report counts on them."""

from __future__ import annotations

import random

import pytest

from livingrag.evaluation.datasets import Question
from livingrag.evaluation.records import QueryRecord
from livingrag.evaluation.repeats import REPEAT_MARK, repeat_stats, variant_text, with_repeats
from livingrag.evaluation.report_text import repeats_section
from livingrag.experience.answer_reuse import question_key

QS = tuple(Question(id=f"q{i}", question=f"Who directed film number {i}?", answer=f"d{i}") for i in range(10))


def test_a_share_of_the_questions_is_asked_again_later_in_other_case_and_punctuation() -> None:
    stream = with_repeats(QS, 0.3, seed=1)
    assert len(stream) == 13 and [q for q in stream if not q.id.endswith(REPEAT_MARK)] == list(QS)
    repeats = [(i, q) for i, q in enumerate(stream) if q.id.endswith(REPEAT_MARK)]
    assert len(repeats) == 3 and len({q.id for _, q in repeats}) == 3
    for i, r in repeats:
        first = next(j for j, q in enumerate(stream) if q.id == r.id[: -len(REPEAT_MARK)])
        assert first < i  # later
        original = stream[first]
        assert question_key(r.question) == question_key(original.question) and r.answer == original.answer
    assert with_repeats(QS, 0.3, seed=1) == stream and with_repeats(QS, 0.0) == QS
    with pytest.raises(ValueError, match="between 0 and 1"):
        with_repeats(QS, 1.5)


def test_variants_keep_the_words() -> None:
    rng = random.Random(0)
    for _ in range(50):
        v = variant_text("Where was Marta Quell born?", rng)
        assert question_key(v) == "where was marta quell born"


def rec(
    system: str, qid: str, *, correct: bool, tokens: int, reused: int | None = None, error: str | None = None
) -> QueryRecord:
    return QueryRecord(system=system, order=0, position=0, question_id=qid, question="?", contain_correct=correct,
                       completion_tokens=tokens, reused_experience_id=reused, error=error)  # fmt: skip


def test_repeat_stats_count_llm_calls_tokens_and_worse_repeats() -> None:
    records = [
        rec("linear", "q0", correct=True, tokens=10),
        rec("linear", "q1", correct=False, tokens=10),
        rec("linear", "q0#repeat", correct=True, tokens=10),
        rec("linear", "q1#repeat", correct=True, tokens=10),
        rec("living", "q0", correct=True, tokens=8),
        rec("living", "q1", correct=False, tokens=9, error=None),
        rec("living", "q0#repeat", correct=True, tokens=0, reused=5),
        rec("living", "q1#repeat", correct=False, tokens=0, error="LLMUnavailable"),
    ]
    linear, living = repeat_stats(records)
    assert (linear.questions, linear.repeats, linear.reused, linear.llm_calls, linear.completion_tokens) == (
        4,
        2,
        0,
        4,
        40,
    )
    assert (linear.worse, linear.better) == (0, 1)
    assert (living.reused, living.llm_calls, living.completion_tokens, living.worse, living.better) == (1, 2, 17, 0, 0)
    text = repeats_section([vars(x) for x in (linear, living)])
    assert "| living | 4 | 2 | 1 | 2 (-50.0%) | 17 (-57.5%) | 0 / 0 |" in text
