"""The main job on embedded defaults: a small corpus written for this project, a stream of related
questions answered by LinearRAG and LivingRAG side by side, and a short report.

The corpus (``corpus.json``) mixes multi-hop film facts and a support knowledge base of a
fictional messaging app; the questions (``questions.json``) recur the way real traffic does: the
same templates with other entities, and follow-ups that reuse earlier evidence. Every name in
them is invented, so the model cannot answer from memory.

Then the loop that makes memory trustworthy (with ``feedback``, the default): a simulated user who
knows the demo's gold answers reviews LivingRAG's answers (all but the last question's, once there
are six or more), marks each right or wrong and gives the gold answer for each wrong one; a few of
the questions are asked again: a verified answer or a correction is served from memory without an
LLM call, an unreviewed question goes to the LLM (memory nobody verified is not served), and a
wrong answer is never served. The history of one corrected experience closes the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from livingrag.errors import LLMError
from livingrag.evaluation.metrics import contain_match
from livingrag.io.records import read_records

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.db.engine import Database
    from livingrag.db.repositories.trust import HistoryEvent
    from livingrag.evaluation.feedback import GivenFeedback
    from livingrag.pipeline.answer_pipeline import Answer, LivingRAG

DEMO_TENANT = "demo"
DEMO_CORPUS = "demo-kb"
DEMO_ACTOR = "simulated user (the demo's gold answers)"
"""Who gives the demo's verdicts, as the experiences' history names it."""
ASK_AGAIN_EACH = 2
"""Questions asked again per kind of verdict (marked right; corrected), besides one unreviewed question."""


def demo_questions() -> list[dict[str, Any]]:
    """The demo's question stream (``questions.json``), read as every dataset file is."""
    return read_records(Path(str(resources.files("livingrag.demo").joinpath("questions.json"))))


def demo_corpus_path() -> str:
    return str(resources.files("livingrag.demo").joinpath("corpus.json"))


@dataclass
class SystemTally:
    correct: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: float = 0.0
    overhead_ms: list[float] = field(default_factory=list)


@dataclass
class DemoRow:
    question: str
    gold: str
    linear: Answer | None
    living: Answer | None
    linear_ok: bool
    living_ok: bool
    decision: str
    novelty: float | None
    grounding: float | None
    errors: dict[str, str] = field(default_factory=dict)
    """system -> why its answer failed (the LLM crashed, timed out or was unreachable); counted wrong."""

    def text(self, system: str) -> str | None:
        a = self.linear if system == "linear" else self.living
        return a.answer if a is not None else None


@dataclass
class ReviewStep:
    """The simulated user's verdict on LivingRAG's answer to question ``index`` (0-based)."""

    index: int
    question: str
    answer: str
    gold: str
    given: GivenFeedback


@dataclass
class AskedAgain:
    """A question asked again after the review: served from memory (``answer.reused_from``) or not."""

    index: int
    question: str
    gold: str
    review: str
    """What the user had said of its first answer: right, corrected, wrong or not reviewed."""
    answer: Answer | None
    correct: bool
    error: str | None = None

    @property
    def from_memory(self) -> bool:
        return self.answer is not None and self.answer.reused_from is not None


@dataclass
class Timeline:
    """The history of one experience (oldest event first) and what it is in the demo."""

    experience_id: int
    what: str
    events: list[HistoryEvent]


