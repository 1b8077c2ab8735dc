"""The main job on embedded defaults: a small corpus written for this project, a stream of related
questions answered by LinearRAG and LivingRAG side by side, and a short report.

The corpus (``corpus.json``) mixes multi-hop film facts and a support knowledge base of a
fictional messaging app; the questions (``questions.json``) recur the way real traffic does: the
same templates with other entities, and follow-ups that reuse earlier evidence. Every name in
them is invented, so the model cannot answer from memory.
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
    from livingrag.pipeline.core import Answer, LivingRAG

DEMO_TENANT = "demo"
DEMO_CORPUS = "demo-kb"


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

    @property
    def failed_answers(self) -> int:
        """Answers that failed with an LLM error (the stream went on without them)."""
        return sum(len(r.errors) for r in self.rows)

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
        }


def run_demo(
    settings: Settings,
    *,
    limit: int | None = None,
    on_row: Callable[[int, DemoRow], None] | None = None,
    on_status: Callable[[str], None] | None = None,
) -> DemoReport:
    """Index the demo corpus (once), empty its experience store, and run the question stream."""
    from livingrag.corpus import service
    from livingrag.db.repositories import experiences as experience_repo
    from livingrag.db.setup import open_database
    from livingrag.errors import NotFound
    from livingrag.pipeline.core import LivingRAG

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
        with db.tenant_session(tenant_id) as s:
            experience_repo.delete_corpus_experiences(s, corpus.id)
        questions = demo_questions()[: limit or None]
        status("loading the models")
        rag = LivingRAG(settings, db=db)
        try:
            report = _stream(rag, tenant_id, corpus.id, questions, on_row)
        finally:
            rag.close()
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
