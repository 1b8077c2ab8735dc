"""Answer reuse for repeated questions: the pure repeat test on hand-made questions (the pipeline end to
end is in tests/pipeline/test_pipeline_reuse.py)."""

from __future__ import annotations

from livingrag.experience.answer_reuse import pick_repeat, question_key

Q1 = "Where was the director of Silver Harbor born?"
Q2 = "In which town was the director of Silver Harbor born?"
REPEAT = "  where was the DIRECTOR of Silver Harbor born  "


def test_question_key_ignores_case_punctuation_and_spacing() -> None:
    assert (
        question_key("Where was the director of Silver Harbor born?") == "where was the director of silver harbor born"
    )
    assert question_key(REPEAT) == question_key(Q1)
    assert question_key("Who is Marta Quell's father?") == question_key("who is marta quells father")
    assert question_key("St. Louis, 1904!") == "st louis 1904"
    assert question_key("?!") == ""


def test_pick_repeat_takes_the_first_candidate_with_the_same_key() -> None:
    cands = [(4, "Who founded the Aurora Quartet?"), (7, "where was the director of silver harbor born"), (9, Q1)]
    assert pick_repeat(Q1, cands) == 7
    assert pick_repeat(Q2, cands) is None  # other words: not a repeat, however close in meaning
    assert pick_repeat("Who was born first, Marta Quell or Elina Saari?", cands) is None
    assert pick_repeat("???", [(1, "!!!")]) is None  # nothing to compare
