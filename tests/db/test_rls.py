"""Row-level security: a tenant's session can neither read, update nor delete another tenant's
rows, even by id, and the application role cannot bypass RLS. Every test runs twice: with the app
logging in as the owner and switching to ``db.app_role`` in each transaction (``db.app_url``
unset), and with ``db.app_url`` set to a login role of its own."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, ProgrammingError

from livingrag.db.engine import Database
from livingrag.db.models import JOB_TABLES, TENANT_OWNED_TABLES
from livingrag.db.repositories import api_keys, corpora, tenants
from livingrag.db.repositories.rows import rowcount
from tests.conftest import db_settings_for

pytestmark = pytest.mark.db
LOGIN_ROLE = "livingrag_rls_login"


@pytest.fixture(params=["app_role", "app_url"])
def db(request: pytest.FixtureRequest, db: Database, database_url: str) -> Iterator[Database]:
    """The session's database as the default settings reach it (``app_role``), or through
    ``db.app_url`` as a login role that is a member of the migrations' application role."""
    if request.param == "app_role":
        yield db
        return
    with db.owner_session() as s:
        s.execute(
            text(
                f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{LOGIN_ROLE}') THEN "
                f"CREATE ROLE {LOGIN_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD 'rls-test'; END IF; END $$"
            )
        )
        s.execute(text(f"GRANT {db.settings.app_role} TO {LOGIN_ROLE}"))
    url = make_url(database_url).set(username=LOGIN_ROLE, password="rls-test").render_as_string(hide_password=False)
    login = Database(db_settings_for(database_url, app_url=url))
    yield login
    login.dispose()


def _app_user(db: Database) -> str:
    return LOGIN_ROLE if db.settings.app_url is not None else db.settings.app_role


