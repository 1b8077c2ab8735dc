"""The corpus graph in PostgreSQL: indexing, skipping, crash safety, update/delete consistency,
malformed input, bulk loading into matrices. Model stand-ins from corpus_support keep these fast;
tests/test_retriever.py runs the real models."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from livingrag.corpus.graph import CorpusIndexer
from livingrag.corpus.hooks import _hooks, register_passage_change_hook
from livingrag.corpus.ingest import Document
from livingrag.corpus.matrices import GraphCache, load_graph
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.db.repositories import corpus_graph as repo
from livingrag.errors import InvalidInput, NotFound
from livingrag.types import CorpusInfo
from tests.corpus_support import CORPUS, HashEmbedder, RuleExtractor

pytestmark = pytest.mark.db


def _corpus(db: Database, tenant: int, name: str = "c") -> CorpusInfo:
    with db.tenant_session(tenant) as s:
        return corpora.create_corpus(s, tenant, name, embedding_model="hash16", embedding_dim=16, ner_model="rules")


def _indexer(db: Database, tenant: int, corpus: CorpusInfo, **kw: object) -> CorpusIndexer:
    kw.setdefault("extractor", RuleExtractor())
    return CorpusIndexer(db, tenant, corpus, embedder=HashEmbedder(), **kw)  # type: ignore[arg-type]


def _docs(records: list[dict[str, str]] = CORPUS) -> list[Document]:
    return [Document(r["title"], r["text"], source=f"test {i}") for i, r in enumerate(records)]


def _counts(db: Database, tenant: int, corpus_id: int) -> dict[str, int]:
    with db.tenant_session(tenant) as s:
        return repo.corpus_counts(s, corpus_id)


def _check_consistent(db: Database, tenant: int, corpus_id: int) -> None:
    """Every passage has sentences and edges; mention weights sum to 1; no dangling or orphan rows."""
    with db.tenant_session(tenant) as s:
        q = lambda sql: s.execute(text(sql), {"c": corpus_id}).scalar()  # noqa: E731
        assert q("SELECT count(*) FROM passages p WHERE corpus_id = :c AND NOT EXISTS "
                 "(SELECT 1 FROM sentences x WHERE x.passage_id = p.id)") == 0  # fmt: skip
        assert q("SELECT count(*) FROM passages p WHERE corpus_id = :c AND NOT EXISTS "
                 "(SELECT 1 FROM passage_entities x WHERE x.passage_id = p.id)") == 0  # fmt: skip
        assert q("SELECT count(*) FROM entities e WHERE corpus_id = :c AND NOT EXISTS "
                 "(SELECT 1 FROM passage_entities x WHERE x.entity_id = e.id)") == 0  # fmt: skip
        assert q("SELECT count(*) FROM entities WHERE corpus_id = :c AND embedding IS NULL") == 0
        assert q("SELECT count(*) FROM passages WHERE corpus_id = :c AND embedding IS NULL") == 0
        bad = q("SELECT count(*) FROM (SELECT passage_id, sum(weight) w FROM passage_entities WHERE corpus_id = :c "
                "GROUP BY passage_id) t WHERE abs(w - 1) > 1e-5")  # fmt: skip
        assert bad == 0
        # every entity-sentence edge joins an entity the sentence's passage mentions
        assert q("SELECT count(*) FROM entity_sentences es JOIN sentences x ON x.id = es.sentence_id "
                 "WHERE es.corpus_id = :c AND NOT EXISTS (SELECT 1 FROM passage_entities pe "
                 "WHERE pe.passage_id = x.passage_id AND pe.entity_id = es.entity_id)") == 0  # fmt: skip


def test_index_then_reindex_skips_by_hash(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c, batch_size=4)
    r1 = idx.index_documents(_docs())
    assert r1.indexed == len(CORPUS) and r1.skipped_existing == 0
    assert r1.version == 3  # one version per batch of 4: 4 + 4 + 2
    counts = _counts(db, tenant, c.id)
    assert counts["passages"] == len(CORPUS) and counts["entities"] > 10
    _check_consistent(db, tenant, c.id)
    # re-index: nothing new, models never called, version unchanged
    idx2 = _indexer(db, tenant, c, extractor=RuleExtractor(fail_after=0))
    r2 = idx2.index_documents(_docs() + _docs()[:2])
    assert r2.indexed == 0 and r2.skipped_existing == len(CORPUS) and r2.duplicates_in_input == 2
    assert r2.version == r1.version
    assert _counts(db, tenant, c.id) == counts


def test_adding_indexes_only_new_passages_and_entities_meet(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:5]))
    before = _counts(db, tenant, c.id)
    r = idx.index_documents(_docs())
    assert r.indexed == len(CORPUS) - 5 and r.skipped_existing == 5
    with db.tenant_session(tenant) as s:
        # "Marta Quell" occurs in two passages but is one entity; its surface forms are kept
        row = s.execute(
            text("SELECT count(*), min(name) FROM entities WHERE corpus_id = :c AND normalized_name = 'marta quell'"),
            {"c": c.id},
        ).one()
        assert row == (1, "Marta Quell")
        n_links = s.execute(
            text("SELECT count(*) FROM passage_entities pe JOIN entities e ON e.id = pe.entity_id "
                 "WHERE e.normalized_name = 'marta quell' AND e.corpus_id = :c"), {"c": c.id}
        ).scalar()  # fmt: skip
        assert n_links == 2
    assert _counts(db, tenant, c.id)["entities"] > before["entities"]
    _check_consistent(db, tenant, c.id)


def test_title_becomes_an_entity_of_its_passage(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    _indexer(db, tenant, c).index_documents([Document("Zorbu (river)", "It flows north for ninety miles.")])
    with db.tenant_session(tenant) as s:
        names = s.execute(text("SELECT normalized_name, label FROM entities WHERE corpus_id = :c"), {"c": c.id}).all()
    assert ("zorbu", "TITLE") in names


def test_long_documents_are_chunked_and_linked(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    words = [f"Word{i} sentence number {i}." for i in range(100)]  # 400 tokens
    doc = Document("Long Doc", " ".join(words), external_id="long")
    r = _indexer(db, tenant, c, chunk_tokens=120, chunk_overlap=20, batch_size=2).index_documents([doc])
    assert r.indexed == 4  # windows start at 0, 100, 200, 300
    with db.tenant_session(tenant) as s:
        rows = s.execute(
            text("SELECT id, chunk_index, external_id, token_count FROM passages WHERE corpus_id = :c "
                 "ORDER BY chunk_index"), {"c": c.id}
        ).all()  # fmt: skip
        assert [r[1] for r in rows] == [0, 1, 2, 3]
        assert [r[2] for r in rows] == ["long#0", "long#1", "long#2", "long#3"]
        links = s.execute(
            text("SELECT source_id, target_id FROM passage_links WHERE corpus_id = :c ORDER BY source_id"), {"c": c.id}
        ).all()
    ids = [r[0] for r in rows]
    assert [tuple(x) for x in links] == [(ids[0], ids[1]), (ids[1], ids[2]), (ids[2], ids[3])]


def test_crash_in_a_batch_leaves_whole_batches_and_the_next_run_continues(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    crashing = _indexer(db, tenant, c, extractor=RuleExtractor(fail_after=6), batch_size=4)
    with pytest.raises(RuntimeError, match="simulated crash"):
        crashing.index_documents(_docs())
    assert _counts(db, tenant, c.id)["passages"] == 4  # the first batch only
    _check_consistent(db, tenant, c.id)

    # a failure inside the write transaction (after the passages were inserted) rolls all of it back
    def boom(*_a: object, **_k: object) -> int:
        raise RuntimeError("simulated crash while writing")

    orig = repo.link_chunks
    repo.link_chunks = boom  # type: ignore[assignment]
    try:
        with pytest.raises(RuntimeError, match="while writing"):
            _indexer(db, tenant, c, batch_size=4).index_documents(_docs())
    finally:
        repo.link_chunks = orig  # type: ignore[assignment]
    assert _counts(db, tenant, c.id)["passages"] == 4
    _check_consistent(db, tenant, c.id)

    r = _indexer(db, tenant, c, batch_size=4).index_documents(_docs())
    assert r.skipped_existing == 4 and r.indexed == len(CORPUS) - 4
    _check_consistent(db, tenant, c.id)
    # same graph as a clean run
    clean = _corpus(db, tenant, "clean")
    _indexer(db, tenant, clean).index_documents(_docs())
    a, b = _counts(db, tenant, c.id), _counts(db, tenant, clean.id)
    assert a == b


def test_update_and_delete_keep_the_graph_consistent(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs())
    fired: list[tuple[int, tuple[int, ...], str]] = []

    def hook(session: object, corpus_id: int, ids: object, kind: str) -> None:
        fired.append((corpus_id, tuple(ids), kind))  # type: ignore[arg-type]

    register_passage_change_hook(hook)  # type: ignore[arg-type]
    try:
        with db.tenant_session(tenant) as s:
            pid = s.execute(
                text("SELECT id FROM passages WHERE corpus_id = :c AND title = 'Olaf Renning'"), {"c": c.id}
            ).scalar_one()
            v0 = corpora.current_version(s, c.id)
        # Copenhagen is only in this passage; after the update it is gone, Aarhus appears
        idx.update_passage(pid, text="Olaf Renning was a Danish engineer from Aarhus.")
        with db.tenant_session(tenant) as s:
            keys = set(
                s.execute(text("SELECT normalized_name FROM entities WHERE corpus_id = :c"), {"c": c.id}).scalars()
            )
            p = repo.get_passage(s, c.id, pid)
            assert corpora.current_version(s, c.id) == v0 + 1
        assert "copenhagen" not in keys and "aarhus" in keys
        assert p.text.endswith("from Aarhus.") and p.id == pid
        assert fired[-1] == (c.id, (pid,), "updated")
        _check_consistent(db, tenant, c.id)

        # delete two passages by id and by external id; Olaf Renning stays (Brevik's passage names him)
        with db.tenant_session(tenant) as s:
            brevik = s.execute(
                text("SELECT id FROM passages WHERE corpus_id = :c AND title = 'Brevik'"), {"c": c.id}
            ).scalar_one()
        deleted = idx.delete_passages([pid, str(brevik)])
        assert sorted(deleted) == sorted([pid, brevik])
        assert fired[-1] == (c.id, tuple(sorted([pid, brevik])), "deleted")
        with db.tenant_session(tenant) as s:
            keys = set(
                s.execute(text("SELECT normalized_name FROM entities WHERE corpus_id = :c"), {"c": c.id}).scalars()
            )
            assert corpora.current_version(s, c.id) == v0 + 2
        assert "aarhus" not in keys and "telemark" not in keys and "olaf renning" not in keys
        assert "marta quell" in keys
        _check_consistent(db, tenant, c.id)
        with pytest.raises(NotFound):
            idx.delete_passages([999_999_999])
    finally:
        _hooks.remove(hook)  # type: ignore[arg-type]


def test_a_failing_hook_rolls_the_change_back(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:3]))
    before = _counts(db, tenant, c.id)

    def hook(*_a: object) -> None:
        raise RuntimeError("hook refused")

    register_passage_change_hook(hook)  # type: ignore[arg-type]
    try:
        with db.tenant_session(tenant) as s:
            pid = s.execute(text("SELECT min(id) FROM passages WHERE corpus_id = :c"), {"c": c.id}).scalar_one()
        with pytest.raises(RuntimeError, match="hook refused"):
            idx.delete_passages([pid])
    finally:
        _hooks.remove(hook)  # type: ignore[arg-type]
    assert _counts(db, tenant, c.id) == before


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.json", b'[{"title": "a", "text": "b"},', "not valid JSON"),
        (
            "notext.json",
            b'[{"title": "a", "text": "fine"}, {"title": "b"}]',
            "record at index 1: the record has no 'text' field",
        ),
        ("empty.json", b"", "the file is empty"),
        ("blank.jsonl", b"\n  \n", "the file is empty"),
        ("latin1.json", '[{"title": "Malmö", "text": "Malmö is a city."}]'.encode("latin-1"), "not UTF-8"),
        ("badline.jsonl", b'{"text": "ok"}\n{"text": 3}\n', "line 2: 'text' must be a string"),
        ("emptytext.json", b'[{"title": "x", "text": "   "}]', "record at index 0: 'text' is empty"),
        ("weird.json", b"42", "expected a JSON list"),
    ],
)
def test_malformed_input_names_file_and_record_and_writes_nothing(
    db: Database, tenant: int, tmp_path: Path, name: str, content: bytes, expected: str
) -> None:
    c = _corpus(db, tenant)
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InvalidInput) as ei:
        _indexer(db, tenant, c, extractor=RuleExtractor(fail_after=0)).index_path(path)
    assert name in str(ei.value) and expected in str(ei.value)
    assert _counts(db, tenant, c.id)["passages"] == 0


def test_malformed_file_in_a_folder_writes_nothing(db: Database, tenant: int, tmp_path: Path) -> None:
    c = _corpus(db, tenant)
    (tmp_path / "a.txt").write_text("Marta Quell made films in Brevik.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_bytes(b"\xff\xfe broken")
    with pytest.raises(InvalidInput, match=r"b\.md: not UTF-8"):
        _indexer(db, tenant, c).index_path(tmp_path)
    assert _counts(db, tenant, c.id)["passages"] == 0
    (tmp_path / "sub" / "b.md").write_text("# Notes\nElina Saari played in Helsinki.")
    r = _indexer(db, tenant, c).index_path(tmp_path)
    assert r.indexed == 2
    with db.tenant_session(tenant) as s:
        rows = s.execute(
            text("SELECT title, external_id FROM passages WHERE corpus_id = :c ORDER BY title"), {"c": c.id}
        )
        assert [tuple(r) for r in rows] == [("a", "a.txt"), ("b", "sub/b.md")]


def test_graph_loads_in_bulk_and_reloads_on_version_change(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs())
    g = load_graph(db, tenant, c.id, 16)
    counts = _counts(db, tenant, c.id)
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
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:3]))
    cache = GraphCache()
    g1 = cache.get(db, tenant, c.id, 16)
    report = idx.index_documents(_docs(CORPUS[3:4]))
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
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:3]))
    cache = GraphCache(background_refresh=True)
    g1 = cache.get(db, tenant, c.id, 16)
    idx.index_documents(_docs(CORPUS[3:4]))
    assert cache.get(db, tenant, c.id, 16) is g1  # answered at once, from the previous version
    assert cache.background_loads == 1 and cache.stale_hits == 1
    deadline = time.monotonic() + 30
    while (g := cache.get(db, tenant, c.id, 16)) is g1:
        assert time.monotonic() < deadline, "the newer version was never loaded"
        time.sleep(0.02)
    assert g.version > g1.version and g.n_passages == g1.n_passages + 1
    assert cache.background_loads == 1  # loaded once
    # a writer waits for its own change
    report = idx.index_documents(_docs(CORPUS[4:5]))
    g3 = cache.get(db, tenant, c.id, 16, min_version=report.version)
    assert g3.version == report.version and g3.n_passages == g.n_passages + 1
    assert cache.background_loads == 1


def test_within_the_check_interval_only_a_writer_reads_the_version(db: Database, tenant: int) -> None:
    """``check_interval_s``: questions are answered from the cached graph without reading the
    version until the interval has passed; a writer passing the version it committed gets it at
    once."""
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:3]))
    cache = GraphCache(check_interval_s=3600)
    g1 = cache.get(db, tenant, c.id, 16)
    report = idx.index_documents(_docs(CORPUS[3:4]))
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
        c = _corpus(db, tid)
        _indexer(db, tid, c).index_documents(_docs(records))
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
            np.testing.assert_array_equal(x.toarray(), y.toarray(), err_msg=k)
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=k)
        elif isinstance(x, (list, tuple, dict, int, float, str)) or x is None:
            assert x == y, k


def test_a_reload_reads_only_what_changed_and_equals_a_full_load(db: Database, tenant: int) -> None:
    """After adds, an in-place update, a delete and an entity that got its vector later, the graph
    read from the previous tables plus what changed equals a full load, field for field."""
    from livingrag.corpus.matrices import load_graph_and_tables
    from livingrag.db.repositories.corpus_graph import load_graph_tables

    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:3]))
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

    idx.index_documents(_docs(CORPUS[3:6]))  # adds
    check()
    idx.index_documents(_docs(CORPUS[6:]))
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


def _same_tables(a: repo.GraphTables, b: repo.GraphTables) -> None:
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


def _appended(db: Database, tenant: int, corpus_id: int, known: repo.GraphTables) -> repo.GraphTables | None:
    with db.tenant_session(tenant) as s:
        s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        return repo.load_graph_tables_appended(s, tenant, corpus_id, 16, known)


def _full(db: Database, tenant: int, corpus_id: int) -> repo.GraphTables:
    with db.tenant_session(tenant) as s:
        s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        return repo.load_graph_tables(s, corpus_id, 16)


def test_after_adds_only_the_added_rows_are_read_and_the_graph_equals_a_full_load(db: Database, tenant: int) -> None:
    """Adds interleaved with another corpus's (ids not contiguous), documents chunked over two
    batches (a new link to a known passage), and entities sorting before, between and after the
    known ones: the appended load equals a full load, tables and graph."""
    from livingrag.corpus.matrices import graph_from_tables

    c, other = _corpus(db, tenant), _corpus(db, tenant, "other")
    idx, idx_other = _indexer(db, tenant, c, batch_size=2), _indexer(db, tenant, other)
    idx.index_documents(_docs(CORPUS[:3]))
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

    idx_other.index_documents(_docs(CORPUS[3:5]))
    idx.index_documents(_docs(CORPUS[5:7]))
    step()
    words = " ".join(f"Zed{i} met Aaron{i} in Mid{i}ville." for i in range(60))
    long_doc = Document("Long Doc", words, external_id="long")  # 3 chunks: batches of 2 and 1
    _indexer(db, tenant, c, batch_size=2, chunk_tokens=120, chunk_overlap=20).index_documents([long_doc])
    assert _counts(db, tenant, c.id)["passage_links"] == 2  # the second batch links to the first
    step()
    idx_other.index_documents(_docs(CORPUS[7:]))
    assert _appended(db, tenant, c.id, tables) is None  # only the other corpus changed
    idx.index_documents(_docs(CORPUS[7:]))
    step()
    assert len(tables.passage_ids) == _counts(db, tenant, c.id)["passages"]


def test_a_change_that_is_not_an_append_makes_the_appended_load_decline(db: Database, tenant: int) -> None:
    """An update or deletion sets ``rewrite_version``: a graph loaded before it is read again
    another way; adds after it are appended to the tables read after it."""
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:4]))
    before = _full(db, tenant, c.id)
    with db.tenant_session(tenant) as s:
        pid = int(s.execute(text("SELECT min(id) FROM passages WHERE corpus_id = :c"), {"c": c.id}).scalar_one())
        v, rw = s.execute(text("SELECT version, rewrite_version FROM corpora WHERE id = :c"), {"c": c.id}).one()
    assert rw < v  # the adds did not set it
    idx.update_passage(pid, text="Ingrid Vale is a Norwegian singer from Brevik, born in Oslo.")
    assert _appended(db, tenant, c.id, before) is None
    after_update = _full(db, tenant, c.id)
    idx.index_documents(_docs(CORPUS[4:6]))
    got = _appended(db, tenant, c.id, after_update)
    assert got is not None
    _same_tables(got, _full(db, tenant, c.id))
    idx.delete_passages([pid])
    assert _appended(db, tenant, c.id, got) is None


def test_a_batch_that_gives_a_known_entity_its_vector_counts_as_a_rewrite(db: Database, tenant: int) -> None:
    """An entity stored without a vector (a concurrent deletion removed it between a batch's plan
    and its write) that a batch gives one is a row a loaded graph lacks but an id below its
    highest: the batch's version bump is not an append."""
    c = _corpus(db, tenant)
    _indexer(db, tenant, c).index_documents(_docs(CORPUS[:2]))
    with db.tenant_session(tenant) as s:
        s.execute(
            text("INSERT INTO entities (tenant_id, corpus_id, name, normalized_name) VALUES (:t, :c, 'Nox', 'nox')"),
            {"t": tenant, "c": c.id},
        )
    vec = np.ones(16, dtype=np.float32)
    batch = repo.GraphBatch(
        passages=[repo.PassageRow("Nox", "Nox is here.", "hash-nox", 12, 3, None, 0, None, vec)],
        sentences=[repo.SentenceRow(0, 0, "Nox is here.", vec)],
        entities=[repo.EntityRow("nox", "Nox", None, ("Nox",), vec)],
        entity_sentences=[("nox", 0)],
        passage_entities=[(0, "nox", 1, 1.0)],
    )
    with db.tenant_session(tenant) as s:
        repo.lock_corpus(s, c.id)
        written = repo.write_batch(s, tenant, c.id, batch)
        again = repo.upsert_entities(s, tenant, c.id, batch.entities)  # it has one now
    assert written.filled_vectors == 1 and len(written.passage_ids) == 1 and again == 0


