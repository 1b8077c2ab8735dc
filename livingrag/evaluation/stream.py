"""The online-stream runner behind ``livingrag eval stream``.

For every system (``linear``, ``living`` and the ablated LivingRAGs) and every stream order, the
questions are answered in stream order over one indexed copy of the dataset's corpus, starting from
an empty experience store; only earlier questions of the same run can have written the experiences
a question reuses. LLM calls run concurrently (``concurrency`` questions in flight); write-backs are
queued in stream order, and a question's record is written (``records.jsonl``) once its write-back
has been decided, so an interrupted run resumes where it stopped. Runs go one after another, so at
most the last one is partial: it resumes with the experiences it had stored (a candidate whose
record was not written when the run died is lost; at most ``concurrency`` of them).

The report (``results.json``, ``queries.csv``, ``report.md``, figures) is written at the end, and
can be rewritten from ``records.jsonl`` alone with ``livingrag eval report``.

With ``feedback_rate`` R > 0 a living system's answers get simulated feedback from the gold answers
(:mod:`livingrag.evaluation.feedback`): a drawn answer's verdict is given right after its write-back
has been decided and before its record is written, so it acts on the later questions the way the
write-back does (with ``concurrency`` c, the next c questions may already be answered).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from livingrag.errors import InvalidInput
from livingrag.evaluation.datasets import Dataset, Question, stream_orders
from livingrag.evaluation.feedback import GivenFeedback, GoldReviewer
from livingrag.evaluation.metrics import all_gold_recall_at_k, score_answer
from livingrag.evaluation.records import (
    ABLATION_SYSTEMS,
    DECISION_ERROR,
    DECISION_REJECTED_GS,
    DECISION_REJECTED_NS,
    DECISION_STORED,
    SYSTEM_LINEAR,
    SYSTEM_LIVING,
    QueryRecord,
    append_record,
    read_records_jsonl,
)
from livingrag.evaluation.reuse import fusion_added_entities

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.corpus.progress import Progress
    from livingrag.db.engine import Database
    from livingrag.evaluation.metrics import Judge
    from livingrag.pipeline.answer_pipeline import Answer, LivingRAG

log = logging.getLogger(__name__)

RECORDS_JSONL = "records.jsonl"
RUN_JSON = "run.json"
_DECISIONS = {
    "stored": DECISION_STORED,
    "rejected_novelty": DECISION_REJECTED_NS,
    "rejected_grounding": DECISION_REJECTED_GS,
    "error": DECISION_ERROR,
    "dropped": DECISION_ERROR,
}


@dataclass(frozen=True)
class StreamConfig:
    """What one evaluation run is; ``run.json`` keeps it so that a resumed run is the same run."""

    dataset: str
    systems: tuple[str, ...]
    orders: int = 1
    seed: int = 0
    limit: int | None = None
    tenant: str = "eval"
    corpus: str = ""
    concurrency: int = 1
    judge: str | None = None
    question_ids: tuple[str, ...] = field(default=(), repr=False)
    repeat_share: float = 0.0
    skip: int = 0
    feedback_rate: float = 0.0
    """The share of a living system's answers that get simulated feedback (``--feedback-rate``)."""
    feedback_seed: int | None = None
    """Seed of the draw of those answers (None: ``seed``)."""

    @property
    def feedback_seed_used(self) -> int | None:
        """The seed the feedback draw uses (None without feedback)."""
        if not self.feedback_rate:
            return None
        return self.seed if self.feedback_seed is None else self.feedback_seed

    def identity(self) -> dict[str, Any]:
        """The fields a resumed run must share with the interrupted one (``repeat_share`` and ``skip``
        only when set, so that runs recorded before they existed still resume; ``feedback_rate`` and
        the feedback seed always, read as :data:`ABSENT_IDENTITY` from a run recorded before them)."""
        d = asdict(self)
        d.pop("concurrency")
        for optional in ("repeat_share", "skip"):
            if not d[optional]:
                d.pop(optional)
        d["systems"] = list(self.systems)
        d["question_ids"] = list(self.question_ids)
        d["feedback_seed"] = self.feedback_seed_used
        return d


