"""Loading a corpus graph from PostgreSQL into a :class:`~livingrag.retrieval.corpus_graph.CorpusGraph`.

The tables are read with a handful of bulk statements (binary COPY parsed by numpy) in one
REPEATABLE READ snapshot, ids are mapped to content-ordered rows with vectorised searches, and the
sparse matrices are assembled once. :class:`GraphCache` keeps one graph per (corpus, version) in
the process and reloads it when the corpus version in the database changes.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy.engine import make_url

from livingrag.corpus.normalize import normalize_entity
from livingrag.db.repositories import corpora
from livingrag.db.repositories.graph_tables import (
    GraphTables,
    load_graph_tables,
    load_graph_tables_appended,
    load_graph_tables_since,
)
from livingrag.retrieval.corpus_graph import CorpusGraph
from livingrag.sorted_merge import IdRows

if TYPE_CHECKING:
    from livingrag.db.engine import Database

log = logging.getLogger(__name__)


def graph_from_tables(corpus_id: int, t: GraphTables) -> CorpusGraph:
    """Assemble the in-memory graph from bulk-loaded tables (ids -> content-ordered rows)."""
    passages, entities = IdRows(t.passage_ids), IdRows(t.entity_ids)
    s_prow, s_ok = passages.rows(t.sentence_passage_ids)
    s_keep = np.flatnonzero(s_ok)
    sentence_ids = t.sentence_ids[s_keep]
    e_rows, e_ok = entities.rows(t.es_entity_ids)
    s_rows, s_ok2 = IdRows(sentence_ids).rows(t.es_sentence_ids)
    es_keep = e_ok & s_ok2
    pe_p, pe_pok = passages.rows(t.pe_passage_ids)
    pe_e, pe_eok = entities.rows(t.pe_entity_ids)
    pe_keep = pe_pok & pe_eok
    l_a, l_aok = passages.rows(t.link_sources)
    l_b, l_bok = passages.rows(t.link_targets)
    l_keep = l_aok & l_bok
    return CorpusGraph.build(
        corpus_id=corpus_id,
        version=t.version,
        passage_ids=t.passage_ids,
        passage_embeddings=t.passage_embeddings,
        passage_titles=t.passage_titles,
        passage_title_keys=[normalize_entity(title) for title in t.passage_titles],
        passage_texts=t.passage_texts,
        passage_lengths=t.passage_lengths,
        entity_ids=t.entity_ids,
        entity_keys=t.entity_keys,
        entity_names=t.entity_names,
        entity_embeddings=t.entity_embeddings,
        sentence_ids=sentence_ids,
        sentence_passages=s_prow[s_keep],
        sentence_embeddings=t.sentence_embeddings[s_keep],
        entity_sentence_pairs=np.stack([e_rows[es_keep], s_rows[es_keep]], axis=1),
        passage_entity_mentions=np.stack(
            [pe_p[pe_keep].astype(np.float64), pe_e[pe_keep].astype(np.float64), t.pe_mentions[pe_keep]], axis=1
        ),
        passage_links=np.stack(
            [l_a[l_keep].astype(np.float64), l_b[l_keep].astype(np.float64), t.link_weights[l_keep]], axis=1
        ),
    )


def load_graph(db: Database, tenant_id: int, corpus_id: int, dim: int) -> CorpusGraph:
    """Read the corpus in one REPEATABLE READ snapshot and build its graph."""
    return load_graph_and_tables(db, tenant_id, corpus_id, dim)[0]


def load_graph_and_tables(
    db: Database, tenant_id: int, corpus_id: int, dim: int, *, previous: GraphTables | None = None
) -> tuple[CorpusGraph, GraphTables]:
    """The graph and the tables it was built from, read in one REPEATABLE READ snapshot; with
    ``previous`` (an earlier load of this corpus) less is read, and the graph is the same:
    - when every change since ``previous`` only added passages, only the added rows
      (:func:`load_graph_tables_appended`);
    - otherwise every id and edge, but the texts and vectors only of the rows ``previous`` lacks
      (:func:`load_graph_tables_since`)."""
    t0 = time.perf_counter()
    usable = previous is not None and len(previous.passage_hashes) == len(previous.passage_ids)
    how = ""
    with db.tenant_session(tenant_id) as s:
        s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        tables: GraphTables | None = None
        if usable and previous is not None:
            tables = load_graph_tables_appended(s, tenant_id, corpus_id, dim, previous)
            how = f" (appended since v{previous.version})"
            if tables is None:
                tables = load_graph_tables_since(s, corpus_id, dim, previous)
                how = f" (since v{previous.version})"
        if tables is None:
            tables = load_graph_tables(s, corpus_id, dim)
    t1 = time.perf_counter()
    graph = graph_from_tables(corpus_id, tables)
    log.info(
        "loaded corpus %s v%s%s: %d passages, %d entities, %d sentences (read %.2fs, build %.2fs, %.0f MB)",
        corpus_id,
        graph.version,
        how,
        graph.n_passages,
        graph.n_entities,
        graph.n_sentences,
        t1 - t0,
        time.perf_counter() - t1,
        graph.nbytes() / 1e6,
    )
    return graph, tables


def current_version(db: Database, tenant_id: int, corpus_id: int) -> int | None:
    """The corpus's version (None: no such corpus for this tenant), in one round trip."""
    return corpora.version_read(db, tenant_id, corpus_id)


