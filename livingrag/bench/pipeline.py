"""The pipeline benchmark: LivingRAG's own overhead outside the LLM call, on a multi-hop QA corpus.

The dataset's corpus is indexed into tenant ``bench`` if needed (as ``livingrag bench retrieval``
does); the corpus's experiences and logs are cleared (unless ``keep_store``); then the questions
run one after another through :class:`~livingrag.pipeline.answer_pipeline.LivingRAG` in ``living`` mode,
each write-back awaited before the next question, so that matching sees the store grow as it
would under a stream of traffic.

The LLM is by default a deterministic OpenAI-compatible server on loopback, started in-process
(:mod:`livingrag.testing.openai_server`, answering from the first passage in a few milliseconds)
and reached through the real ``openai`` provider, so that the numbers are the pipeline's, not a
model's; ``llm="configured"`` uses the configured provider instead. Overhead is ``total - llm``
per answer (encode, match, retrieve, prompt, log and the glue between them); the write-back runs
after the answer and is reported separately.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from livingrag.bench.retrieval import BenchDataset, bench_settings, ensure_bench_corpus, peak_rss_mb
from livingrag.bench.stats import percentile

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.corpus.progress import Progress
    from livingrag.db.engine import Database
    from livingrag.pipeline.answer_pipeline import Answer
    from livingrag.types import CorpusInfo

STAGES = ("overhead", "total", "llm", "encode", "match", "retrieve", "prompt", "log")
ENCODE_STAGES = ("embed", "ner", "mention_embed", "link")
"""The parts of ``encode`` (question embedding in the retriever's worker thread, spaCy NER when the
gazetteer found nothing, mention embedding for mentions without an exact name, entity linking)."""
MATCH_STAGES = ("preselect", "rescore", "scaffold")
"""The parts of ``match`` (SQL preselection, numpy rescoring and fusion, scaffold selection)."""
TARGET_OVERHEAD_P50_MS = 100.0


def run_pipeline_bench(
    db: Database,
    settings: Settings,
    dataset: BenchDataset,
    *,
    tenant: str = "bench",
    limit: int | None = 200,
    llm: Literal["loopback", "configured"] = "loopback",
    keep_store: bool = False,
    warmup: int = 3,
    writeback_timeout_s: float = 300.0,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return its report (see the module docstring)."""
    from livingrag.corpus.progress import NullProgress
    from livingrag.db.repositories import experiences as experience_repo
    from livingrag.db.repositories import querylog as query_log_repo
    from livingrag.pipeline.answer_pipeline import LivingRAG

    progress = progress or NullProgress()
    say = log or (lambda _msg: None)
    tenant_id, corpus, _, _ = ensure_bench_corpus(db, settings, dataset, tenant=tenant, progress=progress)
    settings = bench_settings(settings, dataset)
    # The benchmark times the whole answer path; a repeated question answered from the store (answer
    # reuse) would skip the prompt and the LLM call, so reuse is off here (the report shows it).
    settings.experience.answer_reuse = False
    questions = dataset.questions[:limit] if limit else dataset.questions

    server = None
    if llm == "loopback":
        from livingrag.testing.openai_server import OpenAICompatServer, qa_reply

        server = OpenAICompatServer(responder=qa_reply, record=False).__enter__()
        settings.llm.provider = "openai"
        settings.llm.base_url = server.base_url
        settings.llm.model = "loopback-qa"
        settings.llm.max_retries = 0
    elif llm != "configured":
        raise ValueError(f"llm must be 'loopback' or 'configured', got {llm!r}")

    if not keep_store:
        with db.tenant_session(tenant_id) as s:
            experience_repo.delete_corpus_writeback_log(s, corpus.id)
            query_log_repo.delete_corpus_query_log(s, corpus.id)
            experience_repo.delete_corpus_experiences(s, corpus.id)

    tally = _Tally()
    rag = LivingRAG(settings, db=db)
    try:
        say("loading models and the verifier (not timed)...")
        t = time.perf_counter()
        for q in questions[:warmup]:  # first calls pay for lazy loading; linear mode writes nothing
            rag.answer(q.question, tenant=tenant_id, corpus=corpus.id, mode="linear")
        verifier = rag.store.verifier
        warmup_s = time.perf_counter() - t
        task = progress.add("questions ", len(questions))
        wall = time.perf_counter()
        with progress:
            for q in questions:
                c0 = time.process_time()
                a = rag.answer(q.question, tenant=tenant_id, corpus=corpus.id, mode="living")
                tally.add(a, (time.process_time() - c0) * 1000, writeback_timeout_s)
                progress.advance(task, 1)
        wall_s = time.perf_counter() - wall
    finally:
        rag.close(timeout=writeback_timeout_s)
        if server is not None:
            server.__exit__(None, None, None)

    with db.tenant_session(tenant_id) as s:
        stored = experience_repo.count_corpus_experiences(s, corpus.id)
    n = len(questions)
    out: dict[str, Any] = {
        "dataset": dataset.name,
        "corpus": corpus.name,
        "questions": n,
        "mode": "living",
        "llm": llm,
    }
    out |= tally.figures(n)
    out["experiences_stored"] = int(stored or 0)
    out["wall_seconds"] = round(wall_s, 2)
    out["warmup_seconds"] = round(warmup_s, 2)
    out["peak_rss_mb"] = peak_rss_mb()
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    out["cpu_count"] = os.cpu_count()
    out["settings"] = _settings_report(settings, corpus, verifier.name, llm)
    return out


