"""The offline default: a small GGUF model run in-process on the CPU with llama-cpp-python.

One model instance per :class:`LocalLLM`; a lock serialises calls (llama.cpp contexts are not
thread-safe, and on a small machine parallel calls would only fight over the cores), so
``settings.concurrency`` does not apply here. The model loads lazily on the first call, or
eagerly with :meth:`LocalLLM.load`. Prompt and completion tokens are counted by llama.cpp with the
model's own tokenizer over the chat-templated prompt (``Completion.usage_source == "tokenizer"``).
Generation stops at ``settings.timeout_s`` (checked before each new token; the prompt's own
evaluation cannot be interrupted) and raises LLMTimeout.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from livingrag.config import LLMSettings
from livingrag.errors import LLMError, LLMTimeout, ModelUnavailable
from livingrag.generation.llm import Completion, Message
from livingrag.generation.providers.local_models import resolve_model_path

log = logging.getLogger(__name__)

__all__ = ["LocalLLM", "default_threads"]


def default_threads() -> int:
    """Threads for llama.cpp when none is configured: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class LocalLLM:
    """An :class:`~livingrag.generation.llm.LLM` running a GGUF model in this process."""

    def __init__(self, settings: LLMSettings, *, models_dir: Path) -> None:
        self.settings = settings
        self.models_dir = Path(models_dir)
        self.threads = settings.threads or default_threads()
        self.name = f"local:{settings.model}"
        self.model_path: Path | None = None
        self._llama: Any = None
        self._lock = threading.Lock()

    # -- loading ---------------------------------------------------------------------------------

    def load(self) -> LocalLLM:
        """Assemble and verify the model file if needed, and load it; idempotent and thread-safe."""
        with self._lock:
            self._load_locked()
        return self

    def _load_locked(self) -> Any:
        if self._llama is not None:
            return self._llama
        try:
            import llama_cpp
        except ImportError as err:
            raise ModelUnavailable(
                "provider=local needs llama-cpp-python (it builds from source: run scripts/install.sh, "
                "or pip install llama-cpp-python); or set LIVINGRAG_LLM__PROVIDER=openai with a server URL"
            ) from err
        path, display = resolve_model_path(self.settings.model, self.models_dir)
        started = time.perf_counter()
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.settings.context_tokens,
                n_threads=self.threads,
                n_threads_batch=self.threads,
                n_batch=512,
                seed=0,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as err:
            raise ModelUnavailable(f"llama.cpp could not load {path}: {err}") from err
        self.model_path = path
        self.name = f"local:{display}"
        log.info("loaded %s (%d threads) in %.1f s", path, self.threads, time.perf_counter() - started)
        return self._llama

    def close(self) -> None:
        """Free the model (the next call loads it again)."""
        with self._lock:
            llama, self._llama = self._llama, None
        if llama is not None and hasattr(llama, "close"):
            llama.close()

    # -- token counting ----------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` with the model's tokenizer (no chat template, no special tokens)."""
        with self._lock:
            llama = self._load_locked()
            return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    # -- generation --------------------------------------------------------------------------------

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
    ) -> Completion:
        """Generate a reply (greedy at temperature 0); raises LLMTimeout, LLMError or ModelUnavailable."""
        import llama_cpp

        limit = self.settings.max_tokens if max_tokens is None else max_tokens
        temp = self.settings.temperature if temperature is None else temperature
        timeout = self.settings.timeout_s
        with self._lock:
            llama = self._load_locked()
            started = time.perf_counter()
            deadline = started + timeout
            timed_out = False

            eos = llama.token_eos()

            def stop_at_deadline(_input_ids: Any, scores: Any) -> Any:
                # llama-cpp-python's chat API takes no stopping criteria, so past the deadline this
                # logits processor forces the end-of-sequence token; the flag turns that into LLMTimeout.
                nonlocal timed_out
                if time.perf_counter() > deadline:
                    timed_out = True
                    scores[:] = -float("inf")
                    scores[eos] = 0.0
                return scores

            try:
                out = llama.create_chat_completion(
                    messages=[dict(m) for m in messages],
                    max_tokens=limit,
                    temperature=temp,
                    stop=list(stop) if stop else None,
                    seed=0,
                    logits_processor=llama_cpp.LogitsProcessorList([stop_at_deadline]),
                )
            except ValueError as err:  # e.g. "Requested tokens (5000) exceed context window of 4096"
                raise LLMError(
                    f"local model {self.settings.model}: {err} (shorten the prompt or raise "
                    "LIVINGRAG_LLM__CONTEXT_TOKENS)"
                ) from err
            except RuntimeError as err:
                raise LLMError(f"local model {self.settings.model} failed: {err}") from err
            latency = time.perf_counter() - started
        if timed_out:
            raise LLMTimeout(
                f"local model {self.settings.model} did not finish within {timeout:g} s "
                f"(LIVINGRAG_LLM__TIMEOUT_S); {self.threads} threads"
            )
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            model=self.name,
            latency_s=latency,
            finish_reason=choice.get("finish_reason"),
            usage_source="tokenizer",
        )
