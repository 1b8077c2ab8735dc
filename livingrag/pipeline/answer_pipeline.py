"""LivingRAG: the answer pipeline (paper eq. 1-3).

``answer()`` runs, on the caller's thread::

    encode (NER + embedding + linking -> a_base)
      -> experience match (eq. 7) -> fusion (eq. 8-10) -> retrieval from a0 (LinearRAG)
      -> scaffold (eq. 12-13) -> LLM (eq. 14) -> query log

and returns. The write-back of the candidate (novelty -> grounding -> transactional insert,
eq. 15-19) runs afterwards on a background worker, in arrival order per (tenant, corpus), so an
answer never waits for the verifier. ``flush()`` waits for pending write-backs; ``close()``
drains them. LinearRAG is the same pipeline with experience off (mode ``linear``).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from livingrag.db.repositories import corpora, tenants
from livingrag.db.repositories import experiences as experience_repo
from livingrag.db.repositories.experiences import ReusableExperience
from livingrag.db.repositories.querylog import insert_query_log
from livingrag.errors import Conflict, InvalidInput, LivingRAGError, LLMError, StandbyLost
from livingrag.experience.answer_reuse import pick_repeat, question_key
from livingrag.experience.drop_log import DropRecorder
from livingrag.experience.keysent import parse_summary
from livingrag.experience.scaffold_policy import scaffolds_masked
from livingrag.experience.store import ExperienceStore
from livingrag.experience.template import has_placeholder, mask, mask_scaffold
from livingrag.experience.trust import serves_answer
from livingrag.experience.types import (
    ExperienceCandidate,
    Finding,
    MatchedExperience,
    MatchResult,
    ScaffoldChoice,
    WriteBackResult,
)
from livingrag.experience.use_counts import UseRecorder
from livingrag.generation.llm import LLM, Completion, added
from livingrag.generation.qa import (
    GeneratedAnswer,
    QAPrompt,
    Scaffold,
    build_qa_prompt,
    generate_answer,
    resolve_answer_style,
)
from livingrag.models.threads import set_torch_threads
from livingrag.pipeline.modes import Mode
from livingrag.pipeline.stopwatch import Stopwatch
from livingrag.pipeline.writeback import WritebackWorker
from livingrag.retrieval.retriever import Retriever, shared_graph_cache
from livingrag.types import CorpusInfo, QueryEncoding, RetrievalResult, RetrievedPassage

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.db.engine import Database

log = logging.getLogger(__name__)


class TokenSink(Protocol):
    """Who is shown an answer as the model makes it (``answer(tokens=...)``): a streamed HTTP reply,
    the terminal."""

    def token(self, text: str) -> None:
        """The next piece of the model's reply."""

    def restart(self, reason: str) -> None:
        """The reply so far is void and the question is asked again (``reason`` says why)."""


class WritebackDropped(LivingRAGError):
    """The write-back queue refused a candidate (full, or shutting down); the drop is logged."""


@dataclass(frozen=True)
class Answer:
    """What :meth:`LivingRAG.answer` returns.

    ``latency_ms`` holds ``setup`` (name resolution, plus model loading on a corpus's first
    query), ``encode``, ``match``, ``retrieve``, ``prompt``, ``llm``, ``log``, ``total`` and
    ``overhead`` (the pipeline's own per-query time: total minus the LLM call and setup).
    ``writeback`` resolves to the gate decision once the background worker has processed the
    candidate (None when nothing is written back: mode ``linear``).
    """

    question: str
    answer: str
    explanation: str
    system: str
    passages: tuple[RetrievedPassage, ...]
    fused: tuple[MatchedExperience, ...]
    scaffold: ScaffoldChoice | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_ms: dict[str, float]
    query_log_id: int | None
    retrieval: RetrievalResult
    match: MatchResult | None
    completion: Completion
    prompt_id: str
    writeback: Future[WriteBackResult] | None = field(default=None, compare=False, repr=False)
    candidate: ExperienceCandidate | None = field(default=None, compare=False, repr=False)
    """The write-back candidate when the caller deferred it (``answer(defer_writeback=True)``)."""
    gated: bool = field(default=True, compare=False, repr=False)
    reused_from: int | None = None
    """The experience whose answer was given again for this repeated question (no LLM call), else None."""
    reused_trust: str | None = None
    """That experience's trust when it was served (``verified``, or ``auto_verified`` by a learned gate)."""
    findings: tuple[Finding, ...] = ()
    """Earlier experiences stated in the prompt as facts (``experience.findings_k``; beyond the paper)."""

    @property
    def fused_ids(self) -> tuple[int, ...]:
        return tuple(m.id for m in self.fused)

    @property
    def scaffold_id(self) -> int | None:
        return self.scaffold.experience_id if self.scaffold else None


