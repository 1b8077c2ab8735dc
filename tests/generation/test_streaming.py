"""Streamed completions (``on_token``) from the openai provider against a real OpenAI-compatible server
on loopback, and ``generate_answer`` with providers that stream and that do not."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from livingrag.config import LLMSettings
from livingrag.errors import LLMError, LLMTimeout, LLMUnavailable
from livingrag.generation.llm import Completion, takes_streaming
from livingrag.generation.providers import build_llm
from livingrag.generation.providers.openai_provider import OpenAICompatibleLLM
from livingrag.generation.qa import QAPrompt, generate_answer
from livingrag.testing.openai_server import OpenAICompatServer, Step, reply_for

MESSAGES = [{"role": "user", "content": "who wrote Hamlet"}]


@pytest.fixture
def server() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer() as srv:
        yield srv


def make_llm(base_url: str, **kw: object) -> OpenAICompatibleLLM:
    values: dict[str, object] = {"provider": "openai", "base_url": base_url, "model": "m", "timeout_s": 5.0}
    values |= {"max_retries": 2, "retry_backoff_s": 0.01} | kw
    llm = build_llm(LLMSettings(**values))  # type: ignore[arg-type]
    assert isinstance(llm, OpenAICompatibleLLM)
    return llm


def test_streamed_reply_arrives_piece_by_piece_and_equals_the_whole_reply(server: OpenAICompatServer) -> None:
    llm = make_llm(server.base_url)
    assert takes_streaming(llm)
    whole = llm.complete(MESSAGES)
    server.script.append(Step(token_delay_s=0.2))
    seen: list[tuple[float, str]] = []
    started = time.perf_counter()
    c = llm.complete(MESSAGES, on_token=lambda t: seen.append((time.perf_counter() - started, t)))
    assert "".join(t for _, t in seen) == c.text == whole.text == reply_for(MESSAGES)
    assert [t for _, t in seen] == ["Answer:", " Hamlet", " wrote", " who"]
    # the first piece came while the rest were still being sent (three more at 0.2 s each), not at the end
    assert time.perf_counter() - started - seen[0][0] >= 0.3
    assert (c.prompt_tokens, c.completion_tokens, c.usage_source) == (whole.prompt_tokens, 4, "server")
    assert c.finish_reason == "stop" and c.model == "m"
    body = server.requests[-1]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_stream_without_usage_is_estimated(server: OpenAICompatServer) -> None:
    server.script.append(Step(usage=False))
    c = make_llm(server.base_url).complete(MESSAGES, on_token=lambda t: None)
    assert c.usage_source == "estimate" and c.completion_tokens > 0


def test_failure_before_the_first_piece_is_retried(server: OpenAICompatServer) -> None:
    server.script.extend([Step(status=503), Step()])
    pieces: list[str] = []
    c = make_llm(server.base_url).complete(MESSAGES, on_token=pieces.append)
    assert c.attempts == 2 and "".join(pieces) == c.text


def test_error_event_after_pieces_is_not_retried(server: OpenAICompatServer) -> None:
    server.script.append(Step(stream_error_after=2, error_message="the model crashed"))
    pieces: list[str] = []
    with pytest.raises(LLMError, match="the model crashed"):
        make_llm(server.base_url).complete(MESSAGES, on_token=pieces.append)
    assert pieces == ["Answer:", " Hamlet"] and server.served == 1


def test_timeout_event_mid_stream_is_a_timeout(server: OpenAICompatServer) -> None:
    server.script.append(Step(stream_error_after=1, stream_error_type="timeout", error_message="did not finish"))
    with pytest.raises(LLMTimeout, match="did not finish"):
        make_llm(server.base_url).complete(MESSAGES, on_token=lambda t: None)


def test_exhausted_retries_before_any_piece_is_unavailable(server: OpenAICompatServer) -> None:
    server.script.extend([Step(status=503)] * 3)
    with pytest.raises(LLMUnavailable, match="HTTP 503"):
        make_llm(server.base_url).complete(MESSAGES, on_token=lambda t: None)


class _WholeOnly:
    """A provider that cannot stream."""

    name = "whole"

    def complete(self, messages: object, **kw: object) -> Completion:
        return Completion(text="Evidence: x.\nAnswer: Paris", prompt_tokens=1, completion_tokens=2, model="w",
                          latency_s=0.0)  # fmt: skip


def test_generate_answer_gives_a_non_streaming_reply_at_once() -> None:
    pieces: list[str] = []
    prompt = QAPrompt(messages=[{"role": "user", "content": "q"}], prompt_id="p", style="short", scaffold_id=None)
    gen = generate_answer(_WholeOnly(), prompt, on_token=pieces.append)
    assert pieces == ["Evidence: x.\nAnswer: Paris"] and gen.answer == "Paris"


def test_generate_answer_streams_through_a_streaming_provider(server: OpenAICompatServer) -> None:
    pieces: list[str] = []
    prompt = QAPrompt(messages=MESSAGES, prompt_id="p", style="short", scaffold_id=None)
    gen = generate_answer(make_llm(server.base_url), prompt, on_token=pieces.append)
    assert len(pieces) == 4 and "".join(pieces) == gen.completion.text and gen.answer == "Hamlet wrote who"
