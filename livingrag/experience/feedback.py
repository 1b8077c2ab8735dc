"""People correct memory: verdicts on answers, verifying and retracting experiences, and each
experience's history (beyond the paper; see :mod:`livingrag.experience.trust` for why).

A verdict names an answered question (its ``query_log_id``) and has these effects, in one
transaction under the write-back's locks (the corpus's evidence lock, shared, and its scope lock):

* ``right``: the question's experience (the one its write-back stored, or the one its answer was
  reused from) becomes ``verified``. If the gates had rejected its candidate, the candidate (kept
  with the decision in ``writeback_log.candidate``) is stored now, verified, unless a cited passage
  changed since the answer (then nothing is stored and the outcome says why); if an active
  experience of the same question already holds the same answer, that one is verified instead.
  A pair (question, answer) earlier marked wrong is forgotten.
* ``wrong``: every active experience of the corpus that gives this answer to this question is
  ``retracted`` (inactive, with the reason), and the pair (question key, answer key) is remembered
  in ``rejected_answers``: answer reuse never serves it for the question again, and the gate
  refuses the same answer to the same question.
* ``wrong`` with a corrected ``answer``: also stores the person's answer as a verified experience
  (``origin = person``), made from the question's query embedding, map and cited passages. Its
  claims are checked against those passages by the configured verifier first; a correction no
  passage supports is stored as asserted by that person (``grounding.grounded = false``) and never
  shown as grounded.

A verdict that repeats the question's latest one (same verdict, same corrected answer) changes
nothing and returns that one's outcome (idempotent). Every change appends to the experience's
history (``experience_events``) with the actor; every verdict is kept in ``answer_feedback``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from livingrag.config import Settings
from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as repo
from livingrag.db.repositories import gate as gate_repo
from livingrag.db.repositories import graph_writer as graph_repo
from livingrag.db.repositories import passages as passage_repo
from livingrag.db.repositories import trust as trust_repo
from livingrag.errors import Conflict, InvalidInput, NotFound
from livingrag.experience.answer_reuse import question_key
from livingrag.experience.grounding import extract_claims, grounding_score, passes_grounding
from livingrag.experience.keysent import compose_summary, keysent, top_entities
from livingrag.experience.store import ExperienceStore
from livingrag.experience.store_input import positive_id
from livingrag.experience.template import mask
from livingrag.experience.trust import Actor, evidence_hash
from livingrag.experience.types import UsedPassage

log = logging.getLogger(__name__)

MAX_ANSWER_CHARS = 2000
MAX_NOTE_CHARS = 2000
MAX_REASON_CHARS = 2000


@dataclass(frozen=True)
class CorrectionCheck:
    """How a person's corrected answer fared against the question's passages: GS (eq. 16) by the
    configured verifier, whether it passes ``gates.tau_gs`` (``grounded``), and each claim."""

    verifier: str
    gs: float | None
    grounded: bool
    claims: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class FeedbackOutcome:
    """What one verdict did."""

    feedback_id: int
    query_log_id: int
    corpus_id: int
    verdict: str
    answer: str | None
    actor: str
    repeated: bool
    """The verdict repeated the question's latest one: nothing changed."""
    verified_ids: tuple[int, ...] = ()
    retracted_ids: tuple[int, ...] = ()
    stored_experience_id: int | None = None
    """The experience this verdict stored (a rejected candidate, or the correction)."""
    remembered_wrong: bool = False
    check: CorrectionCheck | None = None
    messages: tuple[str, ...] = ()
    created_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat() if self.created_at else None
        return out


@dataclass(frozen=True)
class TrustChange:
    """What verifying or retracting one experience did."""

    experience_id: int
    trust: str
    previous: str
    changed: bool
    actor: str
    reason: str | None = None


@dataclass
class _Material:
    """What storing an experience for a question needs (from a rejected candidate or an experience)."""

    query: str
    template: str
    embedding: np.ndarray
    final: dict[int, float]
    explanation: str
    passages: tuple[UsedPassage, ...]
    hashes: dict[int, str] | None
    """Each cited passage's :func:`evidence_hash` at answer time (None: from an experience row,
    whose staleness says whether its evidence changed)."""
    stale: bool
    corpus_version: int
    gs: float | None = None
    claims: list[dict[str, Any]] = field(default_factory=list)


