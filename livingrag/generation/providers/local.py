"""The offline default: a small GGUF model run with llama.cpp in a supervised child process.

llama.cpp is native code: a crash inside it (a segmentation fault, an illegal instruction on a CPU
it was not built for, the out-of-memory killer) ends the process it runs in. So the model runs in a
child process (:mod:`~livingrag.generation.providers.llama_child`), an OpenAI-compatible HTTP server
on loopback, and :class:`LocalLLM` talks to it through the same client as any OpenAI-compatible
server (:class:`~livingrag.generation.providers.openai_provider.OpenAICompatibleLLM`), token
accounting included. When the child dies under a request, that request raises
:class:`~livingrag.errors.LLMUnavailable` naming how it ended (``SIGSEGV (segmentation fault)``)
and the next call starts a new child; the caller (a CLI command, the HTTP service, a stream
evaluation) goes on.

One child per :class:`LocalLLM`; a lock serialises calls (the model runs one generation at a time,
and on a small machine parallel calls would only fight over the cores), so ``settings.concurrency``
does not apply here. The child starts lazily on the first call, or eagerly with :meth:`LocalLLM.load`.
Prompt and completion tokens are counted by llama.cpp with the model's own tokenizer over the
chat-templated prompt (``Completion.usage_source == "tokenizer"``). Generation stops at
``settings.timeout_s`` (checked before each new token) and raises LLMTimeout; a child that does not
answer within twice that (its prompt evaluation cannot be interrupted) is killed and restarted.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from pydantic import SecretStr

from livingrag.config import LLMSettings
from livingrag.errors import LLMError, LLMTimeout, LLMUnavailable, ModelUnavailable
from livingrag.generation.llm import Completion, Message, TokenCallback
from livingrag.generation.providers.child_process import ChildStartError, SupervisedChild
from livingrag.generation.providers.cpu_support import cpu_refusal, read_cpu_flags
from livingrag.generation.providers.llama_child import TOKEN_ENV
from livingrag.generation.providers.local_models import resolve_model_path
from livingrag.generation.providers.openai_provider import OpenAICompatibleLLM

log = logging.getLogger(__name__)

__all__ = ["CHILD_MODULE", "LocalLLM", "default_threads"]

CHILD_MODULE = "livingrag.generation.providers.llama_child"
START_TIMEOUT_S = 300.0
"""How long a starting child may take to load its model before it is stopped."""


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
    """An :class:`~livingrag.generation.llm.LLM` running a GGUF model in a supervised child process."""

    supports_grammar = True
    """``complete`` accepts ``grammar=`` (llama.cpp GBNF) to constrain the reply's form."""
    supports_logprobs = True
    """``complete`` accepts ``top_logprobs=`` (each token's log-probability, and the first token's alternatives)."""
    supports_streaming = True
    """``complete`` accepts ``on_token=``: the model process streams each token as it is made."""

    def __init__(self, settings: LLMSettings, *, models_dir: Path) -> None:
        self.settings = settings
        self.models_dir = Path(models_dir)
        self.threads = settings.threads or default_threads()
        self.name = f"local:{settings.model}"
        self.model_path: Path | None = None
        self.starts = 0
        """Children started so far (a restart after a crash counts)."""
        self.crashes = 0
        """Children that died under a request or while starting."""
        self.system_info: str | None = None
        self._lock = threading.Lock()
        self._child: SupervisedChild | None = None
        self._client: OpenAICompatibleLLM | None = None
        self._token = ""
        self._client_timeout_s = settings.timeout_s + max(30.0, settings.timeout_s)

    # -- the child process ------------------------------------------------------------------------

    @property
    def child_pid(self) -> int | None:
        """The pid of the running model process, or None when none runs."""
        child = self._child
        return child.pid if child is not None and child.alive else None

    def load(self) -> LocalLLM:
        """Start the model process (assembling and verifying the model file if needed); idempotent."""
        with self._lock:
            self._ensure_locked()
        return self

    def _ensure_locked(self) -> OpenAICompatibleLLM:
        if self._child is not None and self._client is not None and self._child.alive:
            return self._client
        if self._child is not None:
            log.warning("%s; starting a new one", self._child.crash_report(wait_s=0.0))
            self._discard_locked()
        refusal = cpu_refusal(read_cpu_flags())
        if refusal:
            raise ModelUnavailable(f"local model {self.settings.model}: {refusal}")
        path, display = resolve_model_path(self.settings.model, self.models_dir)
        token = secrets.token_urlsafe(32)
        command = [
            sys.executable,
            "-m",
            CHILD_MODULE,
            "--model",
            str(path),
            "--name",
            f"local:{display}",
            "--threads",
            str(self.threads),
            "--context-tokens",
            str(self.settings.context_tokens),
            "--timeout-s",
            repr(self.settings.timeout_s),
            "--parent-pid",
            str(os.getpid()),
        ]
        started = time.perf_counter()
        child = SupervisedChild(
            command, env={**os.environ, TOKEN_ENV: token}, name=f"the local model process ({display})"
        )
        self.starts += 1
        try:
            ready = child.wait_ready(START_TIMEOUT_S)
        except ChildStartError as err:
            if err.reported:
                raise ModelUnavailable(f"local model {display}: {err}") from None
            self.crashes += 1
            raise LLMUnavailable(
                f"{err} (model {path}); run `livingrag doctor` to check the runtime, or use a server: "
                "LIVINGRAG_LLM__PROVIDER=openai with LIVINGRAG_LLM__BASE_URL"
            ) from None
        client_settings = self.settings.model_copy(
            update={
                "provider": "openai",
                "base_url": f"http://127.0.0.1:{int(ready['port'])}/v1",
                "api_key": SecretStr(token),
                "model": f"local:{display}",
                "max_retries": 0,
                "concurrency": 1,
                "timeout_s": self._client_timeout_s,
            }
        )
        client = OpenAICompatibleLLM(
            client_settings, server_label=f"the local model process (pid {child.pid})", trust_env=False
        )
        client.supports_grammar = True
        self._child, self._client, self._token = child, client, token
        self.model_path, self.name = path, f"local:{display}"
        self.system_info = str(ready.get("system_info") or "")
        log.info(
            "started %s (pid %d, %d threads) in %.1f s",
            path.name,
            child.pid,
            self.threads,
            time.perf_counter() - started,
        )
        return client

    def _discard_locked(self) -> None:
        child, client = self._child, self._client
        self._child = self._client = None
        if client is not None:
            client.close()
        if child is not None:
            child.stop()

    def close(self) -> None:
        """Stop the model process (the next call starts a new one)."""
        with self._lock:
            self._discard_locked()

    # -- token counting ----------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` with the model's tokenizer (no chat template, no special tokens)."""
        with self._lock:
            client = self._ensure_locked()
            try:
                r = httpx.post(
                    f"{client.base_url}/tokenize",
                    json={"content": text},
                    headers={"authorization": f"Bearer {self._token}"},
                    timeout=self._client_timeout_s,
                    trust_env=False,
                )
                r.raise_for_status()
                return len(r.json()["tokens"])
            except (httpx.HTTPError, ValueError, KeyError) as err:
                raise self._failure_locked(err, "counting tokens") from err

    # -- generation --------------------------------------------------------------------------------

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
        """Generate a reply (greedy at temperature 0); raises LLMTimeout, LLMError, LLMUnavailable or
        ModelUnavailable. ``top_logprobs`` asks for each token's log-probability and, when k >= 1, the
        first token's k most likely alternatives. ``on_token`` is called with each token's text as the
        model makes it (the reply is the same as without it).

        ``grammar`` (llama.cpp GBNF text) constrains the reply; an invalid grammar is an LLMError.
        A crash of the model process under this call is an LLMUnavailable naming how it ended.
        """
        with self._lock:
            client = self._ensure_locked()
            started = time.perf_counter()
            try:
                c = client.complete(
                    messages,
                    max_tokens=max_tokens,
                    temperature=temperature,
                    stop=stop,
                    grammar=grammar,
                    top_logprobs=top_logprobs,
                    on_token=on_token,
                )
            except LLMTimeout:
                if time.perf_counter() - started >= self._client_timeout_s * 0.9 and self._child is not None:
                    self._child.kill()
                    self._discard_locked()
                    raise LLMTimeout(
                        f"local model {self.settings.model} did not finish within {self.settings.timeout_s:g} s "
                        "(LIVINGRAG_LLM__TIMEOUT_S) and its process stopped answering; it is restarted for the "
                        "next question"
                    ) from None
                raise
            except LLMError as err:
                raise self._failure_locked(err, "answering") from err
        return dataclasses.replace(c, model=self.name, usage_source="tokenizer")

    def _failure_locked(self, err: Exception, doing: str) -> LLMError:
        """The error to raise for ``err``: an LLMUnavailable naming the crash when the child died."""
        child = self._child
        if child is None:
            return err if isinstance(err, LLMError) else LLMError(str(err))
        # A dropped connection arrives before the exit status: give the process a moment to be reaped.
        connection_lost = isinstance(err, LLMUnavailable | httpx.TransportError)
        if child.returncode(wait_s=2.0 if connection_lost else 0.0) is None:
            return err if isinstance(err, LLMError) else LLMError(f"the local model process failed {doing}: {err}")
        self.crashes += 1
        how = child.exit_description()
        log.error("%s while %s", child.crash_report(wait_s=0.0), doing)
        self._discard_locked()
        return LLMUnavailable(
            f"the local model process ({self.settings.model}, pid {child.pid}) ended with {how} while {doing}; "
            "it is restarted for the next question (its last output is in the log; `livingrag doctor` checks "
            "the runtime)"
        )
