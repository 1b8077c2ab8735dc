"""Request and response models of the HTTP API (they are the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_BATCH = 1000  # documents or passages per request (the byte limit applies too)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- tenants


class TenantCreate(_In):
    name: str = Field(..., min_length=1, max_length=200, description="Unique tenant name.")


class TenantOut(BaseModel):
    id: int
    name: str
    api_key_prefix: str = Field(description="First characters of the key, to tell keys apart.")
    created_at: datetime


class TenantCreated(TenantOut):
    api_key: str = Field(description="The tenant's API key. Shown once: only its hash is stored.")


# ---------------------------------------------------------------- corpora


class CorpusCreate(_In):
    name: str = Field(..., min_length=1, max_length=200, description="Corpus name, unique within the tenant.")


class CorpusOut(BaseModel):
    id: int
    name: str
    embedding_model: str
    embedding_dim: int
    extractor: str
    version: int = Field(description="Bumped by every change of the corpus graph.")
    created_at: datetime | None
    counts: dict[str, int] | None = Field(default=None, description="Passages, sentences, entities (GET one).")


class Page(BaseModel):
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last page.")


class CorpusList(Page):
    items: list[CorpusOut]


# ---------------------------------------------------------------- passages


class PassageIn(_In):
    text: str = Field(..., min_length=1, max_length=200_000, description="Passage text (not chunked).")
    title: str = Field(default="", max_length=1000)
    external_id: str | None = Field(default=None, max_length=500, description="Your own id for the passage.")


class PassageBatch(_In):
    passages: list[PassageIn] = Field(..., min_length=1, max_length=MAX_BATCH)


class DocumentIn(_In):
    text: str = Field(..., min_length=1, max_length=2_000_000, description="Document text (chunked when indexed).")
    title: str = Field(default="", max_length=1000)
    external_id: str | None = Field(default=None, max_length=500)


class DocumentBatch(_In):
    documents: list[DocumentIn] = Field(..., min_length=1, max_length=MAX_BATCH)


class PassageUpdate(_In):
    text: str | None = Field(default=None, min_length=1, max_length=200_000)
    title: str | None = Field(default=None, max_length=1000)


class PassageDelete(_In):
    ids: list[int] = Field(..., min_length=1, max_length=MAX_BATCH, description="Passage ids.")


class PassageOut(BaseModel):
    id: int
    corpus_id: int
    title: str
    text: str
    external_id: str | None


class PassageList(Page):
    items: list[PassageOut]


class IndexResult(BaseModel):
    """What one indexing run did."""

    indexed: int
    skipped_existing: int = Field(description="Passages the corpus already held (same title and text).")
    duplicates_in_input: int
    new_entities: int
    version: int
    passage_ids: list[int] = Field(description="Ids of the passages indexed now.")


class Deleted(BaseModel):
    deleted: list[int]


class JobOut(BaseModel):
    id: str
    corpus_id: int
    documents: int
    state: Literal["queued", "running", "succeeded", "failed"]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: IndexResult | None
    error: str | None


# ---------------------------------------------------------------- ask


class AskIn(_In):
    question: str = Field(..., min_length=1, description="The question (api.max_question_chars at most).")
    corpus: int | str = Field(..., description="Corpus id or name (the caller's own).")
    mode: str = Field(default="living", description="living, linear, ... (see `livingrag ask --help`).")
    ablations: list[str] = Field(default_factory=list, max_length=10, description="Components switched off.")
    top_k: int | None = Field(default=None, ge=1, le=100, description="Passages given to the prompt.")


class AskPassage(BaseModel):
    id: int
    title: str
    text: str
    score: float


class AskOut(BaseModel):
    answer: str
    explanation: str
    system: str
    passages: list[AskPassage]
    fused_experience_ids: list[int]
    scaffold_experience_id: int | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_ms: dict[str, float]
    query_log_id: int | None
    writeback: Literal["queued", "none"] = Field(description="queued: the experience write-back runs later.")


# ---------------------------------------------------------------- experiences


class ExperienceOut(BaseModel):
    id: int
    corpus_id: int
    query: str
    answer: str
    confidence: float
    created_at: datetime
    expires_at: datetime | None
    fusion_uses: int
    scaffold_uses: int
    last_used_at: datetime | None
    stale: bool
    stale_reason: str | None
    map_size: int


class ExperienceList(Page):
    items: list[ExperienceOut]


# ---------------------------------------------------------------- admin


class ExpireIn(_In):
    before: str | None = Field(default=None, description="ISO timestamp or date (UTC when no zone).")
    older_than: str | None = Field(default=None, description="Age such as 30d, 12h, 2w.")
    tenant_id: int | None = Field(default=None, ge=1)
    corpus_id: int | None = Field(default=None, ge=1)
    dry_run: bool = False


class ExpireOut(BaseModel):
    expired: int
    created_before: datetime
    dry_run: bool


class PruneIn(_In):
    max_per_tenant: int | None = Field(default=None, ge=0)
    min_confidence: float | None = Field(default=None, ge=0, le=1)
    unused_for: str | None = Field(default=None, description="Age such as 90d.")
    expired: bool = False
    stale: bool = False
    tenant_id: int | None = Field(default=None, ge=1)
    corpus_id: int | None = Field(default=None, ge=1)
    dry_run: bool = False


class PruneOut(BaseModel):
    counts: dict[str, int]
    dry_run: bool


class StatsOut(BaseModel):
    rows: list[dict[str, Any]]


class HealthOut(BaseModel):
    status: Literal["ok", "unavailable"]
    database: bool
    schema_current: str | None
    schema_head: str | None
    schema_up_to_date: bool
    models: Literal["loaded", "loading", "failed"]
    detail: str | None = None