@dataclass
class _Tally:
    """What the timed answers measured, answer by answer."""

    lat: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in STAGES})
    match_lat: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in MATCH_STAGES})
    encode_lat: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in ENCODE_STAGES})
    writeback_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    decisions: Counter[str] = field(default_factory=Counter)
    fused: int = 0
    scaffolded: int = 0
    candidates: int = 0

    def add(self, a: Answer, cpu_ms: float, writeback_timeout_s: float) -> None:
        """One answer's stage times and experience use; then its write-back awaited (and timed)."""
        self.cpu_ms.append(cpu_ms)
        for k in STAGES:
            self.lat[k].append(float(a.latency_ms.get(k, 0.0)))
        for k in ENCODE_STAGES:
            self.encode_lat[k].append(float(a.retrieval.encoding.timings.get(k, 0.0)))
        for k in MATCH_STAGES:
            self.match_lat[k].append(float(a.match.timings.get(f"{k}_ms", 0.0)) if a.match else 0.0)
        self.fused += bool(a.fused)
        self.scaffolded += a.scaffold is not None
        self.candidates += bool(a.match and a.match.candidates)
        t = time.perf_counter()
        if a.writeback is not None:
            try:
                self.decisions[a.writeback.result(timeout=writeback_timeout_s).decision] += 1
            except Exception as exc:  # a dropped or failed write-back is counted, not fatal
                self.decisions[f"failed: {type(exc).__name__}"] += 1
        self.writeback_ms.append((time.perf_counter() - t) * 1000)

    def figures(self, n: int) -> dict[str, Any]:
        """The percentiles of every stage, the CPU per answer, the write-back wait, the target and the
        experience use over ``n`` answers."""
        out: dict[str, Any] = {}
        for k in STAGES:
            out[f"{k}_ms_p50"] = percentile(self.lat[k], 50)
            out[f"{k}_ms_p95"] = percentile(self.lat[k], 95)
        for k in ENCODE_STAGES:
            out[f"encode_{k}_ms_p50"] = percentile(self.encode_lat[k], 50)
            out[f"encode_{k}_ms_p95"] = percentile(self.encode_lat[k], 95)
        for k in MATCH_STAGES:
            out[f"match_{k}_ms_p50"] = percentile(self.match_lat[k], 50)
            out[f"match_{k}_ms_p95"] = percentile(self.match_lat[k], 95)
        # CPU time of this process (all threads) per answer: what the wall time would be without other
        # processes competing for the cores; it includes the loopback server's and client's share of
        # the LLM call (a few ms) and excludes PostgreSQL's own CPU
        out["cpu_ms_p50"] = percentile(self.cpu_ms, 50)
        out["cpu_ms_p95"] = percentile(self.cpu_ms, 95)
        out["overhead_ms_mean"] = round(sum(self.lat["overhead"]) / n, 3) if n else 0.0
        out["writeback_wait_ms_p50"] = percentile(self.writeback_ms, 50)
        out["writeback_wait_ms_p95"] = percentile(self.writeback_ms, 95)
        out["target_overhead_p50_ms"] = TARGET_OVERHEAD_P50_MS
        out["target_met"] = bool(n) and out["overhead_ms_p50"] <= TARGET_OVERHEAD_P50_MS
        out["questions_with_match_candidates"] = self.candidates
        out["questions_fused"] = self.fused
        out["questions_scaffolded"] = self.scaffolded
        out["writeback_decisions"] = dict(sorted(self.decisions.items()))
        return out


