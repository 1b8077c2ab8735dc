"""The experience store's gated, transactional write-back after answering (eq. 5-6, 15-19).

A background worker calls ``writer.write_back(ExperienceCandidate.from_retrieval(...))`` for each
answer. Write-back checks novelty first and runs the verifier only for novel candidates; the insert
re-checks novelty under a per-corpus advisory lock, so concurrent writers never store two
experiences the gate would call duplicates, and the experience, its entity rows and its decision
row commit together or not at all. With ``gates.learn`` the tenant's earned calibrator
(:mod:`livingrag.experience.gate_learning`) may decide instead of the fixed gates.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from livingrag.config import Settings
from livingrag.corpus.ner import answer_entity_labels
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.db.repositories import experiences as repo
from livingrag.db.repositories import graph_writer as graph_repo
from livingrag.db.repositories import passages as passage_repo
from livingrag.db.repositories import trust as trust_repo
from livingrag.errors import InvalidInput, ModelUnavailable, NotFound
from livingrag.experience.answer_form import FormCheck, check_answer_form
from livingrag.experience.answer_reuse import question_key
from livingrag.experience.gate_features import candidate_features
from livingrag.experience.gate_learning import ActiveGate, GateLearner
from livingrag.experience.grounding import extract_claims, grounding_score, passes_grounding
from livingrag.experience.keysent import compose_summary, keysent, top_entities
from livingrag.experience.matching import retrieval_scores_from_cosines
from livingrag.experience.novelty import is_novel, novelty_score
from livingrag.experience.sparsify import sparsify
from livingrag.experience.store_input import CheckedCandidate, validate_candidate
from livingrag.experience.store_matching import ExperienceMatcher
from livingrag.experience.template import mask
from livingrag.experience.trust import evidence_hash, origin_of
from livingrag.experience.types import ClaimVerdict, Decision, ExperienceCandidate, WriteBackResult
from livingrag.experience.verifiers import ResolvedVerifier, Verifier, build_verifier
from livingrag.generation.llm import LLM
from livingrag.quotas import over_quota

log = logging.getLogger(__name__)

MARKED_WRONG = "a person marked this answer wrong for this question"
"""The reason the gate gives for refusing an answer people marked wrong for the same question."""


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)


def _outcome(write: Callable[[], WriteBackResult]) -> WriteBackResult | Exception:
    """``write()``'s decision, or what it raised (returned, not raised): bad input, or a failure
    that :meth:`ExperienceWriter.write_back` does not decide itself (a verifier that cannot be built)."""
    try:
        return write()
    except Exception as exc:
        return exc


def candidate_record(c: CheckedCandidate, epsilon: float, max_entities: int) -> dict[str, Any]:
    """What a rejected candidate needs to be stored later on a person's word (``writeback_log.
    candidate``): its unit query embedding, base activation, final activation sparsified as a stored
    map is (eq. 5), explanation, mentions, the corpus version it was answered at and each cited
    passage's id, title and :func:`evidence_hash` (the text itself stays in ``passages``)."""
    return {
        "embedding": [round(float(x), 7) for x in c.emb.tolist()],
        "base": {str(k): float(v) for k, v in c.base.items()},
        "final": {str(k): float(v) for k, v in sparsify(c.final, epsilon, max_entities).items()},
        "explanation": c.explanation,
        "mentions": list(c.mentions),
        "corpus_version": c.corpus_version,
        "passages": [{"id": p.id, "title": p.title, "hash": evidence_hash(p.title, p.text)} for p in c.passages],
    }


