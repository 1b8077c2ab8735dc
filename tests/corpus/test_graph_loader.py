"""Loading the corpus graph into memory (:mod:`livingrag.corpus.graph_loader`): bulk loads, loads of
only what changed or was appended (equal to a full load), the graph cache and its background
refresh. Model stand-ins from corpus_support keep these fast."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from sqlalchemy import text

from livingrag.corpus.graph_loader import GraphCache, load_graph
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.db.repositories import graph_tables as tables_repo
from livingrag.db.repositories import graph_writer as graph_repo
from tests.corpus_support import CORPUS, HashEmbedder, corpus_documents, graph_corpus, graph_counts, rule_indexer

pytestmark = pytest.mark.db


def test_graph_loads_in_bulk_and_reloads_on_version_change(db: Database, tenant: int) -> None:
    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents())
    g = load_graph(db, tenant, c.id, 16)
    counts = graph_counts(db, tenant, c.id)
    assert g.n_passages == counts["passages"] and g.n_entities == counts["entities"]
    assert g.mentions.nnz == counts["passage_entities"]
    assert g.entity_sentences.nnz == counts["entity_sentences"]
    assert list(g.entity_keys) == sorted(g.entity_keys)
    # mention counts in the matrix equal the table's
    with db.tenant_session(tenant) as s:
        rows = s.execute(
            text("SELECT passage_id, entity_id, mentions FROM passage_entities WHERE corpus_id = :c"), {"c": c.id}
        ).all()
    for pid, eid, m in rows:
        assert g.mentions[g.id_to_passage[pid], g.id_to_entity[eid]] == m
    np.testing.assert_allclose(np.linalg.norm(g.passage_embeddings, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(g.transition.sum(axis=0)).ravel()[~g.dangling], 1.0, atol=1e-6)

    cache = GraphCache()
    g1 = cache.get(db, tenant, c.id, 16)
    assert cache.get(db, tenant, c.id, 16) is g1
    idx.add_passage("Ingrid Vale is a Norwegian singer from Brevik.", title="Ingrid Vale")
    g2 = cache.get(db, tenant, c.id, 16)
    assert g2 is not g1 and g2.version > g1.version and g2.n_passages == g1.n_passages + 1


def test_while_a_newer_version_loads_questions_get_the_previous_graph_and_writers_wait(
    db: Database, tenant: int
) -> None:
    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents(CORPUS[:3]))
    cache = GraphCache()
    g1 = cache.get(db, tenant, c.id, 16)
    report = idx.index_documents(corpus_documents(CORPUS[3:4]))
    assert report.ids_by_hash and list(report.ids_by_hash.values()) == report.passage_ids
    loading = cache._loading[(tenant, c.id)]
    loading.acquire()  # another request is loading the new version
    try:
        assert cache.get(db, tenant, c.id, 16) is g1 and cache.stale_hits == 1
        got: list[object] = []
        writer = threading.Thread(
            target=lambda: got.append(cache.get(db, tenant, c.id, 16, min_version=report.version))
        )
        writer.start()
        writer.join(0.3)
        assert writer.is_alive()  # the writer waits for a graph that holds its change
    finally:
        loading.release()
    writer.join(30)
    (g2,) = got
    assert g2.version == report.version and g2.n_passages == g1.n_passages + 1  # type: ignore[attr-defined]
    assert cache.get(db, tenant, c.id, 16) is g2


def test_with_background_refresh_a_question_never_waits_for_a_newer_version(db: Database, tenant: int) -> None:
    """``background_refresh`` (the service's setting): the first question after a change is answered
    from the previous graph while the new one loads on a thread of its own; a writer passing the
    version it committed still gets a graph that holds its change."""
    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents(CORPUS[:3]))
    cache = GraphCache(background_refresh=True)
    g1 = cache.get(db, tenant, c.id, 16)
    idx.index_documents(corpus_documents(CORPUS[3:4]))
    assert cache.get(db, tenant, c.id, 16) is g1  # answered at once, from the previous version
    assert cache.background_loads == 1 and cache.stale_hits == 1
    deadline = time.monotonic() + 30
    while (g := cache.get(db, tenant, c.id, 16)) is g1:
        assert time.monotonic() < deadline, "the newer version was never loaded"
        time.sleep(0.02)
    assert g.version > g1.version and g.n_passages == g1.n_passages + 1
    assert cache.background_loads == 1  # loaded once
    # a writer waits for its own change
    report = idx.index_documents(corpus_documents(CORPUS[4:5]))
    g3 = cache.get(db, tenant, c.id, 16, min_version=report.version)
    assert g3.version == report.version and g3.n_passages == g.n_passages + 1
    assert cache.background_loads == 1


def test_within_the_check_interval_only_a_writer_reads_the_version(db: Database, tenant: int) -> None:
    """``check_interval_s``: questions are answered from the cached graph without reading the
    version until the interval has passed; a writer passing the version it committed gets it at
    once."""
    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents(CORPUS[:3]))
    cache = GraphCache(check_interval_s=3600)
    g1 = cache.get(db, tenant, c.id, 16)
    report = idx.index_documents(corpus_documents(CORPUS[3:4]))
    assert cache.get(db, tenant, c.id, 16) is g1  # within the interval: not even read
    g2 = cache.get(db, tenant, c.id, 16, min_version=report.version)
    assert g2.version == report.version and g2.n_passages == g1.n_passages + 1
    assert cache.get(db, tenant, c.id, 16) is g2
    with pytest.raises(ValueError, match="check_interval_s must be >= 0"):
        cache.set_refresh(background=False, check_interval_s=-1)


def test_the_cache_never_serves_one_databases_graph_for_anothers_ids(make_database_url: Callable[[], str]) -> None:
    """Two databases each with tenant 1's corpus 1 at the same version: ids and versions of two
    databases are unrelated, so the process-wide cache keeps each database's graph apart."""
    from livingrag.db import migrate
    from livingrag.db.repositories import tenants
    from tests.conftest import db_settings_for

    dbs, graphs = [], []
    cache = GraphCache()
    for records in (CORPUS[:2], CORPUS[2:5]):
        db = Database(db_settings_for(make_database_url()))
        migrate.upgrade(db)
        with db.owner_session() as s:
            tid = tenants.create_tenant(s, "same")[0].id
        c = graph_corpus(db, tid)
        rule_indexer(db, tid, c).index_documents(corpus_documents(records))
        dbs.append((db, tid, c))
    (db_a, ta, ca), (db_b, tb, cb) = dbs
    assert (ta, ca.id) == (tb, cb.id)  # the same ids in both databases ...
    assert corpora.version_read(db_a, ta, ca.id) == corpora.version_read(db_b, tb, cb.id)  # ... and version
    for db, tid, c in dbs:
        graphs.append(cache.get(db, tid, c.id, 16))
    assert graphs[0].n_passages == 2 and graphs[1].n_passages == 3
    assert cache.get(db_a, ta, ca.id, 16).n_passages == 2  # and back again: reloaded, not the other's
    for db, _, _ in dbs:
        db.dispose()


def _same_graph(a: object, b: object) -> None:
    """Two graphs (or two table sets) equal field for field; sparse matrices compared densely."""
    import scipy.sparse as sp

    va, vb = vars(a), vars(b)
    assert va.keys() == vb.keys()
    for k in va:
        x, y = va[k], vb[k]
        if sp.issparse(x):
            np.testing.assert_array_equal(va[k].toarray(), vb[k].toarray(), err_msg=k)  # x: scipy's SparseABC
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=k)
        elif isinstance(x, (list, tuple, dict, int, float, str)) or x is None:
            assert x == y, k


