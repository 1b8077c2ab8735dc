"""``livingrag bench retrieval``: Recall@2/@5, latency and indexing time on a multi-hop QA set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from livingrag.cli.common import console, err_console, examples, load_settings, open_database, print_json

RETRIEVAL_HELP = (
    "Benchmark the retriever on a multi-hop QA dataset, read as `eval stream` reads it "
    '(docs/evaluation.md, "Datasets": the development folders of ../shared/datasets, '
    "HippoRAG's question + corpus pairs, raw MuSiQue JSON lines in a "
    ".jsonl or .json file, raw HotpotQA and 2WikiMultiHopQA files; questions without gold passages are left out): "
    "index its corpus if not yet indexed (in the configured "
    "database, under the tenant 'bench'), run every question, and report Recall@2/@5 against the gold passages, "
    "dense-only Recall@5 with the same embedder, latency p50/p95 split into query encoding and graph work, "
    "indexing wall time by phase and peak memory. Re-runs reuse the index; --shuffle-seed indexes a copy of the "
    "corpus in shuffled order (recall must not depend on it)."
    + examples(
        "livingrag bench retrieval --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa",
        "livingrag bench retrieval --dataset musique --data-dir ../shared/datasets/musique --json",
        "livingrag bench retrieval --dataset musique --data-dir musique_ans_v1.0_dev.jsonl --limit 200",
        "livingrag bench retrieval --dataset 2wikimultihopqa --data-dir DATA --shuffle-seed 7 --limit 200 --json",
        "livingrag bench retrieval --dataset 2wikimultihopqa --data-dir DATA --start 501 --per-question b.jsonl",
    )
)


def retrieval(
    dataset: str = typer.Option(..., "--dataset", help="2wikimultihopqa, musique or hotpotqa."),
    data_dir: Path = typer.Option(
        ...,
        "--data-dir",
        help="The dataset's folder (e.g. ../shared/datasets/musique; ../shared/datasets works too) or question file.",
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only N questions (from --start)."),
    start: int = typer.Option(1, "--start", min=1, help="The first question's number (1-based)."),
    per_question: Path | None = typer.Option(
        None,
        "--per-question",
        help="Write one JSON line per question (number, question, recalls) here, for `livingrag bench paired`.",
    ),
    shuffle_seed: int | None = typer.Option(None, "--shuffle-seed", help="Index the corpus in this shuffled order."),
    preset: str | None = typer.Option(None, "--preset", help="Retrieval preset (default: the dataset's)."),
    tenant: str = typer.Option("bench", "--tenant", help="Tenant that owns the benchmark corpora (created)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    from livingrag.bench.paired_runs import write_records
    from livingrag.bench.retrieval import load_dataset, run_retrieval_bench
    from livingrag.corpus.progress import NullProgress, RichProgress

    settings = load_settings()
    data = load_dataset(dataset, data_dir)
    progress = NullProgress() if quiet else RichProgress(err_console)
    records: list[dict[str, Any]] | None = [] if per_question is not None else None
    with open_database(settings) as db:
        out = run_retrieval_bench(
            db,
            settings,
            data,
            tenant=tenant,
            limit=limit,
            start=start,
            shuffle_seed=shuffle_seed,
            preset=preset,
            progress=progress,
            per_question=records,
        )
    if per_question is not None and records is not None:
        write_records(per_question, records)
    if as_json:
        print_json(out)
        return
    table = Table("metric", "value", title=f"retrieval benchmark: {out['dataset']} ({out['questions']} questions)")
    for key in (
        "passage_recall_at_2",
        "passage_recall_at_5",
        "dense_recall_at_5",
        "all_gold_recall_at_2",
        "all_gold_recall_at_5",
        "dense_fallback_rate",
        "retrieval_ms_p50",
        "retrieval_ms_p95",
        "encode_ms_p50",
        "graph_ms_p50",
        "graph_ms_p95",
        "index_seconds",
        "peak_rss_mb",
    ):
        table.add_row(key, str(out.get(key)))
    console.print(table)
    console.print(f"index phases (s): {out['index_phases']}")
    if "first_index_phases" in out:
        console.print(f"first indexing run (s): {out['first_index_phases']}")