ABSENT_IDENTITY: dict[str, Any] = {"feedback_rate": 0.0, "feedback_seed": None}
"""What a ``run.json`` written before these identity fields existed means by leaving them out."""


def parse_only_orders(value: str | None, orders: int) -> frozenset[int] | None:
    """``--only-orders "1,2"`` -> {1, 2} (None when not given); each must be an order of ``--orders``."""
    if value is None or not value.strip():
        return None
    out: set[int] = set()
    for part in value.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= orders:
            raise InvalidInput(
                f"--only-orders: {part!r} is not one of the orders 0..{orders - 1} (--orders {orders}); "
                "write e.g. --only-orders 1,2"
            )
        out.add(int(part))
    return frozenset(out)


def parse_systems(systems: str | Sequence[str], ablations: str | Sequence[str] = ()) -> tuple[str, ...]:
    """``linear,living`` plus ``--ablations fusion,scaffold,gate`` -> system names (Table 5 order)."""
    items = [s.strip().lower() for s in (systems.split(",") if isinstance(systems, str) else systems) if s.strip()]
    abl = [a.strip().lower() for a in (ablations.split(",") if isinstance(ablations, str) else ablations) if a.strip()]
    known = (SYSTEM_LINEAR, SYSTEM_LIVING, *ABLATION_SYSTEMS.values())
    for s in items:
        if s not in known:
            raise InvalidInput(f"unknown system {s!r} in --systems; use {', '.join(known)}")
    for a in abl:
        if a not in ABLATION_SYSTEMS:
            raise InvalidInput(f"unknown ablation {a!r} in --ablations; use {', '.join(ABLATION_SYSTEMS)}")
        items.append(ABLATION_SYSTEMS[a])
    out = tuple(dict.fromkeys(items))
    if not out:
        raise InvalidInput("--systems names no system")
    return out


# --------------------------------------------------------------------------------------------------
# Corpus


@dataclass(frozen=True)
class IndexedCorpus:
    tenant_id: int
    corpus_id: int
    key_of_passage: dict[int, str]  # passage id -> the dataset's document key
    index_seconds: float


def index_dataset_corpus(
    db: Database, settings: Settings, dataset: Dataset, *, tenant: str, corpus: str, progress: Progress | None = None
) -> IndexedCorpus:
    """Index the dataset's corpus (unchanged documents are skipped) and map passages to its keys."""
    from livingrag.corpus import service
    from livingrag.corpus.chunking import document_key
    from livingrag.corpus.ingest import Document
    from livingrag.db.repositories import passages as passage_repo
    from livingrag.errors import NotFound

    tenant_id, _ = service.ensure_tenant(db, tenant)
    try:
        info = service.get_corpus(db, tenant_id, corpus)
    except NotFound:
        info = service.create_corpus(db, tenant_id, corpus, settings)
    docs = [Document(title=d.title, text=d.text, external_id=d.key) for d in dataset.corpus]
    t0 = time.perf_counter()
    service.indexer(db, tenant_id, info, settings, progress=progress).index_documents(docs)
    seconds = time.perf_counter() - t0
    by_doc_key = {document_key(d): d.external_id for d in docs}
    with db.tenant_session(tenant_id) as s:
        doc_keys = passage_repo.passage_doc_keys(s, info.id)
    key_of_passage = {pid: str(by_doc_key[dk]) for pid, dk in doc_keys.items() if dk in by_doc_key}
    return IndexedCorpus(tenant_id, info.id, key_of_passage, seconds)


