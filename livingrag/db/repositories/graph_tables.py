"""Loading the corpus graph's tables for the retriever's matrices: in full, since an earlier
load, or the passages appended since it.

Reads are binary COPYs and packed columns parsed by numpy, in one snapshot (the caller runs them
in a REPEATABLE READ transaction); :mod:`livingrag.corpus.graph_loader` builds the in-memory
:class:`~livingrag.retrieval.corpus_graph.CorpusGraph` from them. The graph is written by
:mod:`livingrag.db.repositories.graph_writer`. Like every repository, nothing here commits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from livingrag.db.copy_binary import copy_out_fixed
from livingrag.errors import NotFound
from livingrag.sorted_merge import IdRows, insert_items, insert_rows, insertion_points


@dataclass(frozen=True)
class GraphTables:
    """The corpus graph as arrays, rows in content order (see retrieval/corpus_graph.py)."""

    version: int
    passage_ids: np.ndarray
    passage_titles: list[str]
    passage_texts: list[str]
    passage_lengths: np.ndarray
    passage_embeddings: np.ndarray
    entity_ids: np.ndarray
    entity_keys: list[str]
    entity_names: list[str]
    entity_embeddings: np.ndarray
    sentence_ids: np.ndarray
    sentence_passage_ids: np.ndarray
    sentence_embeddings: np.ndarray
    es_entity_ids: np.ndarray  # entity_sentences, column by column
    es_sentence_ids: np.ndarray
    pe_passage_ids: np.ndarray  # passage_entities, column by column
    pe_entity_ids: np.ndarray
    pe_mentions: np.ndarray
    link_sources: np.ndarray  # passage_links, column by column
    link_targets: np.ndarray
    link_weights: np.ndarray
    passage_hashes: list[str] = field(default_factory=list)  # content hashes, as passage_ids
    passage_high: int = 0
    """The highest passage id of the corpus when read (with or without a vector; 0: none): the
    passages added after it have higher ids (:func:`load_graph_tables_appended`)."""

    def nbytes(self) -> int:
        """Bytes of the arrays (the vectors above all)."""
        return int(sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray)))


def repeatable_read(session: Session) -> None:
    """Make the session's transaction one REPEATABLE READ snapshot, as the loads below want (call
    it before the transaction's first statement)."""
    session.connection(execution_options={"isolation_level": "REPEATABLE READ"})


def load_graph_tables(session: Session, corpus_id: int, dim: int) -> GraphTables:
    """Read one corpus's graph in a handful of bulk statements (one consistent snapshot).

    The caller should run this in a REPEATABLE READ transaction (or hold the corpus lock) so the
    statements see one version.
    """
    version, passage_high = _version_and_high(session, corpus_id)
    c = {"c": corpus_id}
    prows = session.execute(
        text(
            "SELECT id, title, text, length, content_hash FROM passages WHERE corpus_id = :c"
            f" AND embedding IS NOT NULL ORDER BY {_PASSAGE_ORDER}"
        ),
        c,
    ).all()
    pemb = _vectors(session, "passages", dim, c)
    erows = session.execute(
        text(
            "SELECT id, normalized_name, name FROM entities WHERE corpus_id = :c AND embedding IS NOT NULL"
            f" ORDER BY {_ENTITY_ORDER}"
        ),
        c,
    ).all()
    eemb = _vectors(session, "entities", dim, c)
    semb = _vectors(session, "sentences", dim, c)
    edges = _edges(session, corpus_id)
    es, pe, pl = edges["es"], edges["pe"], edges["pl"]
    if not np.array_equal(pemb["id"], np.array([r[0] for r in prows], dtype=np.int64)) or not np.array_equal(
        eemb["id"], np.array([r[0] for r in erows], dtype=np.int64)
    ):
        raise RuntimeError("the corpus changed while it was being loaded; load it in one snapshot")
    return GraphTables(
        version=int(version),
        passage_ids=pemb["id"],
        passage_titles=[r[1] for r in prows],
        passage_texts=[r[2] for r in prows],
        passage_lengths=np.array([r[3] for r in prows], dtype=np.float64),
        passage_embeddings=pemb["embedding"],
        entity_ids=eemb["id"],
        entity_keys=[r[1] for r in erows],
        entity_names=[r[2] for r in erows],
        entity_embeddings=eemb["embedding"],
        sentence_ids=semb["id"],
        sentence_passage_ids=semb["passage_id"],
        sentence_embeddings=semb["embedding"],
        es_entity_ids=es["entity_id"],
        es_sentence_ids=es["sentence_id"],
        pe_passage_ids=pe["passage_id"],
        pe_entity_ids=pe["entity_id"],
        pe_mentions=pe["mentions"],
        link_sources=pl["source_id"],
        link_targets=pl["target_id"],
        link_weights=pl["weight"],
        passage_hashes=[r[4] for r in prows],
        passage_high=passage_high,
    )


