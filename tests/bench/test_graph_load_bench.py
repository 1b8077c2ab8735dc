"""``livingrag bench graph-load``: the three kinds of graph load timed on a small corpus, the
appended one checked against a full load, and nothing written."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from livingrag.bench.graph_load import format_report, run_graph_load_bench
from livingrag.corpus.indexer import CorpusIndexer
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.db.repositories import passages as passage_repo
from livingrag.errors import InvalidInput
from tests.corpus_support import CORPUS, HashEmbedder, RuleExtractor

pytestmark = pytest.mark.db


def _state(db: Database, tenant: int, corpus_id: int) -> tuple[object, ...]:
    with db.tenant_session(tenant) as s:
        row = s.execute(text("SELECT version, rewrite_version FROM corpora WHERE id = :c"), {"c": corpus_id}).one()
        return (*row, tuple(sorted(passage_repo.corpus_counts(s, corpus_id).items())))


def test_the_bench_times_each_load_and_writes_nothing(db: Database, tenant: int) -> None:
    with db.tenant_session(tenant) as s:
        c = corpora.create_corpus(s, tenant, "c", embedding_model="hash16", embedding_dim=16, ner_model="rules")
    indexer = CorpusIndexer(db, tenant, c, embedder=HashEmbedder(), extractor=RuleExtractor(), batch_size=3)
    indexer.index_documents([Document(r["title"], r["text"]) for r in CORPUS])
    before = _state(db, tenant, c.id)
    report = run_graph_load_bench(db, tenant, c, added=[1, 4], rounds=2)
    assert _state(db, tenant, c.id) == before
    assert report.passages == len(CORPUS) and report.rounds == 2 and report.edges > 0
    assert [a.added for a in report.appended] == [1, 4]
    assert all(a.same_as_full for a in report.appended)
    assert min(report.full_read_ms, report.rewrite_read_ms, *(a.read_ms for a in report.appended)) > 0
    text_report = format_report(report)
    assert "full load" in text_report and "appended load" in text_report and "same as a full load: True" in text_report
    with pytest.raises(InvalidInput, match=f"--added 99: corpus 'c' holds only {len(CORPUS)} passages"):
        run_graph_load_bench(db, tenant, c, added=[99], rounds=1)
    with pytest.raises(InvalidInput, match="at least 1"):
        run_graph_load_bench(db, tenant, c, added=[0], rounds=1)
    assert _state(db, tenant, c.id) == before