@dataclass
class DemoReport:
    rows: list[DemoRow]
    tallies: dict[str, SystemTally]
    decisions: dict[str, int]
    stored: int
    fused_queries: int
    scaffold_queries: int
    index_seconds: float
    seconds: float
    model: str
    verifier: str
    finding_queries: int = 0  # questions whose prompt stated earlier experiences as findings
    reviews: list[ReviewStep] = field(default_factory=list)
    again: list[AskedAgain] = field(default_factory=list)
    timelines: list[Timeline] = field(default_factory=list)

    @property
    def failed_answers(self) -> int:
        """Answers of the stream that failed with an LLM error (the stream went on without them)."""
        return sum(len(r.errors) for r in self.rows)

    @property
    def failed_again(self) -> int:
        """Questions asked again whose answer failed with an LLM error."""
        return sum(1 for a in self.again if a.error is not None)

    @property
    def llm_calls_saved(self) -> int:
        """Questions asked again that were answered from memory: each one LLM call LinearRAG makes."""
        return sum(1 for a in self.again if a.from_memory)

    @property
    def wrong_from_memory(self) -> int:
        """Answers served from memory that are wrong against the demo's gold answers."""
        return sum(1 for a in self.again if a.from_memory and not a.correct)

    def as_dict(self) -> dict[str, Any]:
        return {
            "questions": len(self.rows),
            "model": self.model,
            "verifier": self.verifier,
            "seconds": round(self.seconds, 1),
            "index_seconds": round(self.index_seconds, 1),
            "systems": {
                name: {
                    "contain_acc": t.correct / max(1, len(self.rows)),
                    "prompt_tokens": t.prompt_tokens,
                    "completion_tokens": t.completion_tokens,
                    "llm_seconds": round(t.llm_ms / 1000, 1),
                }
                for name, t in self.tallies.items()
            },
            "writeback": self.decisions,
            "experiences_stored": self.stored,
            "queries_with_fusion": self.fused_queries,
            "queries_with_scaffold": self.scaffold_queries,
            "queries_with_findings": self.finding_queries,
            "failed_answers": self.failed_answers,
            "rows": [
                {
                    "question": r.question,
                    "gold": r.gold,
                    "linear": r.text("linear"),
                    "living": r.text("living"),
                    "linear_correct": r.linear_ok,
                    "living_correct": r.living_ok,
                    "fused_experiences": list(r.living.fused_ids) if r.living else [],
                    "scaffold_experience": r.living.scaffold_id if r.living else None,
                    "writeback": r.decision,
                    "novelty": r.novelty,
                    "grounding": r.grounding,
                    "completion_tokens": [a.completion_tokens if a else 0 for a in (r.linear, r.living)],
                    "errors": r.errors,
                }
                for r in self.rows
            ],
            "feedback": {
                "simulated": f"from the demo's gold answers ({DEMO_ACTOR})",
                "reviews": [
                    {
                        "question": v.question,
                        "answer": v.answer,
                        "gold": v.gold,
                        "verdict": v.given.verdict,
                        "correction": v.given.correction_text,
                        "correction_experience": v.given.correction_experience_id,
                        "verified_experiences": list(v.given.verified_ids),
                        "retracted_experiences": list(v.given.retracted_ids),
                        "messages": list(v.given.messages),
                        "error": v.given.error,
                    }
                    for v in self.reviews
                ],
                "asked_again": [
                    {
                        "question": a.question,
                        "gold": a.gold,
                        "review": a.review,
                        "answer": a.answer.answer if a.answer is not None else None,
                        "correct": a.correct,
                        "from_memory": a.from_memory,
                        "experience": a.answer.reused_from if a.answer is not None else None,
                        "completion_tokens": a.answer.completion_tokens if a.answer is not None else 0,
                        "error": a.error,
                    }
                    for a in self.again
                ],
                "llm_calls_saved": self.llm_calls_saved,
                "wrong_answers_from_memory": self.wrong_from_memory,
                "timelines": [
                    {
                        "experience": t.experience_id,
                        "what": t.what,
                        "events": [
                            {
                                "at": e.created_at.isoformat(),
                                "event": e.event,
                                "actor": e.actor,
                                "reason": e.reason,
                                "query": e.query_log_id,
                            }
                            for e in t.events
                        ],
                    }
                    for t in self.timelines
                ],
            },
        }