_PASSAGE_ORDER = 'content_hash COLLATE "C"'
_ENTITY_ORDER = 'normalized_name COLLATE "C"'
_SENTENCE_ORDER = 'p.content_hash COLLATE "C", s.position'
"""The graph's content order: passages by content hash, entities by normalised name, sentences by
their passage's hash and their position. Byte order (``COLLATE "C"``) on any server, so that a
load merging new rows into loaded ones (:func:`load_graph_tables_appended`) puts them where a full
load would: Python compares strings by code point, the same order as UTF-8 bytes."""

_SENTENCES_FROM = (
    "FROM sentences s JOIN passages p ON p.id = s.passage_id AND p.tenant_id = s.tenant_id"
    " WHERE s.corpus_id = %(c)s AND s.embedding IS NOT NULL AND p.embedding IS NOT NULL"
)
"""The sentences a graph holds: those with a vector, of the passages it holds."""


def _vectors(
    session: Session,
    table: Literal["passages", "entities", "sentences"],
    dim: int,
    params: Mapping[str, Any],
    *,
    above_h: bool = False,
) -> dict[str, np.ndarray]:
    """The graph's rows of ``table`` (passages, entities or sentences, of the corpus ``params["c"]``,
    those with a vector) in content order, by binary COPY: ``id`` and ``embedding`` (sentences also
    ``passage_id``). ``above_h``: only passages and entities with an id above ``params["h"]``, and
    the sentences of such passages."""
    above = " AND {id} > %(h)s" if above_h else ""
    if table == "sentences":
        return copy_out_fixed(
            session,
            f"SELECT s.id, s.passage_id, s.embedding {_SENTENCES_FROM}{above.format(id='p.id')}"
            f" ORDER BY {_SENTENCE_ORDER}",
            [("id", "int8"), ("passage_id", "int8"), ("embedding", "vector", dim)],
            params,
        )
    order = {"passages": _PASSAGE_ORDER, "entities": _ENTITY_ORDER}[table]
    return copy_out_fixed(
        session,
        f"SELECT id, embedding FROM {table} WHERE corpus_id = %(c)s AND embedding IS NOT NULL{above.format(id='id')}"
        f" ORDER BY {order}",
        [("id", "int8"), ("embedding", "vector", dim)],
        params,
    )


def _version_and_high(session: Session, corpus_id: int) -> tuple[int, int]:
    """The corpus's version and its highest passage id (0: none), in one statement."""
    row = session.execute(
        text(
            "SELECT version, (SELECT coalesce(max(id), 0) FROM passages WHERE corpus_id = :c)"
            " FROM corpora WHERE id = :c"
        ),
        {"c": corpus_id},
    ).one_or_none()
    if row is None:
        raise NotFound(f"no corpus with id {corpus_id}")
    return int(row[0]), int(row[1])


_SEND = {
    "int8": ("int8send", ">i8", np.int64),
    "int4": ("int4send", ">i4", np.int32),
    "float4": ("float4send", ">f4", np.float32),
}
"""Column kind -> (PostgreSQL send function, big-endian numpy type, native numpy type)."""


