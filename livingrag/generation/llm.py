"""The LLM interface every provider implements, and what one call returns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeGuard, runtime_checkable

Message = dict[str, str]
"""A chat message: {"role": "system" | "user" | "assistant", "content": ...}."""


@dataclass(frozen=True)
class Completion:
    """One LLM call's text and its token usage (from the server, or counted with the model's tokenizer)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    latency_s: float
    finish_reason: str | None = None
    usage_source: str = "server"
    """Where the token counts come from: "server" (the API's usage), "tokenizer" (counted with the
    model's own tokenizer) or "estimate" (the server reported none; about four characters a token)."""
    attempts: int = 1
    """HTTP attempts this call took (retries + 1); always 1 for in-process models."""
    token_logprobs: tuple[tuple[str, float], ...] = ()
    """When asked for (``top_logprobs=``) and the server reports them: each generated token's text
    and natural-log probability, in order."""
    first_token_alternatives: tuple[tuple[str, float], ...] = ()
    """When asked for (``top_logprobs=`` >= 1) and the server reports them: the first generated
    token's most likely tokens at that step with their natural-log probabilities, best first."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def cost_usd(self, price_prompt_per_m: float, price_completion_per_m: float) -> float:
        """cost = prompt_tokens * p_in / 1e6 + completion_tokens * p_out / 1e6."""
        return (self.prompt_tokens * price_prompt_per_m + self.completion_tokens * price_completion_per_m) / 1e6


def added(first: Completion, second: Completion) -> Completion:
    """``second`` with the tokens, latency and attempts of both calls (one answer that took two)."""
    return replace(
        second,
        prompt_tokens=first.prompt_tokens + second.prompt_tokens,
        completion_tokens=first.completion_tokens + second.completion_tokens,
        latency_s=first.latency_s + second.latency_s,
        attempts=first.attempts + second.attempts,
    )


@runtime_checkable
class LLM(Protocol):
    """A chat-completion model. Implementations are thread-safe and bound their own concurrency.

    A provider whose ``supports_grammar`` attribute is true also accepts ``grammar=`` (llama.cpp
    GBNF text) in :meth:`complete`; :func:`livingrag.generation.qa.generate_answer` uses it.
    """

    name: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
    ) -> Completion:
        """Generate a reply; raises :class:`livingrag.errors.LLMError` subclasses on failure."""
        ...


class GrammarLLM(LLM, Protocol):
    """An :class:`LLM` whose ``supports_grammar`` is true: :meth:`complete` also takes ``grammar=``."""

    supports_grammar: bool

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        grammar: str | None = None,
    ) -> Completion: ...


class LogprobLLM(LLM, Protocol):
    """An :class:`LLM` whose ``supports_logprobs`` is true: :meth:`complete` also takes
    ``top_logprobs=`` (None: not asked; 0: each token's log-probability; k: also the first token's
    k most likely alternatives) and fills :attr:`Completion.token_logprobs` and
    :attr:`Completion.first_token_alternatives`."""

    supports_logprobs: bool

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        top_logprobs: int | None = None,
    ) -> Completion: ...


TokenCallback = Callable[[str], None]
"""Called with each piece of text as the model makes it (a streamed completion)."""


class StreamingLLM(LLM, Protocol):
    """An :class:`LLM` whose ``supports_streaming`` is true: :meth:`complete` also takes ``on_token=``,
    called with each piece of the reply as the model makes it; the returned :class:`Completion` is the
    whole reply, as without streaming."""

    supports_streaming: bool

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion: ...


def takes_streaming(llm: LLM) -> TypeGuard[StreamingLLM]:
    """Whether ``llm`` declares ``supports_streaming`` (and so accepts ``on_token=``)."""
    return bool(getattr(llm, "supports_streaming", False))


def takes_logprobs(llm: LLM) -> TypeGuard[LogprobLLM]:
    """Whether ``llm`` declares ``supports_logprobs`` (and so accepts ``top_logprobs=``)."""
    return bool(getattr(llm, "supports_logprobs", False))


def takes_grammar(llm: LLM) -> TypeGuard[GrammarLLM]:
    """Whether ``llm`` declares ``supports_grammar`` (and so accepts ``grammar=``)."""
    return bool(getattr(llm, "supports_grammar", False))
