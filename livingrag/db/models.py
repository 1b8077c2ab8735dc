"""SQLAlchemy tables. The schema itself is created only by the alembic migrations in ``livingrag/db/migrations/``.

Every tenant-owned table carries ``tenant_id`` and is protected by row-level security keyed on the
session setting ``livingrag.tenant_id``, which :meth:`livingrag.db.engine.Database.tenant_session` sets
(see docs/database-and-tenancy.md).

Vector columns are declared without a dimension (``vector``) so one schema serves corpora that use
different embedding models; each row records its ``embedding_dim`` where an index needs it, and the
HNSW indexes are partial expression indexes on ``(column::vector(d))`` for each dimension in use.
Those are made by the migrations and the scope-index planner per dimension, so they are not
declared here (:data:`DYNAMIC_INDEX_PREFIXES`); everything else is, and a test compares these
tables with the migrated schema.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ARRAY,
    REAL,
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    Double,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import BYTEA, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _tenant_fk() -> Mapped[int]:
    return mapped_column(BigInteger, ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False)


def _tenant_col() -> Mapped[int]:
    return mapped_column(BigInteger, nullable=False)


def _corpus_col() -> Mapped[int]:
    return mapped_column(BigInteger, nullable=False)


def _in_corpus() -> ForeignKeyConstraint:
    """(corpus_id, tenant_id) must name a corpus of the same tenant: rows cannot cross tenants."""
    return ForeignKeyConstraint(["corpus_id", "tenant_id"], ["corpora.id", "corpora.tenant_id"], ondelete="CASCADE")


def _pk(table: str, *columns: str) -> PrimaryKeyConstraint:
    """The primary key of a tenant table: ``tenant_id`` first (migration 0007)."""
    return PrimaryKeyConstraint("tenant_id", *columns, name=f"{table}_pkey")


def _in_tenant(table: str, column: str, parent: str, ondelete: str = "CASCADE") -> ForeignKeyConstraint:
    """``(tenant_id, column)`` references ``parent (tenant_id, id)``: a row can only reference a row of
    its own tenant, whoever writes it (foreign-key checks bypass row-level security; migration 0007)."""
    return ForeignKeyConstraint(
        ["tenant_id", column],
        [f"{parent}.tenant_id", f"{parent}.id"],
        name=f"fk_{table}_{column.removesuffix('_id')}",
        ondelete=ondelete,
    )


def _id() -> Mapped[int]:
    return mapped_column(BigInteger, Identity(), nullable=False)


def _ref() -> Mapped[int]:
    return mapped_column(BigInteger, nullable=False)


def _now() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class Tenant(Base):
    __tablename__ = "tenants"
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(Text, nullable=False, unique=True)
    created_at: Mapped[datetime] = _now()


class ApiKey(Base):
    """A tenant's API key (migration 0005): only its sha256 is stored; the application role may
    read every column but ``key_hash`` and resolves keys through ``livingrag_api_key_grant``."""

    __tablename__ = "api_keys"
    __table_args__ = (
        _pk("api_keys", "id"),
        UniqueConstraint("tenant_id", "name", name="uq_api_keys_tenant_name"),
        # key hashes are sha256 of 256 random bits: unique by construction; the index serves lookups
        UniqueConstraint("key_hash", "tenant_id", name="uq_api_keys_key_hash"),
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_fk()
    name: Mapped[str] = mapped_column(Text, nullable=False)
    key_hash: Mapped[str] = mapped_column(Text, nullable=False)
    prefix: Mapped[str] = mapped_column(Text, nullable=False)
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    created_at: Mapped[datetime] = _now()
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Corpus(Base):
    __tablename__ = "corpora"
    __table_args__ = (
        _pk("corpora", "id"),
        UniqueConstraint("tenant_id", "name", name="uq_corpora_tenant_name"),
        UniqueConstraint("id", "tenant_id", name="uq_corpora_id_tenant"),
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_fk()
    name: Mapped[str] = mapped_column(Text, nullable=False)
    embedding_model: Mapped[str] = mapped_column(Text, nullable=False)
    embedding_dim: Mapped[int] = mapped_column(Integer, nullable=False)
    ner_model: Mapped[str] = mapped_column(Text, nullable=False)
    extractor: Mapped[str] = mapped_column(Text, nullable=False, server_default="spacy")
    version: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    rewrite_version: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    """The version of the last change that was not an append (migration 0009)."""
    settings: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class Passage(Base):
    __tablename__ = "passages"
    __table_args__ = (
        _pk("passages", "id"),
        _in_corpus(),
        UniqueConstraint("tenant_id", "corpus_id", "content_hash", name="uq_passages_corpus_hash"),
        Index("ix_passages_corpus_external", "corpus_id", "external_id"),
        Index("ix_passages_corpus_doc", "corpus_id", "doc_key", "chunk_index"),
        Index("ix_passages_corpus_id", "corpus_id", "id"),  # migration 0009
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    external_id: Mapped[str | None] = mapped_column(Text)
    doc_key: Mapped[str | None] = mapped_column(Text)
    chunk_index: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    title: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    text: Mapped[str] = mapped_column(Text, nullable=False)
    content_hash: Mapped[str] = mapped_column(Text, nullable=False)
    length: Mapped[int] = mapped_column(Integer, nullable=False)
    token_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class Sentence(Base):
    __tablename__ = "sentences"
    __table_args__ = (
        _pk("sentences", "id"),
        _in_corpus(),
        _in_tenant("sentences", "passage_id", "passages"),
        Index("ix_sentences_passage", "passage_id"),
        Index("ix_sentences_corpus", "corpus_id"),
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    passage_id: Mapped[int] = _ref()
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)


class Entity(Base):
    __tablename__ = "entities"
    __table_args__ = (
        _pk("entities", "id"),
        _in_corpus(),
        UniqueConstraint("tenant_id", "corpus_id", "normalized_name", name="uq_entities_corpus_normalized"),
        Index("ix_entities_corpus_id", "corpus_id", "id"),  # migration 0009
        Index("ix_entities_without_vector", "corpus_id", postgresql_where=text("embedding IS NULL")),  # 0010
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    name: Mapped[str] = mapped_column(Text, nullable=False)
    normalized_name: Mapped[str] = mapped_column(Text, nullable=False)
    surface_forms: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    label: Mapped[str | None] = mapped_column(Text)
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)


class EntitySentence(Base):
    __tablename__ = "entity_sentences"
    __table_args__ = (
        _pk("entity_sentences", "entity_id", "sentence_id"),
        _in_corpus(),
        _in_tenant("entity_sentences", "entity_id", "entities"),
        _in_tenant("entity_sentences", "sentence_id", "sentences"),
        Index("ix_entity_sentences_sentence", "sentence_id"),
        Index("ix_entity_sentences_corpus", "corpus_id"),
    )
    entity_id: Mapped[int] = _ref()
    sentence_id: Mapped[int] = _ref()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()


class PassageEntity(Base):
    __tablename__ = "passage_entities"
    __table_args__ = (
        _pk("passage_entities", "passage_id", "entity_id"),
        _in_corpus(),
        _in_tenant("passage_entities", "passage_id", "passages"),
        _in_tenant("passage_entities", "entity_id", "entities"),
        Index("ix_passage_entities_entity", "entity_id"),
        Index("ix_passage_entities_corpus", "corpus_id"),
    )
    passage_id: Mapped[int] = _ref()
    entity_id: Mapped[int] = _ref()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    mentions: Mapped[int] = mapped_column(Integer, nullable=False)
    weight: Mapped[float] = mapped_column(REAL, nullable=False)


class PassageLink(Base):
    __tablename__ = "passage_links"
    __table_args__ = (
        _pk("passage_links", "source_id", "target_id"),
        _in_corpus(),
        _in_tenant("passage_links", "source_id", "passages"),
        _in_tenant("passage_links", "target_id", "passages"),
        Index("ix_passage_links_target", "target_id"),
        Index("ix_passage_links_corpus", "corpus_id"),
    )
    source_id: Mapped[int] = _ref()
    target_id: Mapped[int] = _ref()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    weight: Mapped[float] = mapped_column(REAL, nullable=False, server_default="1.0")


class Experience(Base):
    __tablename__ = "experiences"
    __table_args__ = (
        _pk("experiences", "id"),
        _in_corpus(),
        Index("ix_experiences_scope_created", "tenant_id", "corpus_id", "created_at"),
        Index("ix_experiences_expires", "expires_at", postgresql_where=text("expires_at IS NOT NULL")),
        Index("ix_experiences_sources", "source_passage_ids", postgresql_using="gin"),
        Index("ix_experiences_question", "tenant_id", "corpus_id", "question_key"),  # migration 0011
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    query: Mapped[str] = mapped_column(Text, nullable=False)
    query_template: Mapped[str | None] = mapped_column(Text)  # T(q) of eq. 11 (migration 0002)
    query_embedding: Mapped[Any] = mapped_column(Vector(), nullable=False)
    embedding_dim: Mapped[int] = mapped_column(Integer, nullable=False)
    activation: Mapped[dict[str, float]] = mapped_column(JSONB, nullable=False)
    activation_packed: Mapped[bytes | None] = mapped_column(
        BYTEA, Computed("livingrag_pack_activation(activation)", persisted=True)
    )  # migration 0003: (entity id, weight) pairs, big-endian int8 + float8
    summary: Mapped[str] = mapped_column(Text, nullable=False)
    answer: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = _now()
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    confidence: Mapped[float] = mapped_column(REAL, nullable=False)
    grounding: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    source_passage_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), nullable=False, server_default="{}")
    corpus_version: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    fusion_uses: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    scaffold_uses: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    stale: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    stale_reason: Mapped[str | None] = mapped_column(Text)
    # provenance and trust (migration 0011)
    origin: Mapped[str] = mapped_column(Text, nullable=False, server_default="gate")
    origin_detail: Mapped[str | None] = mapped_column(Text)
    trust: Mapped[str] = mapped_column(Text, nullable=False, server_default="unverified")
    trust_actor: Mapped[str | None] = mapped_column(Text)
    trust_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    trust_reason: Mapped[str | None] = mapped_column(Text)
    gated: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="true")
    answer_uses: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    question_key: Mapped[str | None] = mapped_column(Text)
    # the learned gate that stored it, and its P(right) (migration 0014)
    gate_probability: Mapped[float | None] = mapped_column(Double)
    gate_model_id: Mapped[int | None] = mapped_column(BigInteger)


class ExperienceEntity(Base):
    """One entity of an experience's activation map; ``weight`` is unit-normalised
    (a~_k[e] / |a~_k|, migration 0002) so the entity channel ranks by cosine."""

    __tablename__ = "experience_entities"
    __table_args__ = (
        _pk("experience_entities", "experience_id", "entity_id"),
        _in_corpus(),
        _in_tenant("experience_entities", "experience_id", "experiences"),
        Index(
            "ix_experience_entities_channel",
            "tenant_id",
            "corpus_id",
            "entity_id",
            text("weight DESC"),
            postgresql_include=["experience_id"],
        ),
    )
    experience_id: Mapped[int] = _ref()
    entity_id: Mapped[int] = _ref()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    weight: Mapped[float] = mapped_column(REAL, nullable=False)


class WritebackLog(Base):
    __tablename__ = "writeback_log"
    __table_args__ = (
        _pk("writeback_log", "id"),
        _in_corpus(),
        # deleting an experience clears experience_id only (tenant_id is the row's own)
        _in_tenant("writeback_log", "experience_id", "experiences", ondelete="SET NULL (experience_id)"),
        Index("ix_writeback_log_scope_created", "tenant_id", "corpus_id", "created_at"),
        Index("ix_writeback_log_experience", "experience_id", postgresql_where=text("experience_id IS NOT NULL")),
        Index(
            "ix_writeback_log_query", "tenant_id", "query_log_id", postgresql_where=text("query_log_id IS NOT NULL")
        ),  # migration 0011
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    query_log_id: Mapped[int | None] = mapped_column(BigInteger)
    experience_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = _now()
    query: Mapped[str] = mapped_column(Text, nullable=False)
    novelty: Mapped[float | None] = mapped_column(REAL)
    grounding: Mapped[float | None] = mapped_column(REAL)
    verifier: Mapped[str | None] = mapped_column(Text)
    decision: Mapped[str] = mapped_column(Text, nullable=False)
    reason: Mapped[str | None] = mapped_column(Text)
    timings: Mapped[dict[str, float]] = mapped_column(JSONB, nullable=False, server_default="{}")
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    candidate: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    """What a rejected candidate needs to be stored later on a person's word (migration 0011)."""
    gate: Mapped[str] = mapped_column(Text, nullable=False, server_default="fixed")
    """Which gate decided: fixed or learned (migration 0014)."""
    probability: Mapped[float | None] = mapped_column(Double)
    gate_model_id: Mapped[int | None] = mapped_column(BigInteger)