def packed_columns(
    session: Session, table_sql: str, columns: Sequence[tuple[str, str]], params: Mapping[str, Any], order: str = ""
) -> dict[str, np.ndarray]:
    """Fixed-width columns of many rows read as ONE value: the server concatenates each row's
    binary send form (``int8send`` ...) with ``string_agg`` (in ``order``, when given) and the
    client splits the bytes with numpy; a COPY would hand them over a row at a time.

    ``table_sql`` is the ``FROM ... WHERE ...`` part; ``columns`` (SQL expression, "int8" |
    "int4" | "float4") must not be NULL. Returns one native-endian array per column expression.
    """
    parts = " || ".join(f"{_SEND[kind][0]}({expr})" for expr, kind in columns)
    by = f" ORDER BY {order}" if order else ""
    raw = session.execute(text(f"SELECT string_agg({parts}, ''::bytea{by}) {table_sql}"), params).scalar()
    dt = np.dtype([(f"c{i}", _SEND[kind][1]) for i, (_, kind) in enumerate(columns)])
    rec = np.frombuffer(raw or b"", dtype=dt)
    return {expr: rec[f"c{i}"].astype(_SEND[kind][2]) for i, (expr, kind) in enumerate(columns)}


def _edges(session: Session, corpus_id: int) -> dict[str, dict[str, np.ndarray]]:
    """The three edge tables of a corpus, column by column (each read as one packed value)."""
    return _edge_columns(
        session,
        "FROM entity_sentences es WHERE es.corpus_id = :c",
        "FROM passage_entities WHERE corpus_id = :c",
        "FROM passage_links WHERE corpus_id = :c",
        {"c": corpus_id},
    )


def _edge_columns(
    session: Session, es_from: str, pe_from: str, pl_from: str, params: Mapping[str, Any]
) -> dict[str, dict[str, np.ndarray]]:
    """The rows of the three edge tables that ``es_from`` (``entity_sentences`` as ``es``),
    ``pe_from`` and ``pl_from`` select, column by column: ``{"es": {entity_id, sentence_id},
    "pe": {passage_id, entity_id, mentions}, "pl": {source_id, target_id, weight}}``."""
    es = packed_columns(session, es_from, [("es.entity_id", "int8"), ("es.sentence_id", "int8")], params)
    pe = packed_columns(session, pe_from, [("passage_id", "int8"), ("entity_id", "int8"), ("mentions", "int4")], params)
    pl = packed_columns(session, pl_from, [("source_id", "int8"), ("target_id", "int8"), ("weight", "float4")], params)
    return {"es": {"entity_id": es["es.entity_id"], "sentence_id": es["es.sentence_id"]}, "pe": pe, "pl": pl}


