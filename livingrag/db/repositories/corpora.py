"""Corpora: a tenant's named document collections and their version counter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from livingrag.db.repositories.rows import rowcount
from livingrag.db.repositories.tenants import validate_name
from livingrag.errors import AlreadyExists, NotFound
from livingrag.types import CorpusInfo

if TYPE_CHECKING:
    from livingrag.db.engine import Database

_COLS = "id, tenant_id, name, embedding_model, embedding_dim, ner_model, extractor, version, settings, created_at"


TENANT_LOCK_NAMESPACE = 0x4C54  # "LT": first key of pg_advisory_xact_lock(int, int) for a tenant's corpora


def lock_tenant_corpora(session: Session, tenant_id: int) -> None:
    """Serialise corpus creation of one tenant until the end of the transaction (the quota count
    and the insert then see the same rows, across replicas too)."""
    session.execute(
        text("SELECT pg_advisory_xact_lock(:ns, :k)"),
        {"ns": TENANT_LOCK_NAMESPACE, "k": int(tenant_id) % 2_147_483_647},
    )


def count_corpora(session: Session, tenant_id: int) -> int:
    """Corpora of one tenant."""
    sql = text("SELECT count(*) FROM corpora WHERE tenant_id = :t")
    return int(session.execute(sql, {"t": int(tenant_id)}).scalar_one())


def _row(r: Any) -> CorpusInfo:
    return CorpusInfo(*r)


def create_corpus(
    session: Session,
    tenant_id: int,
    name: str,
    *,
    embedding_model: str,
    embedding_dim: int,
    ner_model: str,
    extractor: str = "spacy",
    settings: dict[str, Any] | None = None,
) -> CorpusInfo:
    import json

    name = validate_name(name, "corpus name")
    try:
        with session.begin_nested():
            row = session.execute(
                text(
                    "INSERT INTO corpora (tenant_id, name, embedding_model, embedding_dim, ner_model, extractor,"
                    " settings) VALUES (:t, :n, :em, :d, :ner, :ex, CAST(:s AS jsonb)) RETURNING " + _COLS
                ),
                {
                    "t": tenant_id,
                    "n": name,
                    "em": embedding_model,
                    "d": embedding_dim,
                    "ner": ner_model,
                    "ex": extractor,
                    "s": json.dumps(settings or {}),
                },
            ).one()
    except IntegrityError as exc:
        raise AlreadyExists(f"a corpus named {name!r} already exists for this tenant") from exc
    return _row(row)


def get_corpus(session: Session, name_or_id: str | int) -> CorpusInfo:
    """Look a corpus up by name or id among the rows this session may see (RLS)."""
    if isinstance(name_or_id, int):
        row = session.execute(text(f"SELECT {_COLS} FROM corpora WHERE id = :i"), {"i": name_or_id}).one_or_none()
    else:
        row = session.execute(text(f"SELECT {_COLS} FROM corpora WHERE name = :n"), {"n": name_or_id}).one_or_none()
    if row is None:
        raise NotFound(f"no corpus {name_or_id!r}")
    return _row(row)


def find_corpus_id(session: Session, tenant_id: int, ref: int | str) -> int | None:
    """The id of tenant ``tenant_id``'s corpus ``ref`` (an id, or a name), or None when the tenant
    has none such; explicit about the tenant, so it holds on the owner's session too."""
    col = "id" if isinstance(ref, int) else "name"
    found = session.execute(
        text(f"SELECT id FROM corpora WHERE tenant_id = :t AND {col} = :v"), {"t": tenant_id, "v": ref}
    ).scalar()
    return None if found is None else int(found)


def list_corpora(session: Session) -> list[CorpusInfo]:
    return [_row(r) for r in session.execute(text(f"SELECT {_COLS} FROM corpora ORDER BY id")).all()]


