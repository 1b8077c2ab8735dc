"""Answer generation: LLM providers with token accounting, and named, versioned prompts.

Public API:

* :func:`build_llm` (``providers``): the configured :class:`LLM` (``openai`` or ``local``).
* :class:`LLM`, :class:`Completion` (``llm``): the provider interface and one call's result.
* :func:`build_qa_prompt`, :func:`generate_answer`, :class:`Scaffold`, :func:`resolve_answer_style`
  (``qa``): the answer step (passages + optional scaffold, eq. 14).
* :func:`parse_answer`, :func:`parse_verdict` (``answer``): replies to (answer, explanation), and
  judge replies to a verdict.
* :func:`get_prompt` (``prompts``): any named, versioned template.
"""

from livingrag.generation.answer import ParsedAnswer, parse_answer, parse_verdict
from livingrag.generation.llm import LLM, Completion, Message
from livingrag.generation.prompts import get_prompt
from livingrag.generation.providers import build_llm
from livingrag.generation.qa import (
    GeneratedAnswer,
    QAPrompt,
    Scaffold,
    build_qa_prompt,
    generate_answer,
    resolve_answer_style,
)

__all__ = [
    "LLM",
    "Completion",
    "GeneratedAnswer",
    "Message",
    "ParsedAnswer",
    "QAPrompt",
    "Scaffold",
    "build_llm",
    "build_qa_prompt",
    "generate_answer",
    "get_prompt",
    "parse_answer",
    "parse_verdict",
    "resolve_answer_style",
]