class ExperienceEvent(Base):
    """One thing that happened to an experience (migration 0011): append-only for the application;
    ``experience_id`` has no foreign key, so a deleted experience keeps its history."""

    __tablename__ = "experience_events"
    __table_args__ = (
        _pk("experience_events", "id"),
        _in_corpus(),
        Index("ix_experience_events_experience", "tenant_id", "experience_id", "created_at"),
        Index("ix_experience_events_scope_created", "tenant_id", "corpus_id", "created_at"),
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    experience_id: Mapped[int] = _ref()
    event: Mapped[str] = mapped_column(Text, nullable=False)
    actor: Mapped[str] = mapped_column(Text, nullable=False)
    key_id: Mapped[int | None] = mapped_column(BigInteger)
    query_log_id: Mapped[int | None] = mapped_column(BigInteger)
    reason: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    created_at: Mapped[datetime] = _now()


class AnswerFeedback(Base):
    """A person's verdict on an answered question (migration 0011)."""

    __tablename__ = "answer_feedback"
    __table_args__ = (
        _pk("answer_feedback", "id"),
        _in_corpus(),
        Index("ix_answer_feedback_query", "tenant_id", "query_log_id", "created_at"),
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    query_log_id: Mapped[int] = _ref()
    verdict: Mapped[str] = mapped_column(Text, nullable=False)
    answer: Mapped[str | None] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(Text, nullable=False)
    key_id: Mapped[int | None] = mapped_column(BigInteger)
    experience_id: Mapped[int | None] = mapped_column(BigInteger)
    outcome: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    created_at: Mapped[datetime] = _now()


class RejectedAnswer(Base):
    """An answer people marked wrong for a question (by :func:`livingrag.experience.answer_reuse.
    question_key` of both), per corpus (migration 0011)."""

    __tablename__ = "rejected_answers"
    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "corpus_id", "question_key", "answer_key", name="rejected_answers_pkey"),
        _in_corpus(),
    )
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    question_key: Mapped[str] = mapped_column(Text, nullable=False)
    answer_key: Mapped[str] = mapped_column(Text, nullable=False)
    answer: Mapped[str] = mapped_column(Text, nullable=False)
    query_log_id: Mapped[int | None] = mapped_column(BigInteger)
    actor: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = _now()