def _seed(db: Database, tenant_id: int, tag: str) -> dict[str, Any]:
    """One row in every tenant-owned table for ``tenant_id``; returns their ids."""
    with db.tenant_session(tenant_id) as s:
        c = corpora.create_corpus(s, tenant_id, f"c-{tag}", embedding_model="m", embedding_dim=3, ner_model="n")
        p = s.execute(
            text(
                "INSERT INTO passages (tenant_id, corpus_id, title, text, content_hash, length) "
                "VALUES (:t, :c, 'T', 'secret text ' || :tag, :tag, 10) RETURNING id"
            ),
            {"t": tenant_id, "c": c.id, "tag": tag},
        ).scalar_one()
        sent = s.execute(
            text(
                "INSERT INTO sentences (tenant_id, corpus_id, passage_id, position, text) "
                "VALUES (:t, :c, :p, 0, 'secret') RETURNING id"
            ),
            {"t": tenant_id, "c": c.id, "p": p},
        ).scalar_one()
        e = s.execute(
            text(
                "INSERT INTO entities (tenant_id, corpus_id, name, normalized_name) VALUES (:t, :c, 'E', 'e') "
                "RETURNING id"
            ),
            {"t": tenant_id, "c": c.id},
        ).scalar_one()
        s.execute(
            text("INSERT INTO entity_sentences VALUES (:e, :s, :t, :c)"), {"e": e, "s": sent, "t": tenant_id, "c": c.id}
        )
        s.execute(
            text("INSERT INTO passage_entities VALUES (:p, :e, :t, :c, 1, 1.0)"),
            {"p": p, "e": e, "t": tenant_id, "c": c.id},
        )
        p2 = s.execute(
            text(
                "INSERT INTO passages (tenant_id, corpus_id, text, content_hash, length) "
                "VALUES (:t, :c, 'x', :h, 1) RETURNING id"
            ),
            {"t": tenant_id, "c": c.id, "h": tag + "2"},
        ).scalar_one()
        s.execute(
            text("INSERT INTO passage_links VALUES (:a, :b, :t, :c, 1.0)"), {"a": p, "b": p2, "t": tenant_id, "c": c.id}
        )
        x = s.execute(
            text(
                "INSERT INTO experiences (tenant_id, corpus_id, query, query_embedding, embedding_dim, activation, "
                "summary, answer, confidence) VALUES (:t, :c, 'q', '[1,0,0]', 3, '{}', 's', 'a', 0.9) RETURNING id"
            ),
            {"t": tenant_id, "c": c.id},
        ).scalar_one()
        s.execute(
            text("INSERT INTO experience_entities VALUES (:x, :e, :t, :c, 1.0)"),
            {"x": x, "e": e, "t": tenant_id, "c": c.id},
        )
        w = s.execute(
            text(
                "INSERT INTO writeback_log (tenant_id, corpus_id, query, decision) VALUES (:t, :c, 'q', 'stored') "
                "RETURNING id"
            ),
            {"t": tenant_id, "c": c.id},
        ).scalar_one()
        q = s.execute(
            text(
                "INSERT INTO query_log (tenant_id, corpus_id, query, mode) VALUES (:t, :c, 'q', 'living') RETURNING id"
            ),
            {"t": tenant_id, "c": c.id},
        ).scalar_one()
        # feedback and history (migration 0011)
        s.execute(
            text(
                "INSERT INTO experience_events (tenant_id, corpus_id, experience_id, event, actor)"
                " VALUES (:t, :c, :x, 'created', 'system')"
            ),
            {"t": tenant_id, "c": c.id, "x": x},
        )
        s.execute(
            text(
                "INSERT INTO answer_feedback (tenant_id, corpus_id, query_log_id, verdict, actor)"
                " VALUES (:t, :c, :q, 'wrong', 'key 1')"
            ),
            {"t": tenant_id, "c": c.id, "q": q},
        )
        s.execute(
            text(
                "INSERT INTO rejected_answers (tenant_id, corpus_id, question_key, answer_key, answer, actor)"
                " VALUES (:t, :c, 'q', 'a', 'a', 'key 1')"
            ),
            {"t": tenant_id, "c": c.id},
        )
        # index jobs (migration 0013)
        job = s.execute(
            text(
                "INSERT INTO index_jobs (tenant_id, id, corpus_id, documents, payload)"
                " VALUES (:t, md5(:tag), :c, 1, '[]') RETURNING id"
            ),
            {"t": tenant_id, "c": c.id, "tag": tag},
        ).scalar_one()
    return {
        "corpus": c.id, "passage": p, "sentence": sent, "entity": e, "experience": x, "writeback": w, "query": q,
        "job": job,
    }  # fmt: skip


_ID_COLUMN = {
    "corpora": ("id", "corpus"),
    "passages": ("id", "passage"),
    "sentences": ("id", "sentence"),
    "entities": ("id", "entity"),
    "entity_sentences": ("entity_id", "entity"),
    "passage_entities": ("passage_id", "passage"),
    "passage_links": ("source_id", "passage"),
    "experiences": ("id", "experience"),
    "experience_entities": ("experience_id", "experience"),
    "writeback_log": ("id", "writeback"),
    "query_log": ("id", "query"),
    "index_jobs": ("id", "job"),
}


def test_every_tenant_owned_table_is_covered() -> None:
    assert set(_ID_COLUMN) == set(TENANT_OWNED_TABLES) | set(JOB_TABLES)


