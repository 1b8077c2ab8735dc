"""Request and response models of the HTTP API (they are the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from livingrag.experience.feedback import MAX_ANSWER_CHARS, MAX_NOTE_CHARS, MAX_REASON_CHARS

MAX_BATCH = 1000  # documents or passages per request (the byte limit applies too)


def _storable(v: str) -> str:
    """PostgreSQL text holds neither NUL characters nor lone UTF-16 surrogates (JSON can carry both)."""
    if "\x00" in v:
        raise ValueError("must not contain a NUL character")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"is not valid Unicode (lone surrogate at position {exc.start})") from None
    return v


Text = Annotated[str, AfterValidator(_storable)]
"""A string that PostgreSQL can store: every text field of a request is one."""


def _not_blank(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty or only white space")
    return v


NonBlankText = Annotated[str, AfterValidator(_storable), AfterValidator(_not_blank)]
"""A storable string with at least one character that is not white space."""


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- tenants


class TenantCreate(_In):
    name: Text = Field(..., min_length=1, max_length=200, description="Unique tenant name.")


class TenantOut(BaseModel):
    id: int
    name: str
    created_at: datetime
    active_keys: int = Field(description="API keys neither revoked nor expired.")


class TenantCreated(TenantOut):
    api_key: str = Field(description="The tenant's first API key, 'default', with every scope. Shown once.")
    api_key_prefix: str = Field(description="First characters of the key, to tell keys apart.")


# ---------------------------------------------------------------- API keys

Scope = Literal["read", "write", "feedback", "admin"]


class KeyCreate(_In):
    name: Text = Field(
        ...,
        min_length=1,
        max_length=64,
        description="Unique within the tenant: letters, digits, '.', '_', '-' (not only digits).",
    )
    scopes: list[Scope] = Field(
        default=["read"],
        min_length=1,
        description="read: questions and every GET; write: corpora, passages, index jobs, deleting "
        "experiences (and what feedback allows); feedback: verdicts on answers (POST /v1/queries/{id}/feedback), "
        "verifying and retracting experiences; admin: the tenant's keys.",
    )
    expires_in_days: int | None = Field(default=None, ge=1, le=3650, description="Expire this many days from now.")
    expires_at: datetime | None = Field(default=None, description="Expire at this time (with a time zone).")


class KeyOut(BaseModel):
    id: int
    name: str
    prefix: str = Field(description="First characters of the key, to tell keys apart.")
    scopes: list[str]
    state: Literal["active", "expired", "revoked"]
    created_at: datetime
    last_used_at: datetime | None = Field(description="Last request with this key (to the minute).")
    expires_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyOut):
    key: str = Field(description="The API key. Shown once: only its hash is stored.")


# ---------------------------------------------------------------- corpora


class CorpusCreate(_In):
    name: Text = Field(..., min_length=1, max_length=200, description="Corpus name, unique within the tenant.")


class CorpusPatch(_In):
    retrieval_preset: Text | None = Field(
        default=None,
        max_length=100,
        description="Retrieval preset the corpus is searched with: 2wikimultihopqa, hotpotqa, musique or custom "
        "(an unknown one is 422 naming the known ones). Omitted: unchanged.",
    )


class CorpusOut(BaseModel):
    id: int
    name: str
    embedding_model: str
    embedding_dim: int
    extractor: str
    version: int = Field(description="Bumped by every change of the corpus graph.")
    created_at: datetime | None
    counts: dict[str, int] | None = Field(default=None, description="Passages, sentences, entities (GET one).")
    retrieval_preset: str | None = Field(
        default=None, description="Retrieval preset the corpus is searched with (unless the server sets one)."
    )


class Page(BaseModel):
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last page.")


class CorpusList(Page):
    items: list[CorpusOut]


# ---------------------------------------------------------------- passages


class PassageIn(_In):
    text: Text = Field(..., min_length=1, max_length=200_000, description="Passage text (not chunked).")
    title: Text = Field(default="", max_length=1000)
    external_id: Text | None = Field(default=None, max_length=500, description="Your own id for the passage.")


class PassageBatch(_In):
    passages: list[PassageIn] = Field(..., min_length=1, max_length=MAX_BATCH)


MAX_DOCUMENT_CHARS = 2_000_000  # text of one document of an index job (an upload's too)
MAX_SECTIONS = 10_000  # sections of one document
MAX_HEADING_DEPTH = 20  # headings in one section's path


class SectionIn(_In):
    """The text under one heading of a document, as the document readers cut it."""

    path: list[Annotated[Text, Field(min_length=1, max_length=1000)]] = Field(
        default_factory=list,
        max_length=MAX_HEADING_DEPTH,
        description="The headings above the text, outermost first (the document's title heading left out); "
        "empty for text before the first heading.",
    )
    text: Text = Field(..., min_length=1, max_length=MAX_DOCUMENT_CHARS, description="The section's text.")


class DocumentIn(_In):
    text: Text = Field(
        ...,
        min_length=1,
        max_length=MAX_DOCUMENT_CHARS,
        description="Document text (chunked when indexed). With sections: the text they render to, each "
        "section's last heading on a line above its text, sections separated by a blank line (as the readers "
        "of livingrag.io.readers give it).",
    )
    title: Text = Field(default="", max_length=1000)
    external_id: Text | None = Field(default=None, max_length=500)
    title_is_entity: bool = Field(
        default=True,
        description="False when the title is only the file's name (no heading or metadata gave one): it is then "
        "never indexed as an entity of the document's passages.",
    )
    sections: list[SectionIn] = Field(
        default_factory=list,
        max_length=MAX_SECTIONS,
        description="The document cut by its headings (as `livingrag index` reads a PDF, DOCX, HTML or Markdown "
        "file): chunking then follows them and starts each section's text with its heading path. Empty: the text "
        "is cut into windows.",
    )


class DocumentBatch(_In):
    documents: list[DocumentIn] = Field(..., min_length=1, max_length=MAX_BATCH)


class PassageUpdate(_In):
    text: Text | None = Field(default=None, min_length=1, max_length=200_000)
    title: Text | None = Field(default=None, max_length=1000)


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
    batched_with: int = Field(
        default=1,
        description="Requests whose passages were indexed in the same run as this one's (concurrent adds of a "
        "corpus are committed together); new_entities and version are that run's.",
    )


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
    progress: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="Per indexing stage (entities, embeddings, written): {done, total} passages (as the worker "
        "last reported it, every few seconds).",
    )
    attempts: int = Field(
        default=0,
        description="Times a worker started it: above 1 when the worker running it stopped (a restart, a crash) "
        "and another took it over, skipping the passages already indexed.",
    )


# ---------------------------------------------------------------- uploads


class UploadFileIn(_In):
    """One file to upload, named with its suffix, its bytes in base64."""

    name: NonBlankText = Field(
        ...,
        max_length=500,
        description="The file's name (report.pdf): its suffix picks the reader (.pdf, .docx, .html/.htm/.xhtml, "
        ".md/.markdown, .txt); it is the document's external id, and its title when nothing in the file gives one.",
    )
    content_base64: str = Field(
        ...,
        description="The file's bytes in standard base64 (a data: URL's 'data:...;base64,' prefix is allowed).",
    )


class UploadBatch(_In):
    files: list[UploadFileIn] = Field(
        ...,
        min_length=1,
        max_length=MAX_BATCH,
        description="The files; every one is read before anything is submitted (one unreadable file: nothing is).",
    )


class UploadedFile(BaseModel):
    """What the readers found in one uploaded file."""

    name: str
    title: str
    title_is_entity: bool = Field(description="False: the title is only the file's name (never an entity).")
    sections: int = Field(description="Sections cut by the file's headings (0: the text is one block).")
    characters: int = Field(description="Characters of the document's text (of all its documents).")
    size_bytes: int = Field(description="Size of the file.")
    documents: int = Field(default=1, description="Documents read from it (a .json or .jsonl file: its records).")


class UploadJobOut(JobOut):
    """The index job of an upload, and what was read from each file."""

    files: list[UploadedFile]


# ---------------------------------------------------------------- ask


class AskIn(_In):
    question: Text = Field(..., min_length=1, description="The question (api.max_question_chars at most).")
    corpus: int | Annotated[Text, Field(max_length=200)] = Field(..., description="Corpus id or name (the caller's).")
    mode: Text = Field(default="living", max_length=40, description="living or linear.")
    ablations: list[Annotated[Text, Field(max_length=40)]] = Field(
        default_factory=list,
        max_length=10,
        description="Components switched off in the living mode: fusion, scaffold, gate.",
    )
    top_k: int | None = Field(default=None, ge=1, le=100, description="Passages given to the prompt.")
    min_corpus_version: int | None = Field(
        default=None,
        ge=0,
        description="Answer from the corpus at this version or later (the `version` a passage change returned, "
        "e.g. through another replica); 409 if the corpus has not reached it.",
    )
    stream: bool = Field(
        default=False,
        description="Answer as server-sent events (text/event-stream): `token` events with the model's text as "
        "it is made, `restart` if the question is asked again, then one `answer` event (this response's fields "
        "and the write-back decision) or one `error` event.",
    )


class AskPassage(BaseModel):
    id: int
    title: str
    text: str
    score: float


class FusedExperience(BaseModel):
    id: int
    query: str
    weight: float = Field(description="Fusion weight w_k (eq. 10).")
    score: float = Field(description="Retrieval score s_k (eq. 7).")


class Citation(BaseModel):
    number: int = Field(description="The passage's number [n] in the prompt (its place in `passages`, from 1).")
    passage_id: int
    title: str


class ScaffoldUsed(BaseModel):
    experience_id: int
    score: float = Field(description="Scaffold score (eq. 12).")
    template_similarity: float


class AskOut(BaseModel):
    answer: str
    explanation: str
    system: str
    passages: list[AskPassage]
    fused_experience_ids: list[int]
    scaffold_experience_id: int | None
    finding_experience_ids: list[int] = Field(
        default_factory=list, description="Experiences stated in the prompt as findings (earlier answers as facts)."
    )
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_ms: dict[str, float]
    query_log_id: int | None = Field(
        description="This question's id in the query log: what /v1/queries/{query_log_id}/writeback and "
        "/v1/queries/{query_log_id}/feedback take (null only when the question was not logged)."
    )
    query_id: int | None = Field(
        default=None, description="The same as query_log_id: the id to give feedback on this answer with."
    )
    writeback: Literal["queued", "none"] = Field(description="queued: the experience write-back runs later.")
    reused_from: int | None = Field(
        default=None,
        description="The experience whose answer was given again for this repeated question (no LLM call; "
        "experience.answer_reuse), else null.",
    )
    fused_experiences: list[FusedExperience] = Field(default_factory=list, description="The fused experiences.")
    scaffold: ScaffoldUsed | None = None
    citations: list[Citation] = Field(
        default_factory=list, description="The passages the answer rests on, numbered as in the prompt."
    )


# ---------------------------------------------------------------- experiences


CONFIDENCE = (
    "The gate's grounding score GS (eq. 16: the share of the answer's claims that the verifier found supported "
    "by the cited passages) when it was stored: a heuristic, not a probability that the answer is right. "
    "0 for an experience stored on a person's word without a check; see origin and trust for who vouches for it."
)
Trust = Literal["unverified", "verified", "retracted"]
Origin = Literal["gate", "judge", "person", "ungated"]


class ExperienceOut(BaseModel):
    id: int
    corpus_id: int
    query: str
    answer: str
    confidence: float = Field(description=CONFIDENCE)
    created_at: datetime
    expires_at: datetime | None
    fusion_uses: int
    scaffold_uses: int
    last_used_at: datetime | None
    stale: bool
    stale_reason: str | None
    map_size: int
    origin: Origin = Field(
        default="gate",
        description="Who stored it: gate (the automatic gate), judge (an LLM judge), person (a person's verdict "
        "or correction), ungated (stored with the gates off).",
    )
    origin_detail: str | None = Field(
        default=None, description="The gate's verifier, the judge's model, or the person (key 12, admin, operator)."
    )
    trust: Trust = Field(
        default="unverified",
        description="unverified: nobody checked it; verified: a person said it is right; retracted: a person said "
        "it is wrong (inactive, never served again).",
    )
    trust_actor: str | None = Field(default=None, description="Who set the trust (key 12, admin, operator).")
    trust_at: datetime | None = Field(default=None, description="When the trust was set.")
    trust_reason: str | None = Field(default=None, description="Why (the person's note or the verdict).")
    answer_uses: int = Field(default=0, description="Answers given again from it without an LLM call.")
    gated: bool = Field(default=True, description="Stored through the write-back gates (false: gates off or a person).")


class ExperienceList(Page):
    items: list[ExperienceOut]


# ---------------------------------------------------------------- admin


class ExpireIn(_In):
    before: Text | None = Field(default=None, max_length=100, description="ISO timestamp or date (UTC when no zone).")
    older_than: Text | None = Field(default=None, max_length=100, description="Age such as 30d, 12h, 2w.")
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
    unused_for: Text | None = Field(default=None, max_length=100, description="Age such as 90d.")
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


class ReplicaOut(BaseModel):
    """One read standby (``LIVINGRAG_DB__READ_URLS``) as this process sees it."""

    url: str = Field(description="The read URL, its password masked.")
    state: Literal["up", "lagging", "down", "unknown"] = Field(
        description="up: answers reads; lagging: past LIVINGRAG_DB__MAX_REPLICA_LAG_MS, skipped until it catches "
        "up; down: unreachable or no longer a standby, tried again after LIVINGRAG_DB__REPLICA_RETRY_S; unknown: "
        "not checked yet."
    )
    lag_ms: float | None = Field(description="How old its data may be (0: it has replayed the primary's position).")
    replay_lsn: str | None = Field(description="The WAL position it has replayed.")
    replay_paused: bool
    error: str | None = Field(description="Why it is down.")
    retry_in_s: float | None = Field(description="Seconds until a down standby is tried again.")
    reads: int = Field(description="Reads it answered in this process.")


class HealthOut(BaseModel):
    status: Literal["ok", "unavailable"]
    database: bool
    schema_current: str | None
    schema_head: str | None
    schema_up_to_date: bool
    models: Literal["loaded", "loading", "failed"]
    detail: str | None = None
    replicas: list[ReplicaOut] = Field(
        default_factory=list,
        description="The read standbys and their state (empty without LIVINGRAG_DB__READ_URLS). A standby that is "
        "down or lagging does not make the service unavailable: its reads go to the others or the primary.",
    )
    reads_on_primary: dict[str, int] = Field(
        default_factory=dict,
        description="With read standbys: the question path's reads this process sent to the primary instead, by "
        "reason (read_your_writes: no standby had replayed the tenant's write in time; requirement: none held the "
        "min_corpus_version; no_usable_standby: all down or lagging).",
    )


# ---------------------------------------------------------------- web console views


class RankedEntity(BaseModel):
    entity_id: int
    name: str | None = Field(description="Null when the entity is no longer in the corpus graph.")
    label: str | None
    weight: float


class CitedPassage(BaseModel):
    id: int
    title: str | None
    text: str | None
    exists: bool = Field(description="False: the passage was deleted since.")
    changed: bool = Field(description="Deleted, or updated since the experience was stored (it is then stale).")


class ExperienceDetailOut(ExperienceOut):
    summary: str
    query_template: str | None
    corpus_version: int
    activation: list[RankedEntity] = Field(description="The activation map, strongest entity first.")
    cited_passages: list[CitedPassage]
    grounding: dict[str, Any] = Field(description="GS, the verifier and each claim's verdict at write-back.")


class TenantPruneIn(_In):
    """Prune criteria for the caller's own experiences (each adds rows; at least one)."""

    keep: int | None = Field(
        default=None, ge=0, description="Keep this many (verified ones first, then the most used); delete the rest."
    )
    min_confidence: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Delete below this confidence (the gate's heuristic GS); verified experiences are kept.",
    )
    unused_for: Text | None = Field(default=None, max_length=100, description="Delete if unused for e.g. 90d.")
    expired: bool = False
    stale: bool = False
    corpus_id: int | None = Field(default=None, ge=1)
    dry_run: bool = True