def test_a_reload_reads_only_what_changed_and_equals_a_full_load(db: Database, tenant: int) -> None:
    """After adds, an in-place update, a delete and an entity that got its vector later, the graph
    read from the previous tables plus what changed equals a full load, field for field."""
    from livingrag.corpus.graph_loader import load_graph_and_tables
    from livingrag.db.repositories.graph_tables import load_graph_tables

    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents(CORPUS[:3]))
    _, tables = load_graph_and_tables(db, tenant, c.id, 16)

    def check() -> None:
        nonlocal tables
        g_inc, t_inc = load_graph_and_tables(db, tenant, c.id, 16, previous=tables)
        g_full, t_full = load_graph_and_tables(db, tenant, c.id, 16)
        edge_fields = {k for k in vars(t_full) if k.startswith(("es_", "pe_", "link_"))}
        for k in set(vars(t_full)) - edge_fields:
            x, y = getattr(t_inc, k), getattr(t_full, k)
            if isinstance(x, np.ndarray):
                np.testing.assert_array_equal(x, y, err_msg=k)
            else:
                assert x == y, k
        _same_graph(g_inc, g_full)
        tables = t_inc

    idx.index_documents(corpus_documents(CORPUS[3:6]))  # adds
    check()
    idx.index_documents(corpus_documents(CORPUS[6:]))
    check()
    with db.tenant_session(tenant) as s:
        pid = s.execute(text("SELECT min(id) FROM passages WHERE corpus_id = :c"), {"c": c.id}).scalar_one()
    idx.update_passage(pid, text="Ingrid Vale is a Norwegian singer from Brevik, born in Oslo.")  # in place
    check()
    idx.delete_passages([pid])
    check()
    with db.owner_session() as s:  # an entity without a vector is not in the graph ...
        eid = s.execute(text("SELECT min(id) FROM entities WHERE corpus_id = :c"), {"c": c.id}).scalar_one()
        s.execute(text("UPDATE entities SET embedding = NULL WHERE id = :e"), {"e": eid})
    check()
    with db.owner_session() as s:  # ... until it gets one
        s.execute(text("UPDATE entities SET embedding = array_fill(0.25, ARRAY[16])::vector WHERE id = :e"), {"e": eid})
    check()
    with db.tenant_session(tenant) as s:
        assert load_graph_tables(s, c.id, 16).passage_hashes == tables.passage_hashes