def load_graph_tables_since(session: Session, corpus_id: int, dim: int, known: GraphTables) -> GraphTables:
    """The tables :func:`load_graph_tables` would read now, reading the bulky columns (texts and
    vectors) only of the rows ``known`` (an earlier load of this corpus) does not hold.

    Read in full, in one snapshot like the full load: the version, each graph table's ordered ids
    (with the passages' content hashes: a passage rewritten in place keeps its id but not its
    hash, and is read again, its sentences too) and the three edge tables (integers and weights).
    A row that is gone is dropped, a row that is new (an added passage, an entity that got its
    vector) is read, and the rows come in the full load's order, so the result equals a full
    load's field for field.
    """
    version, passage_high = _version_and_high(session, corpus_id)
    c = {"c": corpus_id}
    p_order = session.execute(
        text(
            "SELECT id, content_hash FROM passages WHERE corpus_id = :c AND embedding IS NOT NULL"
            f" ORDER BY {_PASSAGE_ORDER}"
        ),
        c,
    ).all()
    e_ids = packed_columns(
        session,
        "FROM entities WHERE corpus_id = :c AND embedding IS NOT NULL",
        [("id", "int8")],
        c,
        order=_ENTITY_ORDER,
    )["id"]
    s_cols = packed_columns(
        session,
        _SENTENCES_FROM.replace("%(c)s", ":c"),
        [("s.id", "int8"), ("s.passage_id", "int8")],
        c,
        order=_SENTENCE_ORDER,
    )
    s_order = {"id": s_cols["s.id"], "passage_id": s_cols["s.passage_id"]}
    p_ids = np.array([int(r[0]) for r in p_order], dtype=np.int64)
    p_hashes = [str(r[1]) for r in p_order]
    known_hash = dict(zip((int(i) for i in known.passage_ids), known.passage_hashes, strict=True))
    rewritten = np.array([known_hash.get(int(i)) != h for i, h in zip(p_ids, p_hashes, strict=True)], dtype=bool)
    p_old = np.where(rewritten, -1, IdRows(known.passage_ids).find(p_ids))
    e_old = IdRows(known.entity_ids).find(e_ids)
    s_old = IdRows(known.sentence_ids).find(s_order["id"])
    if rewritten.any():  # a rewritten passage's sentences are read again
        s_old[np.isin(s_order["passage_id"], p_ids[rewritten])] = -1
    new_p = [int(i) for i in p_ids[p_old < 0]]
    new_e = [int(i) for i in e_ids[e_old < 0]]
    new_s = [int(i) for i in s_order["id"][s_old < 0]]
    p_rows = {
        int(r[0]): r
        for r in session.execute(
            text("SELECT id, title, text, length FROM passages WHERE corpus_id = :c AND id = ANY(:ids)"),
            c | {"ids": new_p},
        ).all()
    } if new_p else {}  # fmt: skip
    e_rows = {
        int(r[0]): r
        for r in session.execute(
            text("SELECT id, normalized_name, name FROM entities WHERE corpus_id = :c AND id = ANY(:ids)"),
            c | {"ids": new_e},
        ).all()
    } if new_e else {}  # fmt: skip
    edges = _edges(session, corpus_id)

    def vectors(table: str, ids: np.ndarray, old: np.ndarray, old_vecs: np.ndarray, new: list[int]) -> np.ndarray:
        if not new and len(old) == len(old_vecs) and np.array_equal(old, np.arange(len(old))):
            return old_vecs  # the same rows in the same order: shared, not copied
        keep = old >= 0
        out = np.take(old_vecs, np.where(keep, old, 0), axis=0) if len(old_vecs) else np.empty((len(ids), dim))
        out = out.astype(np.float32, copy=False)
        fresh = _vectors_by_id(session, table, corpus_id, new, dim)
        for row in np.flatnonzero(~keep):
            out[row] = fresh[int(ids[row])]
        return out

    def column(values: list[str], old: np.ndarray, ids: np.ndarray, rows: dict[int, Any], k: int) -> list[str]:
        return [values[int(o)] if o >= 0 else rows[int(i)][k] for o, i in zip(old, ids, strict=True)]

    return GraphTables(
        version=int(version),
        passage_ids=p_ids,
        passage_titles=column(known.passage_titles, p_old, p_ids, p_rows, 1),
        passage_texts=column(known.passage_texts, p_old, p_ids, p_rows, 2),
        passage_lengths=np.array(
            [
                float(known.passage_lengths[o]) if o >= 0 else float(p_rows[int(i)][3])
                for o, i in zip(p_old, p_ids, strict=True)
            ],
            dtype=np.float64,
        ),
        passage_embeddings=vectors("passages", p_ids, p_old, known.passage_embeddings, new_p),
        entity_ids=e_ids,
        entity_keys=column(known.entity_keys, e_old, e_ids, e_rows, 1),
        entity_names=column(known.entity_names, e_old, e_ids, e_rows, 2),
        entity_embeddings=vectors("entities", e_ids, e_old, known.entity_embeddings, new_e),
        sentence_ids=s_order["id"],
        sentence_passage_ids=s_order["passage_id"],
        sentence_embeddings=vectors("sentences", s_order["id"], s_old, known.sentence_embeddings, new_s),
        es_entity_ids=edges["es"]["entity_id"],
        es_sentence_ids=edges["es"]["sentence_id"],
        pe_passage_ids=edges["pe"]["passage_id"],
        pe_entity_ids=edges["pe"]["entity_id"],
        pe_mentions=edges["pe"]["mentions"],
        link_sources=edges["pl"]["source_id"],
        link_targets=edges["pl"]["target_id"],
        link_weights=edges["pl"]["weight"],
        passage_hashes=p_hashes,
        passage_high=passage_high,
    )


