"""``GET /health``: 200 when the database answers, the schema is current and the models are loaded;
the body lists each read standby's state and lag too (a standby down or lagging is no failure).

It runs on threads of its own (:data:`HEALTH_THREADS`), not in the pool the other routes share,
so a probe never waits behind busy requests (or their bounded waits for an index lock).
"""

from __future__ import annotations

import functools
from typing import Literal

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from livingrag.api.deps import Services
from livingrag.api.schemas import HealthOut, ReplicaOut

router = APIRouter(tags=["health"])
HEALTH_THREADS = 4
"""Threads reserved for /health probes."""


@functools.cache
def _head() -> str:
    """The migrations' head revision (read from the scripts once per process)."""
    from livingrag.db import migrate

    return migrate.head_revision()


@router.get(
    "/health",
    response_model=HealthOut,
    summary="Liveness and readiness (no key needed)",
    responses={503: {"model": HealthOut, "description": "Not ready: the body says which part is missing."}},
)
async def health(request: Request) -> JSONResponse:
    state = request.app.state
    limiter = getattr(state, "health_limiter", None)
    if limiter is None:
        limiter = state.health_limiter = anyio.CapacityLimiter(HEALTH_THREADS)
    return await anyio.to_thread.run_sync(_health, state.services, limiter=limiter)


def _health(svc: Services) -> JSONResponse:
    """The readiness answer: database, schema and models."""
    from livingrag.db import migrate

    db_ok = svc.db.ping()
    current = head = None
    detail = []
    if db_ok:
        try:
            with svc.db.owner_engine.connect() as conn:
                current = migrate.current_revision(conn)
            head = _head()
        except Exception as exc:
            db_ok = False
            detail.append(f"schema check failed: {type(exc).__name__}")
    else:
        detail.append("database unreachable")
    up_to_date = db_ok and current is not None and current == head
    if db_ok and not up_to_date:
        detail.append(f"schema at {current}, code needs {head}: run `livingrag db upgrade`")
    models: Literal["loaded", "loading", "failed"]
    if svc.models_error is not None:
        models = "failed"
        detail.append(svc.models_error)
    else:
        models = "loaded" if svc.models_loaded.is_set() else "loading"
    ok = db_ok and up_to_date and models == "loaded"
    body = HealthOut(
        status="ok" if ok else "unavailable",
        database=db_ok,
        schema_current=current,
        schema_head=head,
        schema_up_to_date=up_to_date,
        models=models,
        detail="; ".join(detail) or None,
        replicas=[ReplicaOut(**r) for r in svc.db.replica_status()],
        reads_on_primary=dict(svc.db.replicas.counters.primary) if svc.db.replicas is not None else {},
    )
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)
