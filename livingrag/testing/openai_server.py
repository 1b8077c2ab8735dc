"""A small, real OpenAI-compatible HTTP server for tests and benchmarks: ``POST /v1/chat/completions``
on loopback.

It answers deterministically (by default ``Answer: <last user message, reversed word order>``;
``responder`` replaces that, e.g. :func:`qa_reply`, which answers a QA prompt from its first
passage), reports usage as word counts, and follows a script of per-request behaviours so that
tests can provoke HTTP errors, missing usage and slow answers. ``stream: true`` answers with
server-sent ``chat.completion.chunk`` events, one word (with its leading space) a piece, as OpenAI
does. It records every request it received and the largest number of requests it was serving at
once (``record=False`` keeps no requests, for long benchmark runs).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[list[dict[str, Any]]], str]


@dataclass
class Step:
    """What the server does for one request."""

    status: int = 200
    delay_s: float = 0.0
    usage: bool = True
    choices: bool = True
    headers: dict[str, str] = field(default_factory=dict)
    error_message: str = "scripted failure"
    first_token_alternatives: tuple[tuple[str, float], ...] = ()
    """Sent as ``choices[0].logprobs.content[0].top_logprobs`` when the request asks for logprobs."""
    token_logprobs: tuple[tuple[str, float], ...] = ()
    """Sent as ``choices[0].logprobs.content`` (else the first alternative alone) when asked for."""
    token_delay_s: float = 0.0
    """A streamed reply (``stream: true``) waits this long before each piece."""
    stream_error_after: int | None = None
    """A streamed reply sends this many pieces, then an ``{"error": ...}`` event of ``stream_error_type``."""
    stream_error_type: str = "server_error"


def reply_for(messages: list[dict[str, Any]]) -> str:
    """The deterministic reply: the last user message's words in reverse order after "Answer: "."""
    user = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    words = (user[-1] if user else "").split()
    return "Answer: " + " ".join(reversed(words))


_PASSAGE = re.compile(r"^\[1\] (?P<title>[^\n]*)\n(?P<text>[^\n]*)", re.M)


def qa_reply(messages: list[dict[str, Any]]) -> str:
    """A reply in the QA prompt's format, answered from the first numbered passage: ``Thought: <the
    passage's first sentence>`` then ``Answer: <the passage's title>`` (``Answer: unknown`` when the
    prompt has no passage). Deterministic, short and grounded in the passages."""
    user = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    m = _PASSAGE.search(user[-1] if user else "")
    if m is None:
        return "Thought: the passages say nothing about it.\nAnswer: unknown"
    first = re.split(r"(?<=[.!?])\s", m.group("text").strip(), maxsplit=1)[0]
    return f"Thought: {first}\nAnswer: {m.group('title').strip() or 'unknown'}"


def words(text: str) -> int:
    return len(text.split())


class OpenAICompatServer:
    """Start with ``with OpenAICompatServer() as srv:``; ``srv.base_url`` ends in ``/v1``."""

    def __init__(self, *, default_delay_s: float = 0.0, responder: Responder = reply_for, record: bool = True) -> None:
        self.default = Step(delay_s=default_delay_s)
        self.responder = responder
        self.record = record
        self.served = 0
        self.script: deque[Step] = deque()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.served += 1
                    if server.record:
                        server.requests.append(
                            {"path": self.path, "body": body, "auth": self.headers.get("authorization")}
                        )
                    step = server.script.popleft() if server.script else server.default
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if step.delay_s:
                        time.sleep(step.delay_s)
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    elif step.status != 200:
                        self._send(step.status, {"error": {"message": step.error_message, "code": step.status}}, step)
                    elif body.get("stream"):
                        self._stream(server._chunks(body, step), step)
                    else:
                        self._send(200, server._completion(body, step), step)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _stream(self, chunks: list[dict[str, Any]], step: Step) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                for chunk in chunks:
                    if step.token_delay_s and chunk.get("choices"):
                        time.sleep(step.token_delay_s)
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _send(self, status: int, payload: dict[str, Any], step: Step | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (step.headers if step else {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-compat-server", daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        if isinstance(host, bytes):  # typeshed allows bytes; an AF_INET server's host is a str
            host = host.decode()
        return f"http://{host}:{port}/v1"

    def _completion(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        messages = body.get("messages") or []
        text = self.responder(messages)
        out: dict[str, Any] = {
            "id": f"chatcmpl-{self.served}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "unknown"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"},
            ]
            if step.choices
            else [],
        }
        if step.choices and body.get("logprobs") and (step.first_token_alternatives or step.token_logprobs):
            top = int(body.get("top_logprobs") or 0)
            alternatives = [{"token": t, "logprob": lp} for t, lp in step.first_token_alternatives[:top]]
            tokens = step.token_logprobs or step.first_token_alternatives[:1]
            content = [{"token": t, "logprob": lp, "top_logprobs": []} for t, lp in tokens]
            content[0]["top_logprobs"] = alternatives
            out["choices"][0]["logprobs"] = {"content": content}
        if step.usage:
            prompt = sum(words(m.get("content") or "") for m in messages)
            out["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": words(text),
                "total_tokens": prompt + words(text),
            }
        return out

    def _chunks(self, body: dict[str, Any], step: Step) -> list[dict[str, Any]]:
        """The streamed form of :meth:`_completion`'s reply: a chunk a word, the finish, the usage."""
        whole = self._completion(body, step)
        text = whole["choices"][0]["message"]["content"] if whole["choices"] else ""
        pieces = re.findall(r"\s*\S+", text)
        base = {k: whole[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        chunks = [
            base | {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]} for piece in pieces
        ]
        if step.stream_error_after is not None:
            error = {"error": {"message": step.error_message, "type": step.stream_error_type}}
            return [*chunks[: step.stream_error_after], error]
        chunks.append(base | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if step.usage and (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(base | {"choices": [], "usage": whole.get("usage")})
        return chunks

    def __enter__(self) -> OpenAICompatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