def _settings_report(settings: Settings, corpus: CorpusInfo, verifier: str, llm: str) -> dict[str, Any]:
    """The settings a run answered with (``verifier``: the resolved grounding verifier's name)."""
    r = settings.retrieval
    return {
        "retrieval_preset": r.preset,
        "retrieval_top_k": r.top_k,
        "question_ner": r.question_ner,
        "embedding_model": corpus.embedding_model,
        "ner_model": corpus.ner_model,
        "experience": settings.experience.model_dump(mode="json"),
        "gates": settings.gates.model_dump(mode="json") | {"verifier_resolved": verifier},
        "llm": {
            "provider": settings.llm.provider,
            "model": settings.llm.model,
            "base_url": settings.llm.base_url if llm == "configured" else "loopback (in-process)",
            "answer_style": settings.llm.answer_style,
            "max_tokens": settings.llm.max_tokens,
        },
        "writeback_threads": 1,
        "db": "external" if settings.db.url is not None else f"embedded ({settings.db.data_dir})",
    }


def format_report(out: dict[str, Any]) -> str:
    """A plain-text table of the report."""
    lines = [
        f"pipeline benchmark: {out['dataset']} ({out['questions']} questions, mode {out['mode']}, LLM {out['llm']})",
        f"{'stage':<14} {'p50 ms':>9} {'p95 ms':>9}",
    ]
    for k in STAGES:
        lines.append(f"{k:<14} {out[f'{k}_ms_p50']:>9.2f} {out[f'{k}_ms_p95']:>9.2f}")
        for parent, parts in (("encode", ENCODE_STAGES), ("match", MATCH_STAGES)):
            if k == parent:
                for m in parts:
                    name = f"  {m}"
                    p50, p95 = out[f"{parent}_{m}_ms_p50"], out[f"{parent}_{m}_ms_p95"]
                    lines.append(f"{name:<14} {p50:>9.2f} {p95:>9.2f}")
    lines.append(
        f"overhead p50 {out['overhead_ms_p50']:.1f} ms (target <= {out['target_overhead_p50_ms']:.0f} ms: "
        + ("met" if out["target_met"] else "NOT met")
        + ")"
    )
    lines.append(
        f"process CPU per answer (all threads, incl. the loopback LLM call): p50 {out['cpu_ms_p50']:.1f} ms, "
        f"p95 {out['cpu_ms_p95']:.1f} ms"
    )
    lines.append(
        f"write-back (after the answer) p50 {out['writeback_wait_ms_p50']:.1f} ms, p95 "
        f"{out['writeback_wait_ms_p95']:.1f} ms; decisions {out['writeback_decisions']}; "
        f"{out['experiences_stored']} experiences stored"
    )
    lines.append(
        f"reuse: {out['questions_fused']} questions fused, {out['questions_scaffolded']} scaffolded "
        f"(of {out['questions']})"
    )
    lines.append(
        f"wall {out['wall_seconds']} s (+{out['warmup_seconds']} s warm-up), peak RSS {out['peak_rss_mb']} MB, "
        f"load average {out['load_average']} on {out['cpu_count']} cores"
    )
    s = out["settings"]
    lines.append(
        f"settings: preset {s['retrieval_preset']}, top_k {s['retrieval_top_k']}, question_ner {s['question_ner']}, "
        f"embedding {s['embedding_model']}, verifier {s['gates']['verifier']} -> {s['gates']['verifier_resolved']}, "
        f"LLM {s['llm']['provider']}:{s['llm']['model']} ({s['llm']['base_url']}), db {s['db']}"
    )
    e = s["experience"]
    lines.append(
        "experience: "
        + ", ".join(
            f"{k}={e[k]}" for k in ("alpha", "beta", "tau_s", "top_k", "top_h", "candidates_m", "scaffold_floor")
        )
    )
    return "\n".join(lines)


__all__ = ["ENCODE_STAGES", "MATCH_STAGES", "STAGES", "TARGET_OVERHEAD_P50_MS", "format_report", "run_pipeline_bench"]
