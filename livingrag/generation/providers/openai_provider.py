"""Any OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama, llama.cpp server, ...).

Calls go through the ``openai`` package with its own retries switched off: this module retries
only transient failures (connection errors, HTTP 408/409/429/5xx) with exponential backoff and
jitter, honouring a server's ``Retry-After`` header; a client error (400/401/403/404/422) fails at
once. A timed-out request is not retried (a server that is too slow once is likely to be too slow
again, and retrying would multiply the wait): it raises :class:`~livingrag.errors.LLMTimeout`.
A semaphore bounds the requests in flight; it is released while a failed attempt waits for its
retry. Token usage comes from the server's ``usage`` field; a server that omits it gets an
estimate (about four characters per token) and ``Completion.usage_source == "estimate"``.

An error reply whose ``error.type`` is ``timeout`` (the server stopped a generation at its own
deadline, as the local model's process does) raises LLMTimeout too. A client whose
``supports_grammar`` is true sends ``grammar`` (llama.cpp GBNF text) in the request body, which
llama.cpp's server and the local model's process honour; the local provider
(:mod:`~livingrag.generation.providers.local`) talks to its model process through this class.
"""

from __future__ import annotations

import logging
import math
import os
import random
import threading
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import openai

from livingrag.config import LLMSettings
from livingrag.errors import ConfigError, LLMError, LLMTimeout, LLMUnavailable
from livingrag.generation.llm import Completion, Message, TokenCallback

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses retried besides every 5xx."""

_MAX_RETRY_AFTER_S = 30.0
_PLACEHOLDER_KEY = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any key


def estimate_tokens(text: str) -> int:
    """A rough token count (about four characters per token) for servers that report no usage."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def estimate_prompt_tokens(messages: Sequence[Message]) -> int:
    """Estimated prompt tokens of chat messages, with a few tokens of chat-format overhead each."""
    return sum(estimate_tokens(m.get("content") or "") + 4 for m in messages) + 2


def _retry_after(err: openai.APIStatusError) -> float | None:
    try:
        value = err.response.headers.get("retry-after")
        return min(float(value), _MAX_RETRY_AFTER_S) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def _server_message(err: openai.APIError) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(err, "message", "") or err)


