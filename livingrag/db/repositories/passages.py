"""Looking passages up: by id or external id, a page of them, their texts, their source
documents, and the corpus's row counts. Like every repository, nothing here commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session

from livingrag.errors import NotFound


@dataclass(frozen=True)
class PassageRecord:
    id: int
    corpus_id: int
    external_id: str | None
    doc_key: str | None
    chunk_index: int
    title: str
    text: str
    content_hash: str


def passage_texts(session: Session, corpus_id: int, passage_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """``{id: (title, text)}`` of those of ``passage_ids`` that the corpus holds."""
    if not passage_ids:
        return {}
    rows = session.execute(
        text("SELECT id, title, text FROM passages WHERE corpus_id = :c AND id = ANY(:ids)"),
        {"c": int(corpus_id), "ids": [int(p) for p in passage_ids]},
    )
    return {int(r[0]): (r[1] or "", r[2] or "") for r in rows}


_PASSAGE_COLS = "id, corpus_id, external_id, doc_key, chunk_index, title, text, content_hash"


def get_passage(session: Session, corpus_id: int, ref: int | str) -> PassageRecord:
    """A passage by database id (an int, or digits) or by external id."""
    row = None
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        row = session.execute(
            text(f"SELECT {_PASSAGE_COLS} FROM passages WHERE corpus_id = :c AND id = :i"),
            {"c": corpus_id, "i": int(ref)},
        ).one_or_none()
    if row is None and isinstance(ref, str):
        rows = session.execute(
            text(f"SELECT {_PASSAGE_COLS} FROM passages WHERE corpus_id = :c AND external_id = :e ORDER BY id"),
            {"c": corpus_id, "e": ref},
        ).all()
        if len(rows) > 1:
            raise NotFound(f"external id {ref!r} names {len(rows)} passages; use a passage id")
        row = rows[0] if rows else None
    if row is None:
        raise NotFound(f"no passage {ref!r} in this corpus")
    return PassageRecord(*row)


def newest_passage_ids(session: Session, corpus_id: int, k: int) -> list[int]:
    """The ids of the corpus's ``k`` newest passages (the highest ids), newest first."""
    rows = session.execute(
        text("SELECT id FROM passages WHERE corpus_id = :c ORDER BY id DESC LIMIT :k"), {"c": corpus_id, "k": k}
    ).scalars()
    return [int(i) for i in rows]


def count_passages(session: Session, corpus_id: int) -> int:
    """Passages of one corpus."""
    sql = text("SELECT count(*) FROM passages WHERE corpus_id = :c")
    return int(session.execute(sql, {"c": int(corpus_id)}).scalar_one())


def corpus_counts(session: Session, corpus_id: int) -> dict[str, int]:
    row = session.execute(
        text(
            "SELECT (SELECT count(*) FROM passages WHERE corpus_id = :c),"
            " (SELECT count(*) FROM sentences WHERE corpus_id = :c),"
            " (SELECT count(*) FROM entities WHERE corpus_id = :c),"
            " (SELECT count(*) FROM passage_entities WHERE corpus_id = :c),"
            " (SELECT count(*) FROM entity_sentences WHERE corpus_id = :c),"
            " (SELECT count(*) FROM passage_links WHERE corpus_id = :c)"
        ),
        {"c": corpus_id},
    ).one()
    return dict(
        zip(
            ("passages", "sentences", "entities", "passage_entities", "entity_sentences", "passage_links"),
            map(int, row),
            strict=True,
        )
    )


def passage_doc_keys(session: Session, corpus_id: int) -> dict[int, str]:
    """Passage id -> the key of the source document it was chunked from (``passages.doc_key``)."""
    rows = session.execute(text("SELECT id, doc_key FROM passages WHERE corpus_id = :c"), {"c": corpus_id}).all()
    return {int(pid): str(key) for pid, key in rows}


def list_passages(
    session: Session, corpus_id: int, *, limit: int = 50, offset: int = 0, q: str | None = None
) -> list[PassageRecord]:
    """A page of a corpus's passages in id order; ``q`` keeps those whose title or text contains it
    (case-insensitive)."""
    where = "corpus_id = :c"
    params: dict[str, int | str] = {"c": corpus_id, "l": int(limit), "o": int(offset)}
    if q:
        where += " AND (title ILIKE :q OR text ILIKE :q)"
        params["q"] = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = session.execute(
        text(f"SELECT {_PASSAGE_COLS} FROM passages WHERE {where} ORDER BY id LIMIT :l OFFSET :o"), params
    ).all()
    return [PassageRecord(*r) for r in rows]