def _source_of(db: Database | None) -> str:
    """Which database a graph comes from: its server and database name (no credentials)."""
    url = getattr(db, "owner_url", None)
    return _source_of_url(url) if url else ""


@functools.lru_cache(maxsize=64)
def _source_of_url(url: str) -> str:
    u = make_url(url)
    return f"{u.host or ''}:{u.port or ''}/{u.database or ''}?{u.query.get('host', '')}"


class GraphCache:
    """Loaded graphs per (tenant, corpus), replaced when the corpus version in the database changes
    and bounded: past ``max_graphs`` graphs or ``max_bytes`` (:meth:`CorpusGraph.nbytes`) the least
    recently used ones are evicted (the graph just loaded is always kept, even when it alone is
    over the byte budget). A request holding an evicted graph keeps using it; the next one reloads.

    ``check_interval_s`` bounds how often the version is read (0: on every :meth:`get`); a caller
    passing a ``min_version`` its cached graph lacks reads it at once.
    """

    def __init__(
        self,
        check_interval_s: float = 0.0,
        *,
        max_graphs: int | None = None,
        max_bytes: int | None = None,
        background_refresh: bool = False,
    ) -> None:
        self.check_interval_s = check_interval_s
        self.max_graphs = max_graphs
        self.max_bytes = max_bytes
        self.background_refresh = background_refresh
        """When a caller without ``min_version`` finds a newer version and nobody loads it yet, load it
        on a thread of its own and answer the caller from the previous graph at once (the service's
        questions never pay a graph load after a passage change; its writers still wait)."""
        self._graphs: OrderedDict[tuple[int, int], CorpusGraph] = OrderedDict()
        self._sizes: dict[tuple[int, int], int] = {}
        self._sources: dict[tuple[int, int], str] = {}
        self._tables: dict[tuple[int, int], GraphTables] = {}
        self._checked: dict[tuple[int, int], float] = {}
        self._lock = threading.RLock()
        self._loading: dict[tuple[int, int], threading.Lock] = {}
        self._wanted: dict[tuple[int, int], int] = {}
        self._refreshers: set[tuple[int, int]] = set()
        self.evictions = 0
        self.stale_hits = 0
        """Calls answered from the previous version while a newer one was loading."""
        self.background_loads = 0
        """Newer versions loaded on a thread of their own (``background_refresh``)."""

    def configure(self, *, max_graphs: int | None, max_bytes: int | None) -> None:
        """Set the bounds (and evict what is now over them)."""
        with self._lock:
            self.max_graphs, self.max_bytes = max_graphs, max_bytes
            self._evict(keep=None)

    def set_refresh(self, *, background: bool, check_interval_s: float) -> tuple[bool, float]:
        """Set ``background_refresh`` and ``check_interval_s``; returns the previous pair, so that
        a caller that changes the process's cache for a while can put it back."""
        if check_interval_s < 0:
            raise ValueError(f"check_interval_s must be >= 0, got {check_interval_s}")
        with self._lock:
            before = self.background_refresh, self.check_interval_s
            self.background_refresh, self.check_interval_s = background, check_interval_s
        return before

    def get(
        self, db: Database, tenant_id: int, corpus_id: int, dim: int, *, min_version: int | None = None
    ) -> CorpusGraph:
        """The corpus's graph at its current version, loaded once for all callers.

        While another caller loads a newer version, a caller that finds a cached graph of at least
        ``min_version`` (None: any) is answered from it at once instead of waiting: questions keep
        being answered from the previous version while the next one loads. A writer passes the
        version it committed to wait for a graph that holds its change.
        """
        key = (tenant_id, corpus_id)
        source = _source_of(db)
        now = time.monotonic()
        with self._lock:
            graph = self._cached(key, source)
            if (
                graph is not None
                and (min_version is None or graph.version >= min_version)
                and now - self._checked.get(key, 0.0) < self.check_interval_s
            ):
                self._graphs.move_to_end(key)
                return graph
        version = current_version(db, tenant_id, corpus_id)
        with self._lock:
            graph = self._cached(key, source)
            if graph is not None and graph.version == version:
                self._checked[key] = now
                self._graphs.move_to_end(key)
                return graph
            loading = self._loading.setdefault(key, threading.Lock())
        # Loaded outside the cache's lock: one corpus loading never holds up another's requests;
        # requests for the same corpus wait for the one load, unless the previous graph will do.
        if graph is not None and version is not None and (min_version is None or graph.version >= min_version):
            if self.background_refresh and min_version is None:
                started = self.load_in_background(db, tenant_id, corpus_id, dim, version)
                with self._lock:
                    self.stale_hits += 1
                    self.background_loads += int(started)
                return graph
            if not loading.acquire(blocking=False):
                with self._lock:
                    self.stale_hits += 1
                return graph
            loading.release()
        with loading:
            return self._load(db, key, dim, version, source, now)

    def load_in_background(self, db: Database, tenant_id: int, corpus_id: int, dim: int, version: int) -> bool:
        """Have the cached graph of the corpus reach ``version`` soon, without waiting for it: one
        thread per corpus at most loads until the cache holds the highest version asked for
        meanwhile (a burst of changes costs one load after another, not one thread each). Nothing
        happens when the corpus is not cached (its next question loads it) or already holds
        ``version``; returns whether a thread was started. A failed load is logged and ends the
        thread; the next question tries again. With ``background_refresh``, a question that finds a
        newer version asks for it here too."""
        key = (tenant_id, corpus_id)
        with self._lock:
            graph = self._cached(key, _source_of(db))
            if graph is None or graph.version >= version:
                return False
            self._wanted[key] = max(self._wanted.get(key, 0), version)
            if key in self._refreshers:
                return False
            self._refreshers.add(key)
        threading.Thread(
            target=self._refresh_until_wanted, args=(db, key, dim), name=f"graph-refresh-{corpus_id}", daemon=True
        ).start()
        return True

    def _refresh_until_wanted(self, db: Database, key: tuple[int, int], dim: int) -> None:
        """The thread of :meth:`load_in_background`: load the highest version asked for, under the
        corpus's loading lock (a writer or another load waits for it, or it for them), until the
        cache holds it."""
        source = _source_of(db)
        while True:
            with self._lock:  # decided and cleared under one hold: a version asked meanwhile is not lost
                graph, want = self._cached(key, source), self._wanted.get(key, 0)
                if graph is None or graph.version >= want:
                    self._stop_refresh(key)
                    return
                loading = self._loading.setdefault(key, threading.Lock())
            try:
                with loading:
                    got: CorpusGraph | None = self._load(db, key, dim, want, source, time.monotonic())
            except Exception as exc:
                log.warning("graph cache: loading corpus %s of tenant %s failed: %s", key[1], key[0], exc)
                got = None
            if got is None or got.version < want:  # failed, or the corpus went back (dropped and made again)
                with self._lock:
                    self._stop_refresh(key)
                return

    def _stop_refresh(self, key: tuple[int, int]) -> None:
        """(Under the cache's lock.) No refresh thread runs for ``key`` any more."""
        self._refreshers.discard(key)
        self._wanted.pop(key, None)

    def _load(
        self, db: Database, key: tuple[int, int], dim: int, version: int | None, source: str, now: float
    ) -> CorpusGraph:
        """Load the corpus's graph (the caller holds its loading lock) unless a graph of at least
        ``version`` was cached meanwhile; reads only what changed since the cached tables."""
        with self._lock:
            graph = self._cached(key, source)
            if graph is not None and version is not None and graph.version >= version:
                self._graphs.move_to_end(key)
                return graph
            previous = self._tables.get(key) if self._sources.get(key, "") == source else None
        try:
            graph, tables = load_graph_and_tables(db, key[0], key[1], dim, previous=previous)
        except BaseException:
            with self._lock:
                if key not in self._graphs:  # a corpus that failed to load leaves nothing behind
                    self._loading.pop(key, None)
            raise
        self.put(key, graph, now=now, source=source, tables=tables)
        return graph

    def _cached(self, key: tuple[int, int], source: str) -> CorpusGraph | None:
        """The graph kept under ``key`` if it was loaded from the database ``source`` (ids and
        versions of two databases are unrelated: tenant 1's corpus 1 of one is not the other's)."""
        with self._lock:
            if self._sources.get(key, "") != source:
                return None
            return self._graphs.get(key)

    def put(
        self,
        key: tuple[int, int],
        graph: CorpusGraph,
        *,
        now: float | None = None,
        source: str = "",
        tables: GraphTables | None = None,
    ) -> None:
        """Keep ``graph`` (loaded from the database ``source``, from ``tables``: kept too, so the
        next version reads only what changed) under ``key`` as the most recently used, then evict
        past the bounds (the tables count in the bytes)."""
        with self._lock:
            self._sources[key] = source
            self._graphs[key] = graph
            if tables is not None:
                self._tables[key] = tables
            else:
                self._tables.pop(key, None)
            self._graphs.move_to_end(key)
            self._sizes[key] = int(graph.nbytes()) + (tables.nbytes() if tables is not None else 0)
            self._checked[key] = time.monotonic() if now is None else now
            self._evict(keep=key)

    def _evict(self, keep: tuple[int, int] | None) -> None:
        """Drop least recently used graphs (never ``keep``) until both bounds hold."""
        for key in list(self._graphs):
            over_count = self.max_graphs is not None and len(self._graphs) > self.max_graphs
            over_bytes = self.max_bytes is not None and self.nbytes_locked() > self.max_bytes
            if not (over_count or over_bytes):
                return
            if key == keep:
                continue
            self._drop(key)
            self.evictions += 1
            log.info("graph cache: evicted corpus %s of tenant %s", key[1], key[0])

    def _drop(self, key: tuple[int, int]) -> None:
        self._loading.pop(key, None)
        self._graphs.pop(key, None)
        self._tables.pop(key, None)
        self._sources.pop(key, None)
        self._sizes.pop(key, None)
        self._checked.pop(key, None)

    def nbytes_locked(self) -> int:
        return sum(self._sizes.values())

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._graphs

    def keys(self) -> list[tuple[int, int]]:
        """The cached (tenant, corpus) keys, least recently used first."""
        with self._lock:
            return list(self._graphs)

    def nbytes(self) -> int:
        """Bytes of the cached graphs."""
        with self._lock:
            return self.nbytes_locked()

    def invalidate(self, tenant_id: int | None = None, corpus_id: int | None = None) -> None:
        with self._lock:
            for key in list(self._graphs):
                if (tenant_id is None or key[0] == tenant_id) and (corpus_id is None or key[1] == corpus_id):
                    self._drop(key)


__all__ = ["GraphCache", "current_version", "graph_from_tables", "load_graph"]
