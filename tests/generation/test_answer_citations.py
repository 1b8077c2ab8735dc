"""``livingrag ask``'s answer as a person reads it: the answer, a short explanation ending in
numbered citations ``[n]``, and the sources with their titles (livingrag.generation.citations)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from rich.console import Console

from livingrag.cli import answer_cmd
from livingrag.generation.citations import MAX_EXPLANATION_CHARS, cite
from livingrag.types import RetrievedPassage

PASSAGES = (
    RetrievedPassage(
        11, "Nordline Freight Annual Review 2025", "Depots\nThe Tromsø depot is run by Halvard Lien.", 0.9
    ),
    RetrievedPassage(12, "Welcome to the Varik Studio", "Ilse Varik founded the studio in Tallinn in 2019.", 0.4),
    RetrievedPassage(13, "Winter timetable", "The ferry MS Teisten leaves at 07:15. Halvard Lien rides it.", 0.2),
)


@pytest.mark.parametrize(
    ("answer", "explanation", "numbers", "shown"),
    [
        # the model's own markers win
        ("Halvard Lien", "The depot is run by Halvard Lien [1].", (1,), "The depot is run by Halvard Lien [1]."),
        # a leading title (the model's habit) is cut and cites its passage
        (
            "Halvard Lien",
            "Nordline Freight Annual Review 2025, the Tromsø depot is run by Halvard Lien.",
            (1,),
            "The Tromsø depot is run by Halvard Lien. [1]",
        ),
        # else the passages that hold the answer
        ("Halvard Lien", "He runs the depot.", (1, 3), "He runs the depot. [1][3]"),
        # a yes/no answer: the passage sharing most of the explanation's words
        ("yes", "Ilse Varik founded the studio in Tallinn.", (2,), "Ilse Varik founded the studio in Tallinn. [2]"),
        # nothing shown: nothing claimed
        ("no", "Unrelated words entirely.", (), "Unrelated words entirely."),
        # a marker beyond the passages is no citation
        ("Oslo", "See [7].", (), "See [7]."),
    ],
)
def test_cite(answer: str, explanation: str, numbers: tuple[int, ...], shown: str) -> None:
    cited = cite(answer, explanation, PASSAGES)
    assert cited.numbers == numbers and cited.explanation == shown


def test_a_long_explanation_is_cut_short() -> None:
    cited = cite("x", "word " * 300, PASSAGES)
    assert len(cited.explanation) <= MAX_EXPLANATION_CHARS + 2 and cited.explanation.endswith("…")


@dataclass
class _Answer:
    """The fields of livingrag.pipeline's Answer that the CLI shows."""

    answer: str
    explanation: str
    passages: tuple[RetrievedPassage, ...]
    fused: tuple[object, ...] = ()
    scaffold: None = None
    findings: tuple[object, ...] = ()
    reused_from: int | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    system: str = "LivingRAG"
    prompt_tokens: int = 100
    completion_tokens: int = 9
    cost_usd: float = 0.0
    query_log_id: int | None = 42


def test_the_cli_prints_answer_why_and_numbered_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    out = Console(width=200, record=True, color_system=None)
    monkeypatch.setattr(answer_cmd, "console", out)
    a = _Answer("Halvard Lien", "He runs the Tromsø depot.", PASSAGES)
    answer_cmd._show(a, passages=1)  # type: ignore[arg-type]
    text = out.export_text()
    lines = text.splitlines()
    assert lines[0] == "Answer: Halvard Lien"
    assert lines[1] == "Why: He runs the Tromsø depot. [1][3]"
    assert lines[2] == "Sources:"
    assert lines[3].startswith("  [1] Nordline Freight Annual Review 2025 (passage 11, score 0.900)")
    assert "Depots The Tromsø depot is run by Halvard Lien." in lines[4]
    # a cited passage is listed even beyond --passages; an uncited one is not
    assert "[3] Winter timetable" in text and "[2] Welcome" not in text
    assert "query 42" in text
