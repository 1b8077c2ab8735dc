"""The answer parser on realistic, messy model replies."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from livingrag.generation.answer import parse_answer, parse_verdict

# (reply, expected answer, expected explanation or None to skip, marker found)
CASES: list[tuple[str, str, str | None, bool]] = [
    # LinearRAG's format, as capable models write it
    (
        "Thought: Lothair II's mother is Ermengarde of Tours. She died on 20 March 851.\nAnswer: 20 March 851",
        "20 March 851",
        "Lothair II's mother is Ermengarde of Tours. She died on 20 March 851.",
        True,
    ),
    ("Thought: The passages say so.\nAnswer: 20 March 851.", "20 March 851", "The passages say so.", True),
    # markdown emphasis in every place models put it
    ("Thought: ...\n\n**Answer:** Phoolwari", "Phoolwari", "...", True),
    ('**Answer**: "Phoolwari".', "Phoolwari", "", True),
    ("__Answer:__ Finnmark county", "Finnmark county", "", True),
    ("*Answer*: `Berlin`", "Berlin", "", True),
    # case, qualifiers, separators
    ("ANSWER: Paris", "Paris", "", True),
    ("answer: paris", "paris", "", True),
    ("Final Answer: The answer is Finnmark county.", "Finnmark county", "", True),
    ("Reasoning first.\nFinal answer: June 1982", "June 1982", "Reasoning first.", True),
    ("Answer - U.S.", "U.S.", "", True),
    ("ANSWER： Berlin", "Berlin", "", True),
    ("Thought: x\nAnswer = 42", "42", "x", True),
    # answer on the line after the marker, or under a heading
    ("Answer:\n\nJohn Smith Jr.", "John Smith Jr.", "", True),
    ("Thought: blah\n### Answer\nSt. Maurice's Abbey", "St. Maurice's Abbey", "blah", True),
    ("Some thinking.\n\n**Final Answer**\n\n**Aas Ka Panchhi**", "Aas Ka Panchhi", "Some thinking.", True),
    # trailing explanation after the answer
    ("Answer: Phoolwari (released in 1955)", "Phoolwari", "", True),
    ("Answer: Ermengarde of Tours, because she was the mother of Lothair II.", "Ermengarde of Tours", "", True),
    ("Answer: 20 March 851. This is the date given in passage 2.", "20 March 851", "", True),
    ("Answer: Finnmark. The town of Hammerfest is in Finnmark.", "Finnmark", "", True),
    ("Answer: Berlin\nExplanation: passage 3 says he was born there.", "Berlin", "", True),
    ("Answer: Wallace Worsley, as stated in passage [2].", "Wallace Worsley", "", True),
    ("Answer: 'Doctor Zhivago' - according to the passages", "Doctor Zhivago", "", True),
    # yes/no questions
    ("Answer: Yes, both films are American.", "Yes", "", True),
    ("Thought: One is French, the other American.\nAnswer: no.", "No", None, True),
    ("Answer: NO - they differ", "No", "", True),
    # the short prompt's two-line format
    ("Evidence: Teutberga died 11 November 875.\nAnswer: 11 November 875", "11 November 875", None, True),
    (
        "Evidence: Passage 1 says the film was directed by X.\n\nAnswer: X",
        "X",
        "Passage 1 says the film was directed by X.",
        True,
    ),
    # several markers: the last one with content wins; an empty marker is skipped
    ("Answer: Berlin\nExplanation: the passage says so.\nAnswer: Munich", "Munich", None, True),
    ("Thought: I will give the answer: below.\nAnswer: Rome", "Rome", None, True),
    ("Answer: Oslo\nAnswer:", "Oslo", "", True),
    # reasoning models' <think> blocks
    ("<think>hmm, the mother is Ermengarde</think>\nAnswer: London", "London", "hmm, the mother is Ermengarde", True),
    # no marker: "the answer is ..." phrase, a concluding sentence, a bare short reply, or everything
    ("The answer is June 1982.", "June 1982", "", False),
    ("Both were born in Ohio, so the final answer is Ohio.", "Ohio", "Both were born in Ohio, so", False),
    ("Thought: A was born in 1950 and B in 1960. Therefore, A is older.", "A is older", None, False),
    ("Paris", "Paris", "", False),
    ('  "Paris"  ', "Paris", "", False),
    ("Yes.", "Yes", "", False),
    ("The Grand Budapest Hotel", "The Grand Budapest Hotel", "", False),
]


@pytest.mark.parametrize(("reply", "answer", "explanation", "marker"), CASES)
def test_parse_answer(reply: str, answer: str, explanation: str | None, marker: bool) -> None:
    parsed = parse_answer(reply)
    assert parsed.answer == answer
    assert parsed.marker_found is marker
    if explanation is not None:
        assert parsed.explanation == explanation
    assert parsed.raw == reply


def test_long_reply_without_any_answer_falls_back_to_the_whole_reply() -> None:
    reply = "The first passage talks about a film.\nThe second one mentions a director born in Rome in 1920."
    parsed = parse_answer(reply)
    assert not parsed.marker_found
    assert parsed.answer == " ".join(reply.split())
    assert parsed.explanation == reply


def test_empty_and_none_replies() -> None:
    for reply in ("", None, "   \n "):
        parsed = parse_answer(reply)
        assert parsed.answer == "" and parsed.explanation == "" and not parsed.marker_found


def test_explanation_keeps_multiline_reasoning_without_labels() -> None:
    reply = "Thought:\n1. X directed Film A.\n2. X was born in Rome.\nAnswer: Rome"
    parsed = parse_answer(reply)
    assert parsed.explanation == "1. X directed Film A.\n2. X was born in Rome."
    assert parsed.answer == "Rome"


def test_answer_is_one_line() -> None:
    parsed = parse_answer("Answer: Rome\nand then some more text\nover lines")
    assert parsed.answer == "Rome"


@given(st.text(max_size=300))
def test_parser_never_fails_and_answer_is_one_line(reply: str) -> None:
    parsed = parse_answer(reply)
    assert "\n" not in parsed.answer
    assert len(parsed.answer) <= len(reply)


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("correct", True),
        ("Correct.", True),
        ("'correct'", True),
        ("incorrect", False),
        ("Incorrect", False),
        ("The generated answer is incorrect.", False),
        ("not correct", False),
        ("INCORRECT", False),
        ("I cannot tell", None),
        ("", None),
    ],
)
def test_parse_verdict(reply: str, verdict: bool | None) -> None:
    assert parse_verdict(reply) is verdict
