"""The local model's own process: llama.cpp behind a small OpenAI-compatible HTTP server on loopback.

:class:`~livingrag.generation.providers.local.LocalLLM` starts this module as a child process
(``python -m livingrag.generation.providers.llama_child --model PATH ...``), so that a native crash
inside llama.cpp ends this process and never its caller. It loads the model, binds
``127.0.0.1`` on a free port, and writes one JSON line to stdout: ``{"event": "ready", "port": ...}``
(or ``{"event": "error", "message": ...}`` and exits 2). Every request must carry
``Authorization: Bearer <token>`` with the token from the environment variable
``LIVINGRAG_LLM_CHILD_TOKEN``. It exits when its parent process is gone.

Routes (one generation at a time; the others wait):

* ``POST /v1/chat/completions``: OpenAI's request (``messages``, ``max_tokens``, ``temperature``,
  ``stop``) plus llama.cpp's ``grammar`` (GBNF text); the reply's ``usage`` counts tokens with the
  model's own tokenizer over the chat-templated prompt. A generation past ``--timeout-s`` stops
  before its next token and answers HTTP 504 with error type ``timeout``; a prompt longer than the
  context or an invalid grammar answers 400 naming the setting. ``logprobs: true`` (with
  ``top_logprobs: k``, 0-20) adds OpenAI's ``choices[0].logprobs.content``: each generated token's
  log-probability under the model (its raw logits, before any grammar) and the ``k`` most likely
  tokens at its step (see :class:`TokenLogprobs` for the reply's last token). ``stream: true``
  answers with server-sent events, OpenAI's ``chat.completion.chunk`` objects: one per token as it
  is made, one with the finish reason, one with the usage when ``stream_options.include_usage`` is
  true, then ``data: [DONE]``; a timeout after the first token is a last ``{"error": ...}`` event.
* ``POST /v1/tokenize``: ``{"content": text}`` -> ``{"tokens": [...]}`` (no special tokens).
* ``GET /health``: ``{"status": "ok", "busy": bool, "served": n, "system_info": ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import hmac
import itertools
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Generator, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOKEN_ENV = "LIVINGRAG_LLM_CHILD_TOKEN"
"""The environment variable that carries the bearer token the child accepts."""

MAX_BODY_BYTES = 8_000_000
MAX_TOP_LOGPROBS = 20
"""OpenAI's upper bound for ``top_logprobs``."""


class RequestError(Exception):
    """A request the model cannot serve; ``status`` and ``kind`` go into the HTTP error reply."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def _field(body: dict[str, Any], name: str, kinds: type | tuple[type, ...], default: Any) -> Any:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise RequestError(400, f"field {name!r} has the wrong type ({type(value).__name__})")
    return value


def parse_chat_request(body: Any) -> dict[str, Any]:
    """Validate a chat-completions body; raises RequestError naming the first bad field."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "field 'messages' must be a non-empty list")
    clean: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise RequestError(400, f"messages[{i}] must be an object with string 'role' and 'content'")
        clean.append({"role": m["role"], "content": m["content"]})
    max_tokens = _field(body, "max_tokens", int, 256)
    if max_tokens < 1:
        raise RequestError(400, "field 'max_tokens' must be at least 1")
    temperature = float(_field(body, "temperature", (int, float), 0.0))
    if temperature < 0:
        raise RequestError(400, "field 'temperature' must not be negative")
    stop = _field(body, "stop", (str, list), [])
    stop = [stop] if isinstance(stop, str) else stop
    if not all(isinstance(s, str) for s in stop):
        raise RequestError(400, "field 'stop' must be a string or a list of strings")
    grammar = _field(body, "grammar", str, None)
    logprobs = body.get("logprobs", False)
    if logprobs is None:
        logprobs = False
    if not isinstance(logprobs, bool):
        raise RequestError(400, f"field 'logprobs' must be true or false, not {type(logprobs).__name__}")
    top_logprobs = _field(body, "top_logprobs", int, 0)
    if not 0 <= top_logprobs <= MAX_TOP_LOGPROBS:
        raise RequestError(400, f"field 'top_logprobs' must be an integer from 0 to {MAX_TOP_LOGPROBS}")
    if top_logprobs and not logprobs:
        raise RequestError(400, "field 'top_logprobs' needs 'logprobs': true")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise RequestError(400, f"field 'stream' must be true or false, not {type(stream).__name__}")
    stream_options = _field(body, "stream_options", dict, {})
    return {
        "stream": stream,
        "stream_options": stream_options,
        "messages": clean,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stop": stop,
        "grammar": grammar,
        "logprobs": logprobs,
        "top_logprobs": top_logprobs,
    }