class GateLabel(Base):
    """A person's verdict as a label of the question's write-back candidate, with the features the
    gate saw (migration 0014)."""

    __tablename__ = "gate_labels"
    __table_args__ = (
        _pk("gate_labels", "id"),
        _in_corpus(),
        UniqueConstraint("tenant_id", "query_log_id", name="uq_gate_labels_query"),
        Index("ix_gate_labels_scope_time", "tenant_id", "corpus_id", "created_at", "id"),
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    query_log_id: Mapped[int] = _ref()
    writeback_log_id: Mapped[int | None] = mapped_column(BigInteger)
    label: Mapped[bool] = mapped_column(Boolean, nullable=False)
    verdict: Mapped[str] = mapped_column(Text, nullable=False)
    corrected: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    features: Mapped[dict[str, float]] = mapped_column(JSONB, nullable=False)
    actor: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()


class GateModel(Base):
    """One fitted calibrator of a tenant (``corpus_id`` NULL) or of one of its corpora (migration
    0014); ``retired_at`` NULL: the scope's current one."""

    __tablename__ = "gate_models"
    __table_args__ = (
        _pk("gate_models", "id"),
        ForeignKeyConstraint(
            ["corpus_id", "tenant_id"], ["corpora.id", "corpora.tenant_id"], ondelete="CASCADE",
            name="fk_gate_models_corpus_id_corpora",
        ),
        Index(
            "uq_gate_models_current", "tenant_id", text("coalesce(corpus_id, 0)"), unique=True,
            postgresql_where=text("retired_at IS NULL"),
        ),
        Index("ix_gate_models_scope", "tenant_id", "corpus_id", "version"),
    )  # fmt: skip
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_fk()
    corpus_id: Mapped[int | None] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    model: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    earned: Mapped[bool] = mapped_column(Boolean, nullable=False)
    store_threshold: Mapped[float | None] = mapped_column(Double)
    serve_threshold: Mapped[float | None] = mapped_column(Double)
    labels: Mapped[int] = mapped_column(Integer, nullable=False)
    fitted_at: Mapped[datetime] = _now()
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    retired_why: Mapped[str | None] = mapped_column(Text)


class IndexJob(Base):
    """An index job (migration 0013): its documents until it ends, its state, progress, result or
    error, and the worker running it with that worker's lock and heartbeat; any worker answers for
    it and a restart neither loses it nor leaves it running (:mod:`livingrag.corpus.index_jobs`)."""

    __tablename__ = "index_jobs"
    __table_args__ = (
        _pk("index_jobs", "id"),
        _in_corpus(),
        Index("ix_index_jobs_state_created", "state", "created_at"),
        Index("ix_index_jobs_tenant_created", "tenant_id", "created_at"),
    )
    tenant_id: Mapped[int] = _tenant_col()
    id: Mapped[str] = mapped_column(Text, nullable=False)
    corpus_id: Mapped[int] = _corpus_col()
    state: Mapped[str] = mapped_column(Text, nullable=False, server_default="queued")
    documents: Mapped[int] = mapped_column(Integer, nullable=False)
    payload: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    progress: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    worker: Mapped[str | None] = mapped_column(Text)
    worker_lock: Mapped[int | None] = mapped_column(BigInteger)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    created_at: Mapped[datetime] = _now()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class QueryLog(Base):
    __tablename__ = "query_log"
    __table_args__ = (
        _pk("query_log", "id"),
        _in_corpus(),
        Index("ix_query_log_scope_created", "tenant_id", "corpus_id", "created_at"),
    )
    id: Mapped[int] = _id()
    tenant_id: Mapped[int] = _tenant_col()
    corpus_id: Mapped[int] = _corpus_col()
    created_at: Mapped[datetime] = _now()
    query: Mapped[str] = mapped_column(Text, nullable=False)
    mode: Mapped[str] = mapped_column(Text, nullable=False)
    answer: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    prompt_tokens: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    completion_tokens: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    cost_usd: Mapped[float] = mapped_column(Double, nullable=False, server_default="0")
    latencies: Mapped[dict[str, float]] = mapped_column(JSONB, nullable=False, server_default="{}")
    fused_experience_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), nullable=False, server_default="{}")
    scaffold_experience_id: Mapped[int | None] = mapped_column(BigInteger)
    passage_ids: Mapped[list[int]] = mapped_column(ARRAY(BigInteger), nullable=False, server_default="{}")
    error: Mapped[str | None] = mapped_column(Text)
    reused_experience_id: Mapped[int | None] = mapped_column(BigInteger)  # migration 0004


