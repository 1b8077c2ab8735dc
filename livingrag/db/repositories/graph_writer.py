"""Writing the corpus graph: passages, sentences, entities and their edges, and the corpus locks.

Writes go through binary COPY into temporary tables and one ``INSERT ... SELECT`` per table
(:mod:`livingrag.db.copy_binary`). Every write function expects the caller to hold
:func:`lock_corpus` in its transaction, so two writers of one corpus never interleave. The graph
is read back for the retriever by :mod:`livingrag.db.repositories.graph_tables`, and passages are
looked up by :mod:`livingrag.db.repositories.passages`. Like every repository, nothing here commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from livingrag.db.copy_binary import copy_in
from livingrag.db.repositories.rows import rowcount

_LOCK_BASE = 0x4C52_4700_0000_0000  # "LRG" in the high bytes; the corpus id in the low ones
_EVIDENCE_LOCK_BASE = 0x4C52_4500_0000_0000  # "LRE": the passages experiences may cite


def lock_corpus(session: Session, corpus_id: int) -> None:
    """Serialise writers of one corpus until the end of the transaction."""
    session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_BASE + int(corpus_id)})


def lock_evidence(session: Session, corpus_id: int) -> None:
    """Until the end of the transaction, exclude the experience write-backs of one corpus
    (:func:`lock_evidence_shared`): taken, after :func:`lock_corpus`, by the changes that alter or
    remove passages (update, delete), whose hook marks the experiences citing them stale. A
    write-back is then either committed before such a change (and marked by it) or checks its
    evidence after it. Adding passages does not take it: a new passage is no experience's
    evidence, so adds and write-backs of a corpus do not wait for each other."""
    session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _EVIDENCE_LOCK_BASE + int(corpus_id)})


def lock_evidence_shared(session: Session, corpus_id: int) -> None:
    """Hold off the passage updates and deletions of one corpus (:func:`lock_evidence`) until the
    end of the transaction, without excluding other shared holders (the corpus's other
    write-backs) or passage adds."""
    session.execute(text("SELECT pg_advisory_xact_lock_shared(:k)"), {"k": _EVIDENCE_LOCK_BASE + int(corpus_id)})


# ---------------------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class PassageRow:
    title: str
    text: str
    content_hash: str
    length: int
    token_count: int
    doc_key: str | None
    chunk_index: int
    external_id: str | None
    embedding: np.ndarray


@dataclass(frozen=True)
class SentenceRow:
    passage: int  # position in the batch's passage list
    position: int
    text: str
    embedding: np.ndarray | None


@dataclass(frozen=True)
class EntityRow:
    key: str
    name: str
    label: str | None
    surface_forms: tuple[str, ...]
    embedding: np.ndarray | None  # None: the entity is expected to exist already


@dataclass(frozen=True)
class GraphBatch:
    """Everything one indexing transaction writes, linked by positions within the batch."""

    passages: Sequence[PassageRow]
    sentences: Sequence[SentenceRow]
    entities: Sequence[EntityRow]
    entity_sentences: Sequence[tuple[str, int]]  # (entity key, sentence position in this batch)
    passage_entities: Sequence[tuple[int, str, int, float]]  # (passage position, entity key, mentions, weight)


# ---------------------------------------------------------------------------------------- reads


def existing_hashes(session: Session, corpus_id: int, hashes: Sequence[str]) -> set[str]:
    """The subset of ``hashes`` already stored in the corpus."""
    if not hashes:
        return set()
    rows = session.execute(
        text("SELECT content_hash FROM passages WHERE corpus_id = :c AND content_hash = ANY(:h)"),
        {"c": corpus_id, "h": list(hashes)},
    ).scalars()
    return set(rows)


def passage_id_by_hash(session: Session, corpus_id: int, content_hash: str) -> int:
    """The id of the corpus's passage with ``content_hash`` (one must exist)."""
    return int(
        session.execute(
            text("SELECT id FROM passages WHERE corpus_id = :c AND content_hash = :h"),
            {"c": corpus_id, "h": content_hash},
        ).scalar_one()
    )


