"""``livingrag serve``: run the HTTP API with uvicorn."""

from __future__ import annotations

import typer

from livingrag.cli.common import examples, load_settings

SERVE_HELP = (
    "Serve the HTTP API (OpenAPI docs at /docs, readiness at /health). Tenants authenticate with "
    "'Authorization: Bearer <key>'; set LIVINGRAG_API__ADMIN_KEY to manage tenants over HTTP."
    + examples(
        "livingrag serve",
        "LIVINGRAG_API__ADMIN_KEY=change-me livingrag serve --host 0.0.0.0 --port 8000",
        "curl -H 'Authorization: Bearer lrg_...' localhost:8000/v1/corpora",
    )
)


def serve(
    host: str | None = typer.Option(None, "--host", help="Bind address (default: api.host, 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", min=1, max=65535, help="Port (default: api.port, 8000)."),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level (debug, info, warning, error)."),
) -> None:
    import uvicorn

    from livingrag.api import create_app

    settings = load_settings()
    app = create_app(settings)
    uvicorn.run(
        app,
        host=host or settings.api.host,
        port=port or settings.api.port,
        log_level=log_level,
        timeout_graceful_shutdown=30,
    )