def _clean(value: str | None, what: str, limit: int) -> str | None:
    """``value`` with its white space collapsed (None when empty); :class:`InvalidInput` when it is
    not text or longer than ``limit`` characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text, got {type(value).__name__}")
    out = " ".join(value.split())
    if len(out) > limit:
        raise InvalidInput(f"{what} is {len(out)} characters long; at most {limit} are accepted")
    return out or None


class TrustService:
    """Verdicts on answers, trust changes and history of the experiences of one database."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        store: ExperienceStore,
        *,
        clock: Callable[[], datetime] | None = None,
        background_fits: bool = False,
    ) -> None:
        """``background_fits``: refit the tenant's learned gate after a verdict on a background thread
        (the API), instead of before returning (the command line, evaluations, tests)."""
        self.db = db
        self.settings = settings
        self.store = store
        self._clock = clock or (lambda: datetime.now(UTC))
        self._background_fits = background_fits

    def _learned(self, tenant_id: int) -> None:
        """After a label was committed: the tenant's learned gate refits when due."""
        if self._background_fits:
            self.store.learner.schedule_refit(tenant_id)
        else:
            self.store.learner.refit_quietly(tenant_id)

    # ---------------------------------------------------------------- single experiences

    def history(self, tenant_id: int, experience_id: int, *, limit: int = 1000) -> list[trust_repo.HistoryEvent]:
        """The experience's events, oldest first (:class:`NotFound` for one this tenant never had)."""
        tenant_id = positive_id(tenant_id, "tenant_id")
        experience_id = positive_id(experience_id, "experience id")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidInput(f"limit must be an integer from 1 to 10000, got {limit!r}")
        with self.db.tenant_session(tenant_id) as s:
            return trust_repo.history(s, experience_id, limit=limit)

    def verify(self, tenant_id: int, experience_id: int, *, actor: Actor, reason: str | None = None) -> TrustChange:
        """Mark one experience verified (a person vouches for its answer); a retracted one becomes
        verified again and its answer is no longer remembered as wrong for its question."""
        return self._set(tenant_id, experience_id, "verified", actor=actor, reason=reason)

    def retract(self, tenant_id: int, experience_id: int, *, actor: Actor, reason: str | None = None) -> TrustChange:
        """Retract one experience (inactive from now on, with the reason); its answer is remembered
        as wrong for its question, so it is never served or stored for it again."""
        return self._set(tenant_id, experience_id, "retracted", actor=actor, reason=reason)

    def _set(self, tenant_id: int, experience_id: int, trust: str, *, actor: Actor, reason: str | None) -> TrustChange:
        tenant_id = positive_id(tenant_id, "tenant_id")
        experience_id = positive_id(experience_id, "experience id")
        reason = _clean(reason, "reason", MAX_REASON_CHARS)
        now = self._clock()
        with self.db.tenant_session(tenant_id) as s:
            state = trust_repo.lock_experience(s, experience_id, now=now)
            self._lock_corpus(s, state.corpus_id)
            if state.trust == trust:
                return TrustChange(experience_id, trust, state.trust, False, actor.label, reason)
            qkey, akey = state.question_key or question_key(state.query), question_key(state.answer)
            asked = gate_repo.experience_query(s, experience_id)
            labelled = asked is not None and self.store.learner.label_in(
                s,
                tenant_id=tenant_id,
                query_log_id=asked,
                verdict="right" if trust == "verified" else "wrong",
                corrected=False,
                actor=actor.label,
                now=now,
            )
            if trust == "verified":
                self._verify_in(s, tenant_id, state.corpus_id, experience_id, actor, reason, now, None)
                trust_repo.forget_wrong(s, state.corpus_id, qkey, akey)
            else:
                self._retract_in(s, tenant_id, state.corpus_id, [experience_id], actor, reason, now, None)
                trust_repo.remember_wrong(
                    s,
                    tenant_id=tenant_id,
                    corpus_id=state.corpus_id,
                    question_key=qkey,
                    answer_key=akey,
                    answer=state.answer,
                    query_log_id=None,
                    actor=actor.label,
                )
        if labelled:
            self._learned(tenant_id)
        return TrustChange(experience_id, trust, state.trust, True, actor.label, reason)

    # ---------------------------------------------------------------- verdicts on answers

    def feedback(
        self,
        tenant_id: int,
        query_log_id: int,
        verdict: str,
        *,
        actor: Actor,
        answer: str | None = None,
        note: str | None = None,
    ) -> FeedbackOutcome:
        """Apply a person's verdict on the answer of question ``query_log_id`` (module docstring).

        Raises :class:`InvalidInput` for a bad verdict, answer or note, :class:`NotFound` for a
        question this tenant did not ask, and :class:`Conflict` while the question's write-back is
        still pending (retry once it is decided: a verdict needs to know what was stored)."""
        tenant_id = positive_id(tenant_id, "tenant_id")
        query_log_id = positive_id(query_log_id, "query id")
        if verdict not in trust_repo.VERDICTS:
            raise InvalidInput(f"verdict must be 'right' or 'wrong', got {verdict!r}")
        answer = _clean(answer, "corrected answer", MAX_ANSWER_CHARS)
        note = _clean(note, "note", MAX_NOTE_CHARS)
        with self.db.tenant_session(tenant_id) as s:
            q = trust_repo.answered_query(s, query_log_id)
        if q.answer is None or not q.answer.strip():
            raise InvalidInput(f"question {query_log_id} has no answer to judge ({q.error or 'it failed'})")
        if answer is not None and verdict == "right" and question_key(answer) != question_key(q.answer):
            raise InvalidInput("a corrected answer goes with verdict 'wrong' (the answer given was not right)")
        if answer is not None and question_key(answer) == question_key(q.answer):
            answer = None  # the "correction" is the answer given: nothing to correct
            if verdict == "wrong":
                raise InvalidInput("the corrected answer is the answer that was given; give a different one")
        if answer is not None and not question_key(answer):
            raise InvalidInput("the corrected answer has no letters or digits")

        # Outside the locks: what the question left behind, and the check of a correction (the
        # question's embedding, the verifier: too slow to hold the corpus lock for). Under the lock
        # the decision is read again; a write-back decided in between (it was pending, or a lost one
        # recovered) changes what the verdict must do, so the unlocked part is done again with it.
        for _ in range(_DECISION_TRIES):
            with self.db.tenant_session(tenant_id) as s:
                decision = trust_repo.decision_for_query(s, query_log_id)
                own = self._own_experience(s, q, decision)
                wanted = answer is not None or verdict == "right"
                material = self._material(s, q, decision, own) if wanted else None
            # a write-back not decided within api.recovery_grace_s was lost (a process that ended
            # first): the verdict is then taken on what there is, not refused for ever
            lost_after = self.settings.api.recovery_grace_s
            pending = (
                decision is None
                and q.reused_experience_id is None
                and self.settings.experience.enabled
                and _writes_back(q.mode)
                and (self._clock() - q.created_at).total_seconds() < lost_after
            )
            check = self._check(q.query, answer, note, material) if answer is not None and material else None

            now = self._clock()
            with self.db.tenant_session(tenant_id) as s:
                self._lock_corpus(s, q.corpus_id)
                previous = trust_repo.feedback_for_query(s, query_log_id)
                if previous and previous[-1].verdict == verdict and (previous[-1].answer or None) == answer:
                    last = previous[-1]
                    return _outcome_of(last, repeated=True)
                current = trust_repo.decision_for_query(s, query_log_id)
                if current is None and pending:
                    raise Conflict(
                        f"the write-back of question {query_log_id} is still pending; "
                        "give the verdict again in a moment"
                    )
                if _decision_key(current) != _decision_key(decision):
                    log.info("the write-back of question %s was decided meanwhile; reading it again", query_log_id)
                    continue
                if verdict == "right":
                    effects = self._right(s, tenant_id, q, decision, own, material, actor, note, now)
                else:
                    effects = self._wrong(s, tenant_id, q, own, material, answer, check, actor, note, now)
                row = trust_repo.insert_feedback(
                    s,
                    tenant_id=tenant_id,
                    corpus_id=q.corpus_id,
                    query_log_id=query_log_id,
                    verdict=verdict,
                    answer=answer,
                    note=note,
                    actor=actor.label,
                    key_id=actor.key_id,
                    experience_id=effects.get("stored_experience_id") or own,
                    outcome=effects | {"check": asdict(check) if check else None},
                )
                labelled = self.store.learner.label_in(
                    s,
                    tenant_id=tenant_id,
                    query_log_id=query_log_id,
                    verdict=verdict,
                    corrected=answer is not None,
                    actor=actor.label,
                    now=now,
                )
            log.info("feedback %s on question %s by %s: %s", verdict, query_log_id, actor.label, effects["messages"])
            if labelled:
                self._learned(tenant_id)
            return _outcome_of(row, repeated=False)
        raise Conflict(
            f"the write-back decision of question {query_log_id} kept changing while the verdict was taken; "
            "give it again"
        )

    # ---------------------------------------------------------------- the effects

    def _right(
        self,
        s: Session,
        tenant_id: int,
        q: trust_repo.AnsweredQuery,
        decision: trust_repo.Decision | None,
        own: int | None,
        material: _Material | None,
        actor: Actor,
        note: str | None,
        now: datetime,
    ) -> dict[str, Any]:
        assert q.answer is not None
        qkey, akey = question_key(q.query), question_key(q.answer)
        forgot = trust_repo.forget_wrong(s, q.corpus_id, qkey, akey)
        messages = ["the answer is no longer remembered as wrong for this question"] if forgot else []
        target = own if own is not None and self._visible(s, own) else None
        if target is None:
            same = [
                i for i, a in trust_repo.active_for_question(s, q.corpus_id, qkey, now=now) if question_key(a) == akey
            ]
            target = same[0] if same else None
        if target is not None:
            changed = self._verify_in(s, tenant_id, q.corpus_id, target, actor, note, now, q.id)
            messages.append(f"experience {target} " + ("verified" if changed else "was verified already"))
            return {"verified_ids": [target], "messages": messages}
        if material is None:
            messages.append(_nothing_to_store(q, decision))
            return {"messages": messages}
        stored, why = self._store(
            s,
            tenant_id,
            q,
            material,
            answer=q.answer,
            explanation=material.explanation,
            gs=material.gs,
            grounding={"gs": material.gs, "claims": material.claims, "grounded": None, "vouched_by": actor.label},
            actor=actor,
            reason=f"marked right by {actor.label}" + (f": {note}" if note else ""),
            now=now,
        )
        messages.append(
            why
            or f"the gates had not stored this answer ({decision.decision if decision else 'no decision'});"
            f" stored now as verified experience {stored}"
        )
        return {"stored_experience_id": stored, "verified_ids": [stored] if stored else [], "messages": messages}

    def _wrong(
        self,
        s: Session,
        tenant_id: int,
        q: trust_repo.AnsweredQuery,
        own: int | None,
        material: _Material | None,
        answer: str | None,
        check: CorrectionCheck | None,
        actor: Actor,
        note: str | None,
        now: datetime,
    ) -> dict[str, Any]:
        assert q.answer is not None
        qkey, akey = question_key(q.query), question_key(q.answer)
        reason = f"marked wrong by {actor.label}" + (f": {note}" if note else "")
        remembered = trust_repo.remember_wrong(
            s,
            tenant_id=tenant_id,
            corpus_id=q.corpus_id,
            question_key=qkey,
            answer_key=akey,
            answer=q.answer,
            query_log_id=q.id,
            actor=actor.label,
        )
        wrong_ids = [
            i for i, a in trust_repo.active_for_question(s, q.corpus_id, qkey, now=now) if question_key(a) == akey
        ]
        if own is not None and own not in wrong_ids and self._visible(s, own, active_only=True):
            wrong_ids.insert(0, own)
        retracted = self._retract_in(s, tenant_id, q.corpus_id, wrong_ids, actor, reason, now, q.id)
        messages = [f"experience {i} retracted" for i in retracted]
        messages.append(
            "this answer will not be served or stored for this question again"
            if remembered
            else "this answer was already remembered as wrong for this question"
        )
        out: dict[str, Any] = {"retracted_ids": retracted, "remembered_wrong": True, "messages": messages}
        if answer is None:
            return out
        ckey = question_key(answer)
        trust_repo.forget_wrong(s, q.corpus_id, qkey, ckey)
        # every experience that gave the wrong answer to this question, retracted now or before
        corrected = [i for i, a in trust_repo.retracted_for_question(s, q.corpus_id, qkey) if question_key(a) == akey]
        same = [i for i, a in trust_repo.active_for_question(s, q.corpus_id, qkey, now=now) if question_key(a) == ckey]
        if same:
            self._verify_in(s, tenant_id, q.corpus_id, same[0], actor, note, now, q.id)
            self._corrected_events(s, tenant_id, q.corpus_id, corrected, same[0], actor, q.id)
            messages.append(f"the corrected answer was stored already: experience {same[0]} verified")
            return out | {"verified_ids": [same[0]], "stored_experience_id": None}
        if material is None or check is None:
            messages.append("the correction is recorded but not stored: " + _nothing_to_store(q, None))
            return out
        grounding = {
            "gs": check.gs,
            "claims": list(check.claims),
            "grounded": check.grounded,
            "verifier": check.verifier,
            "corrected_by": actor.label,
        }
        if not check.grounded:
            grounding["asserted_by"] = actor.label
        stored, why = self._store(
            s,
            tenant_id,
            q,
            material,
            answer=answer,
            explanation=note or "",
            gs=check.gs,
            grounding=grounding,
            actor=actor,
            reason=f"corrected by {actor.label}" + (f": {note}" if note else ""),
            now=now,
        )
        if stored is None:
            messages.append(f"the correction is recorded but not stored: {why}")
            return out
        self._corrected_events(s, tenant_id, q.corpus_id, corrected, stored, actor, q.id)
        messages.append(
            f"the corrected answer is stored as verified experience {stored}, "
            + (
                "supported by the passages"
                if check.grounded
                else f"asserted by {actor.label}: not checked against the passages (no verifier runs)"
                if check.gs is None
                else f"asserted by {actor.label}: no passage supports it (GS {check.gs})"
            )
        )
        return out | {"stored_experience_id": stored, "verified_ids": [stored]}

    # ---------------------------------------------------------------- pieces

    def _lock_corpus(self, s: Session, corpus_id: int) -> None:
        """The write-back's locks: the corpus's evidence (shared) and its scope."""
        graph_repo.lock_evidence_shared(s, corpus_id)
        repo.lock_scope(s, corpus_id)

    @staticmethod
    def _visible(s: Session, experience_id: int, *, active_only: bool = False) -> bool:
        try:
            rec = repo.get_experience(s, experience_id)
        except NotFound:
            return False
        return not active_only or (not rec.stale and rec.trust != "retracted")

    @staticmethod
    def _own_experience(s: Session, q: trust_repo.AnsweredQuery, decision: trust_repo.Decision | None) -> int | None:
        """The experience the question's answer came from or went into: the one its answer was
        reused from, else the one its write-back stored."""
        if q.reused_experience_id is not None:
            return int(q.reused_experience_id)
        if decision is not None and decision.decision == "stored" and decision.experience_id is not None:
            return int(decision.experience_id)
        return None

    def _material(
        self,
        s: Session,
        q: trust_repo.AnsweredQuery,
        decision: trust_repo.Decision | None,
        own: int | None,
    ) -> _Material | None:
        """What storing an experience for this question needs: the candidate kept with a rejected
        decision, else the question's own experience's row; None when there is neither."""
        if decision is not None and decision.candidate:
            cand = decision.candidate
            ids = [int(p["id"]) for p in cand.get("passages", [])]
            texts = passage_repo.passage_texts(s, q.corpus_id, ids)
            passages = tuple(UsedPassage(id=i, text=texts[i][1], title=texts[i][0]) for i in ids if i in texts)
            claims: list[dict[str, Any]] = []
            gs = decision.grounding
            return _Material(
                query=q.query,
                template=mask(q.query, tuple(cand.get("mentions", ()))),
                embedding=np.asarray(cand["embedding"], dtype=np.float32),
                final={int(k): float(v) for k, v in cand.get("final", {}).items()},
                explanation=str(cand.get("explanation") or ""),
                passages=passages,
                hashes={int(p["id"]): str(p["hash"]) for p in cand.get("passages", [])},
                stale=False,
                corpus_version=int(cand.get("corpus_version") or 0),
                gs=None if gs is None else float(gs),
                claims=claims,
            )
        if own is None:
            return None
        try:
            m = trust_repo.experience_material(s, own)
        except NotFound:
            return None
        texts = passage_repo.passage_texts(s, q.corpus_id, m.source_passage_ids)
        return _Material(
            query=q.query,
            template=m.query_template or mask(q.query, None),
            embedding=m.embedding,
            final=m.activation,
            explanation="",
            passages=tuple(
                UsedPassage(id=i, text=texts[i][1], title=texts[i][0]) for i in m.source_passage_ids if i in texts
            ),
            hashes=None,
            stale=m.stale,
            corpus_version=m.corpus_version,
        )

    def _check(self, query: str, answer: str | None, note: str | None, material: _Material) -> CorrectionCheck:
        """The configured verifier's verdict on a corrected answer against the question's passages
        (eq. 15-16: GS over the claims of the person's note and answer; grounded when GS >= tau_gs)."""
        assert answer is not None
        resolved = self.store.verifier
        if resolved.verifier is None or not material.passages:
            return CorrectionCheck(verifier=resolved.name, gs=None, grounded=False)
        gates = self.settings.gates
        claims = extract_claims(
            note or "",
            answer,
            query,
            gates.max_claims,
            yes_no_answer_claim=bool(getattr(resolved.verifier, "judges_answers", False)),
        )
        verdicts = list(resolved.verifier.verify(claims, material.passages))
        gs = grounding_score([v.score for v in verdicts], gates.tau_nli)
        return CorrectionCheck(
            verifier=resolved.name,
            gs=round(float(gs), 4),
            grounded=passes_grounding(gs, gates.tau_gs),
            claims=tuple(
                {"claim": v.claim, "source": v.source, "g": round(v.score, 4), "passage_id": v.passage_id}
                for v in verdicts
            ),
        )

    def _changed(self, s: Session, corpus_id: int, material: _Material) -> list[int]:
        """The cited passages that changed or went since the answer (what write-back checks too)."""
        if material.hashes is None:
            return [p.id for p in material.passages] if material.stale else []
        now = passage_repo.passage_texts(s, corpus_id, list(material.hashes))
        return sorted(i for i, h in material.hashes.items() if i not in now or evidence_hash(*now[i]) != h)

    def _store(
        self,
        s: Session,
        tenant_id: int,
        q: trust_repo.AnsweredQuery,
        material: _Material,
        *,
        answer: str,
        explanation: str,
        gs: float | None,
        grounding: Mapping[str, Any],
        actor: Actor,
        reason: str,
        now: datetime,
    ) -> tuple[int | None, str | None]:
        """Store a verified experience (``origin = person``) for question ``q`` with ``answer``;
        (its id, None), or (None, why not): a cited passage changed, or the tenant's quota."""
        changed = self._changed(s, q.corpus_id, material)
        if changed:
            return None, (
                f"source passage(s) {', '.join(map(str, changed))} changed or were deleted since the answer; "
                "ask the question again"
            )
        held = self.store.held_experiences(s, tenant_id)
        refusal = self.store.quota_refusal(tenant_id, held)
        if refusal is not None:
            return None, refusal
        exp = self.settings.experience
        anchors = top_entities(material.final, exp.keysent_top_entities)
        names = repo.entity_surface_forms(s, q.corpus_id, anchors) if anchors else {}
        summary = compose_summary(
            q.query,
            keysent(explanation, {e: tuple(names.get(e, ())) for e in anchors}, material.final, exp.keysent_count),
            answer,
        )
        new = repo.NewExperience(
            tenant_id=tenant_id,
            corpus_id=q.corpus_id,
            query=q.query,
            query_template=material.template,
            embedding=material.embedding,
            activation=material.final,
            summary=summary,
            answer=answer,
            confidence=float(gs) if gs is not None else 0.0,
            grounding=dict(grounding) | {"gated": False, "feedback_query_log_id": q.id},
            source_passage_ids=[p.id for p in material.passages],
            corpus_version=material.corpus_version,
            created_at=now,
            expires_at=(now + exp.ttl) if exp.ttl is not None else None,
            origin="person",
            origin_detail=actor.label,
            trust="verified",
            trust_actor=actor.label,
            trust_reason=reason,
            gated=False,
            question_key=question_key(q.query),
        )
        exp_id = repo.insert_experience(s, new)
        trust_repo.insert_events(
            s,
            tenant_id,
            [
                trust_repo.EventRow(exp_id, q.corpus_id, "created", actor.label, actor.key_id, q.id, reason),
                trust_repo.EventRow(exp_id, q.corpus_id, "verified", actor.label, actor.key_id, q.id, reason),
            ],
        )
        return exp_id, None

    def _verify_in(
        self,
        s: Session,
        tenant_id: int,
        corpus_id: int,
        experience_id: int,
        actor: Actor,
        reason: str | None,
        now: datetime,
        query_log_id: int | None,
    ) -> bool:
        """Set one experience verified, with its event; False when it was verified already."""
        state = trust_repo.lock_experience(s, experience_id, now=now)
        if state.trust == "verified":
            return False
        trust_repo.set_trust(s, experience_id, "verified", actor=actor.label, reason=reason, now=now)
        event = "unretracted" if state.trust == "retracted" else "verified"
        rows = [trust_repo.EventRow(experience_id, corpus_id, event, actor.label, actor.key_id, query_log_id, reason)]
        if event == "unretracted":
            rows.append(
                trust_repo.EventRow(
                    experience_id, corpus_id, "verified", actor.label, actor.key_id, query_log_id, reason
                )
            )
        trust_repo.insert_events(s, tenant_id, rows)
        return True

    def _retract_in(
        self,
        s: Session,
        tenant_id: int,
        corpus_id: int,
        ids: Sequence[int],
        actor: Actor,
        reason: str | None,
        now: datetime,
        query_log_id: int | None,
    ) -> list[int]:
        """Retract the experiences ``ids`` (those not retracted already), with their events."""
        done = []
        for i in dict.fromkeys(ids):
            state = trust_repo.lock_experience(s, i, now=now)
            if state.trust == "retracted":
                continue
            trust_repo.set_trust(
                s, i, "retracted", actor=actor.label, reason=reason or f"retracted by {actor.label}", now=now
            )
            done.append(i)
        trust_repo.insert_events(
            s,
            tenant_id,
            [
                trust_repo.EventRow(i, corpus_id, "retracted", actor.label, actor.key_id, query_log_id, reason)
                for i in done
            ],
        )
        return done

    @staticmethod
    def _corrected_events(
        s: Session,
        tenant_id: int,
        corpus_id: int,
        retracted: Sequence[int],
        by: int,
        actor: Actor,
        query_log_id: int,
    ) -> None:
        trust_repo.insert_events(
            s,
            tenant_id,
            [
                trust_repo.EventRow(
                    i,
                    corpus_id,
                    "corrected",
                    actor.label,
                    actor.key_id,
                    query_log_id,
                    f"corrected by experience {by}",
                    {"corrected_by": by},
                )
                for i in retracted
            ],
        )


