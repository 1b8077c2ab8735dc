"""API keys on the tenant's own session: what a key grants, the scopes, and the calling tenant's
keys (``/v1/keys``). The operator manages any tenant's keys through :mod:`livingrag.services.tenants`.

A key is returned in plain once, when it is created; only its hash is stored."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from livingrag.db.repositories import api_keys
from livingrag.db.repositories.api_keys import ADMIN as ADMIN
from livingrag.db.repositories.api_keys import FEEDBACK as FEEDBACK
from livingrag.db.repositories.api_keys import PREFIX_CHARS as PREFIX_CHARS
from livingrag.db.repositories.api_keys import READ as READ
from livingrag.db.repositories.api_keys import SCOPES as SCOPES
from livingrag.db.repositories.api_keys import WRITE as WRITE
from livingrag.db.repositories.api_keys import KeyGrant as KeyGrant
from livingrag.db.repositories.api_keys import KeyRecord as KeyRecord
from livingrag.db.repositories.api_keys import expiry as expiry
from livingrag.db.repositories.api_keys import parse_scopes as parse_scopes
from livingrag.db.repositories.api_keys import validate_key_name as validate_key_name

if TYPE_CHECKING:
    from livingrag.db.engine import Database


def grant_for_key(db: Database, key: str) -> KeyGrant | None:
    """What ``key`` grants (its tenant, id and scopes), or None for an unknown, revoked or expired
    key: one round trip as the application role (the request path's check)."""
    return api_keys.grant_for_key_read(db, key)


def create_own_key(
    db: Database, tenant_id: int, name: str, scopes: Sequence[str], *, expires_at: datetime | None
) -> tuple[KeyRecord, str]:
    """A new key of the calling tenant: its record and the key."""
    with db.tenant_session(tenant_id) as s:
        return api_keys.create_key(s, tenant_id, name, scopes, expires_at=expires_at)


def list_own_keys(db: Database, tenant_id: int) -> list[KeyRecord]:
    """The calling tenant's keys, revoked and expired ones included."""
    with db.tenant_session(tenant_id) as s:
        return api_keys.list_keys(s, tenant_id)


def revoke_own_key(db: Database, tenant_id: int, key_id: int) -> KeyRecord:
    """Revoke one of the calling tenant's keys; its last active admin key is refused
    (:class:`~livingrag.db.repositories.api_keys.LastAdminKey`)."""
    with db.tenant_session(tenant_id) as s:
        return api_keys.revoke_key(s, tenant_id, key_id, keep_an_admin=True)