def empty_memory(db: Database, tenant_id: int, corpus_id: int) -> int:
    """Empty a corpus's memory for a run that starts afresh: its experiences, the answers people
    marked wrong for its questions (``rejected_answers``, which the gate and answer reuse read), and
    what the learned gate learned from them (the corpus's labels; its calibrator and the tenant-wide
    one, which learned from those labels, are retired), so that no earlier run's verdicts act on this
    one. Labels of the tenant's other corpora stay (the tenant-wide calibrator will learn from them
    again: a run that must see none uses a tenant of its own; a warning says so). The history
    (``experience_events``, ``answer_feedback``, retired calibrators) is kept. Returns the number of
    experiences deleted."""
    from datetime import UTC, datetime

    from livingrag.db.repositories import experiences as experience_repo
    from livingrag.db.repositories import gate as gate_repo
    from livingrag.db.repositories import trust as trust_repo

    now = datetime.now(UTC)
    with db.tenant_session(tenant_id) as s:
        deleted = experience_repo.delete_corpus_experiences(s, corpus_id)
        trust_repo.forget_corpus_wrong(s, corpus_id)
        gate_repo.lock_gate(s, tenant_id)
        gate_repo.delete_labels(s, corpus_id)
        for scope in (corpus_id, None):
            gate_repo.retire_models(s, scope, why="a run that starts afresh emptied the corpus's memory", now=now)
        others = sum(n for c, (n, _) in gate_repo.label_counts(s).items() if c != corpus_id)
    if others:
        log.warning(
            "tenant %s holds %d learned-gate labels of other corpora: its tenant-wide calibrator may learn from "
            "them during this run (use a tenant of its own for a run that must start with none)",
            tenant_id,
            others,
        )
    return deleted


# --------------------------------------------------------------------------------------------------
# Records