def run_demo(
    settings: Settings,
    *,
    limit: int | None = None,
    feedback: bool = True,
    on_row: Callable[[int, DemoRow], None] | None = None,
    on_status: Callable[[str], None] | None = None,
) -> DemoReport:
    """Index the demo corpus (once), empty its memory, run the question stream, then (``feedback``)
    the simulated user's review and the questions asked again (module docstring)."""
    from livingrag.corpus import service
    from livingrag.db.setup import open_database
    from livingrag.errors import NotFound
    from livingrag.evaluation.stream import empty_memory
    from livingrag.pipeline.answer_pipeline import LivingRAG

    status = on_status or (lambda _msg: None)
    t0 = time.perf_counter()
    db = open_database(settings.db)  # the demo's start migrates the embedded database
    try:
        tenant_id, _ = service.ensure_tenant(db, DEMO_TENANT)
        try:
            corpus = service.get_corpus(db, tenant_id, DEMO_CORPUS)
        except NotFound:
            corpus = service.create_corpus(db, tenant_id, DEMO_CORPUS, settings)
        status("indexing the demo corpus (skipped when unchanged)")
        t_index = time.perf_counter()
        service.indexer(db, tenant_id, corpus, settings).index_path(demo_corpus_path())
        index_seconds = time.perf_counter() - t_index
        empty_memory(db, tenant_id, corpus.id)  # its experiences and the answers marked wrong in earlier runs
        questions = demo_questions()[: limit or None]
        status("loading the models")
        rag = LivingRAG(settings, db=db)
        try:
            report = _stream(rag, tenant_id, corpus.id, questions, on_row)
            if feedback:
                status("simulated feedback from the demo's gold answers, then questions asked again")
                _feedback_loop(rag, tenant_id, corpus.id, report, questions)
        finally:
            rag.close()  # also writes the pending use counts: the uses of answers served from memory
        if feedback:
            report.timelines = _timelines(db, tenant_id, report)
        report.index_seconds = index_seconds
        report.seconds = time.perf_counter() - t0
        return report
    finally:
        db.close()


def _stream(
    rag: LivingRAG,
    tenant_id: int,
    corpus_id: int,
    questions: list[dict[str, Any]],
    on_row: Callable[[int, DemoRow], None] | None,
) -> DemoReport:
    tallies = {"linear": SystemTally(), "living": SystemTally()}
    decisions: dict[str, int] = {}
    rows: list[DemoRow] = []
    fused_queries = scaffold_queries = finding_queries = 0
    for i, item in enumerate(questions):
        golds = [item["answer"], *item.get("aliases", [])]
        answers: dict[str, Answer | None] = {}
        errors: dict[str, str] = {}
        for system in ("linear", "living"):
            try:
                a = rag.answer(item["question"], tenant=tenant_id, corpus=corpus_id, mode=system)
            except LLMError as exc:  # reported in the row; the stream goes on (a crashed model restarts)
                answers[system], errors[system] = None, str(exc)
                continue
            answers[system] = a
            t = tallies[system]
            t.prompt_tokens += a.prompt_tokens
            t.completion_tokens += a.completion_tokens
            t.llm_ms += a.latency_ms.get("llm", 0.0)
            t.overhead_ms.append(a.latency_ms.get("overhead", 0.0))
        living = answers["living"]
        decision, ns, gs = "none", None, None
        if living is None:
            decision = "no answer"
        elif living.writeback is not None:
            try:
                wb = living.writeback.result(timeout=600)
                decision, ns, gs = wb.decision, wb.novelty, wb.grounding
            except Exception as exc:  # a failed write-back is reported, never fatal
                decision = f"error: {exc}"
        decisions[decision] = decisions.get(decision, 0) + 1
        fused_queries += bool(living is not None and living.fused_ids)
        scaffold_queries += living is not None and living.scaffold_id is not None
        finding_queries += bool(living is not None and living.findings)
        ok = {s: a is not None and contain_match(a.answer, golds) for s, a in answers.items()}
        for s in ok:
            tallies[s].correct += ok[s]
        row = DemoRow(
            item["question"],
            item["answer"],
            answers["linear"],
            living,
            ok["linear"],
            ok["living"],
            decision,
            ns,
            gs,
            errors,
        )
        rows.append(row)
        if on_row is not None:
            on_row(i, row)
    return DemoReport(
        rows=rows,
        tallies=tallies,
        decisions=decisions,
        stored=decisions.get("stored", 0),
        fused_queries=fused_queries,
        scaffold_queries=scaffold_queries,
        finding_queries=finding_queries,
        index_seconds=0.0,
        seconds=0.0,
        model=getattr(rag.llm, "name", "?"),
        verifier=rag.store.verifier.name,
    )


