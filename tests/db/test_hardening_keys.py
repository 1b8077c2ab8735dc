"""The application role cannot rewrite keys in SQL (issue 42, item 4).

As the application role in its own tenant, ``UPDATE api_keys SET revoked_at = NULL`` un-revoked a
key and ``INSERT INTO api_keys`` planted a key with chosen scopes. Since migration 0012 the role
creates keys only through ``livingrag_api_key_create`` (``SECURITY DEFINER``: the session's own
tenant, valid name, hash, prefix, scopes and expiry) and may only revoke: ``revoked_at`` goes from
NULL to the current time, once, for every role (a trigger), and it holds no other write on the
table. Creating, listing and revoking through the repository work as before."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, ProgrammingError

from livingrag.db.engine import Database
from livingrag.db.repositories import api_keys
from livingrag.errors import AlreadyExists

pytestmark = pytest.mark.db
MakeTenant = Callable[..., tuple[int, str]]
CREATE = "SELECT id FROM livingrag_api_key_create(:t, :n, :h, :p, CAST(:s AS text[]), :e)"


def _args(tenant: int, name: str = "planted", **kw: object) -> dict[str, object]:
    return {
        "t": tenant,
        "n": name,
        "h": hashlib.sha256(name.encode()).hexdigest(),
        "p": "lrg_abcdef",
        "s": ["read"],
        "e": None,
    } | kw


def test_the_app_role_cannot_unrevoke_a_key(db: Database, make_tenant: MakeTenant) -> None:
    a, _ = make_tenant("a")
    with db.tenant_session(a) as s:
        rec, key = api_keys.create_key(s, a, "soon-revoked", ["read"])
        revoked = api_keys.revoke_key(s, a, rec.id)
    assert api_keys.grant_for_key_read(db, key) is None
    for value in ("NULL", "now() + interval '1 day'", "'2001-01-01'"):
        with pytest.raises(DBAPIError, match="revoked"), db.tenant_session(a) as s:
            s.execute(text(f"UPDATE api_keys SET revoked_at = {value} WHERE id = :i"), {"i": rec.id})
    # the owner route cannot either: a revoked key stays revoked, whoever writes
    with pytest.raises(DBAPIError, match="revoked"), db.owner_session() as s:
        s.execute(text("UPDATE api_keys SET revoked_at = NULL WHERE id = :i"), {"i": rec.id})
    with db.owner_session() as s:
        assert api_keys.get_key(s, a, rec.id).revoked_at == revoked.revoked_at
    assert api_keys.grant_for_key_read(db, key) is None


def test_revoking_in_sql_stamps_the_current_time(db: Database, make_tenant: MakeTenant) -> None:
    a, _ = make_tenant("a")
    with db.tenant_session(a) as s:
        rec, _ = api_keys.create_key(s, a, "dated", ["read"])
        s.execute(text("UPDATE api_keys SET revoked_at = '2999-01-01' WHERE id = :i"), {"i": rec.id})
        now, at = s.execute(text("SELECT now(), revoked_at FROM api_keys WHERE id = :i"), {"i": rec.id}).one()
    assert at == now


def test_the_app_role_cannot_insert_a_raw_key_row(db: Database, make_tenant: MakeTenant) -> None:
    a, _ = make_tenant("a")
    with pytest.raises(ProgrammingError, match="permission denied"), db.tenant_session(a) as s:
        s.execute(
            text(
                "INSERT INTO api_keys (tenant_id, name, key_hash, prefix, scopes)"
                " VALUES (:t, 'planted', :h, 'lrg_planted', '{read,write,admin}')"
            ),
            {"t": a, "h": hashlib.sha256(b"lrg_planted").hexdigest()},
        )
    with pytest.raises(ProgrammingError, match="permission denied"), db.tenant_session(a) as s:
        s.execute(text("SELECT nextval('api_keys_id_seq')"))
    with db.owner_session() as s:
        assert [k.name for k in api_keys.list_keys(s, a)] == [api_keys.DEFAULT_KEY_NAME]


def test_the_app_role_cannot_change_scopes_hashes_or_expiry(db: Database, make_tenant: MakeTenant) -> None:
    a, _ = make_tenant("a")
    for statement in (
        "UPDATE api_keys SET scopes = '{read,write,admin}'",
        "UPDATE api_keys SET key_hash = 'x'",
        "UPDATE api_keys SET expires_at = NULL",
        "UPDATE api_keys SET last_used_at = now()",
        "DELETE FROM api_keys",
    ):
        with pytest.raises(ProgrammingError, match="permission denied"), db.tenant_session(a) as s:
            s.execute(text(statement))


def test_the_key_function_creates_only_valid_keys_of_the_sessions_tenant(db: Database, make_tenant: MakeTenant) -> None:
    a, _ = make_tenant("a")
    b, _ = make_tenant("b")
    with pytest.raises(DBAPIError, match="row-level security"), db.tenant_session(a) as s:
        s.execute(text(CREATE), _args(b))
    with pytest.raises(DBAPIError, match="row-level security"), db.app_session() as s:
        s.execute(text(CREATE), _args(a))
    now = datetime.now(UTC)
    bad: list[tuple[dict[str, object], str]] = [
        (_args(a, s=[]), "scope"),
        (_args(a, s=None), "scope"),
        (_args(a, s=["read", "read"]), "scope"),
        (_args(a, s=["read", None]), "scope"),
        (_args(a, s=["root"]), "ck_api_keys_scopes"),
        (_args(a, n="12345"), "name"),
        (_args(a, n="bad name"), "name"),
        (_args(a, h="not-a-sha256"), "hash"),
        (_args(a, p="nope"), "prefix"),
        (_args(a, e=now - timedelta(days=1)), "expir"),
        (_args(a, e=now + timedelta(days=4000)), "expir"),
    ]
    for args, why in bad:
        with pytest.raises(DBAPIError, match=why), db.tenant_session(a) as s:
            s.execute(text(CREATE), args)
    with db.tenant_session(a) as s:
        made = s.execute(text(CREATE), _args(a, n="made.in-sql", s=["read", "write"])).scalar_one()
    with db.owner_session() as s:
        assert api_keys.get_key(s, a, made).scopes == ("read", "write")
        assert api_keys.list_keys(s, b)[0].name == api_keys.DEFAULT_KEY_NAME and len(api_keys.list_keys(s, b)) == 1


def test_creating_and_revoking_keys_through_the_repository_still_work(db: Database, make_tenant: MakeTenant) -> None:
    a, _ = make_tenant("a")
    expires = datetime.now(UTC) + timedelta(days=30)
    with db.tenant_session(a) as s:  # a tenant admin's /v1/keys
        rec, key = api_keys.create_key(s, a, "ci", ["read", "write"], expires_at=expires)
        admin, _ = api_keys.create_key(s, a, "second-admin", ["admin"])
    assert rec.scopes == ("read", "write") and rec.expires_at == expires and rec.state() == "active"
    grant = api_keys.grant_for_key_read(db, key)
    assert grant is not None and grant.tenant_id == a and grant.key_id == rec.id
    with db.tenant_session(a) as s:
        with pytest.raises(AlreadyExists):
            api_keys.create_key(s, a, "ci", ["read"])
        assert api_keys.revoke_key(s, a, rec.id, keep_an_admin=True).state() == "revoked"
        assert api_keys.revoke_key(s, a, rec.id).state() == "revoked"  # again: as it is
        assert api_keys.revoke_key(s, a, admin.id, keep_an_admin=True).state() == "revoked"
        with pytest.raises(api_keys.LastAdminKey):
            api_keys.revoke_key(s, a, api_keys.DEFAULT_KEY_NAME, keep_an_admin=True)
    assert api_keys.grant_for_key_read(db, key) is None
    with db.owner_session() as s:  # the operator's route
        op_rec, op_key = api_keys.create_key(s, a, "by-operator", ["admin"])
        assert api_keys.revoke_key(s, a, op_rec.id).state() == "revoked"
    assert api_keys.grant_for_key_read(db, op_key) is None