def existing_entity_keys(session: Session, corpus_id: int, keys: Sequence[str]) -> set[str]:
    if not keys:
        return set()
    rows = session.execute(
        text("SELECT normalized_name FROM entities WHERE corpus_id = :c AND normalized_name = ANY(:k)"),
        {"c": corpus_id, "k": list(keys)},
    ).scalars()
    return set(rows)


def entities_without_embedding(session: Session, corpus_id: int) -> list[tuple[int, str]]:
    return [
        (int(i), str(k))
        for i, k in session.execute(
            text("SELECT id, normalized_name FROM entities WHERE corpus_id = :c AND embedding IS NULL"),
            {"c": corpus_id},
        ).all()
    ]


def set_entity_embeddings(session: Session, corpus_id: int, rows: Sequence[tuple[int, np.ndarray]]) -> None:
    for eid, emb in rows:
        session.execute(
            text("UPDATE entities SET embedding = :e WHERE id = :i AND corpus_id = :c"),
            {"e": np.asarray(emb, dtype=np.float32), "i": eid, "c": corpus_id},
        )


def passage_entity_ids(session: Session, passage_ids: Sequence[int]) -> list[int]:
    return list(
        session.execute(
            text("SELECT DISTINCT entity_id FROM passage_entities WHERE passage_id = ANY(:p)"), {"p": list(passage_ids)}
        ).scalars()
    )


# ---------------------------------------------------------------------------------------- writes


def _allocate_ids(session: Session, table: str, n: int) -> list[int]:
    if n == 0:
        return []
    return list(
        session.execute(
            text(f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) FROM generate_series(1, :n)"), {"n": n}
        ).scalars()
    )


def _temp(session: Session, name: str, columns: str) -> None:
    """An empty staging table ``name`` for this transaction's COPY. It is made once per database
    connection and emptied at each commit (``ON COMMIT DELETE ROWS``): creating and dropping five
    tables in every indexing transaction cost about 9 ms of a 5-passage add, and catalog rows for
    autovacuum. The ``DELETE`` empties it if this transaction used it before (cheap when empty)."""
    session.execute(text(f"CREATE TEMP TABLE IF NOT EXISTS {name} ({columns}) ON COMMIT DELETE ROWS"))
    session.execute(text(f"DELETE FROM {name}"))


_PASSAGE_COPY_COLS = (
    "id", "title", "text", "content_hash", "length", "token_count",
    "doc_key", "chunk_index", "external_id", "embedding",
)  # fmt: skip


@dataclass(frozen=True)
class WrittenBatch:
    """What :func:`write_batch` stored."""

    passage_ids: list[int]
    filled_vectors: int
    """Entities the corpus held without a vector that the batch gave one: the batch did more than
    append rows (a loaded graph lacks those entities), so its version bump must say so."""


