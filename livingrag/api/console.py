"""The web console: the static files of ``livingrag/api/ui`` served under ``/ui`` by the API
process itself (no build step, no other server), with a strict Content-Security-Policy.

The console is plain ES modules that call the ``/v1`` API with the key the user typed, kept in the
browser's ``sessionStorage`` (never in a URL); nothing here reads a key or a tenant's data.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UI_DIR = Path(__file__).resolve().parent / "ui"
PREFIX = "/ui"

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""No inline script or style, no other origin: the console only talks to the API that served it."""

HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-cache",
}


class ConsoleHeaders:
    """Adds :data:`HEADERS` to every response under ``/ui``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.decode().lower() not in HEADERS]
                headers += [(k.encode(), v.encode()) for k, v in HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def install(app: FastAPI) -> None:
    """Serve the console under ``/ui`` (``/ui/`` is its page; the views are ``#/...`` routes)."""
    app.mount(PREFIX, StaticFiles(directory=UI_DIR, html=True), name="ui")
    app.add_middleware(ConsoleHeaders)
