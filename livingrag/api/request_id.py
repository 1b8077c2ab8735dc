"""A request id on every request: taken from the client's ``X-Request-ID`` when it is a short token
(letters, digits, ``-``, ``_``, ``.``; at most 64), else made here; stored in the ASGI scope's state
for the handlers and the error bodies, and sent back as ``X-Request-ID`` on every response."""

from __future__ import annotations

import re
import uuid
from typing import Any

from starlette.requests import Request
from starlette.types import Message, Scope

HEADER = "X-Request-ID"
_VALID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def request_id_of(request: Request) -> str:
    """The id the middleware gave ``request`` (a fresh one where there is none)."""
    rid = getattr(request.state, "request_id", None)
    return rid if isinstance(rid, str) else uuid.uuid4().hex


class RequestId:
    """Pure ASGI middleware (no per-request task or body copy)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(HEADER.lower().encode(), b"").decode("latin-1")
        rid = given if _VALID.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        raw = (HEADER.lower().encode(), rid.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != raw[0]]
                message = {**message, "headers": [*headers, raw]}
            await send(message)

        await self.app(scope, receive, send_with_id)
