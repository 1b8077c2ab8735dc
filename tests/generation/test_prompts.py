"""The versioned prompt registry and the QA prompt builder (passages, scaffold of eq. 14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from livingrag.config import LLMSettings
from livingrag.errors import InvalidInput
from livingrag.generation.prompts import get_prompt, list_prompts, load_templates, select
from livingrag.generation.qa import Scaffold, build_qa_prompt, format_passages, resolve_answer_style
from livingrag.types import RetrievedPassage

EXPECTED = {
    "qa_linearrag",
    "qa_short",
    "passage",
    "scaffold",
    "judge_qa",
    "judge_support",
    "ner_passage",
    "ner_question",
}


def test_every_named_prompt_ships() -> None:
    assert {t.name for t in list_prompts()} >= EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_prompt_renders_with_exactly_its_fields(name: str) -> None:
    t = get_prompt(name)
    values = {f: f"<{f}>" for f in t.fields}
    if t.system is not None:
        msgs = t.render(**values)
        assert [m["role"] for m in msgs] == ["system", "user"]
        text = msgs[0]["content"] + msgs[1]["content"]
    else:
        text = t.render_text(**values)
    for f in t.fields:
        assert f"<{f}>" in text
    assert "{" not in text.replace("{{", "").replace("}}", "") or name.startswith("ner_")


def test_render_rejects_missing_and_unexpected_values() -> None:
    t = get_prompt("judge_qa")
    assert t.fields == {"pred", "gold"}
    with pytest.raises(InvalidInput, match=r"judge_qa.v1: missing values \['gold'\], unexpected values \['golden'\]"):
        t.render(pred="a", golden="b")
    with pytest.raises(InvalidInput, match=r"missing values \['gold', 'pred'\]"):
        t.render()
    with pytest.raises(InvalidInput, match="unexpected values"):
        get_prompt("scaffold").render_text(question="q", reasoning="r", answer="a", extra="x")


def test_render_text_refuses_a_chat_template() -> None:
    with pytest.raises(InvalidInput, match="has a system part"):
        get_prompt("judge_qa").render_text(pred="a", gold="b")


def test_unknown_names_and_versions_are_errors() -> None:
    with pytest.raises(InvalidInput, match=r"no prompt named 'nope'; known: .*qa_linearrag"):
        get_prompt("nope")
    with pytest.raises(InvalidInput, match=r"prompt 'qa_short' has no version 99; known: \[1, 2\]"):
        get_prompt("qa_short", 99)


def test_newest_version_is_chosen_and_older_ones_stay_reachable(tmp_path: Path) -> None:
    (tmp_path / "greet.v1.txt").write_text("Hello {name}")
    (tmp_path / "greet.v10.txt").write_text("System ten\n---user---\nHi {name}, v10\n")
    (tmp_path / "greet.v2.txt").write_text("Hey {name}")
    (tmp_path / "notes.txt").write_text("not a template")
    (tmp_path / "Bad-Name.v1.txt").write_text("ignored")
    cat = load_templates(tmp_path)
    assert set(cat) == {"greet"}
    newest = select(cat, "greet")
    assert newest.version == 10 and newest.id == "greet.v10"
    assert newest.render(name="Ann") == [
        {"role": "system", "content": "System ten"},
        {"role": "user", "content": "Hi Ann, v10"},
    ]
    assert select(cat, "greet", 2).render_text(name="Ann") == "Hey Ann"
    assert select(cat, "greet", 1).system is None


def test_literal_braces_survive_rendering(tmp_path: Path) -> None:
    (tmp_path / "json.v1.txt").write_text('Return {{"answer": ...}} for {question}')
    t = select(load_templates(tmp_path), "json")
    assert t.fields == {"question"}
    assert t.render_text(question="q") == 'Return {"answer": ...} for q'


def test_judge_prompts_follow_figures_6_and_7() -> None:
    fig6 = get_prompt("judge_qa").render(pred="Paris", gold="Paris, France")
    assert fig6[0]["content"] == "You are an expert evaluator."
    assert "Generated answer: Paris\n\nGold answer: Paris, France" in fig6[1]["content"]
    assert "Respond with ONLY 'correct' or 'incorrect'." in fig6[1]["content"]
    fig7 = get_prompt("judge_support").render(pred="Use Wix Bookings", gold="Wix Bookings")
    assert "Wix customer support" in fig7[0]["content"]
    assert "Generated answer:\nUse Wix Bookings" in fig7[1]["content"]
    assert "Leniency" in fig7[1]["content"]


def test_qa_prompt_without_scaffold_is_linearrag_shaped() -> None:
    passages = [
        RetrievedPassage(id=1, title="Lothair II", text="Lothair II was the son of Ermengarde of Tours.", score=0.9),
        RetrievedPassage(id=2, title="Ermengarde of Tours", text="Ermengarde died on 20 March 851.", score=0.8),
    ]
    p = build_qa_prompt("When did Lothair II's mother die?", passages, style="linearrag")
    assert p.prompt_id == "qa_linearrag.v1" and p.scaffold_id is None and p.style == "linearrag"
    system, user = p.messages[0]["content"], p.messages[1]["content"]
    assert '"Thought: "' in system and '"Answer: "' in system
    assert user == (
        "[1] Lothair II\nLothair II was the son of Ermengarde of Tours.\n\n"
        "[2] Ermengarde of Tours\nErmengarde died on 20 March 851.\n\n"
        "Question: When did Lothair II's mother die?\nThought: "
    )


def test_qa_prompt_with_scaffold_marks_it_as_a_reference() -> None:
    scaffold = Scaffold(
        question="When did Charles the Bald's mother die?",
        reasoning="Charles the Bald's mother was Judith.\n Judith died in 843.",
        answer="19 April 843",
    )
    p = build_qa_prompt(
        "When did Lothair II's mother die?", ["passage one", "passage two"], scaffold=scaffold, style="short"
    )
    assert p.prompt_id == "qa_short.v2" and p.scaffold_id == "scaffold.v1"
    user = p.messages[1]["content"]
    # order of eq. 14's context: passages, then the scaffold, then the question
    assert user.index("[2] passage two") < user.index("Reference") < user.index("Question:")
    assert "may not apply" in user
    assert "Earlier question: When did Charles the Bald's mother die?" in user
    assert "Key reasoning: Charles the Bald's mother was Judith. Judith died in 843." in user
    assert "Earlier answer: 19 April 843" in user
    assert user.endswith("Question: When did Lothair II's mother die?")


def test_format_passages_untitled_and_titled() -> None:
    assert format_passages(["alpha", "beta"]) == "[1] alpha\n\n[2] beta\n"
    p = RetrievedPassage(id=3, title="T", text=" body ", score=0.0)
    assert format_passages([p]) == "[1] T\nbody\n"


def test_answer_style_auto_follows_the_provider() -> None:
    assert resolve_answer_style(LLMSettings(provider="local")) == "short"
    assert resolve_answer_style(LLMSettings(provider="openai", base_url="http://x/v1")) == "linearrag"
    assert resolve_answer_style(LLMSettings(provider="local", answer_style="linearrag")) == "linearrag"


def test_unknown_answer_style_is_an_error() -> None:
    with pytest.raises(InvalidInput, match="unknown answer style"):
        build_qa_prompt("q", ["p"], style="verbose")  # type: ignore[arg-type]


def test_short_prompt_ships_an_output_grammar_for_in_process_models() -> None:
    assert get_prompt("qa_short", 1).grammar is None
    grammar = get_prompt("qa_short").grammar
    assert grammar is not None and 'root ::= "Evidence: " sentence "\\nAnswer: " answer' in grammar
    assert build_qa_prompt("q", ["p"], style="short").grammar == grammar
    assert build_qa_prompt("q", ["p"], style="linearrag").grammar is None


def test_findings_state_earlier_answers_with_their_names_before_the_scaffold() -> None:
    findings = [
        Scaffold(
            question="Who directed Glass Orchard?",
            reasoning="Glass Orchard is a 1994 film directed by Mara Quell.",
            answer="Mara Quell.",
        ),
        Scaffold(question="Where is Tern based?", reasoning="", answer="Oslo"),
    ]
    scaffold = Scaffold(question="When was X born?", reasoning="X was born in [DATE].", answer="[DATE]")
    p = build_qa_prompt(
        "When was the director of Glass Orchard born?",
        ["passage one"],
        scaffold=scaffold,
        findings=findings,
        style="short",
    )
    user = p.messages[1]["content"]
    assert user.index("[1] passage one") < user.index("Facts found earlier") < user.index("Reference")
    assert user.index("Reference") < user.index("Question: When was the director")
    assert "- Who directed Glass Orchard? Mara Quell. Glass Orchard is a 1994 film directed by Mara Quell.\n" in user
    assert "- Where is Tern based? Oslo.\n" in user  # no evidence recorded: question and answer alone
    assert "answers to other questions" in user
    # no findings: the prompt is what it was without them
    bare = build_qa_prompt("Q?", ["passage one"], style="short")
    assert bare.messages == build_qa_prompt("Q?", ["passage one"], findings=[], style="short").messages
    assert "Facts found earlier" not in bare.messages[1]["content"]


def test_findings_without_answers_state_only_what_earlier_questions_found() -> None:
    findings = [
        Scaffold(
            question="Who directed Glass Orchard?",
            reasoning="Glass Orchard is a 1994 film directed by Mara Quell.",
            answer="Halvard Quell",  # a wrong earlier answer never reaches the prompt
        ),
        Scaffold(question="Where is Tern based?", reasoning="  ", answer="Oslo"),  # no evidence: dropped
    ]
    p = build_qa_prompt(
        "When was the director of Glass Orchard born?",
        ["passage one"],
        findings=findings,
        findings_with_answers=False,
        style="short",
    )
    user = p.messages[1]["content"]
    assert "- Who directed Glass Orchard? Glass Orchard is a 1994 film directed by Mara Quell.\n" in user
    assert "Halvard" not in user and "Tern" not in user and "Oslo" not in user
    assert "answers are left out" in user and "Facts found earlier" not in user
    assert user.index("[1] passage one") < user.index("What earlier questions found") < user.index("Question: When")
    # only findings without evidence: no block at all
    none = build_qa_prompt("Q?", ["passage one"], findings=findings[1:], findings_with_answers=False, style="short")
    assert none.messages == build_qa_prompt("Q?", ["passage one"], style="short").messages