SCOPE_INDEX_PREFIX = "ix_exp_scope_"
"""Name prefix of the per-(tenant, corpus, dimension) HNSW indexes of :mod:`livingrag.db.repositories.scope_indexes`."""
DYNAMIC_INDEX_PREFIXES: tuple[str, ...] = ("ix_experiences_query_embedding_hnsw_", SCOPE_INDEX_PREFIX)
"""Indexes made per embedding dimension (migrations) and per tenant scope (:mod:`livingrag.db.repositories.
scope_indexes`) as they are needed, not declared above."""


def include_in_autogenerate(name: str | None, type_: str, _parent: object = None) -> bool:
    """alembic's ``include_name``: compare everything but the run-time indexes
    (:data:`DYNAMIC_INDEX_PREFIXES`) and alembic's own version table."""
    if type_ == "index" and name is not None and name.startswith(DYNAMIC_INDEX_PREFIXES):
        return False
    return not (type_ == "table" and name == "alembic_version")


TENANT_OWNED_TABLES: tuple[str, ...] = (
    "corpora",
    "passages",
    "sentences",
    "entities",
    "entity_sentences",
    "passage_entities",
    "passage_links",
    "experiences",
    "experience_entities",
    "writeback_log",
    "query_log",
)
"""Tables of tenant data the application role reads and writes in full under row-level security."""

TRUST_TABLES: tuple[str, ...] = ("experience_events", "answer_feedback", "rejected_answers")
"""Tenant tables of feedback and history (migration 0011) under row-level security; the application
role may only read and append ``experience_events``."""

JOB_TABLES: tuple[str, ...] = ("index_jobs",)
"""Tenant tables of index jobs (migration 0013) under row-level security, read and written by the
application role for its tenant; the workers take, count and put back jobs of every tenant only
through the migration's ``SECURITY DEFINER`` functions (``livingrag_index_job_claim`` and the others)."""

GATE_TABLES: tuple[str, ...] = ("gate_labels", "gate_models")
"""Tenant tables of the learned gate (migration 0014) under row-level security: one tenant's labels
and calibrators are invisible to every other tenant."""

KEY_TABLES: tuple[str, ...] = ("api_keys",)
"""Tenant tables under row-level security that the application role reaches only through column
privileges (it never reads ``key_hash``; it creates keys only through ``livingrag_api_key_create`` and may set
``revoked_at`` once, from NULL to now: migration 0012)."""
