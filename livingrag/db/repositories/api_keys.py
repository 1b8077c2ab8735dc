"""A tenant's API keys: several named keys, each with scopes, an optional expiry and revocation.

Only a key's sha256 is stored; the plain key is returned once, by :func:`create_key`. Every
function here filters by ``tenant_id`` itself, so it is right in an owner session (CLI, operator
routes) and in a tenant session, where row-level security and the application role's column
privileges (every column but ``key_hash``; it creates keys only through ``livingrag_api_key_create``
and may only set ``revoked_at``, once: migration 0012) apply as well. :func:`grant_for_key` resolves a key
from an application session through the ``SECURITY DEFINER`` function ``livingrag_api_key_grant``
on every call: nothing is cached, so a revoked or expired key fails its next request.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Row, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from livingrag.errors import AlreadyExists, Conflict, InvalidInput, NotFound

if TYPE_CHECKING:
    from livingrag.db.engine import Database

KEY_PREFIX = "lrg_"
PREFIX_CHARS = len(KEY_PREFIX) + 6
"""How much of a key is stored in the clear and shown in lists, to tell keys apart."""

READ, WRITE, FEEDBACK, ADMIN = "read", "write", "feedback", "admin"
SCOPES: tuple[str, ...] = (READ, WRITE, FEEDBACK, ADMIN)
"""read: questions and every GET; write: corpora, passages, index jobs, deleting experiences (and
what feedback allows); feedback: verdicts on answers and verifying or retracting experiences;
admin: the tenant's own keys. A key made with every scope (a tenant's ``default`` key) has all four.
The database's ``ck_api_keys_scopes`` names the same scopes (migration 0012 added ``feedback``)."""

DEFAULT_KEY_NAME = "default"
MAX_EXPIRY_DAYS = 3650
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_COLUMNS = "id, tenant_id, name, prefix, scopes, created_at, last_used_at, expires_at, revoked_at"


KeyState = Literal["active", "expired", "revoked"]