def load_graph_tables_appended(
    session: Session, tenant_id: int, corpus_id: int, dim: int, known: GraphTables
) -> GraphTables | None:
    """The tables :func:`load_graph_tables` would read now, reading only the rows added since
    ``known`` (an earlier load of this corpus), or None when that is not enough: the corpus is
    not newer than ``known``, or a change since it was not an append (``corpora.rewrite_version``
    above ``known.version``: an update, a deletion, an entity given its vector later; see
    :func:`~livingrag.db.repositories.corpora.bump_version`). The caller then reads it another way.

    Appends write under :func:`~livingrag.db.repositories.graph_writer.lock_corpus` and take their
    ids under it, so every passage added after ``known`` has an id above ``known.passage_high``;
    its sentences and its edges (passage entities, entity sentences, links) are found through it,
    and the new entities have ids above ``known``'s highest. The new rows are read in content
    order and merged into ``known``'s (:mod:`livingrag.sorted_merge`), so the result equals a full
    load's field for field (the edge tables as sets: a full load reads them in no set order).
    """
    row = session.execute(
        text("SELECT version, rewrite_version FROM corpora WHERE id = :c"), {"c": corpus_id}
    ).one_or_none()
    if row is None:
        raise NotFound(f"no corpus with id {corpus_id}")
    version, rewrite_version = int(row[0]), int(row[1])
    if version <= known.version or rewrite_version > known.version:
        return None
    if len(known.passage_hashes) != len(known.passage_ids) or (
        len(known.passage_ids) and int(known.passage_ids.max()) > known.passage_high
    ):
        return None  # tables of another shape (not from these loaders)
    c = {"c": corpus_id, "t": tenant_id, "h": known.passage_high}
    added = session.execute(
        text(
            "SELECT id, title, text, length, content_hash, embedding IS NOT NULL FROM passages"
            f" WHERE corpus_id = :c AND id > :h ORDER BY {_PASSAGE_ORDER}"
        ),
        c,
    ).all()
    all_new = [int(r[0]) for r in added]
    prows = [r for r in added if r[5]]
    entity_high = int(known.entity_ids.max()) if len(known.entity_ids) else 0
    e_new = {"c": corpus_id, "h": entity_high}
    erows = session.execute(
        text(
            "SELECT id, normalized_name, name FROM entities WHERE corpus_id = :c AND id > :h"
            f" AND embedding IS NOT NULL ORDER BY {_ENTITY_ORDER}"
        ),
        e_new,
    ).all()
    # Each read below costs one round trip even when it finds nothing (an add without new entities).
    eemb = _vectors(session, "entities", dim, e_new, above_h=True)
    pemb = _vectors(session, "passages", dim, c, above_h=True)
    semb = _vectors(session, "sentences", dim, c, above_h=True)
    edges = _edges_of_passages(session, tenant_id, corpus_id, all_new)
    if not np.array_equal(pemb["id"], np.array([r[0] for r in prows], dtype=np.int64)) or not np.array_equal(
        eemb["id"], np.array([r[0] for r in erows], dtype=np.int64)
    ):
        raise RuntimeError("the corpus changed while it was being loaded; load it in one snapshot")

    new_hashes = [str(r[4]) for r in prows]
    q_p = insertion_points(known.passage_hashes, new_hashes)
    q_e = insertion_points(known.entity_keys, [str(r[1]) for r in erows])
    # Sentences come grouped by passage in passage order: a new passage's sentences go after the
    # known sentences of the known passages that sort before it.
    old_s_prow = IdRows(known.passage_ids).find(known.sentence_passage_ids)
    q_of_new_passage = dict(zip(pemb["id"].tolist(), q_p.tolist(), strict=True))
    q_s = np.searchsorted(
        old_s_prow, np.array([q_of_new_passage[int(p)] for p in semb["passage_id"]], dtype=np.int64), side="left"
    ).astype(np.int64)

    def edge(table: str, col: str, old: np.ndarray) -> np.ndarray:
        new = edges[table][col]
        return old if len(new) == 0 else np.concatenate([old, new.astype(old.dtype, copy=False)])

    return GraphTables(
        version=version,
        passage_ids=insert_rows(known.passage_ids, q_p, pemb["id"]),
        passage_titles=insert_items(known.passage_titles, q_p, [r[1] for r in prows]),
        passage_texts=insert_items(known.passage_texts, q_p, [r[2] for r in prows]),
        passage_lengths=insert_rows(known.passage_lengths, q_p, np.array([r[3] for r in prows], dtype=np.float64)),
        passage_embeddings=insert_rows(known.passage_embeddings, q_p, pemb["embedding"]),
        entity_ids=insert_rows(known.entity_ids, q_e, eemb["id"]),
        entity_keys=insert_items(known.entity_keys, q_e, [r[1] for r in erows]),
        entity_names=insert_items(known.entity_names, q_e, [r[2] for r in erows]),
        entity_embeddings=insert_rows(known.entity_embeddings, q_e, eemb["embedding"]),
        sentence_ids=insert_rows(known.sentence_ids, q_s, semb["id"]),
        sentence_passage_ids=insert_rows(known.sentence_passage_ids, q_s, semb["passage_id"]),
        sentence_embeddings=insert_rows(known.sentence_embeddings, q_s, semb["embedding"]),
        es_entity_ids=edge("es", "entity_id", known.es_entity_ids),
        es_sentence_ids=edge("es", "sentence_id", known.es_sentence_ids),
        pe_passage_ids=edge("pe", "passage_id", known.pe_passage_ids),
        pe_entity_ids=edge("pe", "entity_id", known.pe_entity_ids),
        pe_mentions=edge("pe", "mentions", known.pe_mentions),
        link_sources=edge("pl", "source_id", known.link_sources),
        link_targets=edge("pl", "target_id", known.link_targets),
        link_weights=edge("pl", "weight", known.link_weights),
        passage_hashes=insert_items(known.passage_hashes, q_p, new_hashes),
        passage_high=max([known.passage_high, *all_new]),
    )