def test_bump_version_sets_the_rewrite_version_unless_the_change_only_appended(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
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
    from livingrag.corpus import matrices

    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:4]))
    cache = GraphCache()
    cache.get(db, tenant, c.id, 16)

    def refused(*a: object, **k: object) -> None:
        raise AssertionError("an append was read as a rewrite")

    monkeypatch.setattr(matrices, "load_graph_tables_since", refused)
    monkeypatch.setattr(matrices, "load_graph_tables", refused)
    idx.index_documents(_docs(CORPUS[4:]))
    g = cache.get(db, tenant, c.id, 16)
    monkeypatch.undo()
    _same_graph(g, load_graph(db, tenant, c.id, 16))


def test_the_cache_reloads_a_changed_corpus_from_what_it_holds(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:4]))
    cache = GraphCache()
    g1 = cache.get(db, tenant, c.id, 16)
    idx.index_documents(_docs(CORPUS[4:]))
    g2 = cache.get(db, tenant, c.id, 16)
    _same_graph(g2, load_graph(db, tenant, c.id, 16))
    assert g2.version > g1.version and cache.nbytes() > g2.nbytes()  # the kept tables count too


def test_graph_rows_do_not_depend_on_insertion_order(db: Database, tenant: int) -> None:
    a, b = _corpus(db, tenant, "a"), _corpus(db, tenant, "b")
    _indexer(db, tenant, a, batch_size=3).index_documents(_docs())
    _indexer(db, tenant, b, batch_size=4).index_documents(_docs()[::-1])
    ga, gb = load_graph(db, tenant, a.id, 16), load_graph(db, tenant, b.id, 16)
    assert ga.entity_keys == gb.entity_keys and ga.passage_texts == gb.passage_texts
    np.testing.assert_array_equal(ga.passage_embeddings, gb.passage_embeddings)
    np.testing.assert_array_equal(ga.mentions.toarray(), gb.mentions.toarray())
    np.testing.assert_array_equal(ga.entity_sentences.toarray(), gb.entity_sentences.toarray())
    np.testing.assert_array_equal(ga.transition.toarray(), gb.transition.toarray())