class TenantPruneOut(BaseModel):
    counts: dict[str, int]
    dry_run: bool
    items: list[ExperienceOut] = Field(
        description="Dry run with a key that has the read scope: what would go (at most 200, newest first); "
        "empty otherwise."
    )
    items_shown: bool = Field(
        default=True,
        description="False when the dry run's rows were left out because the key lacks the read scope "
        "(a write-only key sees the counts, never the experiences' questions and answers).",
    )


class ClaimOut(BaseModel):
    claim: str
    source: str | None = None
    g: float | None = Field(default=None, description="Support g_i (eq. 15).")
    passage_id: int | None = None
    evidence: str | None = Field(default=None, description="The evidence sentence that gave g_i (its passage's).")


class WritebackOut(BaseModel):
    query_log_id: int
    decision: Literal["pending", "none", "stored", "rejected_novelty", "rejected_grounding", "error", "dropped"] = (
        Field(description="pending: not decided yet; none: nothing is written back for this question.")
    )
    novelty: float | None = Field(default=None, description="NS (eq. 18).")
    grounding: float | None = Field(default=None, description="GS (eq. 16).")
    verifier: str | None = None
    reason: str | None = None
    stage: str | None = None
    experience_id: int | None = None
    claims: list[ClaimOut] = Field(default_factory=list)
    tau_novel: float
    tau_gs: float
    tau_nli: float = Field(description="A claim is supported when its g reaches this (eq. 16).")
    created_at: datetime | None = None


