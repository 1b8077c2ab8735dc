"""The answer-form check before grounding (livingrag.experience.answer_form), rule by rule."""

from __future__ import annotations

import pytest

from livingrag.experience.answer_form import check_answer_form, options


@pytest.mark.parametrize(
    ("question", "answer", "fits"),
    [
        # a choice between named options: one of them, in any case, with or without an article
        ("Which film came out first, The Salt Road or Glass Orchard?", "The Salt Road", True),
        ("Which film came out first, The Salt Road or Glass Orchard?", "glass orchard", True),
        ("Which film came out first, The Salt Road or Glass Orchard?", "Salt Road (2001)", True),
        ("Which film came out first, The Salt Road or Glass Orchard?", "Amber Coast", False),
        ("Which came out first, A or The?", "Amber Coast", True),  # options of articles alone: unreadable
        ("Which film came out first, The Salt Road or Glass Orchard?", "Salt Road", True),
        (
            "Which film has the director who was born later, Playing It Wild or I'll Be Going Now?",
            "William Duncan",
            False,
        ),
        # when: a date, a year, a month, a season or a number
        ("When did Lothair II's mother die?", "Teutberga", False),
        ("When did Lothair II's mother die?", "20 March 851", True),
        ("When did Lothair II's mother die?", "in the 9th century", True),
        ("In what year was Tern founded?", "2014", True),
        ("When does the monsoon arrive in Delhi?", "the middle of the summer", True),
        # how many / how much: a number, digits or words
        ("How many stores are there in Georgia?", "Mobile", False),
        ("How many stores are there in Georgia?", "thirty-five", True),
        ("How much does the Business plan cost per user per month?", "$12", True),
        # yes/no questions and yes/no answers
        ("Are both films from the same country?", "Argentina", False),
        ("Are both films from the same country?", "No", True),
        ("Did Orla Brennick direct Winter Harbour?", "yes.", True),
        ("Where was the director of Winter Harbour born?", "Yes", False),
        ("Was Angus Wagner or Juan Carlos Falcon born first?", "Angus Wagner", True),  # a choice, unparsed
        # anything the rules cannot read fits
        ("Where was the director of Winter Harbour born?", "Galway", True),
        ("Who founded Kestrel Pictures?", "Tomas Reinholt", True),
        ("", "Galway", True),
        ("When was it?", "", True),
    ],
)
def test_answer_form_rules(question: str, answer: str, fits: bool) -> None:
    assert check_answer_form(question, answer).fits is fits


def test_a_mismatch_says_what_was_expected_and_why() -> None:
    c = check_answer_form("When did Lothair II's mother die?", "Teutberga")
    assert c.expected == "a time" and c.reason is not None and "asks when" in c.reason
    c = check_answer_form("Which came out first, A Road or B Lane?", "C Street")
    assert c.expected == "one of the options" and "'A Road'" in (c.reason or "") and "'B Lane'" in (c.reason or "")


def test_options_are_the_two_names_after_the_last_comma() -> None:
    assert options("Which film came out first, The Salt Road or Glass Orchard?") == ("The Salt Road", "Glass Orchard")
    assert options("Who was born first, Zeng Yan or Stefan Nemanjic ?") == ("Zeng Yan", "Stefan Nemanjic")
    assert options("Where was the director of Winter Harbour born?") is None
