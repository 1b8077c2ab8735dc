"""The corpus Python API: create corpora and get indexers and retrievers configured from settings.

from livingrag.config import get_settings
from livingrag.db.setup import open_database
from livingrag.corpus import service

settings = get_settings()
db = open_database(settings.db)  # connects, then migrates (embedded) or checks the schema
tenant, _key = service.ensure_tenant(db, "default")  # (tenant id, its first API key when just created)
corpus = service.create_corpus(db, tenant, "wiki", settings)
service.indexer(db, tenant, corpus, settings).index_path("corpus.json")
retriever = service.retriever(db, tenant, corpus, settings)
result = retriever.retrieve(retriever.encode("Who directed Casablanca?"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from livingrag.db.repositories import corpora, tenants
from livingrag.db.repositories import passages as passage_repo
from livingrag.db.repositories.passages import PassageRecord as PassageRecord
from livingrag.errors import AlreadyExists, NotFound
from livingrag.quotas import check_quota
from livingrag.types import CorpusInfo

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.corpus.indexer import CorpusIndexer
    from livingrag.corpus.ner import EntityExtractor
    from livingrag.corpus.progress import Progress
    from livingrag.db.engine import Database
    from livingrag.models.embedder import SentenceEncoder
    from livingrag.retrieval.retriever import Retriever

DEFAULT_TENANT = "default"


def ensure_tenant(db: Database, name: str = DEFAULT_TENANT, *, create: bool = True) -> tuple[int, str | None]:
    """The id of tenant ``name``, created when missing (with ``create``); the new API key or None."""
    with db.owner_session() as s:
        try:
            return tenants.get_tenant(s, name).id, None
        except NotFound:
            if not create:
                raise
    with db.owner_session() as s:
        try:
            rec, key = tenants.create_tenant(s, name)
        except AlreadyExists:  # created concurrently
            return tenants.get_tenant(s, name).id, None
    return rec.id, key


KNOWN_DIMS = {"all-minilm-l6-v2": 384, "sentence-transformers/all-minilm-l6-v2": 384}


def embedding_dim(settings: Settings) -> int:
    """The embedding model's dimension (the packaged model's is known; others are loaded to ask)."""
    from livingrag.models.embedder import embedder_from_settings

    m = settings.models
    known = KNOWN_DIMS.get(m.embedding_model.strip().lower())
    if known is not None:
        return known
    return embedder_from_settings(m).dim


def create_corpus(
    db: Database, tenant_id: int, name: str, settings: Settings, *, preset: str | None = None
) -> CorpusInfo:
    """A new corpus recording the embedding model, its dimension and the extractor of ``settings``
    (:class:`QuotaExceeded` past ``api.max_corpora_per_tenant``),
    and the retrieval preset it is to be searched with (``preset``, else ``retrieval.preset``):
    :func:`livingrag.retrieval.presets.preset_for` uses it unless the settings name another one."""
    from livingrag.retrieval.presets import preset_params

    m = settings.models
    preset = preset or settings.retrieval.preset
    preset_params(preset)  # an unknown name is an InvalidInput naming the known ones
    dim = embedding_dim(settings)
    limit = settings.api.max_corpora_per_tenant
    with db.tenant_session(tenant_id) as s:
        if limit is not None:
            corpora.lock_tenant_corpora(s, tenant_id)
            check_quota("api.max_corpora_per_tenant", limit, corpora.count_corpora(s, tenant_id), 1, "corpora")
        return corpora.create_corpus(
            s,
            tenant_id,
            name,
            embedding_model=m.embedding_model,
            embedding_dim=dim,
            ner_model=m.ner_model,
            extractor=m.extractor,
            settings={
                "chunk_tokens": m.chunk_tokens,
                "chunk_overlap": m.chunk_overlap,
                "title_entities": m.title_entities,
                "sentence_embeddings": m.sentence_embeddings,
                "retrieval_preset": preset,
            },
        )


def get_corpus(db: Database, tenant_id: int, name_or_id: str | int) -> CorpusInfo:
    with db.tenant_session(tenant_id) as s:
        return corpora.get_corpus(s, name_or_id)


def list_corpora(db: Database, tenant_id: int) -> list[CorpusInfo]:
    """The tenant's corpora, oldest first."""
    with db.tenant_session(tenant_id) as s:
        return corpora.list_corpora(s)


