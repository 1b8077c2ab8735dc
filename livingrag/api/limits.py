"""Request size limit: bodies larger than ``api.max_request_bytes`` get 413 before they are parsed.

A pure ASGI middleware: the declared ``Content-Length`` is checked first; a body sent without one
(chunked) is read up to the limit (and refused past it), then replayed to the app.
"""

from __future__ import annotations

import json
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]


class BodySizeLimit:
    """Refuse request bodies over ``max_bytes`` with a structured 413."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await self._reply(send, 400, "bad_request", "Content-Length is not a number")
                return
            if size > self.max_bytes:
                await self._too_large(send, size)
                return
            await self.app(scope, receive, send)
            return
        # No declared length (chunked): read the body up to the limit, then replay it.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, receive, send)  # disconnected: let the app see it
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                await self._too_large(send, None)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Any, size: int | None) -> None:
        got = f"{size} bytes" if size is not None else "more"
        await self._reply(send, 413, "payload_too_large", f"request body is {got}; the limit is {self.max_bytes} bytes")

    @staticmethod
    async def _reply(send: Any, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
