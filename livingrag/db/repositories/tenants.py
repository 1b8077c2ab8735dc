"""Tenants and their API keys (hashed at rest; the plain key is shown once, at creation)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from livingrag.errors import AlreadyExists, InvalidInput, NotFound

KEY_PREFIX = "lrg_"


@dataclass(frozen=True)
class TenantRecord:
    id: int
    name: str
    api_key_prefix: str
    created_at: datetime


def hash_api_key(key: str) -> str:
    """sha256 of the key. Keys are 256-bit random tokens, so a fast hash is enough at rest."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


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
    """Create a tenant; returns the record and its plain API key (not stored anywhere)."""
    name = validate_name(name, "tenant name")
    key = new_api_key()
    try:
        with session.begin_nested():
            row = session.execute(
                text(
                    "INSERT INTO tenants (name, api_key_hash, api_key_prefix) VALUES (:n, :h, :p) "
                    "RETURNING id, name, api_key_prefix, created_at"
                ),
                {"n": name, "h": hash_api_key(key), "p": key[: len(KEY_PREFIX) + 6]},
            ).one()
    except IntegrityError as exc:
        raise AlreadyExists(f"a tenant named {name!r} already exists") from exc
    return TenantRecord(*row), key


def list_tenants(session: Session) -> list[TenantRecord]:
    rows = session.execute(text("SELECT id, name, api_key_prefix, created_at FROM tenants ORDER BY id")).all()
    return [TenantRecord(*r) for r in rows]


def get_tenant(session: Session, name_or_id: str | int) -> TenantRecord:
    if isinstance(name_or_id, int) or (isinstance(name_or_id, str) and name_or_id.isdigit()):
        row = session.execute(
            text("SELECT id, name, api_key_prefix, created_at FROM tenants WHERE id = :i"), {"i": int(name_or_id)}
        ).one_or_none()
    else:
        row = session.execute(
            text("SELECT id, name, api_key_prefix, created_at FROM tenants WHERE name = :n"), {"n": name_or_id}
        ).one_or_none()
    if row is None:
        raise NotFound(f"no tenant {name_or_id!r}")
    return TenantRecord(*row)


def delete_tenant(session: Session, tenant_id: int) -> None:
    """Delete a tenant and, by cascade, every row it owns."""
    res = session.execute(text("DELETE FROM tenants WHERE id = :i"), {"i": tenant_id})
    if res.rowcount == 0:
        raise NotFound(f"no tenant with id {tenant_id}")


def tenant_for_key(session: Session, key: str) -> int | None:
    """The tenant id for an API key, or None. Works from an application (RLS-bound) session."""
    if not key or not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    return session.execute(text("SELECT livingrag_tenant_for_key(:h)"), {"h": hash_api_key(key)}).scalar()