def test_corpus_rows_are_invisible_to_other_tenants(db: Database, make_tenant: Callable[..., tuple[int, str]]) -> None:
    t1, t2 = make_tenant()[0], make_tenant()[0]
    c = _corpus(db, t1)
    _indexer(db, t1, c).index_documents(_docs(CORPUS[:2]))
    with db.tenant_session(t2) as s:
        assert s.execute(text("SELECT count(*) FROM passages WHERE corpus_id = :c"), {"c": c.id}).scalar() == 0
    with pytest.raises(NotFound):
        load_graph(db, t2, c.id, 16)


def test_ingest_formats(tmp_path: Path) -> None:
    from livingrag.corpus.ingest import read_corpus

    (tmp_path / "a.json").write_text(json.dumps([{"title": "T", "text": "x", "id": 7}, {"text": "y"}]))
    docs = read_corpus(tmp_path / "a.json")
    assert [(d.title, d.text, d.external_id) for d in docs] == [("T", "x", "7"), ("", "y", None)]
    (tmp_path / "b.json").write_text(json.dumps(["0:first chunk", "1:second chunk"]))
    assert [d.text for d in read_corpus(tmp_path / "b.json")] == ["first chunk", "second chunk"]
    (tmp_path / "c.json").write_text(json.dumps(["10:30 meeting", "plain"]))
    assert [d.text for d in read_corpus(tmp_path / "c.json")] == ["10:30 meeting", "plain"]
    (tmp_path / "d.json").write_text(json.dumps({"Demon Dice": ["Demon Dice is a game.", " It has dice."]}))
    assert [(d.title, d.text) for d in read_corpus(tmp_path / "d.json")] == [
        ("Demon Dice", "Demon Dice is a game. It has dice.")
    ]
    (tmp_path / "e.jsonl").write_text('{"title": "A", "text": "a"}\n\n"b"\n')
    assert [(d.title, d.text) for d in read_corpus(tmp_path / "e.jsonl")] == [("A", "a"), ("", "b")]
    with pytest.raises(InvalidInput, match="unsupported file type"):
        read_corpus(tmp_path / "e.csv") if (tmp_path / "e.csv").write_text("x") else None
    with pytest.raises(InvalidInput, match="no such file"):
        read_corpus(tmp_path / "missing.json")