class AskFinal(AskOut):
    """The last event of a streamed answer (``event: answer``)."""

    writeback_decision: WritebackOut | None = Field(
        description="The write-back decision when taken within api.stream_writeback_wait_s (else pending); "
        "null when nothing is written back."
    )


class StoreHealthOut(BaseModel):
    corpora: list[dict[str, Any]] = Field(description="experience_health with reuse coverage, per corpus.")
    growth: list[dict[str, Any]] = Field(description="experience_store_growth per day.")
    gates: list[dict[str, Any]] = Field(description="Write-back decisions and NS/GS pass rates per day.")
    queries: list[dict[str, Any]] = Field(description="Query log per day: latency percentiles, mean tokens.")


class EntityOut(BaseModel):
    id: int
    name: str
    label: str | None
    passages: int


class LinkedEntity(BaseModel):
    id: int
    name: str
    label: str | None
    shared: int = Field(description="Passages shared with the entity.")
    passage_ids: list[int]


class EntityPassage(BaseModel):
    id: int
    title: str
    text: str = Field(description="The first 300 characters.")
    mentions: int
    weight: float


class NeighbourhoodOut(BaseModel):
    entity: EntityOut
    passages: list[EntityPassage]
    linked: list[LinkedEntity]


# ---------------------------------------------------------------- feedback and trust