def test_tenant_cannot_read_update_or_delete_other_tenants_rows(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    a, _ = make_tenant("a")
    b, _ = make_tenant("b")
    ids_a = _seed(db, a, f"a{a}")
    ids_b = _seed(db, b, f"b{b}")
    for table, (col, key) in _ID_COLUMN.items():
        with db.tenant_session(a) as s:
            # A sees its own row ...
            assert (
                s.execute(text(f"SELECT count(*) FROM {table} WHERE {col} = :i"), {"i": ids_a[key]}).scalar_one() >= 1
            )
            # ... and nothing of B's, even by id, nor in an unfiltered scan.
            assert s.execute(text(f"SELECT count(*) FROM {table} WHERE {col} = :i"), {"i": ids_b[key]}).scalar() == 0
            assert s.execute(text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": b}).scalar() == 0
            upd = s.execute(text(f"UPDATE {table} SET tenant_id = tenant_id WHERE {col} = :i"), {"i": ids_b[key]})
            assert rowcount(upd) == 0
            dele = s.execute(text(f"DELETE FROM {table} WHERE {col} = :i"), {"i": ids_b[key]})
            assert rowcount(dele) == 0
    with db.tenant_session(b) as s:
        for table, (col, key) in _ID_COLUMN.items():
            assert (
                s.execute(text(f"SELECT count(*) FROM {table} WHERE {col} = :i"), {"i": ids_b[key]}).scalar_one() >= 1
            )
    # the tenants table itself: A sees only itself
    with db.tenant_session(a) as s:
        assert s.execute(text("SELECT array_agg(id) FROM tenants")).scalar() == [a]


def test_tenant_cannot_write_rows_for_another_tenant(db: Database, make_tenant: Callable[..., tuple[int, str]]) -> None:
    a, _ = make_tenant("a")
    b, _ = make_tenant("b")
    ids_b = _seed(db, b, f"b{b}")
    ids_a = _seed(db, a, f"a{a}")
    # WITH CHECK: a row labelled with B's tenant id is refused.
    with pytest.raises(ProgrammingError, match="row-level security"), db.tenant_session(a) as s:
        s.execute(
            text("INSERT INTO query_log (tenant_id, corpus_id, query, mode) VALUES (:t, :c, 'q', 'x')"),
            {"t": b, "c": ids_b["corpus"]},
        )
    # Labelled with A's id but pointing into B's corpus: the composite foreign key refuses it.
    with pytest.raises(DBAPIError, match="foreign key"), db.tenant_session(a) as s:
        s.execute(
            text("INSERT INTO query_log (tenant_id, corpus_id, query, mode) VALUES (:t, :c, 'q', 'x')"),
            {"t": a, "c": ids_b["corpus"]},
        )
    # Moving one's own row to another tenant is refused too.
    with pytest.raises(ProgrammingError, match="row-level security"), db.tenant_session(a) as s:
        s.execute(text("UPDATE query_log SET tenant_id = :b WHERE id = :i"), {"b": b, "i": ids_a["query"]})


def test_session_without_tenant_sees_nothing(db: Database, make_tenant: Callable[..., tuple[int, str]]) -> None:
    a, _ = make_tenant("a")
    _seed(db, a, f"a{a}")
    with db.app_session() as s:
        for table in ("tenants", *TENANT_OWNED_TABLES, *JOB_TABLES):
            assert s.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0


def test_application_role_cannot_bypass_rls(db: Database) -> None:
    with db.app_engine.connect() as c:
        user, su, bypass = c.execute(
            text("SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        ).one()
        assert user == _app_user(db)
        assert su is False and bypass is False
        owners = set(
            c.execute(text("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = current_schema()")).scalars()
        )
        assert user not in owners
        # it cannot switch RLS off for itself ...
        with pytest.raises(ProgrammingError):
            c.execute(text("SET row_security = off; SELECT count(*) FROM experiences"))
        c.rollback()
        # ... nor disable it on a table
        with pytest.raises(ProgrammingError):
            c.execute(text("ALTER TABLE experiences DISABLE ROW LEVEL SECURITY"))
        c.rollback()


def test_api_key_lookup_from_application_role(db: Database, make_tenant: Callable[..., tuple[int, str]]) -> None:
    a, key = make_tenant("a")
    with db.app_session() as s:
        assert tenants.tenant_for_key(s, key) == a
        grant = api_keys.grant_for_key(s, key)
        assert grant is not None and grant.tenant_id == a and grant.scopes == set(api_keys.SCOPES)
        assert tenants.tenant_for_key(s, key + "x") is None
        assert tenants.tenant_for_key(s, "not-a-key") is None
    with db.owner_session() as s:
        stored = s.execute(text("SELECT key_hash FROM api_keys WHERE tenant_id = :i"), {"i": a}).scalar_one()
    assert key not in stored and stored == tenants.hash_api_key(key)


def test_the_one_round_trip_key_lookup_grants_what_the_session_lookup_grants(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    a, key = make_tenant("a")
    with db.owner_session() as s:
        s.execute(text("UPDATE api_keys SET last_used_at = NULL WHERE tenant_id = :i"), {"i": a})
    grant = api_keys.grant_for_key_read(db, key)
    with db.app_session() as s:
        assert grant == api_keys.grant_for_key(s, key) and grant is not None and grant.tenant_id == a
    with db.owner_session() as s:  # the lookup's stamp committed with it
        assert s.execute(text("SELECT last_used_at FROM api_keys WHERE tenant_id = :i"), {"i": a}).scalar()
    for bad in (key + "x", "not-a-key", "", "lrg_" + "x" * 300):
        assert api_keys.grant_for_key_read(db, bad) is None
    with db.owner_session() as s:
        s.execute(text("UPDATE api_keys SET revoked_at = now() WHERE tenant_id = :i"), {"i": a})
    assert api_keys.grant_for_key_read(db, key) is None  # a revoked key: at once


def test_application_role_never_reads_key_hashes(db: Database, make_tenant: Callable[..., tuple[int, str]]) -> None:
    """api_keys is under RLS and the application role holds column privileges without key_hash:
    it sees its own tenant's keys' names and scopes, nothing of another tenant's, no hash at all,
    and may only insert keys and set revoked_at."""
    a, _ = make_tenant("a")
    b, _ = make_tenant("b")
    with db.owner_session() as s:
        b_key = api_keys.get_key(s, b, api_keys.DEFAULT_KEY_NAME)
    for statement in (
        "SELECT key_hash FROM api_keys",
        "SELECT * FROM api_keys",
        "UPDATE api_keys SET scopes = '{read}'",
        "UPDATE api_keys SET key_hash = 'x'",
        "UPDATE api_keys SET expires_at = NULL",
        "DELETE FROM api_keys",
    ):
        with pytest.raises(ProgrammingError, match="permission denied"), db.tenant_session(a) as s:
            s.execute(text(statement))
    with db.tenant_session(a) as s:
        assert s.execute(text("SELECT array_agg(DISTINCT tenant_id) FROM api_keys")).scalar() == [a]
        assert s.execute(text("SELECT count(*) FROM api_keys WHERE id = :i"), {"i": b_key.id}).scalar() == 0
        upd = s.execute(text("UPDATE api_keys SET revoked_at = now() WHERE id = :i"), {"i": b_key.id})
        assert rowcount(upd) == 0
        mine, _ = api_keys.create_key(s, a, "made-by-app", ["read"])
        assert api_keys.revoke_key(s, a, mine.id).state() == "revoked"
    with pytest.raises(ProgrammingError, match="row-level security"), db.tenant_session(a) as s:
        api_keys.create_key(s, b, "planted-by-a", ["admin"])
    with db.app_session() as s:
        assert s.execute(text("SELECT count(*) FROM api_keys")).scalar() == 0
    with db.owner_session() as s:
        assert api_keys.get_key(s, b, b_key.id).revoked_at is None
        assert [k.name for k in api_keys.list_keys(s, b)] == [api_keys.DEFAULT_KEY_NAME]


def test_tenant_delete_cascades(db: Database, make_tenant: Callable[..., tuple[int, str]]) -> None:
    a, _ = make_tenant("a")
    _seed(db, a, f"a{a}")
    with db.owner_session() as s:
        tenants.delete_tenant(s, a)
    with db.owner_session() as s:
        for table in (*TENANT_OWNED_TABLES, *JOB_TABLES):
            assert s.execute(text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": a}).scalar() == 0


def test_tenant_read_is_confined_like_a_tenant_session(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    """The one-round-trip read path (matching) runs under the same RLS as a tenant session."""
    a, _ = make_tenant("a")
    b, _ = make_tenant("b")
    ids_a = _seed(db, a, f"ra{a}")
    ids_b = _seed(db, b, f"rb{b}")
    rows = db.tenant_read(a, "SELECT id, text FROM passages ORDER BY id", {})
    assert ids_a["passage"] in [r[0] for r in rows]
    assert ids_b["passage"] not in [r[0] for r in rows]
    assert db.tenant_read(a, "SELECT count(*) FROM passages WHERE tenant_id = %(t)s", {"t": b}) == [(0,)]
    # binary rows: bytea arrives as raw bytes, not hex text
    assert db.tenant_read(a, "SELECT '\\x00ff'::bytea", {}) == [(b"\x00\xff",)]


def test_tenant_read_settings_end_with_its_transaction(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    a, _ = make_tenant("a")
    got = db.tenant_read(
        a,
        "SELECT current_setting('livingrag.tenant_id'), current_setting('hnsw.ef_search')",
        {},
        local_settings={"hnsw.ef_search": "17"},
    )
    assert got == [(str(a), "17")]
    # the read connection itself (autocommit: the implicit transaction ended with the read) keeps
    # neither, and runs as the application role
    with db.read_engine.connect() as c:
        row = c.execute(
            text("SELECT current_setting('livingrag.tenant_id', true), current_setting('hnsw.ef_search'), current_user")
        ).one()
        assert row[0] in (None, "") and row[1] in ("", "40") and row[2] == _app_user(db)
        assert c.execute(text("SELECT count(*) FROM tenants")).scalar() == 0
    # every pooled connection is back to no tenant and the default search width
    for _ in range(db.settings.pool_size + 1):
        with db.app_session() as s:
            assert s.execute(text("SELECT current_setting('livingrag.tenant_id', true)")).scalar() in (None, "")
            # (unknown on a connection that has not loaded pgvector yet: None)
            assert s.execute(text("SELECT current_setting('hnsw.ef_search', true)")).scalar() in (None, "40")
            assert s.execute(text("SELECT count(*) FROM tenants")).scalar() == 0


def test_tenant_read_error_rolls_back_and_leaves_the_pool_usable(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    a, _ = make_tenant("a")
    with pytest.raises(Exception, match="division by zero"):
        db.tenant_read(a, "SELECT 1 / %(z)s", {"z": 0})
    with pytest.raises(Exception, match="no_such_table"):
        db.tenant_read(a, "SELECT * FROM no_such_table", {})
    for _ in range(db.settings.pool_size + 1):
        assert db.tenant_read(a, "SELECT 1", {}) == [(1,)]
    with db.owner_session() as s:  # no transaction was left open on a pooled connection
        left_open = text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND state LIKE 'idle in transaction%'"
        )
        assert s.execute(left_open).scalar() == 0
    with pytest.raises(ValueError, match="tenant_id must be a positive integer"):
        db.tenant_read(0, "SELECT 1", {})


def test_tenant_read_scope_error_runs_no_statement(db: Database, make_tenant: Callable[..., tuple[int, str]]) -> None:
    """The scope statement and the read share one implicit transaction: when setting the scope
    fails, the read is not executed without it (it would see no tenant, or the last one)."""
    a, _ = make_tenant("a")
    _seed(db, a, f"rs{a}")
    with db.tenant_session(a) as s:
        n = s.execute(text("SELECT count(*) FROM passages")).scalar_one()
    assert n > 0
    with pytest.raises(Exception, match="work_mem"):
        db.tenant_read(a, "SELECT 1 / 0", {}, local_settings={"work_mem": "plenty"})  # not run: no division error
    assert db.tenant_read(a, "SELECT count(*) FROM passages", {}) == [(n,)]


def test_tenant_read_survives_a_dropped_pooled_connection(
    db: Database, database_url: str, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    """Read connections are not pinged before use: one the server dropped while it sat in the pool
    (as after a restart) is retired and the read sent again on a new connection."""
    a, _ = make_tenant("a")
    ids = _seed(db, a, f"rd{a}")
    own = Database(db_settings_for(database_url))  # a pool of its own: one connection
    try:
        pid = own.tenant_read(a, "SELECT pg_backend_pid()", {})[0][0]
        assert own.tenant_read(a, "SELECT pg_backend_pid()", {})[0][0] == pid  # the same pooled connection
        with db.owner_session() as s:
            assert s.execute(text("SELECT pg_terminate_backend(:p, 5000)"), {"p": pid}).scalar() is True
        rows = own.tenant_read(a, "SELECT id, pg_backend_pid() FROM passages ORDER BY id", {})
        assert ids["passage"] in [r[0] for r in rows]
        assert rows[0][1] != pid
    finally:
        own.dispose()


def test_every_transaction_runs_as_the_app_role_even_after_a_reset_role(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    """A pooled connection whose session-level role was reset (or never set, as behind a
    transaction-pooling proxy) still runs each tenant transaction as the application role."""
    a, _ = make_tenant("a")
    for _ in range(db.settings.pool_size + 1):  # every pooled connection
        with db.app_engine.connect() as c:
            c.exec_driver_sql("RESET ROLE")
            c.commit()
    with db.tenant_session(a) as s:
        assert s.execute(text("SELECT current_user")).scalar() == _app_user(db)
    assert db.tenant_read(a, "SELECT current_user", {}) == [(_app_user(db),)]
    with db.app_session() as s:
        assert s.execute(text("SELECT current_user")).scalar() == _app_user(db)
    assert db.app_role_problems() == []
    db.check_app_role()


def test_a_superuser_app_login_is_refused_naming_why(db: Database, database_url: str) -> None:
    from livingrag.errors import ConfigError

    owner = Database(db_settings_for(database_url, app_url=database_url))  # the owner: a superuser here
    try:
        problems = owner.app_role_problems()
        assert any("is a superuser" in p for p in problems) and any("owns" in p for p in problems)
        with pytest.raises(ConfigError, match=r"refusing to serve tenants: role .* is a superuser"):
            owner.check_app_role()
    finally:
        owner.dispose()


def test_the_pipeline_refuses_to_start_on_a_role_that_bypasses_rls(database_url: str) -> None:
    from livingrag.config import get_settings
    from livingrag.errors import ConfigError
    from livingrag.pipeline.answer_pipeline import LivingRAG
    from livingrag.testing.openai_server import OpenAICompatServer

    owner = Database(db_settings_for(database_url, app_url=database_url))
    try:
        with OpenAICompatServer() as server:
            settings = get_settings(llm={"provider": "openai", "base_url": server.base_url, "api_key": "k"})
            with pytest.raises(ConfigError, match="refusing to serve tenants"):
                LivingRAG(settings, db=owner)
    finally:
        owner.dispose()


def test_a_session_connection_dropped_while_idle_is_replaced_at_checkout(
    db: Database, database_url: str, make_tenant: Callable[..., tuple[int, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session connections are pinged only after sitting idle (engine.IDLE_PING_S): one the server
    dropped meanwhile fails its ping and the pool hands out a new one; the session never sees it."""
    from livingrag.db import engine as engine_module

    a, _ = make_tenant("a")
    monkeypatch.setattr(engine_module, "IDLE_PING_S", 0.2)
    own = Database(db_settings_for(database_url))
    try:
        with own.tenant_session(a) as s:
            pid = s.execute(text("SELECT pg_backend_pid()")).scalar()
        with own.tenant_session(a) as s:  # handed back a moment ago: not pinged, the same connection
            assert s.execute(text("SELECT pg_backend_pid()")).scalar() == pid
        with db.owner_session() as s:
            assert s.execute(text("SELECT pg_terminate_backend(:p, 5000)"), {"p": pid}).scalar() is True
        time.sleep(0.3)
        with own.tenant_session(a) as s:
            assert s.execute(text("SELECT pg_backend_pid()")).scalar() != pid
    finally:
        own.dispose()
