"""The operator's tenants and their keys, on the owner's session (the admin key's ``/v1/tenants``,
``livingrag tenant``, ``livingrag key``): create, list, look up and delete tenants; create, list
and revoke any tenant's keys. A tenant manages its own keys through :mod:`livingrag.services.keys`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from livingrag.db.repositories import api_keys, tenants
from livingrag.db.repositories.api_keys import ADMIN, KeyRecord
from livingrag.db.repositories.tenants import TenantRecord as TenantRecord

if TYPE_CHECKING:
    from livingrag.db.engine import Database


def create_tenant(db: Database, name: str) -> tuple[TenantRecord, str]:
    """A new tenant with its ``default`` key (every scope): the record and the key, in plain once."""
    with db.owner_session() as s:
        return tenants.create_tenant(s, name)


def list_tenants(db: Database) -> list[TenantRecord]:
    with db.owner_session() as s:
        return tenants.list_tenants(s)


def get_tenant(db: Database, name_or_id: str | int) -> TenantRecord:
    """The tenant by name or id (:class:`~livingrag.errors.NotFound` when there is none)."""
    with db.owner_session() as s:
        return tenants.get_tenant(s, name_or_id)


def delete_tenant(db: Database, tenant_id: int) -> None:
    """Delete the tenant and everything it owns."""
    with db.owner_session() as s:
        tenants.delete_tenant(s, tenant_id)


# ---------------------------------------------------------------- any tenant's keys


def create_key(
    db: Database,
    tenant: str | int,
    name: str,
    scopes: Sequence[str],
    *,
    expires_in_days: int | None = None,
    expires_at: datetime | None = None,
) -> tuple[TenantRecord, KeyRecord, str]:
    """A new key of ``tenant`` (name or id), expiring as :func:`~livingrag.services.keys.expiry`
    says: the tenant, the key's record and the key. An unknown tenant is refused before the expiry
    is read."""
    with db.owner_session() as s:
        t = tenants.get_tenant(s, tenant)
        when = api_keys.expiry(in_days=expires_in_days, at=expires_at)
        rec, key = api_keys.create_key(s, t.id, name, scopes, expires_at=when)
    return t, rec, key


def list_keys(db: Database, tenant: str | int) -> list[KeyRecord]:
    """Every key of ``tenant`` (name or id), revoked and expired ones included."""
    with db.owner_session() as s:
        return api_keys.list_keys(s, tenants.get_tenant(s, tenant).id)


@dataclass(frozen=True)
class Revocation:
    """A key revoked by the operator: the tenant, the key before and after, and how many active
    admin keys the tenant has left."""

    tenant: TenantRecord
    before: KeyRecord
    key: KeyRecord
    active_admin_keys: int


def revoke_key(db: Database, tenant: str | int, key: str | int) -> Revocation:
    """Revoke ``tenant``'s key ``key`` (id or name; one already revoked stays as it is), even its
    last admin key."""
    with db.owner_session() as s:
        t = tenants.get_tenant(s, tenant)
        before = api_keys.get_key(s, t.id, key)
        rec = api_keys.revoke_key(s, t.id, before.id)
        admins_left = sum(1 for k in api_keys.list_keys(s, t.id) if ADMIN in k.scopes and k.state() == "active")
    return Revocation(tenant=t, before=before, key=rec, active_admin_keys=admins_left)
