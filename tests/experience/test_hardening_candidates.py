"""Issue 42, item 2: the Python store API never stores an experience whose evidence it did not
check. A candidate carries the corpus version it was retrieved at (``from_retrieval`` sets it); one
without it is refused, so a passage changed after the retrieval is always caught."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from livingrag.config import get_settings
from livingrag.corpus import service
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.errors import InvalidInput
from livingrag.experience.store import ExperienceStore
from livingrag.experience.types import ExperienceCandidate
from livingrag.retrieval.retriever import Retriever
from livingrag.types import CorpusInfo
from tests.corpus_support import CORPUS
from tests.experience_helpers import HashingEncoder

pytestmark = [pytest.mark.db, pytest.mark.slow]

QUESTION = "Where was the director of Silver Harbor born?"


@pytest.fixture
def setup(db: Database) -> Iterator[tuple[int, CorpusInfo, Retriever]]:
    settings = get_settings()
    tenant, _ = service.ensure_tenant(db, f"cand-{uuid.uuid4().hex[:8]}")
    corpus = service.create_corpus(db, tenant, "small", settings)
    docs = [Document(d["title"], d["text"], source=f"test {i}") for i, d in enumerate(CORPUS)]
    service.indexer(db, tenant, corpus, settings).index_documents(docs)
    retriever = service.retriever(db, tenant, corpus, settings)
    yield tenant, service.get_corpus(db, tenant, corpus.id), retriever
    retriever.close()


def test_from_retrieval_carries_the_version_the_retrieval_read(
    db: Database, setup: tuple[int, CorpusInfo, Retriever]
) -> None:
    tenant, corpus, retriever = setup
    result = retriever.retrieve(retriever.encode(QUESTION))
    cand = ExperienceCandidate.from_retrieval(tenant, corpus.id, result, explanation="x.", answer="Galway")
    assert cand.corpus_version == result.encoding.graph_version == corpus.version


def test_a_passage_changed_after_the_retrieval_is_never_stored_unchecked(
    db: Database, setup: tuple[int, CorpusInfo, Retriever]
) -> None:
    """The store example of docs/experience-store.md, then an update of a cited passage, then a write-back
    without the gates: the candidate is refused as changed evidence, not stored active."""
    tenant, corpus, retriever = setup
    result = retriever.retrieve(retriever.encode(QUESTION))
    cand = ExperienceCandidate.from_retrieval(tenant, corpus.id, result, explanation="x.", answer="Galway")
    service.indexer(db, tenant, corpus, get_settings()).update_passage(
        result.passages[0].id, text=result.passages[0].text + " Revised."
    )
    store = ExperienceStore(db, get_settings(), encoder=HashingEncoder())
    out = store.write_back(cand, gated=False)
    assert out.decision == "rejected_grounding" and out.experience_id is None
    assert str(result.passages[0].id) in (out.reason or "")


def test_a_candidate_without_a_corpus_version_is_refused(
    db: Database, setup: tuple[int, CorpusInfo, Retriever]
) -> None:
    tenant, corpus, retriever = setup
    result = retriever.retrieve(retriever.encode(QUESTION))
    cand = ExperienceCandidate.from_retrieval(tenant, corpus.id, result, explanation="x.", answer="Galway")
    store = ExperienceStore(db, get_settings(), encoder=HashingEncoder())
    unversioned = ExperienceCandidate(**{**cand.__dict__, "corpus_version": None})
    for gated in (True, False):
        with pytest.raises(InvalidInput, match="corpus_version"):
            store.write_back(unversioned, gated=gated)
    with db.tenant_session(tenant) as s:
        from sqlalchemy import text

        assert s.execute(text("SELECT count(*) FROM experiences WHERE corpus_id = :c"), {"c": corpus.id}).scalar() == 0