def _unique(keys: Iterator[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(keys))


def make_record(
    a: Answer,
    q: Question,
    *,
    system: str,
    order: int,
    position: int,
    key_of_passage: dict[int, str],
    activation_threshold: float,
    verdict: bool | None,
    writeback: Any = None,
    writeback_error: str | None = None,
    store_size: int | None = None,
    feedback: GivenFeedback | None = None,
) -> QueryRecord:
    """One :class:`QueryRecord` from a pipeline answer (and its write-back decision and feedback)."""
    from livingrag.experience.template import mask

    scores = score_answer(a.answer, q.answers)
    retrieved = _unique(key_of_passage.get(p.id, f"passage:{p.id}") for p in a.passages)
    enc = a.retrieval.encoding
    lat = a.latency_ms
    retrieval_ms = sum(lat.get(k, 0.0) for k in ("encode", "match", "retrieve", "prompt"))
    living = system != SYSTEM_LINEAR
    decision = novelty = grounding = stored_id = validation_s = None
    if living and a.reused_from is None:  # an answer served from memory makes no write-back
        if writeback is not None:
            decision = _DECISIONS.get(writeback.decision, DECISION_ERROR)
            novelty, grounding, stored_id = writeback.novelty, writeback.grounding, writeback.experience_id
            validation_s = writeback.timings.get("total_ms", 0.0) / 1000.0
        else:
            decision = DECISION_ERROR
    graph_transfer = None
    if living and a.match is not None:
        graph_transfer = bool(a.fused) and fusion_added_entities(
            dict(enc.base_activation), dict(a.retrieval.start_activation), activation_threshold
        )
    context = sorted(e for e, v in a.retrieval.final_activation.items() if v >= activation_threshold)
    extra: dict[str, Any] = {}
    if living and a.reused_from is None and writeback is not None:
        extra["gate"] = {"gate": writeback.gate, "probability": writeback.probability, "trust": writeback.trust}
    if a.reused_from is not None:
        extra["reused_trust"] = a.reused_trust
    if feedback is not None and feedback.verdict is not None:
        extra["feedback"] = {"verified": list(feedback.verified_ids), "retracted": list(feedback.retracted_ids)}
    if feedback is not None and feedback.error is not None:
        extra["feedback_error"] = feedback.error
    given = feedback is not None and feedback.verdict is not None
    return QueryRecord(
        system=system,
        order=order,
        position=position,
        question_id=q.id,
        question=q.question,
        gold_answers=q.answers,
        prediction=a.answer,
        explanation=a.explanation,
        contain_correct=scores.contain,
        em=scores.em,
        f1=scores.f1,
        llm_correct=verdict,
        gold_keys=q.gold_keys,
        retrieved_keys=retrieved,
        all_gold_recall_at_2=all_gold_recall_at_k(retrieved, q.gold_keys, 2),
        all_gold_recall_at_5=all_gold_recall_at_k(retrieved, q.gold_keys, 5),
        prompt_tokens=a.prompt_tokens,
        completion_tokens=a.completion_tokens,
        cost_usd=a.cost_usd,
        retrieval_s=retrieval_ms / 1000.0,
        llm_s=lat.get("llm", 0.0) / 1000.0,
        validation_s=validation_s,
        seed_entity_ids=tuple(s.entity_id for s in enc.seeds),
        context_entity_ids=tuple(context),
        masked_question=mask(q.question, enc.mentions),
        fused_experience_ids=a.fused_ids,
        matched_experience_ids=tuple(m.id for m in a.match.top) if a.match is not None else (),
        finding_experience_ids=tuple(f.experience_id for f in a.findings),
        reused_experience_id=a.reused_from,
        scaffold_experience_id=a.scaffold_id,
        scaffold_similarity=a.scaffold.template_similarity if a.scaffold else None,
        graph_transfer=graph_transfer,
        writeback=decision,
        novelty=novelty,
        grounding=grounding,
        stored_experience_id=stored_id,
        store_size_after=store_size if living else None,
        feedback=feedback.verdict if feedback is not None else None,
        feedback_correction=feedback.correction if feedback is not None and given else None,
        correction_experience_id=feedback.correction_experience_id if feedback is not None else None,
        reused_wrong=None if a.reused_from is None else not scores.contain,
        error=writeback_error,
        extra=extra,
    )


def failed_record(q: Question, *, system: str, order: int, position: int, error: str) -> QueryRecord:
    """The record of a question the pipeline could not answer (it counts as wrong)."""
    return QueryRecord(
        system=system,
        order=order,
        position=position,
        question_id=q.id,
        question=q.question,
        gold_answers=q.answers,
        gold_keys=q.gold_keys,
        error=error[:2000],
    )


# --------------------------------------------------------------------------------------------------
# Runner


@dataclass
class StreamRun:
    """One evaluation run in ``out_dir`` (see the module docstring)."""

    settings: Settings
    dataset: Dataset
    config: StreamConfig
    out_dir: Path
    judge: Judge | None = None
    progress: Progress | None = None
    log: Callable[[str], None] = field(default=lambda _msg: None)
    only_orders: frozenset[int] | None = None
    """Run only these of the stream orders (None: all); the others can be run later into the same folder."""

    @property
    def records_path(self) -> Path:
        return self.out_dir / RECORDS_JSONL

    def _check_resume(self) -> tuple[list[QueryRecord], list[Any] | None]:
        """Records already written and the run whose experiences the store holds (``store_owner``).

        A run may be resumed, or extended to more questions (``--limit`` raised, one order, the
        earlier questions a prefix of the new ones: the first positions are the same computation).
        """
        run_file = self.out_dir / RUN_JSON
        if not run_file.exists():
            if self.records_path.exists() and self.records_path.stat().st_size > 0:
                raise InvalidInput(f"{self.records_path} exists without {RUN_JSON}; use an empty --out folder")
            return [], None
        try:
            earlier = json.loads(run_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidInput(f"{run_file}: cannot read it ({exc}); use an empty --out folder") from None
        mine = self.config.identity()
        diff = [k for k in mine if earlier.get(k, ABSENT_IDENTITY.get(k)) != mine[k]]
        old_ids, new_ids = list(earlier.get("question_ids") or []), mine["question_ids"]
        extends = (
            set(diff) <= {"limit", "question_ids"}
            and self.config.orders == 1
            and len(old_ids) <= len(new_ids)
            and new_ids[: len(old_ids)] == old_ids
        )
        if diff and not extends:
            raise InvalidInput(
                f"--out {self.out_dir} holds a different run (differs in {', '.join(diff)}); "
                "use another --out folder, or --fresh to start over"
            )
        if diff:
            self.log(f"extending the run from {len(old_ids)} to {len(new_ids)} questions")
        if not self.records_path.exists():
            return [], None
        return read_records_jsonl(self.records_path, allow_truncated_tail=True), earlier.get("store_owner")

    def _save_state(self, store_owner: list[Any] | None) -> None:
        # concurrency is no part of the run's identity, but the report says what it meant for feedback
        state = self.config.identity() | {"store_owner": store_owner, "concurrency": self.config.concurrency}
        tmp = self.out_dir / (RUN_JSON + ".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.out_dir / RUN_JSON)

    def _rewrite_records(self, records: list[QueryRecord]) -> None:
        """Rewrite records.jsonl (without a torn last line), so appends start on a clean line."""
        tmp = self.records_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in records))
        tmp.replace(self.records_path)

    def run(self, *, fresh: bool = False) -> list[QueryRecord]:
        """Answer every stream (resuming what ``out_dir`` already holds) and return all records."""
        from livingrag.db.setup import open_database
        from livingrag.pipeline.answer_pipeline import LivingRAG

        self.out_dir.mkdir(parents=True, exist_ok=True)
        if fresh:
            for name in (RECORDS_JSONL, RUN_JSON):
                (self.out_dir / name).unlink(missing_ok=True)
        records, store_owner = self._check_resume()
        orders = stream_orders(len(self.dataset.questions), self.config.orders, self.config.seed)
        # a partial run of a system that writes experiences resumes only on its own store; any other
        # partial run is started over (its records are dropped), so that every run stays exact
        started = {(r.system, r.order) for r in records}
        for system, o in started:
            n_done = sum(1 for r in records if r.system == system and r.order == o)
            if system != SYSTEM_LINEAR and n_done < len(orders[o]) and [system, o] != store_owner:
                self.log(f"{system}, order {o}: the store no longer holds its experiences; starting it over")
                records = [r for r in records if (r.system, r.order) != (system, o)]
        self._rewrite_records(records)
        self._save_state(store_owner)
        done = {r.key for r in records}

        db = open_database(self.settings.db)
        try:
            self.log(f"indexing {len(self.dataset.corpus)} documents (unchanged ones are skipped)")
            corpus = index_dataset_corpus(
                db,
                self.settings,
                self.dataset,
                tenant=self.config.tenant,
                corpus=self.config.corpus,
                progress=self.progress,
            )
            rag = LivingRAG(self.settings, db=db)
            try:
                for system in self.config.systems:
                    for o, order in enumerate(orders):
                        if self.only_orders is not None and o not in self.only_orders:
                            continue
                        todo = [p for p in range(len(order)) if (system, o, p) not in done]
                        if system == SYSTEM_LINEAR:
                            shared = self._share_linear(records, orders, o, todo)
                            records += shared
                            copied = {r.position for r in shared}
                            todo = [p for p in todo if p not in copied]
                        if not todo:
                            continue
                        partial = len(todo) < len(order)
                        records += self._run_one(rag, corpus, system, o, order, todo, resume=partial)
            finally:
                rag.close()
        finally:
            db.close()
        return records

    def _share_linear(
        self, records: list[QueryRecord], orders: list[list[int]], o: int, todo: list[int]
    ) -> list[QueryRecord]:
        """LinearRAG keeps no state between questions, so its answer to a question is the same in every
        order: order ``o``'s positions in ``todo`` get copies of another order's record of the same
        question (``extra["shared_from_order"]``), appended to records.jsonl; the others are left."""
        answered: dict[int, QueryRecord] = {}
        for r in records:
            if r.system == SYSTEM_LINEAR and r.order != o and r.error is None and "shared_from_order" not in r.extra:
                answered.setdefault(orders[r.order][r.position], r)
        out: list[QueryRecord] = []
        for position in todo:
            rec = answered.get(orders[o][position])
            if rec is None:
                continue
            copy = replace(rec, order=o, position=position, extra={**rec.extra, "shared_from_order": rec.order})
            append_record(self.records_path, copy)
            out.append(copy)
        if out:
            self.log(f"{SYSTEM_LINEAR}, order {o}: {len(out)} answer(s) shared from other orders (it keeps no state)")
        return out

    def _run_one(
        self,
        rag: LivingRAG,
        corpus: IndexedCorpus,
        system: str,
        o: int,
        order: list[int],
        todo: list[int],
        *,
        resume: bool,
    ) -> list[QueryRecord]:
        from livingrag.experience.feedback import TrustService
        from livingrag.pipeline.modes import Mode

        mode = Mode.from_system(system)
        reviewer = None
        seed = self.config.feedback_seed_used
        if mode.write and seed is not None:
            reviewer = GoldReviewer(
                TrustService(rag.db, rag.settings, rag.store), rate=self.config.feedback_rate, seed=seed
            )
        if mode.write and not resume:
            empty_memory(rag.db, corpus.tenant_id, corpus.corpus_id)
        if mode.write:
            self._save_state([system, o])
        self.log(
            f"{system}, order {o}: {len(todo)} question(s)"
            + (" (resumed)" if resume else ", empty experience store")
            + (f", simulated feedback on {100 * self.config.feedback_rate:g} % of the answers" if reviewer else "")
        )
        _, info = rag.resolve(corpus.tenant_id, corpus.corpus_id)
        threshold = rag.retriever(corpus.tenant_id, info).params.delta
        task = self.progress.add(f"{system} #{o}", len(todo)) if self.progress is not None else None
        out: list[QueryRecord] = []
        questions = self.dataset.questions

        def answer(position: int) -> tuple[Answer | None, bool | None, str | None]:
            q = questions[order[position]]
            try:
                a = rag.answer(
                    q.question, tenant=corpus.tenant_id, corpus=corpus.corpus_id, mode=mode, defer_writeback=True
                )
            except Exception as exc:  # the failure is recorded; the stream goes on
                return None, None, f"{type(exc).__name__}: {exc}"
            verdict = None
            if self.judge is not None:
                verdict = self.judge.judge(a.answer, q.answers).correct
            return a, verdict, None

        window = max(1, self.config.concurrency)
        with ThreadPoolExecutor(max_workers=window, thread_name_prefix="eval-answer") as pool:
            pending: list[tuple[int, Future[tuple[Answer | None, bool | None, str | None]]]] = []
            it = iter(todo)
            for p in it:
                pending.append((p, pool.submit(answer, p)))
                if len(pending) >= window:
                    break
            while pending:
                position, fut = pending.pop(0)
                nxt = next(it, None)
                if nxt is not None:
                    pending.append((nxt, pool.submit(answer, nxt)))
                a, verdict, error = fut.result()
                q = questions[order[position]]
                if a is None:
                    rec = failed_record(q, system=system, order=o, position=position, error=error or "failed")
                else:
                    rec = self._finish(rag, corpus, a, q, system, o, position, threshold, verdict, reviewer)
                append_record(self.records_path, rec)
                out.append(rec)
                if task is not None and self.progress is not None:
                    self.progress.advance(task)
        return out

    def _finish(
        self,
        rag: LivingRAG,
        corpus: IndexedCorpus,
        a: Answer,
        q: Question,
        system: str,
        o: int,
        position: int,
        threshold: float,
        verdict: bool | None,
        reviewer: GoldReviewer | None = None,
    ) -> QueryRecord:
        """Queue the write-back (stream order), wait for its decision, give the simulated feedback
        when the question is drawn for it, and build the record."""
        from livingrag.db.repositories import experiences as experience_repo

        wb = wb_error = size = None
        fut = rag.submit_writeback(a)
        if fut is not None:
            try:
                wb = fut.result()
            except Exception as exc:
                wb_error = f"write-back: {type(exc).__name__}: {exc}"
                rag.flush()  # a dropped candidate's decision is logged in batches: a verdict needs it
        given = None
        if reviewer is not None and a.query_log_id is not None and reviewer.chosen(q.id):
            given = reviewer.review(corpus.tenant_id, a.query_log_id, a.answer, q.answers)
        if system != SYSTEM_LINEAR:
            with rag.db.tenant_session(corpus.tenant_id) as s:
                size = experience_repo.count_corpus_experiences(s, corpus.corpus_id)
        return make_record(
            a,
            q,
            system=system,
            order=o,
            position=position,
            key_of_passage=corpus.key_of_passage,
            activation_threshold=threshold,
            verdict=verdict,
            writeback=wb,
            writeback_error=wb_error,
            store_size=size,
            feedback=given,
        )
