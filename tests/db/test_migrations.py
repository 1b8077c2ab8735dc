"""The schema comes only from alembic: upgrade/downgrade round trips, the required shape, and
data surviving every upgrade from the previous revision."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import inspect, text

from livingrag.db import migrate
from livingrag.db.engine import Database
from livingrag.db.models import GATE_TABLES, JOB_TABLES, KEY_TABLES, TENANT_OWNED_TABLES
from livingrag.db.setup import open_database
from livingrag.errors import SchemaOutOfDate
from tests.conftest import db_settings_for

pytestmark = pytest.mark.db


def _revisions() -> list[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config())
    return [r.revision for r in reversed(list(script.walk_revisions()))]


@pytest.fixture
def fresh_db(make_database_url: Callable[[], str]) -> Iterator[Database]:
    db = Database(db_settings_for(make_database_url()))
    yield db
    db.dispose()


def _tables(db: Database) -> set[str]:
    with db.owner_engine.connect() as c:
        return set(inspect(c).get_table_names())


def test_upgrade_downgrade_upgrade(fresh_db: Database) -> None:
    migrate.upgrade(fresh_db)
    assert migrate.status(fresh_db).up_to_date
    assert {"tenants", *TENANT_OWNED_TABLES} <= _tables(fresh_db)
    migrate.downgrade(fresh_db, "base")
    assert migrate.status(fresh_db).current is None
    assert _tables(fresh_db) == {"alembic_version"}
    migrate.upgrade(fresh_db)
    assert migrate.status(fresh_db).up_to_date


def test_stepwise_upgrade_and_downgrade(fresh_db: Database) -> None:
    revs = _revisions()
    for r in revs:
        migrate.upgrade(fresh_db, r)
        assert migrate.status(fresh_db).current == r
    for prev in [*reversed(revs[:-1]), "base"]:
        migrate.downgrade(fresh_db, prev)
        assert migrate.status(fresh_db).current == (None if prev == "base" else prev)


def test_schema_shape(fresh_db: Database) -> None:
    migrate.upgrade(fresh_db)
    with fresh_db.owner_engine.connect() as c:
        cols = {
            r[0]: (r[1], r[2])
            for r in c.execute(
                text(
                    "SELECT column_name, data_type, udt_name FROM information_schema.columns "
                    "WHERE table_name = 'experiences'"
                )
            )
        }
        assert cols["query_embedding"][1] == "vector"
        assert cols["activation"][0] == "jsonb"
        assert cols["created_at"][0] == "timestamp with time zone"
        assert cols["expires_at"][0] == "timestamp with time zone"
        idx = (
            c.execute(
                text("SELECT indexdef FROM pg_indexes WHERE tablename = 'experiences' AND indexdef ILIKE '%hnsw%'")
            )
            .scalars()
            .all()
        )
        assert idx and ("vector_cosine_ops" in idx[0] or "halfvec_cosine_ops" in idx[0])
        rls: dict[str, bool] = dict(
            c.execute(
                text(
                    "SELECT relname, relrowsecurity FROM pg_class WHERE relkind = 'r' AND relnamespace = "
                    "current_schema()::regnamespace"
                )
            ).all()
        )
        for table in ("tenants", *TENANT_OWNED_TABLES, *KEY_TABLES, *JOB_TABLES, *GATE_TABLES):
            assert rls[table] is True, f"RLS not enabled on {table}"
        policies = {r[0] for r in c.execute(text("SELECT tablename FROM pg_policies"))}
        assert {"tenants", *TENANT_OWNED_TABLES, *KEY_TABLES, *JOB_TABLES, *GATE_TABLES} <= policies
        for table in (*TENANT_OWNED_TABLES, *KEY_TABLES, *JOB_TABLES):
            assert "tenant_id" in {col["name"] for col in inspect(c).get_columns(table)}


def test_external_server_refuses_out_of_date_schema(make_database_url: Callable[[], str]) -> None:
    url = make_database_url()
    with pytest.raises(SchemaOutOfDate, match="livingrag db upgrade"):
        open_database(db_settings_for(url))
    db = Database(db_settings_for(url))
    migrate.upgrade(db, _revisions()[0])
    if len(_revisions()) > 1:
        with pytest.raises(SchemaOutOfDate, match="livingrag db upgrade"):
            open_database(db_settings_for(url))
    assert migrate.status(db).current == _revisions()[0]  # checked, never migrated
    db.dispose()


def test_connecting_creates_no_schema(fresh_db: Database) -> None:
    """``Database(...)`` only connects: an empty database stays empty, not even ``alembic_version``."""
    assert _tables(fresh_db) == set()
    assert migrate.status(fresh_db).current is None


def test_opening_a_current_external_database_does_not_migrate(database_url: str) -> None:
    db = open_database(db_settings_for(database_url))
    try:
        assert migrate.status(db).up_to_date
    finally:
        db.close()


def test_the_connection_layer_does_not_import_the_migrations() -> None:
    """engine.py connects; the schema step is called by the layer that builds things (db/setup.py)."""
    import ast
    from pathlib import Path

    import livingrag.db.engine

    names: set[str] = set()
    for node in ast.walk(ast.parse(Path(livingrag.db.engine.__file__).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    schema = {n for n in names if n.startswith(("livingrag.db.migrate", "livingrag.db.setup", "alembic"))}
    assert not schema, f"engine.py imports the schema layer: {sorted(schema)}"


def _populate_v1(db: Database) -> dict[str, int]:
    """Rows in every table of the first revision's shape (the tenant's key as the revision keeps it);
    later migrations must keep them."""
    with db.owner_session() as s:
        if "api_key_hash" in {c["name"] for c in inspect(s.connection()).get_columns("tenants")}:  # before 0005
            s.execute(
                text("INSERT INTO tenants (id, name, api_key_hash, api_key_prefix) VALUES (901, 'm', 'h901', 'lrg_x')")
            )
        else:
            s.execute(text("INSERT INTO tenants (id, name) VALUES (901, 'm')"))
            s.execute(
                text(
                    "INSERT INTO api_keys (tenant_id, name, key_hash, prefix, scopes) "
                    "VALUES (901, 'default', 'h901', 'lrg_x', '{read,write,admin}')"
                )
            )
        s.execute(
            text(
                "INSERT INTO corpora (id, tenant_id, name, embedding_model, embedding_dim, ner_model) "
                "VALUES (902, 901, 'c', 'm', 3, 'n')"
            )
        )
        s.execute(
            text(
                "INSERT INTO passages (id, tenant_id, corpus_id, title, text, content_hash, length, embedding) VALUES "
                "(903, 901, 902, 'T', 'Alice met Bob.', 'h1', 14, '[1,0,0]'), "
                "(904, 901, 902, 'T', 'Bob met Carol.', 'h2', 14, '[0,1,0]')"
            )
        )
        s.execute(
            text(
                "INSERT INTO sentences (id, tenant_id, corpus_id, passage_id, position, text, embedding) "
                "VALUES (905, 901, 902, 903, 0, 'Alice met Bob.', '[1,0,0]')"
            )
        )
        s.execute(
            text(
                "INSERT INTO entities (id, tenant_id, corpus_id, name, normalized_name, surface_forms, embedding) "
                "VALUES (906, 901, 902, 'Alice', 'alice', '{Alice}', '[0,0,1]')"
            )
        )
        s.execute(text("INSERT INTO entity_sentences VALUES (906, 905, 901, 902)"))
        s.execute(text("INSERT INTO passage_entities VALUES (903, 906, 901, 902, 1, 1.0)"))
        s.execute(text("INSERT INTO passage_links VALUES (903, 904, 901, 902, 1.0)"))
        s.execute(
            text(
                "INSERT INTO experiences (id, tenant_id, corpus_id, query, query_embedding, embedding_dim, activation,"
                " summary, answer, confidence, source_passage_ids) VALUES (907, 901, 902, 'who met Bob?', '[1,0,0]',"
                " 3, '{\"906\": 1.0}', 'Q: who met Bob? A: Alice', 'Alice', 0.75, '{903}')"
            )
        )
        s.execute(text("INSERT INTO experience_entities VALUES (907, 906, 901, 902, 1.0)"))
        s.execute(
            text(
                "INSERT INTO writeback_log (tenant_id, corpus_id, experience_id, query, novelty, grounding, verifier,"
                " decision) VALUES (901, 902, 907, 'who met Bob?', 1.0, 0.75, 'offline', 'stored')"
            )
        )
        s.execute(
            text(
                "INSERT INTO query_log (tenant_id, corpus_id, query, mode, answer) "
                "VALUES (901, 902, 'who met Bob?', 'living', 'Alice')"
            )
        )
    return _counts(db)


def _counts(db: Database) -> dict[str, int]:
    with db.owner_engine.connect() as c:
        return {t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in ("tenants", *TENANT_OWNED_TABLES)}


_PAIRS = list(zip(_revisions(), _revisions()[1:], strict=False))


@pytest.mark.parametrize(
    ("previous", "target"),
    _PAIRS or [pytest.param(None, None, marks=pytest.mark.skip(reason="only one revision so far"))],
)
def test_upgrade_keeps_data_populated_at_previous_revision(fresh_db: Database, previous: str, target: str) -> None:
    migrate.upgrade(fresh_db, previous)
    before = _populate_v1(fresh_db)
    migrate.upgrade(fresh_db, target)
    assert _counts(fresh_db) == before
    with fresh_db.owner_engine.connect() as c:
        row = c.execute(
            text(
                "SELECT query, activation, summary, answer, confidence, source_passage_ids "
                "FROM experiences WHERE id = 907"
            )
        ).one()
    assert row == ("who met Bob?", {"906": 1.0}, "Q: who met Bob? A: Alice", "Alice", 0.75, [903])


def test_the_models_are_the_migrated_schema(db: Database) -> None:
    """``db/models.py`` (alembic's metadata) and the schema the migrations build are the same:
    autogenerate proposes nothing (columns and their types, generated columns, primary, unique and
    foreign keys, indexes), apart from the HNSW indexes made per dimension and scope at run time."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from livingrag.db.models import Base, include_in_autogenerate

    with db.owner_engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_name": include_in_autogenerate})
        diff = compare_metadata(ctx, Base.metadata)
    assert diff == [], f"db/models.py differs from the migrated schema: {diff}"


def test_0005_keeps_existing_tenant_keys_working_and_downgrades(fresh_db: Database) -> None:
    """A tenant's key from before 0005 becomes its 'default' key with every scope, resolvable from
    the application role; downgrading puts an active key back on the tenant."""
    from livingrag.db.repositories import api_keys

    migrate.upgrade(fresh_db, "0004")
    old_key = api_keys.new_api_key()
    with fresh_db.owner_session() as s:
        s.execute(
            text("INSERT INTO tenants (id, name, api_key_hash, api_key_prefix) VALUES (950, 'old', :h, :p)"),
            {"h": api_keys.hash_api_key(old_key), "p": old_key[: api_keys.PREFIX_CHARS]},
        )
    migrate.upgrade(fresh_db)
    with fresh_db.app_session() as s:
        grant = api_keys.grant_for_key(s, old_key)
    assert grant is not None and grant.tenant_id == 950 and grant.scopes == set(api_keys.SCOPES)
    with fresh_db.owner_session() as s:
        [key] = api_keys.list_keys(s, 950)
        assert (key.name, key.prefix, key.state()) == ("default", old_key[: api_keys.PREFIX_CHARS], "active")
        assert key.last_used_at is not None  # stamped by the lookup above
        columns = {c["name"] for c in inspect(s.connection()).get_columns("tenants")}
        assert not columns & {"api_key_hash", "api_key_prefix"}
        # a second key, then the default one revoked: the downgrade keeps the one still active
        _, newer = api_keys.create_key(s, 950, "newer", ["read"])
        api_keys.revoke_key(s, 950, "default")
    migrate.downgrade(fresh_db, "0004")
    with fresh_db.app_session() as s:
        assert (
            s.execute(text("SELECT livingrag_tenant_for_key(:h)"), {"h": api_keys.hash_api_key(newer)}).scalar() == 950
        )
        assert (
            s.execute(text("SELECT livingrag_tenant_for_key(:h)"), {"h": api_keys.hash_api_key(old_key)}).scalar()
            is None
        )
    migrate.upgrade(fresh_db)
    with fresh_db.app_session() as s:
        grant = api_keys.grant_for_key(s, newer)
    assert grant is not None and grant.tenant_id == 950


def test_0011_gives_existing_experiences_their_provenance_and_question_key(fresh_db: Database) -> None:
    """Rows stored before 0011 become ``unverified``; their origin comes from what they recorded
    (the verifier, whether the gates ran) and their question key is the one answer reuse computes."""
    migrate.upgrade(fresh_db, "0010")
    _populate_v1(fresh_db)
    with fresh_db.owner_session() as s:
        s.execute(
            text(
                "INSERT INTO experiences (id, tenant_id, corpus_id, query, query_embedding, embedding_dim, activation,"
                " summary, answer, confidence, grounding) VALUES"
                " (908, 901, 902, 'Who met  BOB?!', '[0,1,0]', 3, '{}', 's', 'Alice', 0.9,"
                '  \'{"gated": true, "verifier": "judge"}\'),'
                " (909, 901, 902, 'q', '[0,0,1]', 3, '{}', 's', 'a', 1.0,"
                '  \'{"gated": false, "verifier": "none"}\'),'
                " (910, 901, 902, 'q2', '[0,1,1]', 3, '{}', 's', 'a', 0.7,"
                '  \'{"gated": true, "verifier": "offline"}\')'
            )
        )
    migrate.upgrade(fresh_db)
    with fresh_db.owner_engine.connect() as c:
        got = c.execute(
            text(
                "SELECT id, origin, origin_detail, trust, gated, question_key, answer_uses FROM experiences"
                " WHERE id >= 907 ORDER BY id"
            )
        ).all()
    assert [tuple(r) for r in got] == [
        (907, "ungated", None, "unverified", False, "who met bob", 0),  # recorded nothing: as answer reuse read it
        (908, "judge", "judge", "unverified", True, "who met bob", 0),
        (909, "ungated", "none", "unverified", False, "q", 0),
        (910, "gate", "offline", "unverified", True, "q2", 0),
    ]
    migrate.downgrade(fresh_db, "0010")
    migrate.upgrade(fresh_db)