def _same_tables(a: tables_repo.GraphTables, b: tables_repo.GraphTables) -> None:
    """Two table sets equal field for field; the edge tables compared as sets of rows (a full load
    reads them in no set order)."""
    edges = {"es": ("es_entity_ids", "es_sentence_ids"), "pe": ("pe_passage_ids", "pe_entity_ids", "pe_mentions"),
             "link": ("link_sources", "link_targets", "link_weights")}  # fmt: skip
    for cols in edges.values():
        rows = [sorted(zip(*(getattr(t, c).tolist() for c in cols), strict=True)) for t in (a, b)]
        assert rows[0] == rows[1], cols
    for k in set(vars(a)) - {c for cols in edges.values() for c in cols}:
        x, y = getattr(a, k), getattr(b, k)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, k
            np.testing.assert_array_equal(x, y, err_msg=k)
        else:
            assert x == y, k


def _appended(
    db: Database, tenant: int, corpus_id: int, known: tables_repo.GraphTables
) -> tables_repo.GraphTables | None:
    with db.tenant_session(tenant) as s:
        s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        return tables_repo.load_graph_tables_appended(s, tenant, corpus_id, 16, known)


def _full(db: Database, tenant: int, corpus_id: int) -> tables_repo.GraphTables:
    with db.tenant_session(tenant) as s:
        s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        return tables_repo.load_graph_tables(s, corpus_id, 16)


def test_after_adds_only_the_added_rows_are_read_and_the_graph_equals_a_full_load(db: Database, tenant: int) -> None:
    """Adds interleaved with another corpus's (ids not contiguous), documents chunked over two
    batches (a new link to a known passage), and entities sorting before, between and after the
    known ones: the appended load equals a full load, tables and graph."""
    from livingrag.corpus.graph_loader import graph_from_tables

    c, other = graph_corpus(db, tenant), graph_corpus(db, tenant, "other")
    idx, idx_other = rule_indexer(db, tenant, c, batch_size=2), rule_indexer(db, tenant, other)
    idx.index_documents(corpus_documents(CORPUS[:3]))
    tables = _full(db, tenant, c.id)
    assert tables.passage_high == int(tables.passage_ids.max())
    assert _appended(db, tenant, c.id, tables) is None  # nothing newer

    def step() -> None:
        nonlocal tables
        got = _appended(db, tenant, c.id, tables)
        assert got is not None
        full = _full(db, tenant, c.id)
        _same_tables(got, full)
        _same_graph(graph_from_tables(c.id, got), graph_from_tables(c.id, full))
        tables = got

    idx_other.index_documents(corpus_documents(CORPUS[3:5]))
    idx.index_documents(corpus_documents(CORPUS[5:7]))
    step()
    words = " ".join(f"Zed{i} met Aaron{i} in Mid{i}ville." for i in range(60))
    long_doc = Document("Long Doc", words, external_id="long")  # 3 chunks: batches of 2 and 1
    rule_indexer(db, tenant, c, batch_size=2, chunk_tokens=120, chunk_overlap=20).index_documents([long_doc])
    assert graph_counts(db, tenant, c.id)["passage_links"] == 2  # the second batch links to the first
    step()
    idx_other.index_documents(corpus_documents(CORPUS[7:]))
    assert _appended(db, tenant, c.id, tables) is None  # only the other corpus changed
    idx.index_documents(corpus_documents(CORPUS[7:]))
    step()
    assert len(tables.passage_ids) == graph_counts(db, tenant, c.id)["passages"]


