"""Simulated feedback in the stream evaluation (``livingrag eval stream --feedback-rate R``) and what
it did to the answers (beyond the paper).

LivingRAG answers a repeated question from memory only from an experience a person verified or
corrected (``experience.reuse_answers_from=verified``); with no feedback it never does. The stream
evaluation plays that person from the gold answers, as one who knows the answer would:

    chosen(q)  = u(feedback seed, id of q) < R     u: uniform on [0, 1), random.Random("<seed>:<id>")
    verdict(q) = right                             when the answer is Contain-correct (metrics.py)
                 wrong, corrected to gold[0]       otherwise (the first gold answer)

Each question is drawn on its own (the share is R in expectation; every question when R = 1, none
when R = 0), by its id, so that a resumed or extended run and every living system of a run draw the
same questions; a repeat (``<id>#repeat``) is drawn apart from its first asking. Answers served from
memory get feedback too (a wrong one is then retracted). LinearRAG keeps no memory and gets none.

Per (system, order) run, over its records (:func:`feedback_stats`):

    llm_calls          = answers that reached the LLM (neither served from memory nor failed)
    served_from_memory = answers given again from an experience without an LLM call
    served_wrong       = those of them that are not Contain-correct
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from livingrag.errors import Conflict, InvalidInput, ModelUnavailable, NotFound
from livingrag.evaluation.metrics import contain_match
from livingrag.evaluation.records import QueryRecord

if TYPE_CHECKING:
    from livingrag.experience.feedback import TrustService

__all__ = [
    "FEEDBACK_ACTOR",
    "FeedbackStats",
    "GivenFeedback",
    "GoldReviewer",
    "chosen_for_feedback",
    "feedback_stats",
    "parse_feedback_rate",
    "simulated_verdict",
]

FEEDBACK_ACTOR = "simulated feedback (gold answers)"
"""The actor the experiences' history names for the evaluation's verdicts."""


def parse_feedback_rate(value: object, option: str = "--feedback-rate") -> float:
    """``R`` as a float from 0 to 1; :class:`InvalidInput` naming ``option`` for anything else."""
    try:
        rate = float(str(value).strip())  # "0.3", 0.3 and 1 alike; True, None and "abc" are not numbers
    except ValueError:
        rate = math.nan
    if not (0.0 <= rate <= 1.0):  # NaN fails too
        raise InvalidInput(
            f"{option} must be a number from 0 to 1 (the share of answered questions that get simulated "
            f"feedback; 0 none, 1 every one), got {value!r}"
        )
    return rate


def chosen_for_feedback(question_id: str, rate: float, seed: int) -> bool:
    """Whether question ``question_id`` gets feedback at rate ``rate`` (module docstring)."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    return random.Random(f"{seed}:{question_id}").random() < rate


def simulated_verdict(prediction: str, gold_answers: Sequence[str]) -> tuple[str, str | None]:
    """``("right", None)`` for a Contain-correct ``prediction``, else ``("wrong", gold_answers[0])``."""
    if contain_match(prediction, gold_answers):
        return "right", None
    return "wrong", gold_answers[0] if gold_answers else None


@dataclass(frozen=True)
class GivenFeedback:
    """What the simulated person said about one answer and what it did."""

    verdict: str | None
    """right or wrong; None when the answer was drawn but no verdict could be given (``error``)."""
    correction: bool = False
    """The wrong verdict came with the first gold answer as the corrected answer."""
    correction_experience_id: int | None = None
    """The experience that holds the correction (stored now, or an earlier one verified)."""
    verified_ids: tuple[int, ...] = ()
    retracted_ids: tuple[int, ...] = ()
    error: str | None = None
    messages: tuple[str, ...] = ()
    """What the verdict did, in words (:attr:`FeedbackOutcome.messages`)."""
    correction_text: str | None = None
    """The corrected answer given (the first gold answer), when there was one."""


class GoldReviewer:
    """Gives the verdicts of the module docstring through a :class:`TrustService`."""

    def __init__(self, trust: TrustService, *, rate: float, seed: int, actor: str = FEEDBACK_ACTOR) -> None:
        from livingrag.experience.trust import Actor

        self.trust = trust
        self.rate = parse_feedback_rate(rate, "feedback rate")
        self.seed = int(seed)
        self.actor = Actor(actor)

    def chosen(self, question_id: str) -> bool:
        return chosen_for_feedback(question_id, self.rate, self.seed)

    def review(self, tenant_id: int, query_log_id: int, prediction: str, gold_answers: Sequence[str]) -> GivenFeedback:
        """The verdict on one answer, once its write-back has been decided (else :class:`Conflict`
        becomes the outcome's ``error``). Nothing here stops a stream: a refusal is the outcome."""
        if not gold_answers:
            return GivenFeedback(None, error="the question has no gold answer")
        if not prediction.strip():
            return GivenFeedback(None, error="the answer is empty")
        verdict, correction = simulated_verdict(prediction, gold_answers)
        try:
            try:
                out = self.trust.feedback(tenant_id, query_log_id, verdict, actor=self.actor, answer=correction)
            except InvalidInput:
                if correction is None:
                    raise
                # the gold answer reads as the given one once case and punctuation go (Contain
                # normalises otherwise): the verdict stands without a correction
                correction = None
                out = self.trust.feedback(tenant_id, query_log_id, verdict, actor=self.actor)
        except (Conflict, InvalidInput, NotFound, ModelUnavailable) as exc:
            return GivenFeedback(None, error=f"{type(exc).__name__}: {exc}"[:500])
        corrected_id = None
        if correction is not None:
            corrected_id = out.stored_experience_id or (out.verified_ids[0] if out.verified_ids else None)
        return GivenFeedback(
            verdict=verdict,
            correction=correction is not None,
            correction_experience_id=corrected_id,
            verified_ids=tuple(out.verified_ids),
            retracted_ids=tuple(out.retracted_ids),
            messages=tuple(out.messages),
            correction_text=correction,
        )