class ExperienceWriter:
    """Gate and store write-back candidates of one database (eq. 5-6, 15-19), logging each decision."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        matcher: ExperienceMatcher,
        *,
        verifier: Verifier | ResolvedVerifier | None = None,
        llm: LLM | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """``matcher`` gives the novelty score its preselection and the encoder (which also embeds
        evidence), and takes the templates of what is stored. ``verifier`` overrides
        ``gates.verifier``; ``llm`` is what the ``llm`` verifier asks. ``clock`` gives the current
        time (tests)."""
        self.db = db
        self.settings = settings
        self.exp = settings.experience
        self.gates = settings.gates
        self.matcher = matcher
        self._llm = llm
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._resolved: ResolvedVerifier | None
        if isinstance(verifier, ResolvedVerifier):
            self._resolved = verifier
        elif verifier is not None:
            self._resolved = ResolvedVerifier(verifier, verifier.name, "given")
        else:
            self._resolved = None
        self.learner = GateLearner(db, settings, clock=self._clock)
        """The tenants' learned gates (``gates.learn``): which calibrator decides or watches a write-back."""

    @property
    def verifier(self) -> ResolvedVerifier:
        """The grounding verifier, resolved from ``gates.verifier`` on first use (``auto`` falls
        back to ``offline`` when no NLI model loads, and says so)."""
        if self._resolved is None:
            with self._lock:
                if self._resolved is None:
                    self._resolved = build_verifier(
                        self.gates.verifier,
                        encoder=lambda: self.matcher.encoder,
                        evidence_k=self.gates.evidence_sentences,
                        nli_model=self.gates.nli_model,
                        device=self.settings.models.device,
                        llm=self._judge_llm() if self.gates.verifier == "judge" else self._llm,
                        judge_evidence=self.gates.judge_evidence,
                    )
        return self._resolved

    def _judge_llm(self) -> LLM | None:
        """The judge's LLM: the answer model, or ``gates.judge_model`` built with the answer model's
        provider settings (a second local model process, or another model name on the same server)."""
        model = self.gates.judge_model
        if not model or (self._llm is not None and model == self.settings.llm.model):
            return self._llm
        from livingrag.generation.providers import build_llm

        return build_llm(self.settings.llm.model_copy(update={"model": model}), data_dir=self.settings.db.data_dir)

    def write_back_many(self, items: Sequence[tuple[ExperienceCandidate, bool]]) -> list[WriteBackResult | Exception]:
        """:meth:`write_back` of each ``(candidate, gated)`` in order; each one's decision, or the
        exception :meth:`write_back` would have raised for it (:class:`InvalidInput`,
        :class:`NotFound`, or a failure it does not decide itself; nothing of that candidate
        written), returned so that one candidate's error never stops the others. The outcome of
        every candidate is what :meth:`write_back` gives it alone.

        Ungated candidates that follow each other (the "w/o quality gate" ablation: no verifier,
        so the database is their whole cost) are stored together, one transaction per (tenant,
        corpus) with the corpus's reads and locks paid once (:meth:`_insert_all`); if that
        transaction fails, nothing of it is kept and each of its candidates is written back alone,
        so one candidate's failure stays its own. A gated candidate is written back alone, after
        the ungated ones before it: its novelty precheck then sees every experience stored before
        it, as it would one at a time."""
        out: list[WriteBackResult | Exception | None] = [None] * len(items)
        pending: list[tuple[int, _Ready]] = []

        def store_pending() -> None:
            groups: dict[tuple[int, int], list[tuple[int, _Ready]]] = {}
            for i, r in pending:
                groups.setdefault((r.g.c.tenant_id, r.g.c.corpus_id), []).append((i, r))
            pending.clear()
            for group in groups.values():
                for (i, _), result in zip(group, self._insert_group([r for _, r in group]), strict=True):
                    out[i] = result

        for i, (candidate, gated) in enumerate(items):
            if gated:
                store_pending()
                out[i] = _outcome(functools.partial(self.write_back, candidate))
                continue
            try:
                pending.append((i, self._ungated(candidate)))
            except Exception as exc:
                out[i] = exc
        store_pending()
        assert all(o is not None for o in out)
        return out  # type: ignore[return-value]

    def _ungated(self, candidate: ExperienceCandidate) -> _Ready:
        """A candidate of the "w/o quality gate" ablation, validated and ready to store (GS = 1.0)."""
        t0 = time.perf_counter()
        c = validate_candidate(candidate)
        resolved = self.verifier
        details: dict[str, Any] = dict(resolved.record()) | {"gates": "off"}
        return _Ready(_Gated(c, resolved, details, {"validate_ms": _ms(t0)}, t0, gs=1.0), None, False)

    def _insert_group(self, batch: Sequence[_Ready]) -> list[WriteBackResult | Exception]:
        """:meth:`_insert_all` of ``batch`` (one tenant and corpus); when that fails, each candidate
        alone, with :meth:`write_back`'s outcomes (an ``error`` decision, or the input error)."""
        if len(batch) > 1:
            try:
                return list(self._insert_all(batch))
            except Exception as exc:
                log.warning("write-back of %d candidates together failed (%s); storing each alone", len(batch), exc)
        return [_outcome(functools.partial(self._insert_or_error, r)) for r in batch]

    def _insert_or_error(self, r: _Ready) -> WriteBackResult:
        """:meth:`_insert` of one candidate, a failure other than bad input decided as ``error``."""
        try:
            return self._insert(r.g, r.version, gated=r.gated)
        except (InvalidInput, NotFound):
            raise
        except Exception as exc:
            return self._failed(r.g, exc)

    def write_back(self, candidate: ExperienceCandidate, *, gated: bool = True) -> WriteBackResult:
        """Gate and store one candidate; returns (and logs in ``writeback_log``) the decision.

        ``gated=False`` is the paper's "w/o quality gate" ablation: NS is still computed and
        logged, but neither the novelty gate (eq. 18) nor the grounding gate (eq. 15-17) is
        applied (no verifier runs; the stored confidence is 1.0, details say ``gates: off``).

        Malformed input raises :class:`InvalidInput` (and :class:`NotFound` for a corpus the
        tenant does not have) and writes nothing. Any other failure is recorded as an ``error``
        decision and returned, never raised, so a background worker keeps going.
        """
        if not gated:  # no gate to pass: one transaction, NS computed once, under the storing locks
            return self._insert_or_error(self._ungated(candidate))
        t0 = time.perf_counter()
        c = validate_candidate(candidate)
        resolved = self.verifier
        vrec = resolved.record()
        timings: dict[str, float] = {"validate_ms": _ms(t0)}
        ns: float | None = None
        gs: float | None = None
        verdicts: tuple[ClaimVerdict, ...] = ()
        details: dict[str, Any] = dict(vrec)

        def state() -> _Gated:
            """The candidate's gate values so far, as every decision logs them."""
            return _Gated(c, resolved, details, timings, t0, ns=ns, gs=gs, verdicts=verdicts)

        try:
            t1 = time.perf_counter()
            learning = self.gates.learn and resolved.verifier is not None
            with self.db.tenant_session(c.tenant_id, read_floor=False) as s:
                version = self._checked_version(s, c)
                wrong = self._marked_wrong(s, c)
                ns, nearest = (None, None) if wrong else self._novelty(s, c)
                active = self.learner.active_in(s, c.corpus_id) if learning and not wrong else None
            if wrong:  # a person marked this answer wrong for this question: never stored again
                details |= {"stage": "marked_wrong"}
                timings["grounding_ms"] = 0.0
                return self._decide(replace(state(), gs=0.0), "rejected_grounding", reason=MARKED_WRONG)
            timings["novelty_ms"] = _ms(t1)
            details |= {"nearest_experience_id": nearest}
            if ns is None or not is_novel(ns, self.gates.tau_novel):
                details["stage"] = "precheck"
                return self._decide(state(), "rejected_novelty")

            t2 = time.perf_counter()
            form = None
            if resolved.verifier is not None and self.gates.answer_form:
                form = check_answer_form(c.query, c.answer, self._answer_labels(c.answer))
                if not form.fits and not learning:  # a wrong form is not an experience, however grounded
                    details |= {"stage": "answer_form", "expected": form.expected}
                    timings["grounding_ms"] = _ms(t2)
                    return self._decide(replace(state(), gs=0.0), "rejected_grounding", reason=form.reason)
            if resolved.verifier is None:
                gs = 1.0  # gates.verifier=none: the grounding gate is off (ablation)
            else:
                claims = extract_claims(
                    c.explanation,
                    c.answer,
                    c.query,
                    self.gates.max_claims,
                    yes_no_answer_claim=bool(getattr(resolved.verifier, "judges_answers", False)),
                )
                verdicts = tuple(resolved.verifier.verify(claims, c.passages))
                gs = grounding_score([v.score for v in verdicts], self.gates.tau_nli)
            timings["grounding_ms"] = _ms(t2)
            details["claims"] = [
                {
                    "claim": v.claim,
                    "source": v.source,
                    "g": round(v.score, 4),
                    "passage_id": v.passage_id,
                    "evidence": v.evidence[:1000] if v.evidence else None,
                }
                for v in verdicts
            ]
            if learning:
                return self._learned_or_fixed(state(), version, form, active)
            if not passes_grounding(gs, self.gates.tau_gs):
                return self._decide(state(), "rejected_grounding")

            return self._insert(state(), version)
        except (InvalidInput, NotFound):
            raise
        except Exception as exc:
            return self._failed(state(), exc)

    def _learned_or_fixed(
        self, g: _Gated, version: int, form: FormCheck | None, active: ActiveGate | None
    ) -> WriteBackResult:
        """The decision once the candidate's features are known (``gates.learn``): the tenant's
        earned calibrator decides (store iff P(right) >= its store threshold; ``auto_verified`` iff
        also >= its serve threshold), else the fixed gate does, exactly as without learning (the
        answer-form check, then GS >= tau_gs), with a watching calibrator's probability logged."""
        c = g.c
        form_words = check_answer_form(c.query, c.answer) if form is not None else None
        features = candidate_features(
            query=c.query,
            answer=c.answer,
            explanation=c.explanation,
            passages=c.passages,
            verdicts=g.verdicts,
            ns=float(g.ns or 0.0),
            gs=g.gs,
            form_fits=form_words.fits if form_words is not None else True,
            type_fits=form.fits if form is not None else True,
        )
        g.details["features"] = {k: round(v, 6) for k, v in features.items()}
        p = active.model.probability(features) if active is not None else None
        if active is not None:
            g.details["learned_gate"] = {
                "model_id": active.model_id,
                "scope": active.scope,
                "version": active.version,
                "probability": round(p, 6) if p is not None else None,
                "decides": active.decides,
                "store_threshold": active.store_threshold,
                "serve_threshold": active.serve_threshold,
            }
        g = replace(g, probability=p, gate_model_id=active.model_id if active is not None else None)
        if active is not None and active.decides and p is not None:
            assert active.store_threshold is not None
            g = replace(g, gate="learned")
            if p < active.store_threshold:
                g.details["stage"] = "learned_gate"
                reason = f"{active.label}: P(right) {p:.3f} below the store threshold {active.store_threshold:.3f}"
                return self._decide(g, "rejected_grounding", reason=reason)
            if active.serve_threshold is not None and p >= active.serve_threshold:
                g = replace(
                    g,
                    trust="auto_verified",
                    trust_reason=f"{active.label}: P(right) {p:.3f} >= the serve threshold"
                    f" {active.serve_threshold:.3f} (held-out precision >= {self.gates.serve_min_precision})",
                )
            return self._insert(g, version)
        if form is not None and not form.fits:
            g.details.update(stage="answer_form", expected=form.expected)
            return self._decide(replace(g, gs=0.0), "rejected_grounding", reason=form.reason)
        if not passes_grounding(g.gs if g.gs is not None else 0.0, self.gates.tau_gs):
            return self._decide(g, "rejected_grounding")
        return self._insert(g, version)

    def _failed(self, g: _Gated, exc: Exception) -> WriteBackResult:
        """The ``error`` decision of a write-back that failed with ``exc`` (logged, never raised)."""
        log.warning("write-back of %r failed: %s", g.c.query[:80], exc, exc_info=True)
        g.details["error_type"] = type(exc).__name__
        return self._decide(g, "error", reason=f"{type(exc).__name__}: {exc}"[:2000])

    def _answer_labels(self, answer: str) -> list[str] | None:
        """The NER labels of ``answer`` for the answer-type rule (``gates.answer_types``), or None
        (the rule off, or no NER model: then only the word rules of the answer-form check run)."""
        if not self.gates.answer_types:
            return None
        m = self.settings.models
        try:
            return answer_entity_labels(answer, m.ner_model, batch_size=m.ner_batch_size)
        except ModelUnavailable as exc:
            log.warning("answer types not checked (%s); the answer-form word rules still run", exc)
            return None

    @staticmethod
    def _marked_wrong(s: Session, c: CheckedCandidate) -> bool:
        """Whether people marked ``c``'s answer wrong for its question in its corpus
        (``rejected_answers``, by :func:`question_key` of both)."""
        return question_key(c.answer) in trust_repo.wrong_answer_keys(s, c.corpus_id, question_key(c.query))

    @staticmethod
    def _checked_version(s: Session, c: CheckedCandidate) -> int:
        """The corpus's current version; :class:`InvalidInput` when the candidate's embedding does
        not have the corpus's dimension (:class:`NotFound` for a corpus the tenant does not have)."""
        dim, version = repo.corpus_dimension_and_version(s, c.corpus_id)
        if dim != c.emb.shape[0]:
            raise InvalidInput(
                f"query embedding has dimension {c.emb.shape[0]} but corpus {c.corpus_id} uses"
                f" {dim}-dimensional embeddings"
            )
        return version

    def _novelty(self, session: Session, c: CheckedCandidate) -> tuple[float, int | None]:
        """NS of eq. 18 against the active experiences (base activation, no decay)."""
        rows = self.matcher.preselect(session, c.tenant_id, c.corpus_id, c.emb, c.base)
        if not rows:
            return 1.0, None
        eta = retrieval_scores_from_cosines(
            rows.embedding_cosines, c.base, rows.entity_ids, rows.weights, rows.lengths, self.exp.alpha
        ).combined
        best = int(np.argmax(eta))
        return novelty_score(eta), rows[best].id

    def _insert(self, g: _Gated, version: int | None, *, gated: bool = True) -> WriteBackResult:
        """Store one candidate that passed its gates: :meth:`_insert_all` of it alone."""
        return self._insert_all([_Ready(g, version, gated)])[0]

    def _insert_all(self, batch: Sequence[_Ready]) -> list[WriteBackResult]:
        """Store candidates of one (tenant, corpus) that passed their gates (``g.gs`` is each one's
        confidence), in order and in one transaction, each unless its evidence changed, the novelty
        recheck under the locks rejects it (gated only), or the tenant is at its quota; each
        decision is logged in that transaction. What a candidate's corpus and the locks cost (the
        dimension and version, KeySent's surface forms, the evidence and scope locks, the quota
        count) is paid once for the batch. ``version``: the corpus version the gates read (None:
        read here, with the dimension check, as the ungated path does). Raises on any failure,
        and then nothing of the batch is stored or logged."""
        first = batch[0].g.c
        assert all((r.g.c.tenant_id, r.g.c.corpus_id) == (first.tenant_id, first.corpus_id) for r in batch)
        assert all(r.g.gs is not None and (r.g.ns is not None or not r.gated) for r in batch)
        t3 = time.perf_counter()
        now = self._clock()
        maps = [sparsify(r.g.c.final, self.exp.epsilon, self.exp.max_map_entities) for r in batch]
        with self.db.tenant_session(first.tenant_id, read_floor=False) as s:
            read_version = None
            if any(r.version is None for r in batch):
                read_version = self._checked_version(s, first)
                for r in batch:
                    if r.g.c.emb.shape[0] != first.emb.shape[0]:
                        self._checked_version(s, r.g.c)  # raises InvalidInput naming the dimension
            anchors = [top_entities(r.g.c.final, self.exp.keysent_top_entities) for r in batch]
            names: dict[int, tuple[str, ...]] = {}
            for r in batch:
                names |= r.g.c.entity_names
            lookup = sorted({e for ids in anchors for e in ids if e not in names})
            if lookup:
                names |= repo.entity_surface_forms(s, first.corpus_id, lookup)
            news = [
                self._new_experience(r, maps[i], {e: tuple(names.get(e, ())) for e in anchors[i]}, now, read_version)
                for i, r in enumerate(batch)
            ]
            build_ms = _ms(t3)
            t4 = time.perf_counter()
            # passage updates and deletions wait for this transaction, and it for them: an experience
            # is either committed before such a change (which then marks it stale) or checked against
            # it here; passage adds change no evidence and wait for neither
            graph_repo.lock_evidence_shared(s, first.corpus_id)
            repo.lock_scope(s, first.corpus_id)
            lock_ms = _ms(t4)
            current = corpora.current_version(s, first.corpus_id)
            held = self.held_experiences(s, first.tenant_id)
            out: list[WriteBackResult] = []
            stored: list[tuple[int, _Ready, repo.NewExperience]] = []
            for r, new in zip(batch, news, strict=True):
                r.g.timings.update(build_ms=build_ms, lock_wait_ms=lock_ms)
                decided, exp_id = self._store_in(s, r, new, current, held)
                out.append(decided)
                if exp_id is not None:
                    held = None if held is None else held + 1
                    stored.append((exp_id, r, new))
        for exp_id, r, new in stored:
            c = r.g.c
            given = c.template_embedding if c.template_text == new.query_template else None
            self.matcher.warm_template(c.tenant_id, exp_id, new.query_template, given)
        return out

    def _new_experience(
        self,
        r: _Ready,
        stored_map: dict[int, float],
        anchors: Mapping[int, tuple[str, ...]],
        now: datetime,
        read_version: int | None,
    ) -> repo.NewExperience:
        """The row of a candidate about to be stored: KeySent's summary (eq. 6), its template
        (eq. 11), its sparsified map (eq. 5), confidence GS and the gate record."""
        c, gs = r.g.c, r.g.gs
        assert gs is not None
        summary = compose_summary(c.query, keysent(c.explanation, anchors, c.final, self.exp.keysent_count), c.answer)
        version = r.version if r.version is not None else read_version
        assert version is not None
        origin, origin_detail = origin_of(
            r.g.resolved.name, gated=r.gated, judge_model=self.gates.judge_model or self.settings.llm.model
        )
        return repo.NewExperience(
            tenant_id=c.tenant_id,
            corpus_id=c.corpus_id,
            query=c.query,
            query_template=mask(c.query, c.mentions),
            embedding=c.emb,
            activation=stored_map,
            summary=summary,
            answer=c.answer,
            confidence=float(gs),
            grounding={
                "gs": gs,
                "gated": r.gated,  # answer reuse gives only gated experiences' answers again
                "tau_nli": self.gates.tau_nli,
                "claims": r.g.details.get("claims", []),
                **r.g.resolved.record(),
            },
            source_passage_ids=[p.id for p in c.passages],
            corpus_version=c.corpus_version if c.corpus_version is not None else version,
            created_at=now,
            expires_at=(now + self.exp.ttl) if self.exp.ttl is not None else None,
            origin=origin,
            origin_detail=origin_detail,
            gated=r.gated,
            question_key=question_key(c.query),
            trust=r.g.trust,
            trust_actor="system" if r.g.trust != "unverified" else None,
            trust_reason=r.g.trust_reason,
            gate_probability=r.g.probability,
            gate_model_id=r.g.gate_model_id,
        )

    def _store_in(
        self, s: Session, r: _Ready, new: repo.NewExperience, current: int, held: int | None
    ) -> tuple[WriteBackResult, int | None]:
        """Inside the storing transaction (locks held): one candidate's last checks, then its row and
        its log row; (its decision, the new experience's id or None). ``current``: the corpus version
        now; ``held``: the tenant's experiences now, when a quota applies (else None)."""
        g, c, details, timings = r.g, r.g.c, r.g.details, r.g.timings
        if r.gated and self._marked_wrong(s, c):  # marked wrong while its gates ran
            details |= {"stage": "marked_wrong"}
            timings["total_ms"] = _ms(g.t0)
            log_id = self._log(s, replace(g, gs=0.0), "rejected_grounding", reason=MARKED_WRONG)
            return g.result("rejected_grounding", log_id, reason=MARKED_WRONG), None
        changed = self._changed_evidence(s, c, current)
        if changed:
            reason = (
                f"source passage(s) {', '.join(map(str, changed))} changed or were deleted after the "
                f"retrieval (corpus version {c.corpus_version})"
            )
            details |= {"stage": "evidence_changed", "changed_passage_ids": changed}
            timings["total_ms"] = _ms(g.t0)
            log_id = self._log(s, g, "rejected_grounding", reason=reason)
            return g.result("rejected_grounding", log_id, reason=reason), None
        t5 = time.perf_counter()
        ns2, nearest2 = self._novelty(s, c)
        timings["recheck_ms"] = _ms(t5)
        g2 = replace(g, ns=ns2)
        if not r.gated:  # no precheck ran: the recheck is the only NS
            details["nearest_experience_id"] = nearest2
        if r.gated and not is_novel(ns2, self.gates.tau_novel):
            details |= {"stage": "recheck", "nearest_experience_id": nearest2, "novelty_precheck": g.ns}
            timings["total_ms"] = _ms(g.t0)
            log_id = self._log(s, g2, "rejected_novelty")
            return g2.result("rejected_novelty", log_id), None
        refusal = self.quota_refusal(c.tenant_id, held)
        if refusal is not None:
            details |= {"stage": "quota", "quota": "api.max_experiences_per_tenant"}
            timings["total_ms"] = _ms(g.t0)
            log_id = self._log(s, g2, "dropped", reason=refusal)
            return g2.result("dropped", log_id, reason=refusal), None
        t6 = time.perf_counter()
        exp_id = repo.insert_experience(s, new)
        details |= {"stage": "stored", "map_size": len(new.activation), "novelty_recheck": ns2}
        timings["insert_ms"] = _ms(t6)
        timings["total_ms"] = _ms(g.t0)
        log_id = self._log(s, g2, "stored", experience_id=exp_id)
        trust_repo.insert_events(
            s,
            c.tenant_id,
            [
                trust_repo.EventRow(
                    experience_id=exp_id,
                    corpus_id=c.corpus_id,
                    event="created",
                    actor="system",
                    query_log_id=c.query_log_id,
                    reason=f"stored by the write-back gates ({new.origin}: {new.origin_detail})"
                    + (
                        f"; {g.gate} gate, P(right) {g.probability:.3f}"
                        if g.gate == "learned" and g.probability
                        else ""
                    ),
                    details={
                        "writeback_log_id": log_id,
                        "gs": g2.gs,
                        "ns": ns2,
                        "gate": g.gate,
                        "probability": g.probability,
                    },
                ),
                *(
                    [
                        trust_repo.EventRow(
                            experience_id=exp_id,
                            corpus_id=c.corpus_id,
                            event="auto_verified",
                            actor="system",
                            query_log_id=c.query_log_id,
                            reason=g.trust_reason,
                            details={"gate_model_id": g.gate_model_id, "probability": g.probability},
                        )
                    ]
                    if g.trust == "auto_verified"
                    else []
                ),
            ],
        )
        return g2.result("stored", log_id, experience_id=exp_id), exp_id

    def held_experiences(self, s: Session, tenant_id: int) -> int | None:
        """The tenant's experiences now, under a per-tenant lock, when ``api.max_experiences_per_tenant``
        is set (else None, and no lock). Taken in the storing transaction, last, after the corpus
        locks (no cycle), so the quota holds with several write-back threads and replicas."""
        if self.settings.api.max_experiences_per_tenant is None:
            return None
        repo.lock_tenant_experiences(s, tenant_id)
        return repo.count_tenant_experiences(s, tenant_id)

    def quota_refusal(self, tenant_id: int, held: int | None) -> str | None:
        """Why the tenant may store no more experiences (``api.max_experiences_per_tenant`` reached,
        with ``held`` of them now), or None; a candidate that passed its gates is then logged as
        ``dropped`` with this reason instead of stored."""
        limit = self.settings.api.max_experiences_per_tenant
        if limit is None or held is None or not over_quota(limit, held, 1):
            return None
        log.warning("write-back: tenant %s is at its experience quota (%d of %d)", tenant_id, held, limit)
        return f"quota exceeded: api.max_experiences_per_tenant = {limit} experiences; the tenant has {held}"

    @staticmethod
    def _changed_evidence(s: Session, c: CheckedCandidate, current: int) -> list[int]:
        """The cited passages whose title or text is no longer what the answer was grounded on (or that
        are gone), when the corpus version moved since the retrieval (``current`` is the version
        now); none when it did not, or when the candidate names no retrieval version."""
        if c.corpus_version is None or current == c.corpus_version:
            return []
        now = passage_repo.passage_texts(s, c.corpus_id, [p.id for p in c.passages])
        return sorted(p.id for p in c.passages if now.get(p.id) != ((p.title or ""), p.text))

    def _decide(self, g: _Gated, decision: Decision, *, reason: str | None = None) -> WriteBackResult:
        """Log a decision that stores nothing, in its own transaction."""
        c = g.c
        g.timings["total_ms"] = _ms(g.t0)
        log_id = None
        try:
            with self.db.tenant_session(c.tenant_id, read_floor=False) as s:
                log_id = self._log(s, g, decision, reason=reason)
        except Exception as exc:  # the database may be what failed; the result still says so
            log.warning("could not log the %s decision for %r: %s", decision, c.query[:80], exc)
        return g.result(decision, log_id, reason=reason)

    def _log(
        self, s: Session, g: _Gated, decision: str, *, experience_id: int | None = None, reason: str | None = None
    ) -> int:
        """Insert the ``writeback_log`` row of ``decision`` for ``g``; returns its id."""
        c, ns, gs, resolved = g.c, g.ns, g.gs, g.resolved
        log.info("write-back %s: NS=%s GS=%s verifier=%s query=%r", decision, ns, gs, resolved.name, c.query[:80])
        # a rejected candidate is kept with its decision: a person's "right" can still store it
        kept = (
            candidate_record(c, self.exp.epsilon, self.exp.max_map_entities)
            if decision.startswith("rejected")
            else None
        )
        return repo.insert_writeback_log(
            s,
            tenant_id=c.tenant_id,
            corpus_id=c.corpus_id,
            query=c.query,
            decision=decision,
            novelty=ns,
            grounding=gs,
            verifier=resolved.name,
            reason=reason,
            timings=g.timings,
            details=g.details,
            experience_id=experience_id,
            query_log_id=c.query_log_id,
            candidate=kept,
            gate=g.gate,
            probability=g.probability,
            gate_model_id=g.gate_model_id,
        )