class FeedbackIn(_In):
    """A person's verdict on the answer of one question."""

    verdict: Literal["right", "wrong"] = Field(
        ...,
        description="right: the answer is right (its experience becomes verified; an answer the gates rejected is "
        "stored, verified). wrong: every active experience giving this answer to this question is retracted and "
        "the answer is never served or stored for it again.",
    )
    answer: NonBlankText | None = Field(
        default=None,
        max_length=MAX_ANSWER_CHARS,
        description="With verdict wrong: the right answer. It is checked against the question's passages by the "
        "configured verifier and stored as a verified experience (origin person); one no passage supports is "
        "stored as asserted by the person, never shown as grounded.",
    )
    note: Text | None = Field(
        default=None,
        max_length=MAX_NOTE_CHARS,
        description="Why (kept with the verdict and in the history; with a correction, also its explanation).",
    )


class CorrectionCheckOut(BaseModel):
    """How a corrected answer fared against the question's passages."""

    verifier: str = Field(description="The configured verifier (gates.verifier) that checked it.")
    gs: float | None = Field(description="GS of the correction's claims (null: nothing to check it against).")
    grounded: bool = Field(description="GS reaches gates.tau_gs: the passages support the correction.")
    claims: list[dict[str, Any]] = Field(description="Each claim with its support g and passage.")