_KILL_SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
from pydantic import SecretStr
from livingrag.config import DBSettings
from livingrag.corpus.graph import CorpusIndexer
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from tests.corpus_support import CORPUS, HashEmbedder, RuleExtractor

class Slow(RuleExtractor):
    def extract_passages(self, texts):
        for ex in super().extract_passages(texts):
            time.sleep(0.05)
            yield ex

db = Database(DBSettings(url=SecretStr({url!r})))
with db.tenant_session({tenant}) as s:
    c = corpora.get_corpus(s, {corpus})
docs = [Document(f"{{r['title']}} {{i}}", r["text"] + f" Part {{i}}.") for i in range(8) for r in CORPUS]
CorpusIndexer(db, {tenant}, c, extractor=Slow(), embedder=HashEmbedder(), batch_size=4).index_documents(docs)
"""


def test_a_process_killed_mid_run_leaves_whole_batches(db: Database, tenant: int, database_url: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    root = str(Path(__file__).resolve().parents[1])
    c = _corpus(db, tenant)
    script = _KILL_SCRIPT.format(root=root, url=database_url, tenant=tenant, corpus=c.id)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": root})
    try:
        deadline = time.monotonic() + 120
        while _counts(db, tenant, c.id)["passages"] < 8:
            assert proc.poll() is None, "the indexing process ended before it could be killed"
            assert time.monotonic() < deadline, "the indexing process wrote nothing"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    n = _counts(db, tenant, c.id)["passages"]
    assert 8 <= n < 8 * len(CORPUS) and n % 4 == 0  # whole batches of 4, nothing half-written
    _check_consistent(db, tenant, c.id)
    docs = [
        Document(f"{r['title']} {i}", r["text"] + f" Part {i}.") for i in range(8) for r in CORPUS
    ]  # the same input as the killed run
    report = _indexer(db, tenant, c, batch_size=4).index_documents(docs)
    assert report.skipped_existing == n and report.indexed == 8 * len(CORPUS) - n
    _check_consistent(db, tenant, c.id)


class _ScriptedLLM:
    """An LLM stand-in that answers the NER prompts with fixed JSON (tests the parsing, not a model)."""

    name = "scripted"

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.calls = 0

    def complete(self, messages, *, max_tokens=None, temperature=None, stop=None):  # type: ignore[no-untyped-def]
        from livingrag.generation.llm import Completion

        self.calls += 1
        text = messages[-1]["content"]
        reply = next(v for k, v in self.replies.items() if k in text)
        return Completion(reply, 10, 5, self.name, 0.0)


def test_llm_extractor_places_terms_in_sentences(db: Database, tenant: int) -> None:
    from livingrag.corpus.ner import LLMExtractor
    from livingrag.errors import LLMError

    llm = _ScriptedLLM(
        {
            "Payouts are sent": '```json\n["Payouts", "payout schedule", "Stripe"]\n```',
            "When do I get": 'Here you go: ["payout schedule", "Payouts"]',
            "broken": "I cannot help with that.",
        }
    )
    ex = LLMExtractor(llm)
    (out,) = list(ex.extract_passages(["Payouts are sent weekly. Stripe handles the transfer."]))
    assert out.sentences == ("Payouts are sent weekly.", "Stripe handles the transfer.")
    placed = {(m.key, m.sentence) for m in out.mentions}
    # "payout schedule" occurs in no sentence: attached to the first one
    assert placed == {("payouts", 0), ("payout schedule", 0), ("stripe", 1)}
    assert ex.extract_question("When do I get my payouts?") == ["payout schedule", "Payouts"]
    with pytest.raises(LLMError, match="JSON array"):
        list(ex.extract_passages(["broken text"]))
    # it plugs into the indexer like spaCy does
    c = _corpus(db, tenant)
    r = _indexer(db, tenant, c, extractor=ex).index_documents(
        [Document("Payouts", "Payouts are sent weekly. Stripe handles the transfer.")]
    )
    assert r.indexed == 1
    with db.tenant_session(tenant) as s:
        keys = set(s.execute(text("SELECT normalized_name FROM entities WHERE corpus_id = :c"), {"c": c.id}).scalars())
    assert {"payouts", "payout schedule", "stripe"} <= keys


def test_separate_sentence_embeddings_build_the_same_graph(db: Database, tenant: int) -> None:
    a, b = _corpus(db, tenant, "late"), _corpus(db, tenant, "separate")
    _indexer(db, tenant, a).index_documents(_docs())
    _indexer(db, tenant, b, sentence_embeddings="separate").index_documents(_docs())
    assert _counts(db, tenant, a.id) == _counts(db, tenant, b.id)
    _check_consistent(db, tenant, b.id)


def test_empty_and_entity_less_corpora_load_and_rank(db: Database, tenant: int) -> None:
    from livingrag.retrieval.core import rank_passages
    from livingrag.retrieval.params import RetrievalParams

    c = _corpus(db, tenant)
    g = load_graph(db, tenant, c.id, 16)
    assert g.n_passages == 0 and g.n_entities == 0
    q = HashEmbedder().encode(["anything"])[0]
    r = rank_passages(g, q, {}, RetrievalParams())
    assert r.dense_fallback and len(r.passages) == 0
    _indexer(db, tenant, c, title_entities=False).index_documents([Document("", "no names here at all.")])
    g = load_graph(db, tenant, c.id, 16)
    assert g.n_passages == 1 and g.n_entities == 0 and bool(g.dangling.all())
    assert rank_passages(g, q, {}, RetrievalParams()).passages.tolist() == [0]


def test_load_in_background_reaches_the_highest_version_asked_with_one_thread(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:3]))
    cache = GraphCache()
    assert cache.load_in_background(db, tenant, c.id, 16, 99) is False  # not cached: its next question loads it
    g1 = cache.get(db, tenant, c.id, 16)
    assert cache.load_in_background(db, tenant, c.id, 16, g1.version) is False  # holds it already
    idx.index_documents(_docs(CORPUS[3:5]))
    v2 = corpora.version_read(db, tenant, c.id)
    idx.index_documents(_docs(CORPUS[5:]))
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
    c = _corpus(db, tenant)
    _indexer(db, tenant, c).index_documents(_docs(CORPUS[:2]))
    tables = _full(db, tenant, c.id)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            idx = _indexer(db, tenant, c, batch_size=2)
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
            got = repo.load_graph_tables_appended(s, tenant, c.id, 16, tables)
            full = repo.load_graph_tables(s, c.id, 16) if got is not None else None  # the same snapshot
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
    c = _corpus(db, tenant)
    tables = _full(db, tenant, c.id)
    assert len(tables.passage_ids) == 0 and tables.passage_high == 0
    _indexer(db, tenant, c).index_documents(_docs(CORPUS[:3]))
    got = _appended(db, tenant, c.id, tables)
    assert got is not None
    _same_tables(got, _full(db, tenant, c.id))


def test_a_background_load_that_fails_ends_its_thread_and_the_next_one_starts_again(
    db: Database, tenant: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:3]))
    cache = GraphCache()
    g1 = cache.get(db, tenant, c.id, 16)
    idx.index_documents(_docs(CORPUS[3:]))
    v = corpora.version_read(db, tenant, c.id)
    assert v is not None and v > g1.version

    from livingrag.corpus import matrices

    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr(matrices, "load_graph_and_tables", broken)
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


def test_link_chunks_links_a_passage_to_its_stored_neighbours_on_both_sides(db: Database, tenant: int) -> None:
    """A chunk linked after its neighbours were stored (the next one and the previous one, both
    found through an index), links of another document untouched, none stored twice."""
    c = _corpus(db, tenant)
    vec = np.ones(16, dtype=np.float32)

    def rows(doc: str, chunks: list[int]) -> repo.GraphBatch:
        ps = [repo.PassageRow(f"{doc}{k}", f"{doc} chunk {k}.", f"h{doc}{k}", 9, 3, doc, k, None, vec) for k in chunks]
        return repo.GraphBatch(passages=ps, sentences=[], entities=[], entity_sentences=[], passage_entities=[])

    with db.tenant_session(tenant) as s:
        repo.lock_corpus(s, c.id)
        p0, p2 = repo.write_batch(s, tenant, c.id, rows("d", [0, 2])).passage_ids
        (e0, e1) = repo.write_batch(s, tenant, c.id, rows("e", [0, 1])).passage_ids
        (p1,) = repo.write_batch(s, tenant, c.id, rows("d", [1])).passage_ids
        assert repo.link_chunks(s, tenant, c.id, [p1]) == 2  # (d0, d1) and (d1, d2)
        assert repo.link_chunks(s, tenant, c.id, [p0, p1, p2]) == 0  # already there
        assert repo.link_chunks(s, tenant, c.id, [e1]) == 1  # (e0, e1)
        links = s.execute(
            text("SELECT source_id, target_id FROM passage_links WHERE corpus_id = :c ORDER BY 1, 2"), {"c": c.id}
        ).all()
    assert sorted(tuple(r) for r in links) == sorted([(p0, p1), (p1, p2), (e0, e1)])