def test_a_change_that_is_not_an_append_makes_the_appended_load_decline(db: Database, tenant: int) -> None:
    """An update or deletion sets ``rewrite_version``: a graph loaded before it is read again
    another way; adds after it are appended to the tables read after it."""
    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents(CORPUS[:4]))
    before = _full(db, tenant, c.id)
    with db.tenant_session(tenant) as s:
        pid = int(s.execute(text("SELECT min(id) FROM passages WHERE corpus_id = :c"), {"c": c.id}).scalar_one())
        v, rw = s.execute(text("SELECT version, rewrite_version FROM corpora WHERE id = :c"), {"c": c.id}).one()
    assert rw < v  # the adds did not set it
    idx.update_passage(pid, text="Ingrid Vale is a Norwegian singer from Brevik, born in Oslo.")
    assert _appended(db, tenant, c.id, before) is None
    after_update = _full(db, tenant, c.id)
    idx.index_documents(corpus_documents(CORPUS[4:6]))
    got = _appended(db, tenant, c.id, after_update)
    assert got is not None
    _same_tables(got, _full(db, tenant, c.id))
    idx.delete_passages([pid])
    assert _appended(db, tenant, c.id, got) is None


def test_a_batch_that_gives_a_known_entity_its_vector_counts_as_a_rewrite(db: Database, tenant: int) -> None:
    """An entity stored without a vector (a concurrent deletion removed it between a batch's plan
    and its write) that a batch gives one is a row a loaded graph lacks but an id below its
    highest: the batch's version bump is not an append."""
    c = graph_corpus(db, tenant)
    rule_indexer(db, tenant, c).index_documents(corpus_documents(CORPUS[:2]))
    with db.tenant_session(tenant) as s:
        s.execute(
            text("INSERT INTO entities (tenant_id, corpus_id, name, normalized_name) VALUES (:t, :c, 'Nox', 'nox')"),
            {"t": tenant, "c": c.id},
        )
    vec = np.ones(16, dtype=np.float32)
    batch = graph_repo.GraphBatch(
        passages=[graph_repo.PassageRow("Nox", "Nox is here.", "hash-nox", 12, 3, None, 0, None, vec)],
        sentences=[graph_repo.SentenceRow(0, 0, "Nox is here.", vec)],
        entities=[graph_repo.EntityRow("nox", "Nox", None, ("Nox",), vec)],
        entity_sentences=[("nox", 0)],
        passage_entities=[(0, "nox", 1, 1.0)],
    )
    with db.tenant_session(tenant) as s:
        graph_repo.lock_corpus(s, c.id)
        written = graph_repo.write_batch(s, tenant, c.id, batch)
        again = graph_repo.upsert_entities(s, tenant, c.id, batch.entities)  # it has one now
    assert written.filled_vectors == 1 and len(written.passage_ids) == 1 and again == 0


def test_bump_version_sets_the_rewrite_version_unless_the_change_only_appended(db: Database, tenant: int) -> None:
    c = graph_corpus(db, tenant)
    with db.tenant_session(tenant) as s:
        assert corpora.bump_version(s, c.id, appended=True) == 1
        assert corpora.bump_version(s, c.id, appended=True) == 2
        row = s.execute(text("SELECT version, rewrite_version FROM corpora WHERE id = :c"), {"c": c.id}).one()
        assert tuple(row) == (2, 0)
        assert corpora.bump_version(s, c.id) == 3
        row = s.execute(text("SELECT version, rewrite_version FROM corpora WHERE id = :c"), {"c": c.id}).one()
        assert tuple(row) == (3, 3)