class FeedbackOut(BaseModel):
    """What a verdict did."""

    feedback_id: int
    query_log_id: int
    corpus_id: int
    verdict: Literal["right", "wrong"]
    answer: str | None = Field(description="The corrected answer given with the verdict, if any.")
    actor: str = Field(description="Who gave it: key <id>, or admin (the operator acting for the tenant).")
    repeated: bool = Field(
        description="The verdict repeats the question's latest one (same verdict and correction): nothing changed, "
        "and this is that verdict's outcome."
    )
    verified_ids: list[int] = Field(description="Experiences verified by this verdict.")
    retracted_ids: list[int] = Field(description="Experiences retracted by this verdict.")
    stored_experience_id: int | None = Field(
        description="The experience this verdict stored: the candidate the gates had rejected, or the correction."
    )
    remembered_wrong: bool = Field(
        description="The answer given is remembered as wrong for this question (never served or stored again)."
    )
    check: CorrectionCheckOut | None = Field(description="The verifier's check of a corrected answer.")
    messages: list[str] = Field(description="What happened, in words.")
    created_at: datetime | None


class TrustIn(_In):
    reason: Text | None = Field(
        default=None, max_length=MAX_REASON_CHARS, description="Why (kept as trust_reason and in the history)."
    )


class TrustChangeOut(BaseModel):
    """What verifying or retracting one experience did, and the experience now."""

    experience_id: int
    trust: Trust = Field(description="The trust now.")
    previous: Trust = Field(description="The trust before.")
    changed: bool = Field(description="False: it had this trust already; nothing changed.")
    actor: str
    reason: str | None
    experience: ExperienceOut


class HistoryEventOut(BaseModel):
    """One thing that happened to an experience."""

    id: int
    event: str = Field(
        description="created, used_fusion, used_scaffold, used_finding, used_answer, verified, retracted, "
        "corrected, unretracted, stale, expired or deleted."
    )
    actor: str = Field(description="key <id>, admin, operator or system.")
    key_id: int | None = Field(description="The API key that did it (null: the operator, the CLI or the service).")
    query_log_id: int | None = Field(description="The question it came with (a verdict, a use), if any.")
    reason: str | None
    details: dict[str, Any]
    created_at: datetime


class HistoryOut(BaseModel):
    experience_id: int
    events: list[HistoryEventOut] = Field(description="Oldest first (the newest `limit` when there are more).")
