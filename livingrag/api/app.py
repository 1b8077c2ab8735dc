"""The app factory: :func:`create_app` wires settings, database, pipeline and routers."""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from fastapi import FastAPI

from livingrag import __version__
from livingrag.api import console, errors
from livingrag.api.deps import Services
from livingrag.api.fairness import TenantRateLimiter, TenantSlots, TotalSlots
from livingrag.api.limits import BodySizeLimit
from livingrag.api.request_id import RequestId
from livingrag.api.routes import (
    admin,
    ask,
    corpora,
    experiences,
    feedback,
    gate,
    graph,
    health,
    keys,
    passages,
    store,
    tenants,
    uploads,
)
from livingrag.api.shared_limits import (
    SHARED_LIMITS_ENV,
    SharedLimitTable,
    SharedRateLimiter,
    SharedTenantSlots,
    SharedTotalSlots,
)
from livingrag.corpus.index_jobs import IndexJobs
from livingrag.retrieval.retriever import shared_graph_cache

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.db.engine import Database
    from livingrag.pipeline.answer_pipeline import LivingRAG

log = logging.getLogger(__name__)

DESCRIPTION = """Graph-RAG question answering with a writable experience store, for many tenants.

Authenticate with `Authorization: Bearer <key>`: a tenant's API key for corpora, passages,
questions and experiences (each tenant sees only its own rows: PostgreSQL row-level security),
the admin key (`LIVINGRAG_API__ADMIN_KEY`) for `/v1/tenants` and `/v1/admin`. A tenant has
several named keys, each with scopes: `read` (questions and every GET), `write` (corpora,
passages, index jobs, deleting experiences), `feedback` (verdicts on answers, verifying and
retracting experiences; `write` allows these too), `admin` (the tenant's keys, `/v1/keys`).
With the admin key, `X-Livingrag-Tenant: <tenant id>` acts for that tenant on the tenant routes
(the web console's operator sign-in). Every error answers `{"error": {"code": ..., "message": ...}}`.
The web console is served under `/ui`.
"""


def _load_models(svc: Services) -> None:
    """Load the encoder and the NER model once, so the first request does not pay for them."""
    try:
        from livingrag.corpus.ner import make_extractor
        from livingrag.models.embedder import embedder_from_settings

        m = svc.settings.models
        embedder_from_settings(m).encode(["warm up"])
        embedder_from_settings(m, queries=True).encode(["warm up"])  # the question encoder (int8 by default)
        if m.extractor == "spacy":
            make_extractor("spacy", ner_model=m.ner_model, batch_size=m.ner_batch_size)
        svc.models_loaded.set()
        log.info("models loaded")
    except Exception as exc:
        log.error("could not load the models: %s", exc)
        svc.models_error = "models failed to load (the reason is in the server log)"
        return
    # A local answer model starts its process now rather than on the first question. A failure
    # here is logged, not fatal: each question tries again and answers 503 while it fails.
    load_llm = getattr(svc.rag.llm, "load", None)
    if load_llm is not None:
        try:
            load_llm()
        except Exception as exc:
            log.error("the answer model could not start (questions answer 503 until it does): %s", exc)


def _recover_writebacks(svc: Services) -> None:
    """Log, as dropped, the write-back candidates a crashed process lost (see experience.drop_log)."""
    from datetime import UTC, datetime, timedelta

    from livingrag.experience.drop_log import log_lost_candidates

    now = datetime.now(UTC)
    try:
        n = log_lost_candidates(
            svc.db, before=now - timedelta(seconds=svc.settings.api.recovery_grace_s), since=now - timedelta(days=7)
        )
        if n:
            log.warning("%d write-back candidates were lost by a stopped server; logged as dropped", n)
    except Exception as exc:
        log.warning("write-back recovery failed: %s", exc)