def update_settings(session: Session, corpus_id: int, changes: dict[str, Any]) -> CorpusInfo:
    """Merge ``changes`` into the corpus's stored settings (other keys kept; version and graph
    untouched) and return the corpus as it now is."""
    import json

    row = session.execute(
        text(
            "UPDATE corpora SET settings = coalesce(settings, '{}'::jsonb) || CAST(:s AS jsonb), updated_at = now()"
            " WHERE id = :i RETURNING " + _COLS
        ),
        {"i": corpus_id, "s": json.dumps(changes)},
    ).one_or_none()
    if row is None:
        raise NotFound(f"no corpus with id {corpus_id}")
    return _row(row)


def bump_version(session: Session, corpus_id: int, *, appended: bool = False) -> int:
    """Increment the corpus version (any graph change) and return the new value.

    ``appended``: the change only added rows (passages with their sentences, new entities with
    their vectors, edges naming a new passage) and altered none a loaded graph holds. Any other
    change also sets ``rewrite_version`` to the new version, so that a graph loaded before it is
    read again in full (:func:`~livingrag.db.repositories.graph_tables.load_graph_tables_appended`
    reads only the new rows when there was none since). When unsure, leave it False.
    """
    v = session.execute(
        text(
            "UPDATE corpora SET version = version + 1, updated_at = now(),"
            " rewrite_version = CASE WHEN :a THEN rewrite_version ELSE version + 1 END"
            " WHERE id = :i RETURNING version"
        ),
        {"i": corpus_id, "a": bool(appended)},
    ).scalar()
    if v is None:
        raise NotFound(f"no corpus with id {corpus_id}")
    return int(v)


def mark_last_change_appended(session: Session, corpus_id: int) -> None:
    """Set ``rewrite_version`` to ``version - 1``: the corpus's last change reads as an append.
    Only for a transaction that is rolled back (``livingrag bench graph-load`` times the appended
    load this way, without writing anything)."""
    session.execute(text("UPDATE corpora SET rewrite_version = version - 1 WHERE id = :c"), {"c": corpus_id})


def step_version_back(session: Session, corpus_id: int) -> None:
    """Decrement ``version``: the corpus reads as it was before its last change. Only under a
    savepoint or in a transaction that is rolled back (``livingrag bench graph-load`` reads the graph
    "before" its newest passages this way)."""
    session.execute(text("UPDATE corpora SET version = version - 1 WHERE id = :c"), {"c": corpus_id})


def current_version(session: Session, corpus_id: int) -> int:
    v = session.execute(text("SELECT version FROM corpora WHERE id = :i"), {"i": corpus_id}).scalar()
    if v is None:
        raise NotFound(f"no corpus with id {corpus_id}")
    return int(v)


def version_read(db: Database, tenant_id: int, corpus_id: int) -> int | None:
    """The corpus's version (None: no such corpus for this tenant) in one round trip
    (:meth:`Database.tenant_read`): the question path reads it for every question."""
    rows = db.tenant_read(tenant_id, "SELECT version FROM corpora WHERE id = %(c)s", {"c": int(corpus_id)})
    return int(rows[0][0]) if rows else None


def preset_read(db: Database, tenant_id: int, corpus_id: int) -> tuple[str | None] | None:
    """``(retrieval preset the corpus recorded,)`` (None inside: none recorded), or None when there is
    no such corpus for this tenant, in one round trip (:meth:`Database.tenant_read`): the question
    path reads it for every question, so a changed preset is seen by the next one."""
    rows = db.tenant_read(
        tenant_id, "SELECT settings->>'retrieval_preset' FROM corpora WHERE id = %(c)s", {"c": int(corpus_id)}
    )
    return (rows[0][0],) if rows else None


def delete_corpus(session: Session, corpus_id: int) -> None:
    res = session.execute(text("DELETE FROM corpora WHERE id = :i"), {"i": corpus_id})
    if rowcount(res) == 0:
        raise NotFound(f"no corpus with id {corpus_id}")