@dataclass(frozen=True)
class KeyRecord:
    """What may be shown of a key: never its hash nor the key itself."""

    id: int
    tenant_id: int
    name: str
    prefix: str
    scopes: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None

    def state(self, now: datetime | None = None) -> KeyState:
        """``revoked``, ``expired`` or ``active``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= (now or datetime.now(UTC)):
            return "expired"
        return "active"


@dataclass(frozen=True)
class KeyGrant:
    """What a valid key grants: its tenant, which key it is, and its scopes."""

    tenant_id: int
    key_id: int | None  # None: the operator (admin key) acting for the tenant
    scopes: frozenset[str]


def hash_api_key(key: str) -> str:
    """sha256 of the key. Keys are 256-bit random tokens, so a fast hash is enough at rest."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_api_key() -> str:
    """A fresh key: ``lrg_`` and 256 random bits (43 URL-safe characters)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def validate_key_name(name: str) -> str:
    """1 to 64 letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit and not all
    digits (so that a name is never mistaken for an id)."""
    name = (name or "").strip()
    if not _NAME.fullmatch(name) or name.isdigit():
        raise InvalidInput(
            f"key name {name!r} is not valid: use 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit and not only digits"
        )
    return name


def parse_scopes(scopes: str | Iterable[str]) -> tuple[str, ...]:
    """Scopes from ``"read,write"`` or a list, de-duplicated in :data:`SCOPES` order; unknown or no
    scopes are :class:`InvalidInput` naming them."""
    items = scopes.split(",") if isinstance(scopes, str) else list(scopes)
    wanted = {str(s).strip().lower() for s in items if str(s).strip()}
    unknown = sorted(wanted - set(SCOPES))
    if unknown:
        raise InvalidInput(f"unknown scope(s) {', '.join(map(repr, unknown))}: choose from {', '.join(SCOPES)}")
    if not wanted:
        raise InvalidInput(f"give at least one scope: {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in wanted)


def expiry(*, in_days: int | None = None, at: datetime | None = None, now: datetime | None = None) -> datetime | None:
    """When a new key expires: ``in_days`` from ``now`` or at ``at`` (not both); None: never."""
    now = now or datetime.now(UTC)
    if in_days is not None and at is not None:
        raise InvalidInput("give the expiry in days or as a time, not both")
    if in_days is not None:
        if isinstance(in_days, bool) or not 1 <= in_days <= MAX_EXPIRY_DAYS:
            raise InvalidInput(f"expiry in days must be a whole number from 1 to {MAX_EXPIRY_DAYS}, got {in_days!r}")
        return now + timedelta(days=in_days)
    if at is not None:
        if at.tzinfo is None:
            raise InvalidInput("expires_at needs a time zone (e.g. 2027-01-31T00:00:00Z)")
        if at <= now:
            raise InvalidInput(f"expires_at {at.isoformat()} is not in the future")
        if at > now + timedelta(days=MAX_EXPIRY_DAYS):
            raise InvalidInput(f"expires_at is more than {MAX_EXPIRY_DAYS} days away")
        return at
    return None


def _record(row: Row[*tuple[Any, ...]]) -> KeyRecord:
    return KeyRecord(
        id=row[0],
        tenant_id=row[1],
        name=row[2],
        prefix=row[3],
        scopes=tuple(row[4]),
        created_at=row[5],
        last_used_at=row[6],
        expires_at=row[7],
        revoked_at=row[8],
    )


def create_key(
    session: Session,
    tenant_id: int,
    name: str,
    scopes: Sequence[str],
    *,
    expires_at: datetime | None = None,
) -> tuple[KeyRecord, str]:
    """Add a key to ``tenant_id``; returns its record and the plain key (stored nowhere).

    The owner route inserts the row; the application role, which holds no ``INSERT`` on
    ``api_keys`` (migration 0012), goes through ``livingrag_api_key_create``, which adds a key to
    the session's own tenant only and checks the row's shape again."""
    name = validate_key_name(name)
    scopes = parse_scopes(scopes)
    key = new_api_key()
    direct = bool(session.execute(text("SELECT has_table_privilege('api_keys', 'INSERT')")).scalar())
    statement = (
        "INSERT INTO api_keys (tenant_id, name, key_hash, prefix, scopes, expires_at) "
        f"VALUES (:t, :n, :h, :p, :s, :e) RETURNING {_COLUMNS}"
        if direct
        else f"SELECT {_COLUMNS} FROM livingrag_api_key_create(CAST(:t AS bigint), :n, :h, :p,"
        " CAST(:s AS text[]), CAST(:e AS timestamptz))"
    )
    try:
        with session.begin_nested():
            row = session.execute(
                text(statement),
                {
                    "t": tenant_id,
                    "n": name,
                    "h": hash_api_key(key),
                    "p": key[:PREFIX_CHARS],
                    "s": list(scopes),
                    "e": expires_at,
                },
            ).one()
    except IntegrityError as exc:
        if "uq_api_keys_tenant_name" in str(exc.orig):
            raise AlreadyExists(f"this tenant already has a key named {name!r}") from exc
        raise
    return _record(row), key


def list_keys(session: Session, tenant_id: int) -> list[KeyRecord]:
    """Every key of the tenant, revoked and expired ones included, oldest first."""
    rows = session.execute(
        text(f"SELECT {_COLUMNS} FROM api_keys WHERE tenant_id = :t ORDER BY id"), {"t": tenant_id}
    ).all()
    return [_record(r) for r in rows]


def get_key(session: Session, tenant_id: int, id_or_name: int | str) -> KeyRecord:
    """One key of the tenant by id or name; :class:`NotFound` otherwise (another tenant's key too)."""
    value: int | str
    if isinstance(id_or_name, int) or str(id_or_name).strip().isdigit():
        where, value = "id = :v", int(id_or_name)
        if not 0 < value < 2**63:  # no bigint id: not found rather than a driver error
            raise NotFound(f"this tenant has no key {id_or_name!r}")
    else:
        where, value = "name = :v", str(id_or_name).strip()
    row = session.execute(
        text(f"SELECT {_COLUMNS} FROM api_keys WHERE tenant_id = :t AND {where}"), {"t": tenant_id, "v": value}
    ).one_or_none()
    if row is None:
        raise NotFound(f"this tenant has no key {id_or_name!r}")
    return _record(row)


class LastAdminKey(Conflict):
    """Revoking this key would leave the tenant without an active admin key."""


def revoke_key(session: Session, tenant_id: int, id_or_name: int | str, *, keep_an_admin: bool = False) -> KeyRecord:
    """Revoke a key of the tenant (from its next request on); a key already revoked is returned as
    it is. With ``keep_an_admin`` the tenant's last active admin key is refused
    (:class:`LastAdminKey`): the tenant could no longer manage its keys itself."""
    key = get_key(session, tenant_id, id_or_name)
    if key.revoked_at is not None:
        return key
    if keep_an_admin and ADMIN in key.scopes and key.state() == "active":
        # Lock the active admin keys so that two revocations cannot each leave the other as the last.
        admins = session.execute(
            text(
                "SELECT id FROM api_keys WHERE tenant_id = :t AND revoked_at IS NULL AND :a = ANY(scopes) "
                "AND (expires_at IS NULL OR expires_at > now()) FOR UPDATE"
            ),
            {"t": tenant_id, "a": ADMIN},
        ).scalars()
        if set(admins) <= {key.id}:
            raise LastAdminKey(
                f"key {key.name!r} is this tenant's last active admin key: create another key with the admin "
                "scope first (or ask the operator to revoke it)"
            )
    row = session.execute(
        text(
            "UPDATE api_keys SET revoked_at = now() WHERE tenant_id = :t AND id = :i AND revoked_at IS NULL "
            f"RETURNING {_COLUMNS}"
        ),
        {"t": tenant_id, "i": key.id},
    ).one_or_none()
    return _record(row) if row is not None else get_key(session, tenant_id, key.id)


def grant_for_key_read(db: Database, key: str) -> KeyGrant | None:
    """:func:`grant_for_key` in one round trip (:meth:`Database.app_statement`): the request
    path's key check, with no explicit transaction or pre-ping."""
    if not key or not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    rows = db.app_statement(
        "SELECT tenant_id, key_id, scopes FROM livingrag_api_key_grant(%(h)s)", {"h": hash_api_key(key)}
    )
    if not rows:
        return None
    tenant_id, key_id, scopes = rows[0]
    return KeyGrant(tenant_id=int(tenant_id), key_id=int(key_id), scopes=frozenset(scopes))


def grant_for_key(session: Session, key: str) -> KeyGrant | None:
    """What ``key`` grants, or None for an unknown, revoked or expired key. Works from an
    application (RLS-bound) session; stamps the key's ``last_used_at`` (at most once a minute)."""
    if not key or not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    row = session.execute(
        text("SELECT tenant_id, key_id, scopes FROM livingrag_api_key_grant(:h)"), {"h": hash_api_key(key)}
    ).one_or_none()
    if row is None:
        return None
    return KeyGrant(tenant_id=int(row[0]), key_id=int(row[1]), scopes=frozenset(row[2]))