_DECISION_TRIES = 3
"""How often :meth:`TrustService.feedback` reads a write-back decision that changed under it again."""


def _decision_key(decision: trust_repo.Decision | None) -> tuple[int, str, int | None] | None:
    """What identifies a write-back decision (its row, outcome and experience), None for none yet."""
    return None if decision is None else (decision.id, decision.decision, decision.experience_id)


def _writes_back(system: str) -> bool:
    """Whether answers of this system (``query_log.mode``: ``linear``, ``living``, ``living-no-...``)
    are offered for write-back: every living system's are, LinearRAG's are not."""
    return system.strip().lower().startswith("living")


def _nothing_to_store(q: trust_repo.AnsweredQuery, decision: trust_repo.Decision | None) -> str:
    """Why there is no candidate to store for question ``q``."""
    if decision is not None and decision.decision == "dropped":
        return "its write-back candidate was dropped before the gates (a full queue or the quota), so nothing is kept"
    if decision is not None and decision.decision == "error":
        return "its write-back failed, so no candidate is kept"
    if not _writes_back(q.mode):
        return f"answers of system {q.mode!r} are not written back, so no candidate is kept"
    if decision is None:
        return "its write-back was never decided (the process that answered it ended first), so no candidate is kept"
    return "no candidate is kept for it"


def _outcome_of(row: trust_repo.FeedbackRow, *, repeated: bool) -> FeedbackOutcome:
    """The outcome recorded with a verdict."""
    o = row.outcome or {}
    check = o.get("check")
    return FeedbackOutcome(
        feedback_id=row.id,
        query_log_id=row.query_log_id,
        corpus_id=row.corpus_id,
        verdict=row.verdict,
        answer=row.answer,
        actor=row.actor,
        repeated=repeated,
        verified_ids=tuple(o.get("verified_ids") or ()),
        retracted_ids=tuple(o.get("retracted_ids") or ()),
        stored_experience_id=o.get("stored_experience_id"),
        remembered_wrong=bool(o.get("remembered_wrong")),
        check=None
        if not check
        else CorrectionCheck(
            verifier=check["verifier"], gs=check["gs"], grounded=check["grounded"], claims=tuple(check["claims"])
        ),
        messages=tuple(o.get("messages") or ())
        if not repeated
        else ("the same verdict was given before; nothing changed",),
        created_at=row.created_at,
    )