def corpora_with_counts(db: Database, tenant_id: int) -> list[tuple[CorpusInfo, dict[str, int]]]:
    """The tenant's corpora, oldest first, each with its graph sizes (passages, sentences, entities, …)."""
    with db.tenant_session(tenant_id) as s:
        return [(c, passage_repo.corpus_counts(s, c.id)) for c in corpora.list_corpora(s)]


def corpus_with_counts(db: Database, tenant_id: int, name_or_id: str | int) -> tuple[CorpusInfo, dict[str, int]]:
    """One corpus of the tenant with its graph sizes."""
    with db.tenant_session(tenant_id) as s:
        c = corpora.get_corpus(s, name_or_id)
        return c, passage_repo.corpus_counts(s, c.id)


def delete_corpus(db: Database, tenant_id: int, corpus_id: int) -> None:
    """Delete the corpus with its whole graph and its experiences."""
    with db.tenant_session(tenant_id) as s:
        corpora.delete_corpus(s, corpus_id)


def list_passages(
    db: Database, tenant_id: int, corpus_id: int, *, limit: int, offset: int, q: str | None = None
) -> list[PassageRecord]:
    """A page of the corpus's passages in id order (``q``: only those whose title or text holds it)."""
    with db.tenant_session(tenant_id) as s:
        return passage_repo.list_passages(s, corpus_id, limit=limit, offset=offset, q=q)


def get_passage(db: Database, tenant_id: int, corpus_id: int, ref: int | str) -> PassageRecord:
    """One passage of the corpus by id (or external id)."""
    with db.tenant_session(tenant_id) as s:
        return passage_repo.get_passage(s, corpus_id, ref)


def count_passages(db: Database, tenant_id: int, corpus_id: int) -> int:
    """How many passages the corpus holds."""
    with db.tenant_session(tenant_id) as s:
        return passage_repo.count_passages(s, corpus_id)


def set_retrieval_preset(db: Database, tenant_id: int, name_or_id: str | int, preset: str) -> CorpusInfo:
    """Record ``preset`` as the retrieval preset the corpus is searched with, in one transaction
    (:class:`InvalidInput` naming the known presets for an unknown one, and nothing changed; the
    version, graph and other settings stay as they are). Returns the corpus as it now is."""
    from livingrag.retrieval.presets import preset_params

    preset_params(preset)  # an unknown name is an InvalidInput naming the known ones
    with db.tenant_session(tenant_id) as s:
        info = corpora.get_corpus(s, name_or_id)
        return corpora.update_settings(s, info.id, {"retrieval_preset": preset})


def indexer(
    db: Database, tenant_id: int, corpus: CorpusInfo, settings: Settings, *, progress: Progress | None = None
) -> CorpusIndexer:
    """An indexer for ``corpus`` with the corpus's models (loaded on first use)."""
    from livingrag.corpus.indexer import CorpusIndexer
    from livingrag.corpus.ner import llm_factory, make_extractor
    from livingrag.models.embedder import embedder_from_settings

    m = settings.models
    stored = corpus.settings or {}

    def extractor() -> EntityExtractor:
        return make_extractor(
            corpus.extractor,
            ner_model=corpus.ner_model,
            batch_size=m.ner_batch_size,
            llm_factory=llm_factory(settings),
            concurrency=settings.llm.concurrency,
        )

    def embedder() -> SentenceEncoder:
        return embedder_from_settings(m, corpus.embedding_model)

    return CorpusIndexer(
        db,
        tenant_id,
        corpus,
        extractor=extractor,
        embedder=embedder,
        chunk_tokens=int(stored.get("chunk_tokens", m.chunk_tokens)),
        chunk_overlap=int(stored.get("chunk_overlap", m.chunk_overlap)),
        title_entities=bool(stored.get("title_entities", m.title_entities)),
        sentence_embeddings=str(stored.get("sentence_embeddings", m.sentence_embeddings)),
        batch_size=m.index_batch_size,
        threads=m.index_threads,
        max_passages=settings.api.max_passages_per_corpus,
        embedding_batch_size=m.embedding_batch_size,
        progress=progress,
    )


def retriever(db: Database, tenant_id: int, corpus: CorpusInfo, settings: Settings, **overrides: object) -> Retriever:
    """A retriever for ``corpus`` with the settings' retrieval parameters (``overrides`` win)."""
    from livingrag.retrieval.retriever import Retriever

    return Retriever.from_settings(db, tenant_id, corpus, settings, **overrides)


__all__ = [
    "DEFAULT_TENANT",
    "create_corpus",
    "ensure_tenant",
    "get_corpus",
    "indexer",
    "retriever",
    "set_retrieval_preset",
]