def write_batch(session: Session, tenant_id: int, corpus_id: int, batch: GraphBatch) -> WrittenBatch:
    """Insert a batch of passages with their sentences, entities and edges.

    The caller holds :func:`lock_corpus` and has already dropped passages whose hash exists.
    Entities new to the corpus are inserted (an existing key only gains new surface forms, and
    its vector if it had none).
    """
    p_ids = _allocate_ids(session, "passages", len(batch.passages))
    s_ids = _allocate_ids(session, "sentences", len(batch.sentences))

    _temp(
        session,
        "_lrg_passages",
        "id bigint, title text, text text, content_hash text, length int, token_count int, doc_key text,"
        " chunk_index int, external_id text, embedding vector",
    )
    copy_in(
        session,
        "_lrg_passages",
        _PASSAGE_COPY_COLS,
        ["int8", "text", "text", "text", "int4", "int4", "text", "int4", "text", "vector"],
        (
            (pid, p.title, p.text, p.content_hash, p.length, p.token_count, p.doc_key, p.chunk_index, p.external_id,
             np.asarray(p.embedding, dtype=np.float32))
            for pid, p in zip(p_ids, batch.passages, strict=True)
        ),
    )  # fmt: skip
    session.execute(
        text(
            "INSERT INTO passages (id, tenant_id, corpus_id, title, text, content_hash, length, token_count, doc_key,"
            " chunk_index, external_id, embedding) SELECT id, :t, :c, title, text, content_hash, length, token_count,"
            " doc_key, chunk_index, external_id, embedding FROM _lrg_passages"
        ),
        {"t": tenant_id, "c": corpus_id},
    )

    _temp(session, "_lrg_sentences", "id bigint, passage_id bigint, position int, text text, embedding vector")
    copy_in(
        session,
        "_lrg_sentences",
        ["id", "passage_id", "position", "text", "embedding"],
        ["int8", "int8", "int4", "text", "vector"],
        (
            (
                sid,
                p_ids[s.passage],
                s.position,
                s.text,
                None if s.embedding is None else np.asarray(s.embedding, dtype=np.float32),
            )
            for sid, s in zip(s_ids, batch.sentences, strict=True)
        ),
    )
    session.execute(
        text(
            "INSERT INTO sentences (id, tenant_id, corpus_id, passage_id, position, text, embedding)"
            " SELECT id, :t, :c, passage_id, position, text, embedding FROM _lrg_sentences"
        ),
        {"t": tenant_id, "c": corpus_id},
    )

    filled = upsert_entities(session, tenant_id, corpus_id, batch.entities)

    _temp(session, "_lrg_entity_sentences", "key text, sentence_id bigint")
    copy_in(
        session,
        "_lrg_entity_sentences",
        ["key", "sentence_id"],
        ["text", "int8"],
        ((k, s_ids[pos]) for k, pos in batch.entity_sentences),
    )
    session.execute(
        text(
            "INSERT INTO entity_sentences (entity_id, sentence_id, tenant_id, corpus_id)"
            " SELECT DISTINCT e.id, t.sentence_id, :t, :c FROM _lrg_entity_sentences t"
            " JOIN entities e ON e.corpus_id = :c AND e.normalized_name = t.key ON CONFLICT DO NOTHING"
        ),
        {"t": tenant_id, "c": corpus_id},
    )

    _temp(session, "_lrg_passage_entities", "passage_id bigint, key text, mentions int, weight real")
    copy_in(
        session,
        "_lrg_passage_entities",
        ["passage_id", "key", "mentions", "weight"],
        ["int8", "text", "int4", "float4"],
        ((p_ids[p], k, m, w) for p, k, m, w in batch.passage_entities),
    )
    session.execute(
        text(
            "INSERT INTO passage_entities (passage_id, entity_id, tenant_id, corpus_id, mentions, weight)"
            " SELECT t.passage_id, e.id, :t, :c, t.mentions, t.weight FROM _lrg_passage_entities t"
            " JOIN entities e ON e.corpus_id = :c AND e.normalized_name = t.key"
        ),
        {"t": tenant_id, "c": corpus_id},
    )
    return WrittenBatch(passage_ids=p_ids, filled_vectors=filled)