def log_softmax(logits: Any) -> Any:
    """log softmax: z_t - log(sum_v exp(z_v)), in float64, shifted by the max first."""
    import numpy as np

    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def token_entry(logp: Any, chosen: int, top: int, text_of: Any) -> dict[str, Any]:
    """OpenAI's logprobs entry for one generated token: ``chosen``'s log-probability at its step
    (``logp``, a log softmax over the vocabulary) and the step's ``top`` most likely tokens."""
    import numpy as np

    alternatives: list[dict[str, Any]] = []
    if top > 0:
        best = np.argpartition(-logp, top - 1)[:top]
        best = best[np.lexsort((best, -logp[best]))]  # most likely first, ties by token id
        alternatives = [{"token": text_of(int(t)), "logprob": float(logp[t])} for t in best]
    return {"token": text_of(chosen), "logprob": float(logp[chosen]), "top_logprobs": alternatives}


class TokenLogprobs:
    """A llama.cpp logits processor that records every generated token's log-probability.

    Called before each step's sampling with the tokens so far and the step's raw logits (before
    any grammar), it keeps the step's log softmax and, from the last of the tokens so far, writes
    the entry of the token chosen at the previous step. The last step's token is never fed back;
    :meth:`finish` writes it as the step's argmax when decoding was greedy and unconstrained (where
    that is the token chosen), and leaves it out otherwise (it is then the token that ended the reply:
    end of text, or the end of a grammar).
    """

    def __init__(self, top: int, text_of: Any) -> None:
        self.top = top
        self.text_of = text_of
        self.entries: list[dict[str, Any]] = []
        self._last: Any = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self._last is not None:
            self.entries.append(token_entry(self._last, int(input_ids[-1]), self.top, self.text_of))
        self._last = log_softmax(scores)
        return scores

    def finish(self, *, greedy_unconstrained: bool, eos: int) -> list[dict[str, Any]]:
        if self._last is not None and greedy_unconstrained:
            chosen = int(self._last.argmax())
            if chosen != eos:
                self.entries.append(token_entry(self._last, chosen, self.top, self.text_of))
        self._last = None
        return self.entries