@dataclass(frozen=True)
class _Job:
    candidate: ExperienceCandidate
    gated: bool
    future: Future[WriteBackResult]


def validate_question(question: object, max_chars: int) -> str:
    """The stripped question, or :class:`InvalidInput` saying what is wrong with it."""
    if not isinstance(question, str):
        raise InvalidInput(f"question must be text, got {type(question).__name__}")
    q = question.strip()
    if not q:
        raise InvalidInput("question is empty")
    if len(q) > max_chars:
        raise InvalidInput(f"question is {len(q)} characters long; the limit is {max_chars}")
    if "\x00" in q:
        raise InvalidInput("question contains a NUL character")
    return q


class LivingRAG:
    """The answer pipeline over the corpora of one database (thread-safe)."""

    def __init__(
        self,
        settings: Settings,
        *,
        db: Database | None = None,
        llm: LLM | None = None,
        store: ExperienceStore | None = None,
        writeback_threads: int = 1,
    ) -> None:
        from livingrag.db.setup import open_database

        self.settings = settings
        self._own_db = db is None
        self.db = db if db is not None else open_database(settings.db)
        self.db.check_app_role()  # tenants' questions run only under a role that row-level security binds
        self._own_llm = llm is None
        if llm is None:
            from livingrag.generation.providers import build_llm

            llm = build_llm(settings.llm, data_dir=settings.db.data_dir)
        self.llm = llm
        self.store = store if store is not None else ExperienceStore(self.db, settings, llm=llm)
        self.uses = UseRecorder(self.db, settings.experience.use_flush_s)
        """Experience use counts, written in batches (:mod:`livingrag.experience.use_counts`)."""
        self.drops = DropRecorder(self.db, settings.experience.drop_log_flush_s)
        """``dropped`` write-back decisions, written in batches (:mod:`livingrag.experience.drop_log`)."""
        self.style = resolve_answer_style(settings.llm)
        self.mask_scaffolds = scaffolds_masked(settings)
        self._retrievers: OrderedDict[tuple[int, int], Retriever] = OrderedDict()
        self._lock = threading.Lock()
        api = settings.api
        shared_graph_cache().configure(
            max_graphs=api.graph_cache_max_graphs,
            max_bytes=None if api.graph_cache_max_mb is None else int(api.graph_cache_max_mb * 1_000_000),
        )
        self._worker: WritebackWorker[_Job] = WritebackWorker(
            batch_handler=self._run_writebacks,
            max_batch=settings.api.writeback_batch,
            threads=writeback_threads,
            maxsize=settings.api.writeback_queue_size,
            on_drop=self._on_drop,
            on_error=self._on_error,
        )
        self._closed = False

    # ---------------------------------------------------------------- resolution

    def resolve(self, tenant: int | str, corpus: int | str) -> tuple[int, CorpusInfo]:
        """Tenant id and corpus for ids or names; :class:`NotFound` when either does not exist.

        Ids never change meaning (identity columns are not reused), so a pair of ids with a loaded
        retriever is answered from memory once one read of the corpus's recorded retrieval preset
        (:func:`corpora.preset_read`, one round trip) finds it unchanged; a changed preset
        (``corpus set-preset``, PATCH, from any process) reads the row again and :meth:`retriever`
        builds anew. Names are looked up every time, so a corpus deleted and created again under
        the same name is the new one.
        """
        by_id = all(isinstance(x, int) and not isinstance(x, bool) for x in (tenant, corpus))
        if by_id:
            r = self._retrievers.get((int(tenant), int(corpus)))
            preset = corpora.preset_read(self.db.reader, int(tenant), int(corpus)) if r is not None else None
            if r is not None and preset == (_preset_of(r.corpus),):
                return int(tenant), r.corpus
        if isinstance(tenant, int) and not isinstance(tenant, bool):
            tenant_id = tenant
        else:
            with self.db.owner_session() as s:
                tenant_id = tenants.get_tenant(s, str(tenant)).id
        with self.db.tenant_session(tenant_id) as s:
            info = corpora.get_corpus(s, corpus)
        return tenant_id, info

    def retriever(self, tenant_id: int, corpus: CorpusInfo) -> Retriever:
        """The (cached) retriever of one corpus; built anew when ``corpus`` records another
        retrieval preset than the cached one was built with (``corpus set-preset``, PATCH)."""
        key = (tenant_id, corpus.id)
        with self._lock:
            r = self._retrievers.get(key)
            if r is not None and _preset_of(r.corpus) != _preset_of(corpus):
                r = None  # whoever holds the old one finishes with it; its thread ends when unreferenced
            if r is None:
                # its graph loads and version checks read from a standby when there are any
                r = Retriever.from_settings(self.db.reader, tenant_id, corpus, self.settings)
                self._retrievers[key] = r
            self._retrievers.move_to_end(key)
            # Bounded like the graph cache: an evicted retriever still serves whoever holds it,
            # and its embedding thread ends once it is no longer referenced.
            while len(self._retrievers) > self.settings.api.graph_cache_max_graphs:
                self._retrievers.popitem(last=False)
            return r

    # ---------------------------------------------------------------- answering

    def answer(
        self,
        question: str,
        *,
        tenant: int | str,
        corpus: int | str,
        mode: str | Mode = "living",
        ablations: Iterable[str] = (),
        top_k: int | None = None,
        defer_writeback: bool = False,
        min_corpus_version: int | None = None,
        tokens: TokenSink | None = None,
    ) -> Answer:
        """Answer one question; the experience write-back is queued, never awaited.

        ``tokens`` is shown the model's reply as it is made (a streamed answer); an answer given again
        from memory makes no tokens.

        ``min_corpus_version``: answer from a graph of at least this corpus version (a client that
        changed the corpus through another replica passes the version it was told); waits for a
        load in flight, and raises :class:`Conflict` when the corpus is not at that version yet.

        ``defer_writeback=True`` queues nothing: the answer carries the candidate, and the caller
        queues it with :meth:`submit_writeback` (the stream evaluation does, in stream order).
        """
        if self._closed:
            raise LivingRAGError("the pipeline is closed")
        m = mode if isinstance(mode, Mode) else Mode.parse(mode, ablations)
        q = validate_question(question, self.settings.api.max_question_chars)
        sw = Stopwatch()

        tenant_id, info = self.resolve(tenant, corpus)
        r = self.retriever(tenant_id, info)
        sw.since_start("setup")  # name resolution; the first query of a corpus also loads its models
        try:
            enc, match = self._encode_and_match(r, tenant_id, info, q, m, sw, min_corpus_version)
        except StandbyLost:  # a read standby went away during a graph load: it is skipped now, so once more
            enc, match = self._encode_and_match(r, tenant_id, info, q, m, sw, min_corpus_version)
        fuse = match is not None and m.fusion and match.fusion_applied
        with sw.step("retrieve"):
            result = r.retrieve(
                enc, start_activation=match.start_activation if (fuse and match is not None) else None, top_k=top_k
            )

        if match is not None and match.top and self.settings.experience.answer_reuse:
            with sw.step("reuse"):
                repeat = self._repeat_of(tenant_id, q, match)
            if repeat is not None:
                return self._reused_answer(tenant_id, info.id, q, m, result, match, repeat, sw)

        with sw.step("prompt"):
            findings, scaffold = _experience_for_prompt(match, m)
            stated = [_summary_for_prompt(f.summary) for f in findings]
            prompt = build_qa_prompt(
                q,
                result.passages,
                scaffold=_summary_for_prompt(scaffold.summary, masked=self.mask_scaffolds) if scaffold else None,
                findings=stated,
                style=self.style,
            )
        fused = match.fused if (fuse and match is not None) else ()
        fused_ids = [e.id for e in fused]
        passage_ids = [p.id for p in result.passages]

        try:
            with sw.step("llm"):
                gen, prompt, scaffold = self._generate(q, result, prompt, scaffold, stated, tokens)
        except LLMError as exc:
            sw.total()
            scaffold_id = scaffold.experience_id if scaffold else None
            self._log_failure(tenant_id, info.id, q, m, sw.ms, fused_ids, scaffold_id, passage_ids, exc)
            raise
        return self._logged_answer(
            tenant_id, info.id, q, m, sw, result, match, gen, prompt, scaffold, findings, fused, defer_writeback
        )

    def _encode_and_match(
        self,
        r: Retriever,
        tenant_id: int,
        info: CorpusInfo,
        q: str,
        m: Mode,
        sw: Stopwatch,
        min_corpus_version: int | None,
    ) -> tuple[QueryEncoding, MatchResult | None]:
        """The question's encoding (from a graph of at least ``min_corpus_version``) and, in a mode
        that reads the store, its match (eq. 7-13); timed as the ``encode`` and ``match`` steps."""
        use_experience = self.settings.experience.enabled
        with sw.step("encode"):
            graph = None
            if min_corpus_version is not None:
                # with read standbys: read from one that holds that version (or from the primary)
                with self.db.corpus_version_floor(tenant_id, info.id, min_corpus_version):
                    graph = r.graph(min_version=min_corpus_version)
                if graph.version < min_corpus_version:
                    raise Conflict(
                        f"corpus {info.id} is at version {graph.version}, below min_corpus_version {min_corpus_version}"
                    )
            # living mode embeds the question's template (eq. 11) in the question's forward pass,
            # when matching compares templates (eq. 12) at all and the store has not met that
            # question form before (its cache, by template text)
            templates = m.read and use_experience and self.store.templates_needed
            enc = r.encode(
                q,
                graph=graph,
                template=mask if templates else None,
                known_template=functools.partial(self.store.template_vector, tenant_id) if templates else None,
            )

        match: MatchResult | None = None
        if m.read and use_experience:
            with sw.step("match"):
                # the scaffold's template similarity embeds on this thread: with torch's default (one
                # thread per core) its OpenMP workers spin on a small, busy machine (measured on 2 cores:
                # 265 ms p50 for two short texts); query encoding uses the same setting
                set_torch_threads(r.params.query_threads)
                match = self.store.match(tenant_id, info.id, enc, activation_threshold=r.params.delta)
        return enc, match

    def _logged_answer(
        self,
        tenant_id: int,
        corpus_id: int,
        q: str,
        m: Mode,
        sw: Stopwatch,
        result: RetrievalResult,
        match: MatchResult | None,
        gen: GeneratedAnswer,
        prompt: QAPrompt,
        scaffold: ScaffoldChoice | None,
        findings: tuple[Finding, ...],
        fused: tuple[MatchedExperience, ...],
        defer_writeback: bool,
    ) -> Answer:
        """The generated answer logged (``query_log``), its experience uses counted and its
        write-back candidate queued (or, with ``defer_writeback``, carried)."""
        use_experience = self.settings.experience.enabled
        fused_ids = [e.id for e in fused]
        passage_ids = [p.id for p in result.passages]
        scaffold_id = scaffold.experience_id if scaffold else None
        c = gen.completion
        llm_s = self.settings.llm
        cost = c.cost_usd(llm_s.price_prompt_per_m, llm_s.price_completion_per_m)

        sw.total(excluding=("llm", "setup"))  # the logged row's latencies: up to the log write
        # timed after the row's total: row total + log never exceed the answer's
        with sw.step("log"), self.db.tenant_session(tenant_id, read_floor=False) as s:
            log_id = insert_query_log(
                s,
                tenant_id=tenant_id,
                corpus_id=corpus_id,
                query=q,
                mode=m.system,
                answer=gen.answer,
                model=c.model,
                prompt_tokens=c.prompt_tokens,
                completion_tokens=c.completion_tokens,
                cost_usd=cost,
                latencies=sw.ms,
                fused_experience_ids=fused_ids,
                scaffold_experience_id=scaffold_id,
                passage_ids=passage_ids,
            )
        # the answer waits for the query log too: total and overhead include it (the logged row
        # holds the times up to its own insert); setup (first-query model loading) is left out
        sw.total(excluding=("llm", "setup"))
        self.uses.record(
            tenant_id,
            fused_ids=fused_ids,
            scaffold_id=scaffold_id,
            finding_ids=[f.experience_id for f in findings],
            now=datetime.now(UTC),
            corpus_id=corpus_id,
            query_log_id=log_id,
        )

        future: Future[WriteBackResult] | None = None
        candidate: ExperienceCandidate | None = None
        if m.write and use_experience:
            candidate = ExperienceCandidate.from_retrieval(
                tenant_id,
                corpus_id,
                result,
                explanation=gen.explanation,
                answer=gen.answer,
                corpus_version=result.encoding.graph_version,
                query_log_id=log_id,
            )
            if not defer_writeback:
                future = self._submit(candidate, m.gated)
                candidate = None
        return Answer(
            question=q,
            answer=gen.answer,
            explanation=gen.explanation,
            system=m.system,
            passages=result.passages,
            fused=fused,
            scaffold=scaffold,
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            cost_usd=cost,
            latency_ms=sw.ms,
            query_log_id=log_id,
            retrieval=result,
            match=match,
            completion=c,
            prompt_id=prompt.prompt_id,
            writeback=future,
            candidate=candidate,
            gated=m.gated,
            findings=findings,
        )

    def _generate(
        self,
        q: str,
        result: RetrievalResult,
        prompt: QAPrompt,
        scaffold: ScaffoldChoice | None,
        stated: list[Scaffold],
        tokens: TokenSink | None = None,
    ) -> tuple[GeneratedAnswer, QAPrompt, ScaffoldChoice | None]:
        """The LLM's answer to ``prompt``, with the prompt and scaffold it was finally given.

        An answer that copies a placeholder of the masked scaffold ("[ENT]") cannot be right: the
        question is asked again without the scaffold, and both calls are counted in the completion.
        """
        on_token = tokens.token if tokens is not None else None
        gen = generate_answer(self.llm, prompt, max_tokens=self.settings.llm.max_tokens, on_token=on_token)
        if scaffold is not None and self.mask_scaffolds and has_placeholder(gen.answer):
            log.info("answer %r copied the masked scaffold; asking again without it", gen.answer)
            if tokens is not None:
                tokens.restart("the answer copied a placeholder of the reference question; asked again without it")
            first = gen.completion
            prompt = build_qa_prompt(q, result.passages, findings=stated, style=self.style)
            gen = generate_answer(self.llm, prompt, max_tokens=self.settings.llm.max_tokens, on_token=on_token)
            gen = replace(gen, completion=added(first, gen.completion))
            scaffold = None
        return gen, prompt, scaffold

    def _repeat_of(self, tenant_id: int, q: str, match: MatchResult) -> ReusableExperience | None:
        """The top-K experience whose question ``q`` repeats and whose answer may be given again
        without an LLM call (answer_reuse), if any.

        ``experience.reuse_answers_from`` decides which: ``verified`` (a person marked it right or
        corrected it), ``auto_verified`` (default: verified, or stored by the tenant's earned learned
        gate above its serve threshold) or ``gated`` (those, or stored through the gates with GS at
        least tau_gs). Only the top-K experiences that policy allows and whose question ``q`` repeats are
        looked up (most questions repeat none, and then no round trip is made); the lookup checks
        that each is still active and that people have not marked its answer wrong for this
        question; the first (in top-K order) that passes is chosen."""
        policy = self.settings.experience.reuse_answers_from
        tau = self.settings.gates.tau_gs
        ids = [
            e.id
            for e in match.top
            if serves_answer(policy, trust=e.trust, gated=e.gated, confidence=e.confidence, floor=tau)
            and pick_repeat(q, [(e.id, e.query)]) is not None
        ]
        if not ids:
            return None
        try:
            usable = self._reusable(tenant_id, q, ids)
        except StandbyLost:  # the standby it read from went away: it is skipped now
            usable = self._reusable(tenant_id, q, ids)
        chosen = pick_repeat(q, [(e.id, e.query) for e in usable])
        return next((e for e in usable if e.id == chosen), None)

    def _reusable(self, tenant_id: int, q: str, ids: list[int]) -> list[ReusableExperience]:
        """The experiences of ``ids`` whose answer may be given again for ``q`` (read from a standby
        when there are any)."""
        policy = self.settings.experience.reuse_answers_from
        tau = self.settings.gates.tau_gs
        with self.db.reader.tenant_session(tenant_id) as s:
            return experience_repo.reusable_experiences(
                s,
                ids,
                allowed=lambda trust, gated, confidence: serves_answer(
                    policy, trust=trust, gated=gated, confidence=confidence, floor=tau
                ),
                now=datetime.now(UTC),
                question_key=question_key(q),
                answer_key=question_key,
            )

    def _reused_answer(
        self,
        tenant_id: int,
        corpus_id: int,
        q: str,
        m: Mode,
        result: RetrievalResult,
        match: MatchResult,
        repeat: ReusableExperience,
        sw: Stopwatch,
    ) -> Answer:
        """The earlier answer of ``repeat`` for a repeated question: no prompt, no LLM call, no write-back
        (it would only repeat the experience); the query log names the experience."""
        sw.ms["llm"] = 0.0
        completion = Completion(
            text=repeat.answer,
            prompt_tokens=0,
            completion_tokens=0,
            model=f"reuse:experience {repeat.id}",
            latency_s=0.0,
            usage_source="reuse",
        )
        vouched = "verified by a person" if repeat.trust == "verified" else "stored through the gates, not verified"
        explanation = (
            f"Reused the answer of experience {repeat.id} ({vouched}), stored for the same question: {repeat.query!r}."
        )
        sw.total(excluding=("setup",))
        # timed after the row's total, as in answer()
        with sw.step("log"), self.db.tenant_session(tenant_id, read_floor=False) as s:
            log_id = insert_query_log(
                s,
                tenant_id=tenant_id,
                corpus_id=corpus_id,
                query=q,
                mode=m.system,
                answer=repeat.answer,
                model=completion.model,
                prompt_tokens=0,
                completion_tokens=0,
                cost_usd=0.0,
                latencies=sw.ms,
                fused_experience_ids=[],
                scaffold_experience_id=None,
                passage_ids=[p.id for p in result.passages],
                reused_experience_id=repeat.id,
            )
        sw.total(excluding=("setup",))
        self.uses.record(
            tenant_id,
            fused_ids=(),
            scaffold_id=None,
            finding_ids=(),
            now=datetime.now(UTC),
            answer_id=repeat.id,
            corpus_id=corpus_id,
            query_log_id=log_id,
        )
        return Answer(
            question=q,
            answer=repeat.answer,
            explanation=explanation,
            system=m.system,
            passages=result.passages,
            fused=(),
            scaffold=None,
            prompt_tokens=0,
            completion_tokens=0,
            cost_usd=0.0,
            latency_ms=sw.ms,
            query_log_id=log_id,
            retrieval=result,
            match=match,
            completion=completion,
            prompt_id="reuse",
            gated=m.gated,
            reused_from=repeat.id,
            reused_trust=repeat.trust,
        )

    def submit_writeback(self, answer: Answer) -> Future[WriteBackResult] | None:
        """Queue the deferred write-back of ``answer``; None when it carries no candidate."""
        if answer.candidate is None:
            return answer.writeback
        return self._submit(answer.candidate, answer.gated)

    def _submit(self, candidate: ExperienceCandidate, gated: bool) -> Future[WriteBackResult]:
        future: Future[WriteBackResult] = Future()
        job = _Job(candidate, gated, future)
        if not candidate.answer.strip():
            self._on_drop(job, "the model gave no answer")
        else:
            self._worker.submit((candidate.tenant_id, candidate.corpus_id), job)
        return future

    def _log_failure(
        self,
        tenant_id: int,
        corpus_id: int,
        q: str,
        m: Mode,
        lat: dict[str, float],
        fused_ids: list[int],
        scaffold_id: int | None,
        passage_ids: list[int],
        exc: BaseException,
    ) -> None:
        try:
            with self.db.tenant_session(tenant_id, read_floor=False) as s:
                insert_query_log(
                    s,
                    tenant_id=tenant_id,
                    corpus_id=corpus_id,
                    query=q,
                    mode=m.system,
                    answer=None,
                    model=getattr(self.llm, "name", None),
                    prompt_tokens=0,
                    completion_tokens=0,
                    cost_usd=0.0,
                    latencies=lat,
                    fused_experience_ids=fused_ids,
                    scaffold_experience_id=scaffold_id,
                    passage_ids=passage_ids,
                    error=f"{type(exc).__name__}: {exc}"[:2000],
                )
        except Exception:
            log.warning("could not log the failed query", exc_info=True)

    # ---------------------------------------------------------------- write-back

    def _run_writebacks(self, jobs: list[_Job]) -> None:
        """What the write-back queue holds at once, in order
        (:meth:`~livingrag.experience.store_writeback.ExperienceWriter.write_back_many`: consecutive
        ungated candidates of a corpus are stored in one transaction); a candidate's bad input is
        logged as its ``error`` decision by :meth:`_on_error`."""
        outcomes = self.store.write_back_many([(j.candidate, j.gated) for j in jobs])
        for job, outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, WriteBackResult):
                job.future.set_result(outcome)
            else:
                self._on_error(job, outcome)

    def _on_drop(self, job: _Job, reason: str) -> None:
        c = job.candidate
        self.drops.record(
            tenant_id=c.tenant_id, corpus_id=c.corpus_id, query=c.query, reason=reason, query_log_id=c.query_log_id
        )
        if not job.future.done():
            job.future.set_exception(WritebackDropped(reason))

    def _on_error(self, job: _Job, exc: BaseException) -> None:
        """A write-back that raised (the store records its own failures as ``error`` decisions;
        this catches what it lets through, e.g. a verifier that cannot be built): logged as an
        ``error`` decision too, so that every answered query has its write-back outcome. A job
        already decided (a batch that failed after deciding some of its jobs) is left as it is."""
        if job.future.done():
            return
        c = job.candidate
        try:
            with self.db.tenant_session(c.tenant_id, read_floor=False) as s:
                experience_repo.insert_writeback_log(
                    s,
                    tenant_id=c.tenant_id,
                    corpus_id=c.corpus_id,
                    query=str(c.query or ""),
                    decision="error",
                    novelty=None,
                    grounding=None,
                    verifier=None,
                    reason=f"{type(exc).__name__}: {exc}"[:2000],
                    timings={},
                    details={"error_type": type(exc).__name__, "stage": "write_back"},
                    query_log_id=c.query_log_id,
                )
        except Exception:
            log.warning("could not log the failed write-back", exc_info=True)
        if not job.future.done():
            job.future.set_exception(exc)

    @property
    def pending_writebacks(self) -> int:
        return self._worker.pending

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write-back has been decided and every dropped one logged; False on
        timeout."""
        drained = self._worker.flush(timeout)
        self.drops.flush()
        return drained

    def close(self, timeout: float | None = None) -> None:
        """Drain the write-back queue, then release retrievers and (if owned) the LLM (a local model's
        process stops) and the database."""
        if self._closed:
            return
        self._closed = True
        self._worker.close(timeout)
        self.uses.close()
        self.drops.close()
        for r in self._retrievers.values():
            r.close()
        close_llm = getattr(self.llm, "close", None)
        if self._own_llm and close_llm is not None:
            close_llm()
        if self._own_db:
            self.db.close()

    def __enter__(self) -> LivingRAG:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _summary_for_prompt(summary: str, *, masked: bool = False) -> Scaffold:
    """A stored summary (eq. 6) as the prompt shows it: the scaffold of eq. 14, reduced to its
    reasoning pattern (:func:`mask_scaffold`) when ``masked``, or a finding (never masked)."""
    question, reasoning, answer = parse_summary(summary)
    if masked:
        question, reasoning, answer = mask_scaffold(question, reasoning, answer)
    return Scaffold(question=question, reasoning=reasoning, answer=answer)


def _preset_of(corpus: CorpusInfo) -> str | None:
    """The retrieval preset ``corpus`` recorded (None: none recorded)."""
    return (corpus.settings or {}).get("retrieval_preset")


def _experience_for_prompt(match: MatchResult | None, m: Mode) -> tuple[tuple[Finding, ...], ScaffoldChoice | None]:
    """The findings and the scaffold the prompt states (none unless ``m`` uses the scaffold); a
    scaffold that is also a finding is stated with its names as the finding, not again as a pattern."""
    findings = match.findings if (match is not None and m.scaffold) else ()
    scaffold = match.scaffold if (match is not None and m.scaffold) else None
    if scaffold is not None and scaffold.experience_id in {f.experience_id for f in findings}:
        scaffold = None
    return findings, scaffold