def create_app(
    settings: Settings,
    *,
    db: Database | None = None,
    rag: LivingRAG | None = None,
    preload_models: bool = True,
    models_before_serving: bool = False,
    shared_limits: Path | None = None,
) -> FastAPI:
    """The HTTP app. ``db`` and ``rag`` are built from ``settings`` on startup unless given (then the
    caller owns them). Models load in the background and ``/health`` says 503 until they have; with
    ``models_before_serving`` the process accepts no connection until they have (``serve --workers
    N``: the workers share one port, so a worker still loading must not answer a readiness probe or
    a question meant for a ready one). With ``shared_limits`` (a table made by
    :meth:`~livingrag.api.shared_limits.SharedLimitTable.create`) the question caps and request
    rates count over every process attached to it (the workers of ``serve --workers N``)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from livingrag.db.setup import open_database
        from livingrag.experience.feedback import TrustService
        from livingrag.pipeline.answer_pipeline import LivingRAG

        table = SharedLimitTable.attach(shared_limits) if shared_limits is not None else None
        own_db = db is None
        database = db if db is not None else open_database(settings.db)  # serve's start migrates (embedded)
        pipeline = rag if rag is not None else LivingRAG(settings, db=database)
        svc = Services(
            settings=settings,
            db=database,
            rag=pipeline,
            trust=TrustService(pipeline.db, pipeline.settings, pipeline.store, background_fits=True),
            jobs=IndexJobs(
                database,
                max_pending=settings.api.max_pending_jobs,
                tenant_max_pending=settings.api.tenant_max_pending_jobs,
            ),
            **_limits(settings, table),
            several_workers=table is not None,
        )
        app.state.services = svc
        # questions are answered from the previous graph version while the next one loads on a
        # thread of its own, and the version is read at most every api.graph_check_interval_s;
        # passage changes still wait for theirs (read your writes). The cache is the process's:
        # what it did before this app is restored when the app stops.
        refresh_before = shared_graph_cache().set_refresh(
            background=settings.api.graph_refresh_in_background,
            check_interval_s=settings.api.graph_check_interval_s,
        )
        _recover_writebacks(svc)
        # index jobs: this instance's worker takes queued jobs (those a stopped process left too)
        # and puts back the running jobs whose worker is gone (livingrag.corpus.index_jobs)
        svc.jobs.start(functools.partial(passages.run_index_job, svc))
        # Sync routes run in anyio's thread pool (40 threads by default): make room for every
        # question allowed in flight plus the other routes, so that 429 (not a hidden queue) is
        # what a client meets past api.max_inflight.
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens, settings.api.max_inflight + 16)
        if preload_models and models_before_serving:
            await anyio.to_thread.run_sync(_load_models, svc)
        elif preload_models:
            threading.Thread(target=_load_models, args=(svc,), name="load-models", daemon=True).start()
        else:
            svc.models_loaded.set()
        try:
            yield
        finally:
            background_before, interval_before = refresh_before
            shared_graph_cache().set_refresh(background=background_before, check_interval_s=interval_before)
            svc.jobs.close()
            if rag is None:
                pipeline.close(timeout=30)
            if own_db:
                database.close()
            if table is not None:
                table.close()

    app = FastAPI(
        title="livingrag",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_tags=[
            {"name": "tenants", "description": "Tenant management (admin key)."},
            {"name": "keys", "description": "API keys: a tenant's own (admin scope) or any tenant's (admin key)."},
            {"name": "corpora", "description": "The caller's corpora."},
            {"name": "passages", "description": "Passages and index jobs of a corpus."},
            {"name": "ask", "description": "Questions."},
            {"name": "experiences", "description": "The caller's stored experiences."},
            {
                "name": "feedback",
                "description": "People's verdicts on answers: right, wrong, or the right answer (verifying, "
                "retracting and the history of single experiences are under experiences).",
            },
            {"name": "admin", "description": "Experience-store maintenance (admin key)."},
            {"name": "health", "description": "Readiness."},
        ],
    )
    errors.install(app)
    routers = (tenants, keys, corpora, graph, passages, uploads, ask, experiences, feedback, gate, store, admin, health)
    for module in routers:
        app.include_router(module.router)
    app.include_router(keys.operator_router)
    console.install(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.api.max_request_bytes)
    app.add_middleware(RequestId)  # outermost: every response, the 413 included, carries the id
    return app


def _limits(settings: Settings, table: SharedLimitTable | None) -> dict[str, Any]:
    """The question caps and the request rate of :class:`Services`: in-process, or counted in
    ``table`` over every process attached to it."""
    api = settings.api
    if table is None:
        return {
            "ask_slots": TotalSlots(api.max_inflight),
            "tenant_slots": TenantSlots(api.tenant_max_inflight),
            "rate": TenantRateLimiter(api.tenant_rate_per_s, api.tenant_burst),
        }
    return {
        "ask_slots": SharedTotalSlots(table, api.max_inflight),
        "tenant_slots": SharedTenantSlots(table, api.tenant_max_inflight),
        "rate": SharedRateLimiter(table, api.tenant_rate_per_s, api.tenant_burst),
    }


def app_from_environment() -> FastAPI:
    """The app with settings from the environment (``livingrag serve --workers N`` builds one per
    worker, and so may another ASGI server); each worker loads its models before it takes a
    connection. A weak admin key is refused here too (:mod:`livingrag.api.admin_key`)."""
    from livingrag.api.admin_key import check_admin_key
    from livingrag.config import get_settings

    settings = get_settings()
    check_admin_key(None if settings.api.admin_key is None else settings.api.admin_key.get_secret_value())
    shared = os.environ.get(SHARED_LIMITS_ENV)
    return create_app(settings, models_before_serving=True, shared_limits=Path(shared) if shared else None)