def test_the_cache_appends_added_passages_without_reading_the_whole_corpus(
    db: Database, tenant: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from livingrag.corpus import graph_loader

    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents(CORPUS[:4]))
    cache = GraphCache()
    cache.get(db, tenant, c.id, 16)

    def refused(*a: object, **k: object) -> None:
        raise AssertionError("an append was read as a rewrite")

    monkeypatch.setattr(graph_loader, "load_graph_tables_since", refused)
    monkeypatch.setattr(graph_loader, "load_graph_tables", refused)
    idx.index_documents(corpus_documents(CORPUS[4:]))
    g = cache.get(db, tenant, c.id, 16)
    monkeypatch.undo()
    _same_graph(g, load_graph(db, tenant, c.id, 16))


def test_the_cache_reloads_a_changed_corpus_from_what_it_holds(db: Database, tenant: int) -> None:
    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents(CORPUS[:4]))
    cache = GraphCache()
    g1 = cache.get(db, tenant, c.id, 16)
    idx.index_documents(corpus_documents(CORPUS[4:]))
    g2 = cache.get(db, tenant, c.id, 16)
    _same_graph(g2, load_graph(db, tenant, c.id, 16))
    assert g2.version > g1.version and cache.nbytes() > g2.nbytes()  # the kept tables count too


def test_graph_rows_do_not_depend_on_insertion_order(db: Database, tenant: int) -> None:
    a, b = graph_corpus(db, tenant, "a"), graph_corpus(db, tenant, "b")
    rule_indexer(db, tenant, a, batch_size=3).index_documents(corpus_documents())
    rule_indexer(db, tenant, b, batch_size=4).index_documents(corpus_documents()[::-1])
    ga, gb = load_graph(db, tenant, a.id, 16), load_graph(db, tenant, b.id, 16)
    assert ga.entity_keys == gb.entity_keys and ga.passage_texts == gb.passage_texts
    np.testing.assert_array_equal(ga.passage_embeddings, gb.passage_embeddings)
    np.testing.assert_array_equal(ga.mentions.toarray(), gb.mentions.toarray())
    np.testing.assert_array_equal(ga.entity_sentences.toarray(), gb.entity_sentences.toarray())
    np.testing.assert_array_equal(ga.transition.toarray(), gb.transition.toarray())


def test_empty_and_entity_less_corpora_load_and_rank(db: Database, tenant: int) -> None:
    from livingrag.retrieval.params import RetrievalParams
    from livingrag.retrieval.ranking import rank_passages

    c = graph_corpus(db, tenant)
    g = load_graph(db, tenant, c.id, 16)
    assert g.n_passages == 0 and g.n_entities == 0
    q = HashEmbedder().encode(["anything"])[0]
    r = rank_passages(g, q, {}, RetrievalParams())
    assert r.dense_fallback and len(r.passages) == 0
    rule_indexer(db, tenant, c, title_entities=False).index_documents([Document("", "no names here at all.")])
    g = load_graph(db, tenant, c.id, 16)
    assert g.n_passages == 1 and g.n_entities == 0 and bool(g.dangling.all())
    assert rank_passages(g, q, {}, RetrievalParams()).passages.tolist() == [0]


