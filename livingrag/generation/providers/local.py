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
    """Threads for llama.cpp when none is configured: half the CPUs this process may use (at least 1).

    Half, because CPUs are usually hyper-threads of half as many cores, and because llama.cpp's
    worker threads spin while they wait for each other: when other work (the embedder, the
    write-back worker, other processes) holds a core, one thread per core is far slower than
    leaving a core free. Measured on a busy 2-core machine: 32 tokens took 3.5 s with 1 thread
    and 49-84 s with 2.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, cpus // 2)


class LocalLLM:
    """An :class:`~livingrag.generation.llm.LLM` running a GGUF model in this process."""

    def __init__(self, settings: LLMSettings, *, models_dir: Path) -> None:
        self.settings = settings
        self.models_dir = Path(models_dir)
        self.threads = settings.threads or default_threads()
        self.name = f"local:{settings.model}"
        self.model_path: Path | None = None
        self._llama: Any = None
        self._formatter: Any = None
        self._lock = threading.Lock()
        self._grammars: dict[str, Any] = {}

    supports_grammar = True
    """``complete`` accepts ``grammar=`` (llama.cpp GBNF) to constrain the reply's form."""

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
        self._formatter = self._chat_formatter(self._llama, path)
        self.model_path = path
        self.name = f"local:{display}"
        log.info("loaded %s (%d threads) in %.1f s", path, self.threads, time.perf_counter() - started)
        return self._llama

    @staticmethod
    def _chat_formatter(llama: Any, path: Path) -> Any:
        """The model's own chat template (from the GGUF metadata) as a llama-cpp-python formatter."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelUnavailable(f"{path} has no chat template in its metadata (tokenizer.chat_template)")

        def text_of(token: int) -> str:
            return llama.detokenize([token], special=True).decode("utf-8", "replace") if token != -1 else ""

        eos = llama.token_eos()
        return Jinja2ChatFormatter(
            template=template, eos_token=text_of(eos), bos_token=text_of(llama.token_bos()), stop_token_ids=[eos]
        )

    def close(self) -> None:
        """Free the model (the next call loads it again)."""
        with self._lock:
            llama, self._llama = self._llama, None
        if llama is not None and hasattr(llama, "close"):
            llama.close()

    def _grammar_locked(self, text: str) -> Any:
        """A compiled grammar, checked by llama.cpp's own parser first.

        llama-cpp-python defers parsing to the first sampled token, and an invalid grammar then
        crashes the process (a NULL sampler), so the grammar is parsed here once, up front.
        """
        import llama_cpp

        if text not in self._grammars:
            vocab = getattr(getattr(self._llama, "_model", None), "vocab", None)
            if vocab is not None:
                sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
                if not sampler:
                    raise LLMError(
                        "invalid output grammar for the local model (llama.cpp could not parse it; "
                        "its message is on stderr)"
                    )
                llama_cpp.llama_sampler_free(sampler)
            self._grammars[text] = llama_cpp.LlamaGrammar.from_string(text, verbose=False)
        return self._grammars[text]

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
        grammar: str | None = None,
    ) -> Completion:
        """Generate a reply (greedy at temperature 0); raises LLMTimeout, LLMError or ModelUnavailable.

        ``grammar`` (llama.cpp GBNF text) constrains the reply; an invalid grammar is an LLMError.
        """
        import llama_cpp

        limit = self.settings.max_tokens if max_tokens is None else max_tokens
        temp = self.settings.temperature if temperature is None else temperature
        timeout = self.settings.timeout_s
        with self._lock:
            llama = self._load_locked()
            compiled = self._grammar_locked(grammar) if grammar else None
            started = time.perf_counter()
            deadline = started + timeout
            timed_out = False

            def past_deadline(_input_ids: Any, _logits: Any) -> bool:
                nonlocal timed_out
                timed_out = time.perf_counter() > deadline
                return timed_out

            # The chat template is applied here rather than by create_chat_completion, which takes no
            # stopping criteria: the deadline check must end generation without forcing a token (a
            # forced token can violate a grammar, which aborts llama.cpp).
            try:
                chat = self._formatter(messages=[dict(m) for m in messages])
                tokens = llama.tokenize(chat.prompt.encode("utf-8"), add_bos=not chat.added_special, special=True)
                template_stop = [chat.stop] if isinstance(chat.stop, str) else list(chat.stop or [])
                criteria = llama_cpp.StoppingCriteriaList([past_deadline, *(chat.stopping_criteria or [])])
                out = llama.create_completion(
                    prompt=tokens,
                    max_tokens=limit,
                    temperature=temp,
                    repeat_penalty=1.0,
                    stop=[*(stop or []), *template_stop],
                    seed=0,
                    stopping_criteria=criteria,
                    grammar=compiled,
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
            text=choice.get("text") or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            model=self.name,
            latency_s=latency,
            finish_reason=choice.get("finish_reason"),
            usage_source="tokenizer",
        )