@dataclass(frozen=True)
class _Gated:
    """One candidate on its way through the gates: what each decision logs and returns. ``details`` and
    ``timings`` are the candidate's own dicts, filled in as it goes; ``t0`` is when its write-back began."""

    c: CheckedCandidate
    resolved: ResolvedVerifier
    details: dict[str, Any]
    timings: dict[str, float]
    t0: float
    ns: float | None = None
    gs: float | None = None
    verdicts: tuple[ClaimVerdict, ...] = ()
    gate: str = "fixed"
    """Which gate decided: ``fixed`` (NS, the answer form, GS) or ``learned`` (the tenant's calibrator)."""
    probability: float | None = None
    """The learned gate's P(right), when a calibrator decided or watched."""
    gate_model_id: int | None = None
    trust: str = "unverified"
    """The trust a stored experience gets: ``auto_verified`` above an earned serve threshold."""
    trust_reason: str | None = None

    def result(
        self, decision: str, log_id: int | None, *, experience_id: int | None = None, reason: str | None = None
    ) -> WriteBackResult:
        """The :class:`WriteBackResult` of ``decision`` for this candidate."""
        return WriteBackResult(
            decision=decision,  # type: ignore[arg-type]
            novelty=self.ns,
            grounding=self.gs,
            verifier=self.resolved.name,
            experience_id=experience_id,
            log_id=log_id,
            reason=reason,
            claims=self.verdicts,
            timings=self.timings,
            gate=self.gate,
            probability=self.probability,
            trust=self.trust if decision == "stored" else "unverified",
        )


@dataclass(frozen=True)
class _Ready:
    """A candidate that passed its gates (or has none), on its way into the store: ``version`` is the
    corpus version its gates read (None: the storing transaction reads it)."""

    g: _Gated
    version: int | None
    gated: bool
