"""What the routes share (:class:`Services`) and the authentication dependencies.

Tenant keys: ``Authorization: Bearer <key>``; the key's sha256 is resolved on every request
through the ``livingrag_api_key_grant`` function from an application (RLS-bound) session, so key
hashes are never readable by the app role and a revoked or expired key fails its next request.
Each tenant route depends on :func:`require` (or :func:`require_caller`, when it records who acted)
with the scopes it accepts (``read``, ``write``, ``feedback`` or ``admin``:
:data:`~livingrag.services.keys.SCOPES`). The admin key
(``api.admin_key``) manages tenants and runs maintenance; it is not a tenant key, but with
``X-Livingrag-Tenant: <id>`` it acts for that tenant with every scope (the web console's operator).
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from livingrag.api.add_queue import AddQueue
from livingrag.api.errors import ApiError
from livingrag.api.fairness import KeyedLocks, RateLimiter, TenantSlots, TotalSlots
from livingrag.api.shared_limits import SharedTenantSlots, SharedTotalSlots
from livingrag.corpus.index_jobs import IndexJobs
from livingrag.experience.trust import Actor
from livingrag.services import keys, tenants
from livingrag.services.keys import KeyGrant

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.db.engine import Database
    from livingrag.experience.feedback import TrustService
    from livingrag.pipeline.answer_pipeline import LivingRAG


@dataclass
class Services:
    """Everything one app instance holds: settings, database, pipeline, jobs and limits: the global
    (``ask_slots``) and per-tenant (``tenant_slots``) question slots, the per-tenant request rate
    (``rate``), one lock per corpus for changes to its graph (``index_locks``), the queues that
    commit concurrent passage adds of a corpus together (``add_queue``) and the verdicts, trust
    changes and history of experiences (``trust``, over the pipeline's database, settings and
    experience store)."""

    settings: Settings
    db: Database
    rag: LivingRAG
    trust: TrustService
    jobs: IndexJobs
    ask_slots: TotalSlots | SharedTotalSlots
    tenant_slots: TenantSlots | SharedTenantSlots
    rate: RateLimiter
    index_locks: KeyedLocks = field(default_factory=KeyedLocks)
    add_queue: AddQueue = field(default_factory=AddQueue)
    models_loaded: threading.Event = field(default_factory=threading.Event)
    models_error: str | None = None
    several_workers: bool = False
    """This process is one of the workers of ``serve --workers N`` (N > 1), which share the limits:
    a client's next request may reach another worker (``api.add_waits_for_graph=auto``)."""


def services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


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


ACT_FOR_TENANT_HEADER = "X-Livingrag-Tenant"
MAX_ID = 2**63 - 1
"""The largest id a row can have (``bigint``)."""


def acting_tenant(svc: Services, key: str, header: str | None) -> int | None:
    """The tenant an operator acts for: the id in ``X-Livingrag-Tenant``, honoured only together
    with the admin key (the web console's operator sign-in). None when the header is absent; 403
    when it comes with any other key; 422 for an id that is not a positive integer; 404 for an
    unknown tenant. A tenant key never reaches another tenant through it."""
    if header is None:
        return None
    if not _is_admin(svc, key):
        raise ApiError(403, "forbidden", f"{ACT_FOR_TENANT_HEADER} is accepted only with the admin key")
    value = header.strip()
    if not (value.isascii() and value.isdigit()) or not 0 < int(value) <= MAX_ID:
        raise ApiError(422, "invalid_input", f"{ACT_FOR_TENANT_HEADER} must be a tenant id (a positive integer)")
    return int(tenants.get_tenant(svc.db, int(value)).id)  # NotFound answers 404


def key_grant(
    creds: HTTPAuthorizationCredentials | None = Depends(bearer),
    svc: Services = Depends(services),
    act_for: str | None = Header(
        None,
        alias=ACT_FOR_TENANT_HEADER,
        description="With the admin key only: the id of the tenant the operator acts for.",
    ),
) -> KeyGrant:
    """What the caller's tenant key grants (401 for a missing, unknown, revoked or expired key;
    403 for the admin key). The admin key with ``X-Livingrag-Tenant`` acts for that tenant with
    every scope (see :func:`acting_tenant`)."""
    key = _key(creds)
    acting = acting_tenant(svc, key, act_for)
    if acting is not None:
        return KeyGrant(tenant_id=acting, key_id=None, scopes=frozenset(keys.SCOPES))
    if _is_admin(svc, key):
        raise ApiError(
            403,
            "forbidden",
            f"the admin key manages tenants; use a tenant's API key here (or {ACT_FOR_TENANT_HEADER}: <tenant id>)",
        )
    grant = keys.grant_for_key(svc.db, key)
    if grant is None:
        raise ApiError(401, "unauthorized", "unknown, revoked or expired API key", {"WWW-Authenticate": "Bearer"})
    return grant