def upsert_entities(session: Session, tenant_id: int, corpus_id: int, entities: Sequence[EntityRow]) -> int:
    """Insert new entities; existing ones (same normalised name) gain any new surface forms, and
    the given vector if they had none. Returns how many existing entities got a vector."""
    if not entities:
        return 0
    _temp(session, "_lrg_entities", "key text, name text, label text, surface_forms text[], embedding vector")
    copy_in(
        session,
        "_lrg_entities",
        ["key", "name", "label", "surface_forms", "embedding"],
        ["text", "text", "text", "text[]", "vector"],
        (
            (
                e.key,
                e.name,
                e.label,
                list(e.surface_forms),
                None if e.embedding is None else np.asarray(e.embedding, dtype=np.float32),
            )
            for e in entities
        ),
    )
    filled = session.execute(
        text(
            "SELECT count(*) FROM entities x JOIN _lrg_entities t ON t.key = x.normalized_name"
            " WHERE x.tenant_id = :t AND x.corpus_id = :c AND x.embedding IS NULL AND t.embedding IS NOT NULL"
        ),
        {"t": tenant_id, "c": corpus_id},
    ).scalar_one()
    session.execute(
        text(
            "INSERT INTO entities AS x (tenant_id, corpus_id, name, normalized_name, surface_forms, label, embedding)"
            " SELECT :t, :c, name, key, surface_forms, label, embedding FROM _lrg_entities"
            " ON CONFLICT (tenant_id, corpus_id, normalized_name) DO UPDATE"
            " SET surface_forms = ARRAY(SELECT DISTINCT f FROM unnest(x.surface_forms || EXCLUDED.surface_forms) AS f"
            "   ORDER BY f LIMIT 32),"
            "   embedding = COALESCE(x.embedding, EXCLUDED.embedding)"
            " WHERE NOT (x.surface_forms @> EXCLUDED.surface_forms) OR (x.embedding IS NULL)"
        ),
        {"t": tenant_id, "c": corpus_id},
    )
    return int(filled)


def link_chunks(session: Session, tenant_id: int, corpus_id: int, passage_ids: Sequence[int]) -> int:
    """Link each of ``passage_ids`` with the previous and next chunk of its document, where stored.

    The next chunks and the previous ones are found in two index look-ups from the given passages
    (``ix_passages_corpus_id``, then ``ix_passages_corpus_doc``); one join with ``a.id = ANY(:p) OR
    b.id = ANY(:p)`` joined every chunked passage of the corpus (10 ms of an add on 2Wiki's)."""
    if not passage_ids:
        return 0
    res = session.execute(
        text(
            "INSERT INTO passage_links (source_id, target_id, tenant_id, corpus_id, weight)"
            " SELECT a.id, b.id, :t, :c, 1.0 FROM passages a JOIN passages b"
            "   ON b.corpus_id = a.corpus_id AND b.doc_key = a.doc_key AND b.chunk_index = a.chunk_index + 1"
            " WHERE a.corpus_id = :c AND a.id = ANY(:p) AND a.doc_key IS NOT NULL"
            " UNION"
            " SELECT a.id, b.id, :t, :c, 1.0 FROM passages b JOIN passages a"
            "   ON a.corpus_id = b.corpus_id AND a.doc_key = b.doc_key AND a.chunk_index = b.chunk_index - 1"
            " WHERE b.corpus_id = :c AND b.id = ANY(:p) AND b.doc_key IS NOT NULL"
            " ON CONFLICT DO NOTHING"
        ),
        {"t": tenant_id, "c": corpus_id, "p": list(passage_ids)},
    )
    return rowcount(res)


def delete_passages(session: Session, corpus_id: int, passage_ids: Sequence[int]) -> list[int]:
    """Delete passages (their sentences and edges go by cascade); returns the ids deleted."""
    return [
        int(i)
        for i in session.execute(
            text("DELETE FROM passages WHERE corpus_id = :c AND id = ANY(:p) RETURNING id"),
            {"c": corpus_id, "p": list(passage_ids)},
        ).scalars()
    ]


def clear_passage_graph(session: Session, corpus_id: int, passage_id: int) -> None:
    """Remove a passage's sentences and entity edges (before it is re-extracted)."""
    session.execute(
        text("DELETE FROM sentences WHERE corpus_id = :c AND passage_id = :p"), {"c": corpus_id, "p": passage_id}
    )
    session.execute(
        text("DELETE FROM passage_entities WHERE corpus_id = :c AND passage_id = :p"), {"c": corpus_id, "p": passage_id}
    )