@dataclass(frozen=True)
class FeedbackStats:
    """One (system, order) run's answers, feedback and memory (module docstring). Means are per question."""

    system: str
    order: int
    questions: int
    feedback: int
    right: int
    wrong: int
    corrections: int
    llm_calls: int
    served_from_memory: int
    served_wrong: int
    contain_acc: float
    prompt_mean: float
    completion_mean: float


def feedback_stats(run: Sequence[QueryRecord]) -> FeedbackStats:
    """The figures of the module docstring for the records of one (system, order) run."""
    if not run:
        raise ValueError("no records to count")
    keys = {(r.system, r.order) for r in run}
    if len(keys) != 1:
        raise ValueError(f"records of several runs given: {sorted(keys)}")
    system, order = next(iter(keys))
    n = len(run)
    served = [r for r in run if r.reused_experience_id is not None]
    return FeedbackStats(
        system=system,
        order=order,
        questions=n,
        feedback=sum(1 for r in run if r.feedback is not None),
        right=sum(1 for r in run if r.feedback == "right"),
        wrong=sum(1 for r in run if r.feedback == "wrong"),
        corrections=sum(1 for r in run if r.feedback_correction),
        llm_calls=sum(1 for r in run if r.reused_experience_id is None and r.error is None),
        served_from_memory=len(served),
        served_wrong=sum(1 for r in served if not r.contain_correct),
        contain_acc=sum(r.contain_correct for r in run) / n,
        prompt_mean=sum(r.prompt_tokens for r in run) / n,
        completion_mean=sum(r.completion_tokens for r in run) / n,
    )


@dataclass(frozen=True)
class LearnedGateStats:
    """What the learned gate did over one (system, order) run (``gates.learn``; issue 47), from the
    records' ``extra["gate"]`` (the write-back's deciding gate, its P(right) and the stored trust)
    and ``extra["reused_trust"]``:

    * ``online_auc``: ROC AUC of the logged P(right) against Contain-correctness over the write-backs
      a calibrator watched or decided. Every such probability came from a model fitted on labels of
      earlier questions only, so this is a held-out figure in time order; ``online_auc_late``: the
      same over the run's second half (positions >= n / 2).
    * stored precision: the Contain-correct share of the experiences stored by the fixed gate
      (``stored_fixed``) and by the learned gate (``stored_learned``), and of all stored in the
      second half (``stored_late``).
    * ``served_unverified``: answers served from memory from an ``auto_verified`` experience (no
      person's verdict behind it) and ``served_unverified_wrong`` how many were not Contain-correct.
    """

    system: str
    order: int
    questions: int
    watched: int
    decided_learned: int
    first_learned_position: int | None
    online_auc: float | None
    online_auc_late: float | None
    stored_fixed: int
    stored_fixed_precision: float | None
    stored_learned: int
    stored_learned_precision: float | None
    stored_auto_verified: int
    stored_late: int
    stored_late_precision: float | None
    served_unverified: int
    served_unverified_wrong: int


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _auc(pairs: Sequence[tuple[float, bool]]) -> float | None:
    from livingrag.experience.calibration import roc_auc

    value = roc_auc([p for p, y in pairs if y], [p for p, y in pairs if not y])
    return None if math.isnan(value) else value


def learned_gate_stats(run: Sequence[QueryRecord]) -> LearnedGateStats:
    """:class:`LearnedGateStats` of one (system, order) run's records."""
    if not run:
        raise ValueError("no records to count")
    system, order = run[0].system, run[0].order
    half = len(run) / 2
    gated = [(r, (r.extra or {}).get("gate") or {}) for r in run]
    watched = [(r, g) for r, g in gated if g.get("probability") is not None]
    stored = [(r, g) for r, g in gated if r.writeback == "stored" and g]
    learned = [r for r, g in gated if g.get("gate") == "learned"]
    served = [
        r for r in run if r.reused_experience_id is not None and (r.extra or {}).get("reused_trust") == "auto_verified"
    ]
    return LearnedGateStats(
        system=system,
        order=order,
        questions=len(run),
        watched=len(watched),
        decided_learned=len(learned),
        first_learned_position=min((r.position for r in learned), default=None),
        online_auc=_auc([(float(g["probability"]), r.contain_correct) for r, g in watched]),
        online_auc_late=_auc([(float(g["probability"]), r.contain_correct) for r, g in watched if r.position >= half]),
        stored_fixed=sum(1 for _, g in stored if g.get("gate") != "learned"),
        stored_fixed_precision=_share([r.contain_correct for r, g in stored if g.get("gate") != "learned"]),
        stored_learned=sum(1 for _, g in stored if g.get("gate") == "learned"),
        stored_learned_precision=_share([r.contain_correct for r, g in stored if g.get("gate") == "learned"]),
        stored_auto_verified=sum(1 for _, g in stored if g.get("trust") == "auto_verified"),
        stored_late=sum(1 for r, _ in stored if r.position >= half),
        stored_late_precision=_share([r.contain_correct for r, _ in stored if r.position >= half]),
        served_unverified=len(served),
        served_unverified_wrong=sum(1 for r in served if not r.contain_correct),
    )