@dataclass(frozen=True)
class Caller:
    """Who calls a tenant route: the tenant and the key (None: the operator, the admin key acting
    for the tenant)."""

    tenant_id: int
    key_id: int | None
    scopes: frozenset[str] = frozenset()
    """What the key may do (every scope for the operator)."""

    def may(self, scope: str) -> bool:
        """The key has ``scope``."""
        return scope in self.scopes

    @property
    def actor(self) -> Actor:
        """What an experience's history records as the actor: ``key <id>``, or ``admin``."""
        return Actor.key(self.key_id) if self.key_id is not None else Actor.admin()


def require_caller(*scopes: str) -> Callable[..., Caller]:
    """A dependency returning the :class:`Caller` when its key has one of ``scopes``; 403 naming
    the scopes otherwise, 429 with ``Retry-After`` past the tenant's request rate
    (``api.tenant_rate_per_s``)."""
    unknown = set(scopes) - set(keys.SCOPES)
    if not scopes or unknown:
        raise ValueError(f"scopes must be some of {keys.SCOPES}, got {scopes}")
    needed = " or ".join(f"'{s}'" for s in scopes)

    def caller(grant: KeyGrant = Depends(key_grant), svc: Services = Depends(services)) -> Caller:
        if grant.scopes.isdisjoint(scopes):
            have = ", ".join(s for s in keys.SCOPES if s in grant.scopes)
            raise ApiError(403, "forbidden", f"this key lacks the {needed} scope (it has: {have})")
        refusal = svc.rate.admit(grant.tenant_id)
        if refusal is not None:
            raise ApiError(429, "rate_limited", refusal.message, {"Retry-After": str(refusal.retry_after_s)})
        return Caller(tenant_id=grant.tenant_id, key_id=grant.key_id, scopes=frozenset(grant.scopes))

    caller.__name__ = f"caller_{'_or_'.join(scopes)}"
    return caller


def require(*scopes: str) -> Callable[..., int]:
    """A dependency returning the calling tenant's id when its key has one of ``scopes`` (see
    :func:`require_caller`)."""
    who = require_caller(*scopes)

    def scoped(caller: Caller = Depends(who)) -> int:
        return caller.tenant_id

    scoped.__name__ = f"require_{'_or_'.join(scopes)}"
    return scoped


tenant_id = require(keys.READ)
"""The calling tenant's id for a key with the ``read`` scope (401 for a missing or invalid key)."""
tenant_writer = require(keys.WRITE)
"""The calling tenant's id for a key with the ``write`` scope."""
tenant_feedback = require(keys.FEEDBACK, keys.WRITE)
"""The calling tenant's id for a key with the ``feedback`` or ``write`` scope (verdicts on answers,
verifying and retracting experiences)."""
tenant_admin = require(keys.ADMIN)
"""The calling tenant's id for a key with the ``admin`` scope (the tenant's own keys)."""
writer_caller = require_caller(keys.WRITE)
"""The :class:`Caller` with the ``write`` scope (routes that record who changed an experience)."""
feedback_caller = require_caller(keys.FEEDBACK, keys.WRITE)
"""The :class:`Caller` with the ``feedback`` or ``write`` scope: who gave a verdict or changed an
experience's trust."""


def admin(creds: HTTPAuthorizationCredentials | None = Depends(bearer), svc: Services = Depends(services)) -> None:
    """Admin-only routes: 401 without a key, 403 with a key that is not the admin key."""
    key = _key(creds)
    if svc.settings.api.admin_key is None:
        raise ApiError(403, "forbidden", "no admin key is configured (set LIVINGRAG_API__ADMIN_KEY)")
    if not _is_admin(svc, key):
        raise ApiError(403, "forbidden", "this operation needs the admin key")
