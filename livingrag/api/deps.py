"""What the routes share (:class:`Services`) and the authentication dependencies.

Tenant keys: ``Authorization: Bearer <key>``; the key's sha256 is looked up through the
``livingrag_tenant_for_key`` function from an application (RLS-bound) session, so the key table
is never readable by the app role. The admin key (``api.admin_key``) manages tenants and runs
maintenance; it is not a tenant key.
"""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from livingrag.api.errors import ApiError
from livingrag.api.jobs import JobRegistry
from livingrag.db.repositories import tenants

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.db.engine import Database
    from livingrag.pipeline.core import LivingRAG


@dataclass
class Services:
    """Everything one app instance holds: settings, database, pipeline, jobs and limits."""

    settings: Settings
    db: Database
    rag: LivingRAG
    jobs: JobRegistry
    ask_slots: threading.BoundedSemaphore
    index_lock: threading.Lock = field(default_factory=threading.Lock)
    models_loaded: threading.Event = field(default_factory=threading.Event)
    models_error: str | None = None


def services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


bearer = HTTPBearer(auto_error=False, description="A tenant's API key (or the admin key for /v1/tenants, /v1/admin).")


def _key(creds: HTTPAuthorizationCredentials | None) -> str:
    if creds is None or creds.scheme.lower() != "bearer" or not creds.credentials:
        raise ApiError(
            401, "unauthorized", "missing API key: send 'Authorization: Bearer <key>'", {"WWW-Authenticate": "Bearer"}
        )
    return creds.credentials


def _is_admin(svc: Services, key: str) -> bool:
    admin = svc.settings.api.admin_key
    return admin is not None and hmac.compare_digest(key.encode(), admin.get_secret_value().encode())


def tenant_id(creds: HTTPAuthorizationCredentials | None = Depends(bearer), svc: Services = Depends(services)) -> int:
    """The calling tenant's id (401 for a missing or unknown key)."""
    key = _key(creds)
    if _is_admin(svc, key):
        raise ApiError(403, "forbidden", "the admin key manages tenants; use a tenant's API key here")
    with svc.db.app_session() as s:
        tid = tenants.tenant_for_key(s, key)
    if tid is None:
        raise ApiError(401, "unauthorized", "unknown API key", {"WWW-Authenticate": "Bearer"})
    return int(tid)


def admin(creds: HTTPAuthorizationCredentials | None = Depends(bearer), svc: Services = Depends(services)) -> None:
    """Admin-only routes: 401 without a key, 403 with a key that is not the admin key."""
    key = _key(creds)
    if svc.settings.api.admin_key is None:
        raise ApiError(403, "forbidden", "no admin key is configured (set LIVINGRAG_API__ADMIN_KEY)")
    if not _is_admin(svc, key):
        raise ApiError(403, "forbidden", "this operation needs the admin key")