class LlamaModel:
    """One llama.cpp model and its chat template; :meth:`chat` serves one request at a time."""

    def __init__(self, path: Path, *, name: str, threads: int, context_tokens: int, timeout_s: float) -> None:
        import llama_cpp

        self.llama_cpp = llama_cpp
        self.name = name
        self.timeout_s = timeout_s
        self.llama = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=context_tokens,
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=512,
            seed=0,
            verbose=False,
        )
        self.formatter = self._chat_formatter(path)
        self.lock = threading.Lock()
        self.busy = False
        self.served = 0
        self._grammars: dict[str, Any] = {}

    def _chat_formatter(self, path: Path) -> Any:
        """The model's own chat template (from the GGUF metadata) as a llama-cpp-python formatter."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        llama = self.llama
        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError(f"{path} has no chat template in its metadata (tokenizer.chat_template)")

        def text_of(token: int) -> str:
            return llama.detokenize([token], special=True).decode("utf-8", "replace") if token != -1 else ""

        eos = llama.token_eos()
        return Jinja2ChatFormatter(
            template=template, eos_token=text_of(eos), bos_token=text_of(llama.token_bos()), stop_token_ids=[eos]
        )

    def _grammar(self, text: str) -> Any:
        """A compiled grammar, checked by llama.cpp's own parser first.

        llama-cpp-python defers parsing to the first sampled token, and an invalid grammar then
        crashes the process (a NULL sampler), so the grammar is parsed here once, up front.
        """
        if text not in self._grammars:
            llama_cpp = self.llama_cpp
            vocab = getattr(getattr(self.llama, "_model", None), "vocab", None)
            if vocab is not None:
                sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
                if not sampler:
                    raise RequestError(400, "invalid output grammar for the local model (llama.cpp could not parse it)")
                llama_cpp.llama_sampler_free(sampler)
            self._grammars[text] = llama_cpp.LlamaGrammar.from_string(text, verbose=False)
        return self._grammars[text]

    def _text_of(self, token: int) -> str:
        return self.llama.detokenize([token]).decode("utf-8", "replace")

    def tokenize(self, text: str) -> list[int]:
        with self.lock:
            return list(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def chat(self, req: dict[str, Any]) -> dict[str, Any]:
        """One chat completion as an OpenAI response body; raises RequestError."""
        with self.lock:
            self.busy = True
            try:
                return self._chat_locked(req)
            finally:
                self.busy = False
                self.served += 1

    def chat_stream(self, req: dict[str, Any]) -> Generator[dict[str, Any], None, None]:
        """One chat completion as OpenAI's stream chunks (``chat.completion.chunk``): one per token
        with its text, then one with the finish reason (and the logprobs when asked for), then one
        with the usage. The model is held until the iterator ends or is closed; a RequestError before
        the first chunk means nothing was generated, one after it (a timeout) ends the stream."""
        with self.lock:
            self.busy = True
            try:
                yield from self._stream_locked(req)
            finally:
                self.busy = False
                self.served += 1

    def _start(self, req: dict[str, Any]) -> tuple[Any, TokenLogprobs | None, list[int], Any]:
        """Begin a generation: (llama.cpp's completion, whole or an iterator of chunks; the logprob
        recorder; the prompt's tokens; whether the deadline passed, as a one-element list)."""
        llama_cpp = self.llama_cpp
        compiled = self._grammar(req["grammar"]) if req["grammar"] else None
        deadline = time.perf_counter() + self.timeout_s
        timed_out = [False]

        def past_deadline(_input_ids: Any, _logits: Any) -> bool:
            timed_out[0] = time.perf_counter() > deadline
            return timed_out[0]

        # The chat template is applied here rather than by create_chat_completion, which takes no
        # stopping criteria: the deadline check must end generation without forcing a token (a
        # forced token can violate a grammar, which aborts llama.cpp).
        chat = self.formatter(messages=req["messages"])
        tokens = self.llama.tokenize(chat.prompt.encode("utf-8"), add_bos=not chat.added_special, special=True)
        template_stop = [chat.stop] if isinstance(chat.stop, str) else list(chat.stop or [])
        criteria = llama_cpp.StoppingCriteriaList([past_deadline, *(chat.stopping_criteria or [])])
        # Every prompt is evaluated from its first token: llama-cpp-python would otherwise reuse
        # the KV cache of the longest prefix shared with the previous request, which changes how
        # the rest is batched, so a near tie in greedy decoding could go either way and the same
        # prompt get another answer depending on what was asked before (seen in a paired
        # evaluation: same prompt, different answers). It costs the shared prefix's evaluation.
        self.llama.reset()
        recorder = TokenLogprobs(req["top_logprobs"], self._text_of) if req["logprobs"] else None
        processors = llama_cpp.LogitsProcessorList([recorder]) if recorder is not None else None
        out = self.llama.create_completion(
            prompt=tokens,
            max_tokens=req["max_tokens"],
            temperature=req["temperature"],
            repeat_penalty=1.0,
            stop=[*req["stop"], *template_stop],
            seed=0,
            stopping_criteria=criteria,
            logits_processor=processors,
            grammar=compiled,
            stream=bool(req.get("stream")),
        )
        return out, recorder, tokens, timed_out

    def _logprobs(self, req: dict[str, Any], recorder: TokenLogprobs | None) -> dict[str, Any] | None:
        if recorder is None:
            return None
        unconstrained = req["temperature"] == 0 and not req["grammar"]
        return {"content": recorder.finish(greedy_unconstrained=unconstrained, eos=self.llama.token_eos())}

    def _timeout(self) -> RequestError:
        return RequestError(504, f"did not finish within {self.timeout_s:g} s (LIVINGRAG_LLM__TIMEOUT_S)", "timeout")

    def _chat_locked(self, req: dict[str, Any]) -> dict[str, Any]:
        with _llama_errors():
            out, recorder, _tokens, timed_out = self._start(req)
        if timed_out[0]:
            raise self._timeout()
        assert isinstance(out, dict)  # not streamed (stream=False), so one whole completion
        choice = out["choices"][0]
        usage: Mapping[str, Any] = out.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        completion_tokens = int(usage.get("completion_tokens", 0))
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": choice.get("text") or ""},
                    "finish_reason": choice.get("finish_reason"),
                    "logprobs": self._logprobs(req, recorder),
                }
            ],
            "usage": _usage(prompt_tokens, completion_tokens),
        }

    def _stream_locked(self, req: dict[str, Any]) -> Generator[dict[str, Any], None, None]:
        ident = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
            body = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": self.name}
            return body | {"choices": choices} | extra

        finish: str | None = None
        pieces = 0
        with _llama_errors():
            out, recorder, tokens, timed_out = self._start(req)
            for part in out:  # llama.cpp evaluates the prompt at the first step
                choice = part["choices"][0]
                text = choice.get("text") or ""
                finish = choice.get("finish_reason") or finish
                if text:
                    pieces += 1
                    yield chunk([{"index": 0, "delta": {"content": text}, "finish_reason": None}])
        if timed_out[0]:
            raise self._timeout()
        done = {"index": 0, "delta": {}, "finish_reason": finish or "stop", "logprobs": self._logprobs(req, recorder)}
        yield chunk([done])
        if (req.get("stream_options") or {}).get("include_usage"):
            # completion tokens: the pieces streamed (llama.cpp yields one per generated token)
            yield chunk([], usage=_usage(len(tokens), pieces))


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