def _error_type(err: openai.APIError) -> str | None:
    body = getattr(err, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    kind = inner.get("type") if isinstance(inner, dict) else None
    return kind if isinstance(kind, str) else None


def _pair(entry: Any) -> tuple[str, float] | None:
    token, logprob = getattr(entry, "token", None), getattr(entry, "logprob", None)
    if isinstance(token, str) and isinstance(logprob, int | float) and math.isfinite(logprob):
        return token, float(logprob)
    return None


def _token_logprobs(choice: Any) -> tuple[tuple[str, float], ...]:
    """``choices[0].logprobs.content`` as (token, logprob) pairs in order; empty when the server
    sent none, or when any entry is malformed (a partial sequence would misplace the answer)."""
    content = getattr(getattr(choice, "logprobs", None), "content", None) or []
    pairs = [_pair(entry) for entry in content]
    return () if any(p is None for p in pairs) else tuple(p for p in pairs if p is not None)


def _first_token_alternatives(choice: Any) -> tuple[tuple[str, float], ...]:
    """``choices[0].logprobs.content[0].top_logprobs`` as (token, logprob) pairs, best first; empty
    when the server sent none or something malformed."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return ()
    pairs: list[tuple[str, float]] = []
    for alt in getattr(content[0], "top_logprobs", None) or []:
        pair = _pair(alt)
        if pair is not None:
            pairs.append(pair)
    return tuple(sorted(pairs, key=lambda p: -p[1]))


class OpenAICompatibleLLM:
    """An :class:`~livingrag.generation.llm.LLM` over an OpenAI-compatible HTTP API.

    Thread-safe: one instance may be shared by every thread; at most ``settings.concurrency``
    requests are in flight at once.
    """

    supports_grammar = False
    """Whether ``complete`` sends ``grammar=`` to the server (set by the local provider)."""
    supports_logprobs = True
    """``complete`` takes ``top_logprobs=`` (OpenAI's ``logprobs``; a server that ignores it gives none)."""
    supports_streaming = True
    """``complete`` takes ``on_token=`` (OpenAI's ``stream``: server-sent chunks, usage in the last one)."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        retry_backoff_s: float | None = None,
        server_label: str | None = None,
        trust_env: bool = True,
    ) -> None:
        """``trust_env=False`` ignores proxy variables (HTTP_PROXY, ...): for a server on loopback."""
        key = settings.api_key.get_secret_value() if settings.api_key is not None else None
        key = key or os.environ.get("OPENAI_API_KEY") or None
        if not settings.base_url and key is None:
            raise ConfigError(
                "llm.provider=openai needs LIVINGRAG_LLM__BASE_URL (an OpenAI-compatible server such as "
                "http://localhost:8000/v1) or LIVINGRAG_LLM__API_KEY (for api.openai.com)"
            )
        self.settings = settings
        self.model = settings.model
        self.base_url = settings.base_url or "https://api.openai.com/v1"
        self.server_label = server_label or f"LLM server {self.base_url}"
        """How messages name the server (the local provider names its model process)."""
        self.name = f"openai:{settings.model}"
        self.max_retries = settings.max_retries
        self.backoff_s = settings.retry_backoff_s if retry_backoff_s is None else retry_backoff_s
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=key or _PLACEHOLDER_KEY,
            timeout=settings.timeout_s,
            max_retries=0,
            http_client=None if trust_env else openai.DefaultHttpxClient(trust_env=False),
        )
        self._warned_no_usage = False

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def count_tokens(self, text: str) -> int:
        """Estimated tokens of ``text`` (the server's tokenizer is not available client-side)."""
        return estimate_tokens(text)

    def _backoff(self, attempt: int, err: Exception) -> float:
        hinted = _retry_after(err) if isinstance(err, openai.APIStatusError) else None
        if hinted is not None:
            return hinted
        base = self.backoff_s * (2**attempt)
        return min(base, 20.0) * (0.5 + random.random() / 2)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        grammar: str | None = None,
        top_logprobs: int | None = None,
        on_token: TokenCallback | None = None,
    ) -> Completion:
        """One chat completion; raises LLMTimeout, LLMUnavailable or LLMError (see the module docstring).

        ``grammar`` is sent only when :attr:`supports_grammar` is true (else ignored).
        ``top_logprobs`` asks for each generated token's log-probability
        (:attr:`Completion.token_logprobs`) and, when 1-20, the first token's most likely
        alternatives (:attr:`Completion.first_token_alternatives`).
        ``on_token`` streams the reply (``stream: true``): it is called with each piece of text as the
        server sends it, and the returned completion is the whole reply. A failure before the first
        piece is retried as usual; one after it is not (the caller has shown part of a reply), and
        raises LLMUnavailable saying the reply broke off.
        """
        if top_logprobs is not None and not 0 <= top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be from 0 to 20, not {top_logprobs}")
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": self.settings.max_tokens if max_tokens is None else max_tokens,
            "temperature": self.settings.temperature if temperature is None else temperature,
        }
        if stop:
            request["stop"] = list(stop)
        if grammar and self.supports_grammar:
            request["extra_body"] = {"grammar": grammar}
        if top_logprobs is not None:
            request["logprobs"] = True
            if top_logprobs:
                request["top_logprobs"] = top_logprobs
        if on_token is not None:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        started = time.perf_counter()
        attempts = self.max_retries + 1
        last: Exception | None = None
        what = ""
        streamed = [False]  # whether on_token has been given any text: then nothing is retried
        for attempt in range(attempts):
            try:
                with self._slots:
                    if on_token is not None:
                        response = self._streamed(request, on_token, streamed)
                    else:
                        response = self._client.chat.completions.create(**request)
                return self._completion(response, messages, started, attempt + 1)
            except openai.APITimeoutError as err:
                raise LLMTimeout(
                    f"{self.server_label} (model {self.model}) did not answer within "
                    f"{self.settings.timeout_s:g} s (LIVINGRAG_LLM__TIMEOUT_S)"
                ) from err
            except openai.APIConnectionError as err:
                last = err
                what = f"could not connect to {self.server_label}: {err.__cause__ or err}"
            except openai.APIStatusError as err:
                status = err.status_code
                detail = _server_message(err)
                if _error_type(err) == "timeout":
                    raise LLMTimeout(f"{self.server_label} (model {self.model}): {detail}") from err
                if status not in RETRYABLE_STATUS and status < 500:
                    raise LLMError(self._client_error(status, detail)) from err
                last = err
                what = f"{self.server_label} answered HTTP {status}: {detail}"
            except openai.APIError as err:  # an error event inside a streamed reply
                if _error_type(err) == "timeout":
                    raise LLMTimeout(f"{self.server_label} (model {self.model}): {_server_message(err)}") from err
                raise LLMError(f"{self.server_label} failed while answering: {_server_message(err)}") from err
            except openai.OpenAIError as err:  # malformed responses and the like
                raise LLMError(f"{self.server_label} gave an unusable response: {err}") from err
            if streamed[0]:
                raise LLMUnavailable(f"{what} (the streamed reply broke off after it had begun)") from last
            if attempt + 1 < attempts:
                delay = self._backoff(attempt, last)
                log.warning("%s; retry %d of %d in %.2f s", what, attempt + 1, self.max_retries, delay)
                time.sleep(delay)
        raise LLMUnavailable(f"{what} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})") from last

    def _streamed(self, request: dict[str, Any], on_token: TokenCallback, streamed: list[bool]) -> Any:
        """The chunks of a streamed reply gathered into the shape of a whole response (what
        :meth:`_completion` reads), each piece of text given to ``on_token`` as it comes."""
        parts: list[str] = []
        logprobs: list[Any] = []
        finish: str | None = None
        usage: Any = None
        model: str | None = None
        with self._client.chat.completions.create(**request) as stream:
            for chunk in stream:
                model = model or getattr(chunk, "model", None)
                usage = getattr(chunk, "usage", None) or usage
                for choice in getattr(chunk, "choices", None) or []:
                    if getattr(choice, "index", 0) != 0:
                        continue
                    piece = getattr(getattr(choice, "delta", None), "content", None)
                    if piece:
                        parts.append(piece)
                        streamed[0] = True
                        on_token(piece)
                    finish = getattr(choice, "finish_reason", None) or finish
                    logprobs.extend(getattr(getattr(choice, "logprobs", None), "content", None) or [])
        if model is None:
            raise LLMError(f"{self.server_label} sent an empty stream for model {self.model}")
        choice = SimpleNamespace(
            message=SimpleNamespace(content="".join(parts)),
            finish_reason=finish,
            logprobs=SimpleNamespace(content=logprobs),
        )
        return SimpleNamespace(choices=[choice], usage=usage, model=model)

    def _client_error(self, status: int, detail: str) -> str:
        hint = {
            400: "the server rejected the request",
            401: "the API key was refused (LIVINGRAG_LLM__API_KEY)",
            403: "the API key may not use this model (LIVINGRAG_LLM__API_KEY)",
            404: f"no such model {self.model!r} or wrong base URL (LIVINGRAG_LLM__MODEL, LIVINGRAG_LLM__BASE_URL)",
            422: "the server could not process the request",
        }.get(status, "the server refused the request")
        return f"{self.server_label} answered HTTP {status}: {hint}: {detail}"

    def _completion(self, response: Any, messages: Sequence[Message], started: float, attempts: int) -> Completion:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise LLMError(f"{self.server_label} returned no choices for model {self.model}")
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = (getattr(message, "content", None) or "") if message is not None else ""
        usage = getattr(response, "usage", None)
        prompt_tokens = getattr(usage, "prompt_tokens", None) if usage is not None else None
        completion_tokens = getattr(usage, "completion_tokens", None) if usage is not None else None
        if prompt_tokens is None or completion_tokens is None:
            if not self._warned_no_usage:
                log.warning("LLM server %s reports no token usage; counts are estimated", self.base_url)
                self._warned_no_usage = True
            prompt_tokens = estimate_prompt_tokens(messages)
            completion_tokens = estimate_tokens(text)
            source = "estimate"
        else:
            source = "server"
        return Completion(
            text=text,
            prompt_tokens=int(prompt_tokens),
            completion_tokens=int(completion_tokens),
            model=getattr(response, "model", None) or self.model,
            latency_s=time.perf_counter() - started,
            finish_reason=getattr(choice, "finish_reason", None),
            usage_source=source,
            attempts=attempts,
            token_logprobs=_token_logprobs(choice),
            first_token_alternatives=_first_token_alternatives(choice),
        )