def reviewed_count(questions: int) -> int:
    """How many of the first questions the simulated user reviews: all but the last once there are
    six or more (the last is asked again unreviewed), else all."""
    return questions - 1 if questions >= 6 else questions


def _feedback_loop(
    rag: LivingRAG, tenant_id: int, corpus_id: int, report: DemoReport, questions: list[dict[str, Any]]
) -> None:
    """The review, the questions asked again and the timelines (module docstring), into ``report``."""
    from livingrag.evaluation.feedback import GoldReviewer
    from livingrag.experience.feedback import TrustService

    rag.flush()  # every write-back decided (and every dropped one logged): a verdict needs to know what was kept
    reviewer = GoldReviewer(TrustService(rag.db, rag.settings, rag.store), rate=1.0, seed=0, actor=DEMO_ACTOR)
    n_review = reviewed_count(len(report.rows))
    review_of: dict[int, str] = {}
    for i, row in enumerate(report.rows[:n_review]):
        a = row.living
        if a is None or a.query_log_id is None:
            continue
        golds = _golds(questions[i])
        given = reviewer.review(tenant_id, a.query_log_id, a.answer, golds)
        report.reviews.append(ReviewStep(i, row.question, a.answer, row.gold, given))
        if given.verdict is not None:
            review_of[i] = "corrected" if given.correction else given.verdict

    right = [i for i, v in review_of.items() if v == "right"][:ASK_AGAIN_EACH]
    corrected = [i for i, v in review_of.items() if v == "corrected"][:ASK_AGAIN_EACH]
    unreviewed = list(range(n_review, len(report.rows)))[-1:]
    for i in sorted({*right, *corrected, *unreviewed}):
        item = questions[i]
        review = review_of.get(i, "not reviewed")
        try:
            a = rag.answer(item["question"], tenant=tenant_id, corpus=corpus_id, mode="living")
        except LLMError as exc:
            report.again.append(AskedAgain(i, item["question"], item["answer"], review, None, False, str(exc)))
            continue
        report.again.append(
            AskedAgain(i, item["question"], item["answer"], review, a, contain_match(a.answer, _golds(item)))
        )


def _golds(item: dict[str, Any]) -> list[str]:
    return [item["answer"], *item.get("aliases", [])]


def _timelines(db: Database, tenant_id: int, report: DemoReport) -> list[Timeline]:
    """The history of the first corrected question's experiences: the wrong answer's (when the gate had
    stored it) and the correction's (read once the pipeline has written its use counts and events)."""
    from livingrag.db.repositories import trust as trust_repo
    from livingrag.errors import NotFound

    step = next((v for v in report.reviews if v.given.correction and v.given.correction_experience_id), None)
    if step is None:
        return []
    asked = f"to {step.question!r}"
    wanted = [
        (e, f"the wrong answer {step.answer!r} {asked}, stored by the gate") for e in step.given.retracted_ids[:1]
    ]
    wanted.append(
        (int(step.given.correction_experience_id or 0), f"the correction {step.given.correction_text!r} {asked}")
    )
    out = []
    for exp_id, what in wanted:
        try:
            with db.tenant_session(tenant_id) as s:
                events = trust_repo.history(s, exp_id)
        except NotFound:
            continue
        out.append(Timeline(exp_id, what, events))
    return out
