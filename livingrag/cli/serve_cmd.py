"""``livingrag serve``: run the HTTP API with uvicorn."""

from __future__ import annotations

from typing import Any

import typer

from livingrag.cli.common import examples, load_settings

SERVE_HELP = (
    "Serve the HTTP API (OpenAPI docs at /docs, readiness at /health) and the web console at /ui "
    "(sign in with a tenant's key, or with the admin key and pick a tenant). Tenants authenticate with "
    "'Authorization: Bearer <key>'; set LIVINGRAG_API__ADMIN_KEY to manage tenants over HTTP (at least "
    "32 characters and about 128 bits: serve refuses a weak one)."
    + examples(
        "livingrag serve",
        "livingrag serve --workers 4",
        "LIVINGRAG_API__ADMIN_KEY=\"$(python -c 'import secrets; print(secrets.token_urlsafe(32))')\" "
        "livingrag serve --host 0.0.0.0 --port 8000",
        "curl -H 'Authorization: Bearer lrg_...' localhost:8000/v1/corpora",
        "open http://127.0.0.1:8000/ui/",
    )
)


def serve(
    host: str | None = typer.Option(None, "--host", help="Bind address (default: api.host, 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", min=1, max=65535, help="Port (default: api.port, 8000)."),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level (debug, info, warning, error)."),
    workers: int = typer.Option(
        1,
        "--workers",
        min=1,
        max=64,
        help="Worker processes: stateless replicas on one port; each loads the models before it takes a connection. "
        "The question caps and request rates (api.max_inflight, api.tenant_max_inflight, api.tenant_rate_per_s) "
        "count over all of them.",
    ),
) -> None:
    import uvicorn

    from livingrag.api import create_app
    from livingrag.api.admin_key import check_admin_key

    settings = load_settings()  # validated here, so a bad setting stops the command with its name
    admin_key = settings.api.admin_key
    check_admin_key(None if admin_key is None else admin_key.get_secret_value())
    common: dict[str, Any] = {
        "host": host or settings.api.host,
        "port": port or settings.api.port,
        "log_level": log_level,
        "timeout_graceful_shutdown": 30,
    }
    if workers > 1:
        import os

        from livingrag.api.shared_limits import SHARED_LIMITS_ENV, SharedLimitTable, serving_limit_file
        from livingrag.db.setup import open_database

        # Start (embedded) and check or migrate the database once, before the workers attach to it.
        db = open_database(settings.db)
        db.dispose()
        # One limit table for every worker (they inherit the environment), removed at the end.
        limits = SharedLimitTable.create(serving_limit_file(settings.db.data_dir / "run"))
        os.environ[SHARED_LIMITS_ENV] = str(limits)
        try:
            uvicorn.run("livingrag.api.app:app_from_environment", factory=True, workers=workers, **common)
        finally:
            os.environ.pop(SHARED_LIMITS_ENV, None)
            limits.unlink(missing_ok=True)
            db.close()
    else:
        uvicorn.run(create_app(settings), **common)