@contextlib.contextmanager
def _llama_errors() -> Iterator[None]:
    """llama.cpp's failures as the request errors they are: a ValueError is a prompt the context
    cannot hold ("Requested tokens (5000) exceed context window of 4096"), 400; a RuntimeError, 500."""
    try:
        yield
    except ValueError as err:
        raise RequestError(
            400, f"{err} (shorten the prompt or raise LIVINGRAG_LLM__CONTEXT_TOKENS)", "context_length_exceeded"
        ) from err
    except RuntimeError as err:
        raise RequestError(500, f"llama.cpp failed: {err}", "server_error") from err


def make_handler(model: LlamaModel, token: str, system_info: str) -> type[BaseHTTPRequestHandler]:
    expected = f"Bearer {token}".encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, chunks: Generator[dict[str, Any], None, None]) -> None:
            """Server-sent events, one ``data:`` line a chunk, then ``data: [DONE]``. An error before
            the first chunk answers as a whole (status and JSON); one after it is a last
            ``data: {"error": ...}`` event (OpenAI's form). The connection closes at the end."""
            try:
                first = next(chunks, None)  # raises RequestError before anything is sent
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for c in itertools.chain([] if first is None else [first], chunks):
                        self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                        self.wfile.flush()
                except RequestError as err:
                    error = {"error": {"message": str(err), "type": err.kind, "code": err.status}}
                    self.wfile.write(b"data: " + json.dumps(error).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            finally:
                chunks.close()  # frees the model when the parent went away mid-stream

        def _error(self, status: int, message: str, kind: str) -> None:
            self._send(status, {"error": {"message": message, "type": kind, "code": status}})

        def _authorised(self) -> bool:
            given = (self.headers.get("authorization") or "").encode()
            if hmac.compare_digest(given, expected):
                return True
            self._error(401, "missing or wrong bearer token", "authentication_error")
            return False

        def do_GET(self) -> None:
            if not self._authorised():
                return
            path = self.path.rstrip("/")
            if path == "/health":
                self._send(
                    200, {"status": "ok", "busy": model.busy, "served": model.served, "system_info": system_info}
                )
            elif path == "/v1/models":
                self._send(
                    200, {"object": "list", "data": [{"id": model.name, "object": "model", "owned_by": "local"}]}
                )
            else:
                self._error(404, f"no route GET {self.path}", "not_found")

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY_BYTES:
                self._error(413, f"request body over {MAX_BODY_BYTES} bytes", "invalid_request_error")
                self.close_connection = True
                return
            raw = self.rfile.read(length)
            if not self._authorised():
                return
            path = self.path.rstrip("/")
            try:
                try:
                    body = json.loads(raw or b"{}")
                except ValueError as err:
                    raise RequestError(400, f"the request body is not JSON: {err}") from err
                if path == "/v1/chat/completions":
                    req = parse_chat_request(body)
                    if req["stream"]:
                        self._stream(model.chat_stream(req))
                    else:
                        self._send(200, model.chat(req))
                elif path == "/v1/tokenize":
                    content = body.get("content") if isinstance(body, dict) else None
                    if not isinstance(content, str):
                        raise RequestError(400, "field 'content' must be a string")
                    self._send(200, {"tokens": model.tokenize(content)})
                else:
                    self._error(404, f"no route POST {self.path}", "not_found")
            except RequestError as err:
                self._error(err.status, str(err), err.kind)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the parent gave up on this request

    return Handler


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _watch_parent(parent_pid: int) -> None:
    """End this process when the parent is gone (re-parented), polling once a second."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m livingrag.generation.providers.llama_child")
    parser.add_argument("--model", required=True, type=Path, help="GGUF file")
    parser.add_argument("--name", required=True, help="model name in replies")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context-tokens", type=int, default=4096)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--parent-pid", type=int, default=os.getppid())
    args = parser.parse_args(argv)
    faulthandler.enable()  # a native crash prints where it happened to stderr, which the parent keeps
    token = os.environ.get(TOKEN_ENV)
    if not token:
        _emit({"event": "error", "message": f"{TOKEN_ENV} is not set"})
        return 2
    threading.Thread(target=_watch_parent, args=(args.parent_pid,), daemon=True, name="parent-watch").start()
    started = time.perf_counter()
    try:
        model = LlamaModel(
            args.model,
            name=args.name,
            threads=args.threads,
            context_tokens=args.context_tokens,
            timeout_s=args.timeout_s,
        )
    except ImportError as err:
        _emit({"event": "error", "message": f"llama-cpp-python is not installed ({err}); run scripts/install.sh"})
        return 2
    except (ValueError, RuntimeError, OSError) as err:
        _emit({"event": "error", "message": f"llama.cpp could not load {args.model}: {err}"})
        return 2
    raw_info = model.llama_cpp.llama_print_system_info()
    system_info = raw_info.decode("utf-8", "replace") if isinstance(raw_info, bytes) else str(raw_info)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(model, token, system_info))
    server.daemon_threads = True
    _emit(
        {
            "event": "ready",
            "port": server.server_address[1],
            "pid": os.getpid(),
            "load_s": round(time.perf_counter() - started, 3),
            "system_info": system_info.strip(),
        }
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever(poll_interval=0.5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
