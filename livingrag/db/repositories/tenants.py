"""Tenants. A new tenant gets its first API key, ``default``, with every scope (shown once); its
keys are managed by :mod:`livingrag.db.repositories.api_keys`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from livingrag.db.repositories import api_keys
from livingrag.db.repositories.api_keys import KEY_PREFIX, PREFIX_CHARS, hash_api_key, new_api_key
from livingrag.db.repositories.rows import rowcount
from livingrag.errors import AlreadyExists, InvalidInput, NotFound

__all__ = [
    "KEY_PREFIX",
    "PREFIX_CHARS",
    "TenantRecord",
    "create_tenant",
    "delete_tenant",
    "get_tenant",
    "hash_api_key",
    "list_tenants",
    "new_api_key",
    "tenant_for_key",
    "validate_name",
]


@dataclass(frozen=True)
class TenantRecord:
    id: int
    name: str
    created_at: datetime
    active_keys: int
    """Keys neither revoked nor expired."""


_SELECT = (
    "SELECT t.id, t.name, t.created_at, (SELECT count(*) FROM api_keys k WHERE k.tenant_id = t.id"
    " AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())) FROM tenants t"
)


def validate_name(name: str, what: str = "name") -> str:
    name = (name or "").strip()
    if not name:
        raise InvalidInput(f"{what} must not be empty")
    if len(name) > 200:
        raise InvalidInput(f"{what} is longer than 200 characters")
    if any(ord(c) < 32 for c in name):
        raise InvalidInput(f"{what} must not contain control characters")
    return name


def create_tenant(session: Session, name: str) -> tuple[TenantRecord, str]:
    """Create a tenant with its ``default`` key (every scope); returns the record and that key in
    plain (not stored anywhere)."""
    name = validate_name(name, "tenant name")
    try:
        with session.begin_nested():
            tid, created = session.execute(
                text("INSERT INTO tenants (name) VALUES (:n) RETURNING id, created_at"), {"n": name}
            ).one()
    except IntegrityError as exc:
        raise AlreadyExists(f"a tenant named {name!r} already exists") from exc
    _, key = api_keys.create_key(session, tid, api_keys.DEFAULT_KEY_NAME, api_keys.SCOPES)
    return TenantRecord(tid, name, created, 1), key


def list_tenants(session: Session) -> list[TenantRecord]:
    rows = session.execute(text(f"{_SELECT} ORDER BY t.id")).all()
    return [TenantRecord(*r) for r in rows]


def get_tenant(session: Session, name_or_id: str | int) -> TenantRecord:
    if isinstance(name_or_id, int) or (isinstance(name_or_id, str) and name_or_id.isdigit()):
        row = session.execute(text(f"{_SELECT} WHERE t.id = :i"), {"i": int(name_or_id)}).one_or_none()
    else:
        row = session.execute(text(f"{_SELECT} WHERE t.name = :n"), {"n": name_or_id}).one_or_none()
    if row is None:
        raise NotFound(f"no tenant {name_or_id!r}")
    return TenantRecord(*row)


def delete_tenant(session: Session, tenant_id: int) -> None:
    """Delete a tenant and, by cascade, every row it owns (its keys included)."""
    res = session.execute(text("DELETE FROM tenants WHERE id = :i"), {"i": tenant_id})
    if rowcount(res) == 0:
        raise NotFound(f"no tenant with id {tenant_id}")


def tenant_for_key(session: Session, key: str) -> int | None:
    """The tenant id for a valid API key (any scope), or None. Works from an application
    (RLS-bound) session; see :func:`api_keys.grant_for_key`."""
    grant = api_keys.grant_for_key(session, key)
    return None if grant is None else grant.tenant_id
