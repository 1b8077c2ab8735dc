"""The answer step: render the QA prompt (passages + optional scaffold, eq. 14), call the LLM, parse.

Two prompt styles, both named, versioned templates in ``prompts/``:

* ``linearrag`` (``qa_linearrag``): LinearRAG's reading-comprehension prompt; the model reasons
  after "Thought:" and ends with "Answer:". Suits capable models (an OpenAI-compatible server).
* ``short`` (``qa_short``): one "Evidence:" line and one "Answer:" line. Suits the small offline
  models, which loop or drop the "Answer:" line on long chain-of-thought, and costs far fewer
  completion tokens; the evidence line still gives the experience store an explanation to keep.

The scaffold (``scaffold`` template) is a related question answered earlier, with its key
reasoning and answer, marked as a reference that may not apply. Findings (``findings`` and
``finding``; beyond the paper) state earlier answers as facts, one line each, with their names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from livingrag.config import LLMSettings
from livingrag.generation.answer import ParsedAnswer, parse_answer
from livingrag.generation.llm import LLM, Completion, Message, TokenCallback, takes_grammar, takes_streaming
from livingrag.generation.prompts import get_prompt

__all__ = [
    "AnswerStyle",
    "GeneratedAnswer",
    "QAPrompt",
    "Scaffold",
    "build_qa_prompt",
    "format_findings",
    "format_passages",
    "generate_answer",
    "resolve_answer_style",
]

AnswerStyle = Literal["linearrag", "short"]
_TEMPLATE: dict[str, str] = {"linearrag": "qa_linearrag", "short": "qa_short"}


class PassageLike(Protocol):
    # read-only, so frozen dataclasses (RetrievedPassage) match too
    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class Scaffold:
    """A stored experience shown to the model as a reference: its question, key reasoning, answer."""

    question: str
    reasoning: str
    answer: str


@dataclass(frozen=True)
class QAPrompt:
    """Rendered chat messages and which templates produced them (for the query log)."""

    messages: list[Message]
    prompt_id: str
    style: AnswerStyle
    scaffold_id: str | None
    grammar: str | None = None
    """The template's output grammar (GBNF), applied by providers that support one (the local model)."""


@dataclass(frozen=True)
class GeneratedAnswer:
    """The parsed answer, the explanation before it, and the raw completion with its token counts."""

    answer: str
    explanation: str
    marker_found: bool
    completion: Completion
    prompt: QAPrompt

    @property
    def parsed(self) -> ParsedAnswer:
        return ParsedAnswer(self.answer, self.explanation, self.marker_found, self.completion.text)


def resolve_answer_style(settings: LLMSettings) -> AnswerStyle:
    """``settings.answer_style``, with ``auto`` meaning short for the local model, linearrag otherwise."""
    if settings.answer_style == "auto":
        return "short" if settings.provider == "local" else "linearrag"
    return settings.answer_style


def format_passages(passages: Sequence[PassageLike | str], *, version: int | None = None) -> str:
    """Number the passages with the ``passage`` template ([1] title / text), separated by blank lines."""
    template = get_prompt("passage", version)
    blocks = []
    for i, p in enumerate(passages, start=1):
        title, text = ("", p) if isinstance(p, str) else (p.title or "", p.text)
        block = template.render_text(index=i, title=title.strip(), text=text.strip()).strip()
        if not title.strip():  # an untitled passage: "[1] text" rather than an empty title line
            block = block.replace(f"[{i}] \n", f"[{i}] ", 1)
        blocks.append(block)
    return "\n\n".join(blocks) + "\n"


def format_findings(findings: Sequence[Scaffold], *, with_answers: bool = True) -> str:
    """The ``findings`` block: one line per earlier experience (its question, answer and evidence, with
    names), under a header that says they answered other questions; empty when there is none.
    Without answers (``findings_evidence``): each line is the earlier question and its evidence alone,
    under a header that says the answers are left out, and a finding with no evidence is dropped."""
    if not with_answers:
        findings = [f for f in findings if f.reasoning.strip()]
    if not findings:
        return ""
    line = get_prompt("finding" if with_answers else "finding_evidence")
    facts = []
    for f in findings:
        values = {"question": " ".join(f.question.split()), "reasoning": " ".join(f.reasoning.split())}
        if with_answers:
            values["answer"] = " ".join(f.answer.split()).rstrip(".")
        facts.append(" ".join(line.render_text(**values).split()))
    header = get_prompt("findings" if with_answers else "findings_evidence")
    return header.render_text(facts="\n".join(facts)).strip() + "\n\n"


def build_qa_prompt(
    question: str,
    passages: Sequence[PassageLike | str],
    *,
    scaffold: Scaffold | None = None,
    findings: Sequence[Scaffold] = (),
    findings_with_answers: bool = True,
    style: AnswerStyle = "linearrag",
    version: int | None = None,
) -> QAPrompt:
    """Messages for one question: passages, then the findings (with or without their answers, see
    :func:`format_findings`) and the scaffold block when given, then the question (eq. 14, with the
    findings beyond the paper)."""
    if style not in _TEMPLATE:
        from livingrag.errors import InvalidInput

        raise InvalidInput(f"unknown answer style {style!r}; use one of {', '.join(_TEMPLATE)}")
    template = get_prompt(_TEMPLATE[style], version)
    scaffold_text = ""
    scaffold_id = None
    if scaffold is not None:
        block = get_prompt("scaffold")
        scaffold_text = (
            block.render_text(
                question=" ".join(scaffold.question.split()),
                reasoning=" ".join(scaffold.reasoning.split()) or "(none recorded)",
                answer=" ".join(scaffold.answer.split()),
            ).strip()
            + "\n\n"
        )
        scaffold_id = block.id
    context = format_findings(findings, with_answers=findings_with_answers) + scaffold_text
    messages = template.render(passages=format_passages(passages), scaffold=context, question=question.strip())
    return QAPrompt(
        messages=messages, prompt_id=template.id, style=style, scaffold_id=scaffold_id, grammar=template.grammar
    )


def generate_answer(
    llm: LLM, prompt: QAPrompt, *, max_tokens: int | None = None, on_token: TokenCallback | None = None
) -> GeneratedAnswer:
    """Call ``llm`` on ``prompt`` and parse the reply; LLM errors propagate unchanged.

    A provider that declares ``supports_grammar`` (the local model) also gets the template's output
    grammar, so that a small model cannot stray from the format; servers get the prompt alone.
    ``on_token`` is given the reply's text as the model makes it, token by token where the provider
    streams (``supports_streaming``), else all at once when the reply is complete.
    """
    streams = on_token is not None and takes_streaming(llm)
    extra: dict[str, Any] = {}  # the keywords only some providers take (see their supports_* flags)
    if prompt.grammar and takes_grammar(llm):
        extra["grammar"] = prompt.grammar
    if streams:
        extra["on_token"] = on_token
    completion = llm.complete(prompt.messages, max_tokens=max_tokens, **extra)
    if on_token is not None and not streams and completion.text:
        on_token(completion.text)
    parsed = parse_answer(completion.text)
    return GeneratedAnswer(
        answer=parsed.answer,
        explanation=parsed.explanation,
        marker_found=parsed.marker_found,
        completion=completion,
        prompt=prompt,
    )