def _edges_of_passages(
    session: Session, tenant_id: int, corpus_id: int, passage_ids: Sequence[int]
) -> dict[str, dict[str, np.ndarray]]:
    """The edges that name one of ``passage_ids`` (passages added together): their entity
    sentences (through their sentences), passage entities and links (either end), column by
    column, as :func:`_edges` reads a whole corpus's."""
    return _edge_columns(
        session,
        "FROM entity_sentences es JOIN sentences s ON s.tenant_id = es.tenant_id AND s.id = es.sentence_id"
        " WHERE s.tenant_id = :t AND s.passage_id = ANY(:ids) AND es.corpus_id = :c",
        "FROM passage_entities WHERE tenant_id = :t AND passage_id = ANY(:ids) AND corpus_id = :c",
        "FROM passage_links WHERE tenant_id = :t AND corpus_id = :c"
        " AND (source_id = ANY(:ids) OR target_id = ANY(:ids))",
        {"c": corpus_id, "t": tenant_id, "ids": list(passage_ids)},
    )


def _vectors_by_id(session: Session, table: str, corpus_id: int, ids: Sequence[int], dim: int) -> dict[int, np.ndarray]:
    """``table``'s embedding of each of ``ids`` (binary COPY), by id."""
    if not ids:
        return {}
    if table not in ("passages", "entities", "sentences"):
        raise ValueError(f"no embeddings in {table!r}")
    got = copy_out_fixed(
        session,
        f"SELECT id, embedding FROM {table} WHERE corpus_id = %(c)s AND id = ANY(%(ids)s)",
        [("id", "int8"), ("embedding", "vector", dim)],
        {"c": corpus_id, "ids": list(ids)},
    )
    return {int(i): v for i, v in zip(got["id"], got["embedding"], strict=True)}