def test_load_in_background_reaches_the_highest_version_asked_with_one_thread(db: Database, tenant: int) -> None:
    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents(CORPUS[:3]))
    cache = GraphCache()
    assert cache.load_in_background(db, tenant, c.id, 16, 99) is False  # not cached: its next question loads it
    g1 = cache.get(db, tenant, c.id, 16)
    assert cache.load_in_background(db, tenant, c.id, 16, g1.version) is False  # holds it already
    idx.index_documents(corpus_documents(CORPUS[3:5]))
    v2 = corpora.version_read(db, tenant, c.id)
    idx.index_documents(corpus_documents(CORPUS[5:]))
    v3 = corpora.version_read(db, tenant, c.id)
    assert v2 is not None and v3 is not None and v3 > v2 > g1.version
    loading = cache._loading.setdefault((tenant, c.id), threading.Lock())
    with loading:  # hold the corpus's load, so the thread started next is still waiting for it
        assert cache.load_in_background(db, tenant, c.id, 16, v2) is True
        assert cache.load_in_background(db, tenant, c.id, 16, v3) is False  # the running thread takes it on
    deadline = time.monotonic() + 20
    while cache._graphs[(tenant, c.id)].version < v3 or (tenant, c.id) in cache._refreshers:
        assert time.monotonic() < deadline, "the background load did not reach the last version asked"
        time.sleep(0.02)
    _same_graph(cache.get(db, tenant, c.id, 16), load_graph(db, tenant, c.id, 16))


def test_appended_loads_racing_concurrent_adds_equal_a_full_load_of_their_snapshot(db: Database, tenant: int) -> None:
    """Two writers add passages to one corpus (their batches serialised by the corpus lock, ids
    taken under it) while a reader keeps appending to the tables it holds: every appended load
    equals a full load read in the same snapshot, so no add committed meanwhile is missed or read
    twice."""
    c = graph_corpus(db, tenant)
    rule_indexer(db, tenant, c).index_documents(corpus_documents(CORPUS[:2]))
    tables = _full(db, tenant, c.id)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            idx = rule_indexer(db, tenant, c, batch_size=2)
            for i in range(8):
                words = f"Racer{w}x{i} met Pilot{w}y{i} in Harbor{w}z{i}. Pilot{w}y{i} sailed to Brevik."
                idx.index_documents([Document(f"Race {w}-{i}", words), Document(f"Also {w}-{i}", words + " Again.")])
        except BaseException as exc:
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    for t in writers:
        t.start()
    appended, running = 0, True
    while running:
        running = any(t.is_alive() for t in writers)  # one more load after the writers are done
        with db.tenant_session(tenant) as s:
            s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            got = tables_repo.load_graph_tables_appended(s, tenant, c.id, 16, tables)
            full = tables_repo.load_graph_tables(s, c.id, 16) if got is not None else None  # the same snapshot
        if got is None or full is None:
            time.sleep(0.005)
            continue
        _same_tables(got, full)
        tables, appended = got, appended + 1
    for t in writers:
        t.join(60)
    assert not errors, errors
    assert appended >= 2
    _same_tables(tables, _full(db, tenant, c.id))  # the last load holds every add
    assert len(tables.passage_ids) == 2 + 2 * 8 * 2


def test_an_empty_corpus_appends_its_first_passages(db: Database, tenant: int) -> None:
    c = graph_corpus(db, tenant)
    tables = _full(db, tenant, c.id)
    assert len(tables.passage_ids) == 0 and tables.passage_high == 0
    rule_indexer(db, tenant, c).index_documents(corpus_documents(CORPUS[:3]))
    got = _appended(db, tenant, c.id, tables)
    assert got is not None
    _same_tables(got, _full(db, tenant, c.id))


def test_a_background_load_that_fails_ends_its_thread_and_the_next_one_starts_again(
    db: Database, tenant: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    c = graph_corpus(db, tenant)
    idx = rule_indexer(db, tenant, c)
    idx.index_documents(corpus_documents(CORPUS[:3]))
    cache = GraphCache()
    g1 = cache.get(db, tenant, c.id, 16)
    idx.index_documents(corpus_documents(CORPUS[3:]))
    v = corpora.version_read(db, tenant, c.id)
    assert v is not None and v > g1.version

    from livingrag.corpus import graph_loader

    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr(graph_loader, "load_graph_and_tables", broken)
    assert cache.load_in_background(db, tenant, c.id, 16, v) is True
    deadline = time.monotonic() + 20
    while (tenant, c.id) in cache._refreshers:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert "database went away" in caplog.text and cache._graphs[(tenant, c.id)].version == g1.version
    monkeypatch.undo()
    assert cache.load_in_background(db, tenant, c.id, 16, v) is True  # asked again: a new thread
    while cache._graphs[(tenant, c.id)].version < v:
        assert time.monotonic() < deadline
        time.sleep(0.01)
