"""The openai provider end to end against a real OpenAI-compatible HTTP server on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from livingrag.config import LLMSettings
from livingrag.errors import ConfigError, LLMError, LLMTimeout, LLMUnavailable
from livingrag.generation.llm import LLM, Completion
from livingrag.generation.providers import build_llm
from livingrag.generation.providers.openai_provider import OpenAICompatibleLLM
from livingrag.testing.openai_server import OpenAICompatServer, Step, reply_for

MESSAGES = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "who wrote Hamlet"},
]


@pytest.fixture
def server() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer() as srv:
        yield srv


def make_llm(base_url: str, **kw: object) -> OpenAICompatibleLLM:
    values: dict[str, object] = {
        "provider": "openai",
        "base_url": base_url,
        "model": "test-model",
        "timeout_s": 5.0,
        "max_retries": 3,
        "retry_backoff_s": 0.01,
    }
    values.update(kw)
    llm = build_llm(LLMSettings(**values))  # type: ignore[arg-type]
    assert isinstance(llm, OpenAICompatibleLLM)
    return llm


def test_completion_text_and_usage_from_server(server: OpenAICompatServer) -> None:
    llm = make_llm(server.base_url, api_key=SecretStr("sk-test"))
    assert isinstance(llm, LLM)
    c = llm.complete(MESSAGES, max_tokens=17, temperature=0.3, stop=["\n\n"])
    assert isinstance(c, Completion)
    assert c.text == reply_for(MESSAGES) == "Answer: Hamlet wrote who"
    assert (c.prompt_tokens, c.completion_tokens, c.total_tokens) == (6, 4, 10)  # server's word counts
    assert c.usage_source == "server" and c.attempts == 1
    assert c.model == "test-model" and c.finish_reason == "stop" and c.latency_s > 0
    assert c.cost_usd(1.0, 2.0) == pytest.approx((6 * 1.0 + 4 * 2.0) / 1e6)
    req = server.requests[-1]
    assert req["path"] == "/v1/chat/completions"
    assert req["auth"] == "Bearer sk-test"
    body = req["body"]
    assert body["model"] == "test-model" and body["messages"] == MESSAGES
    assert body["max_tokens"] == 17 and body["temperature"] == 0.3 and body["stop"] == ["\n\n"]


def test_settings_defaults_apply_when_call_gives_none(server: OpenAICompatServer) -> None:
    llm = make_llm(server.base_url, max_tokens=99, temperature=0.0)
    llm.complete(MESSAGES)
    body = server.requests[-1]["body"]
    assert body["max_tokens"] == 99 and body["temperature"] == 0.0 and "stop" not in body


def test_missing_usage_is_estimated_and_flagged(server: OpenAICompatServer) -> None:
    server.script.append(Step(usage=False))
    c = make_llm(server.base_url).complete(MESSAGES)
    assert c.usage_source == "estimate"
    assert c.prompt_tokens > 0 and c.completion_tokens > 0


@pytest.mark.parametrize("statuses", [[429, 200], [503, 200], [429, 503, 500, 200], [408, 409, 502, 200]])
def test_transient_errors_are_retried_then_succeed(server: OpenAICompatServer, statuses: list[int]) -> None:
    server.script.extend(Step(status=s) for s in statuses)
    c = make_llm(server.base_url, max_retries=3).complete(MESSAGES)
    assert c.text == reply_for(MESSAGES)
    assert c.attempts == len(statuses) == len(server.requests)


def test_retry_after_header_is_honoured(server: OpenAICompatServer) -> None:
    server.script.extend([Step(status=429, headers={"Retry-After": "0.4"}), Step()])
    t0 = time.perf_counter()
    c = make_llm(server.base_url).complete(MESSAGES)
    assert time.perf_counter() - t0 >= 0.4
    assert c.attempts == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(server: OpenAICompatServer, status: int) -> None:
    server.script.extend([Step(status=status, error_message="bad things"), Step()])
    with pytest.raises(LLMError) as info:
        make_llm(server.base_url).complete(MESSAGES)
    assert not isinstance(info.value, (LLMUnavailable, LLMTimeout))
    assert len(server.requests) == 1
    assert f"HTTP {status}" in str(info.value) and "bad things" in str(info.value)


def test_persistent_server_errors_give_up_with_llm_unavailable(server: OpenAICompatServer) -> None:
    server.script.extend(Step(status=503, error_message="overloaded") for _ in range(10))
    with pytest.raises(LLMUnavailable, match=r"HTTP 503.*overloaded.*3 attempts"):
        make_llm(server.base_url, max_retries=2).complete(MESSAGES)
    assert len(server.requests) == 3


def test_unreachable_server_raises_llm_unavailable_quickly() -> None:
    with socket.socket() as s:  # a loopback port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = make_llm(f"http://127.0.0.1:{port}/v1", max_retries=2)
    t0 = time.perf_counter()
    with pytest.raises(LLMUnavailable, match=rf"could not connect to LLM server http://127.0.0.1:{port}/v1"):
        llm.complete(MESSAGES)
    assert time.perf_counter() - t0 < 3.0


def test_slow_server_raises_llm_timeout_within_the_timeout(server: OpenAICompatServer) -> None:
    server.script.append(Step(delay_s=3.0))
    llm = make_llm(server.base_url, timeout_s=0.5)
    t0 = time.perf_counter()
    with pytest.raises(LLMTimeout, match=r"did not answer within 0.5 s"):
        llm.complete(MESSAGES)
    elapsed = time.perf_counter() - t0
    assert 0.4 <= elapsed < 1.5
    assert len(server.requests) == 1  # a timeout is not retried


def test_concurrency_limit_bounds_requests_in_flight() -> None:
    with OpenAICompatServer(default_delay_s=0.25) as srv:
        llm = make_llm(srv.base_url, concurrency=2)
        errors: list[BaseException] = []

        def call() -> None:
            try:
                llm.complete(MESSAGES)
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=call) for _ in range(8)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=20)
        elapsed = time.perf_counter() - t0
    assert not errors
    assert len(srv.requests) == 8
    assert srv.max_in_flight == 2
    assert elapsed >= 4 * 0.25  # 8 requests, 2 at a time


def test_unbounded_server_sees_parallel_requests() -> None:
    """The control for the test above: with a higher limit the server does see more at once."""
    with OpenAICompatServer(default_delay_s=0.25) as srv:
        llm = make_llm(srv.base_url, concurrency=8)
        threads = [threading.Thread(target=llm.complete, args=(MESSAGES,)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=20)
    assert srv.max_in_flight > 2


def test_response_without_choices_is_an_llm_error(server: OpenAICompatServer) -> None:
    server.script.append(Step(choices=False))
    with pytest.raises(LLMError, match="no choices"):
        make_llm(server.base_url).complete(MESSAGES)


def test_wrong_path_is_a_404_naming_model_and_url(server: OpenAICompatServer) -> None:
    llm = make_llm(server.base_url.removesuffix("/v1") + "/nope")
    with pytest.raises(LLMError, match=r"HTTP 404.*LIVINGRAG_LLM__BASE_URL"):
        llm.complete(MESSAGES)


def test_openai_provider_needs_a_url_or_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="LIVINGRAG_LLM__BASE_URL"):
        build_llm(LLMSettings(provider="openai", model="gpt-4o-mini"))


def test_base_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="http"):
        LLMSettings(provider="openai", base_url="localhost:8000/v1")