def update_passage_row(session: Session, corpus_id: int, passage_id: int, row: PassageRow) -> None:
    session.execute(
        text(
            "UPDATE passages SET title = :title, text = :text, content_hash = :h, length = :len, token_count = :tok,"
            " embedding = :emb, updated_at = now() WHERE corpus_id = :c AND id = :i"
        ),
        {
            "title": row.title,
            "text": row.text,
            "h": row.content_hash,
            "len": row.length,
            "tok": row.token_count,
            "emb": np.asarray(row.embedding, dtype=np.float32),
            "c": corpus_id,
            "i": passage_id,
        },
    )


def insert_passage_graph(
    session: Session,
    tenant_id: int,
    corpus_id: int,
    passage_id: int,
    sentences: Sequence[SentenceRow],
    entities: Sequence[EntityRow],
    entity_sentences: Sequence[tuple[str, int]],
    passage_entities: Sequence[tuple[str, int, float]],
) -> None:
    """Sentences, entities and edges of one existing passage (after :func:`clear_passage_graph`)."""
    s_ids = _allocate_ids(session, "sentences", len(sentences))
    for sid, s in zip(s_ids, sentences, strict=True):
        session.execute(
            text(
                "INSERT INTO sentences (id, tenant_id, corpus_id, passage_id, position, text, embedding)"
                " VALUES (:i, :t, :c, :p, :pos, :txt, :emb)"
            ),
            {
                "i": sid,
                "t": tenant_id,
                "c": corpus_id,
                "p": passage_id,
                "pos": s.position,
                "txt": s.text,
                "emb": None if s.embedding is None else np.asarray(s.embedding, dtype=np.float32),
            },
        )
    upsert_entities(session, tenant_id, corpus_id, entities)
    for key, pos in entity_sentences:
        session.execute(
            text(
                "INSERT INTO entity_sentences (entity_id, sentence_id, tenant_id, corpus_id)"
                " SELECT id, :s, :t, :c FROM entities WHERE corpus_id = :c AND normalized_name = :k"
                " ON CONFLICT DO NOTHING"
            ),
            {"s": s_ids[pos], "t": tenant_id, "c": corpus_id, "k": key},
        )
    for key, mentions, weight in passage_entities:
        session.execute(
            text(
                "INSERT INTO passage_entities (passage_id, entity_id, tenant_id, corpus_id, mentions, weight)"
                " SELECT :p, id, :t, :c, :m, :w FROM entities WHERE corpus_id = :c AND normalized_name = :k"
            ),
            {"p": passage_id, "t": tenant_id, "c": corpus_id, "m": mentions, "w": weight, "k": key},
        )


def highest_mentioned_entity_id(session: Session, corpus_id: int) -> int:
    """The highest id of the corpus's entities that a passage mentions (0: none)."""
    return int(
        session.execute(
            text(
                "SELECT coalesce(max(e.id), 0) FROM entities e WHERE e.corpus_id = :c"
                " AND EXISTS (SELECT 1 FROM passage_entities pe WHERE pe.entity_id = e.id)"
            ),
            {"c": corpus_id},
        ).scalar_one()
    )


def remove_orphan_entities(session: Session, corpus_id: int, candidate_ids: Sequence[int] | None = None) -> int:
    """Delete entities no passage mentions any more (among ``candidate_ids``, or all)."""
    cond = "AND e.id = ANY(:ids)" if candidate_ids is not None else ""
    params: dict[str, Any] = {"c": corpus_id}
    if candidate_ids is not None:
        if not candidate_ids:
            return 0
        params["ids"] = list(candidate_ids)
    res = session.execute(
        text(
            f"DELETE FROM entities e WHERE e.corpus_id = :c {cond}"
            " AND NOT EXISTS (SELECT 1 FROM passage_entities pe WHERE pe.entity_id = e.id)"
        ),
        params,
    )
    return rowcount(res)
