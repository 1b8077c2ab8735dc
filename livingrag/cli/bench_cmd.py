"""``livingrag bench``: performance benchmarks (never part of the test suite)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from livingrag.cli.common import console, examples, load_settings, print_json

app = typer.Typer(
    help="Benchmarks (never part of the test suite)."
    + examples(
        "livingrag bench retrieval --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa",
        "livingrag bench store --experiences 100000",
        "livingrag bench pipeline --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa",
    ),
    no_args_is_help=True,
)


@app.command(
    help="Benchmark the experience store on synthetic experiences (384-d embeddings, ~30 entities per map, tenants "
    "mixed) in a scratch database of the configured server, dropped afterwards: match latency (SQL preselection "
    "and numpy rescoring), top-K agreement with an exact full scan, write-back throughput of concurrent writers, "
    "and near-duplicates stored when raced."
    + examples(
        "livingrag bench store --experiences 100000",
        "livingrag bench store --experiences 1000000 --tenants 4 --json",
    )
)
def store(
    experiences: int = typer.Option(..., "--experiences", min=1, help="Experiences to load."),
    tenants: int = typer.Option(4, "--tenants", min=1, max=1000, help="Tenants sharing the store."),
    queries: int = typer.Option(1000, "--queries", min=1, help="Queries matched (and checked against a full scan)."),
    writers: int = typer.Option(8, "--writers", min=1, max=64, help="Concurrent write-back writers."),
    writes: int = typer.Option(400, "--writes", min=1, help="Novel candidates written for the throughput."),
    seed: int = typer.Option(0, "--seed", help="Random seed of the synthetic data."),
    keep: bool = typer.Option(False, "--keep", help="Keep the scratch database."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.experience.bench import BenchConfig, format_report, run_store_bench

    cfg = BenchConfig(
        experiences=experiences, tenants=tenants, queries=queries, writers=writers, writes=writes, seed=seed, keep=keep
    )

    def progress(msg: str) -> None:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    report = run_store_bench(load_settings(), cfg, progress=progress)
    if as_json:
        print_json(report)
    else:
        console.print(format_report(report), highlight=False)


@app.command(
    help="Benchmark the answer pipeline's own overhead outside the LLM call (p50/p95 of total minus LLM, and of "
    "encode, match, retrieve, prompt and query log) on a multi-hop QA corpus: index it if needed (tenant 'bench', "
    "as `bench retrieval` does), clear its experiences, then run the questions through LivingRAG in living mode, "
    "awaiting each write-back so that matching sees the store grow. The LLM is a deterministic OpenAI-compatible "
    "server on loopback started in-process (through the real openai provider), or --llm configured."
    + examples(
        "livingrag bench pipeline --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa",
        "livingrag bench pipeline --dataset 2wikimultihopqa --data-dir DATA --limit 50 --llm configured --json",
    )
)
def pipeline(
    dataset: str = typer.Option(..., "--dataset", help="2wikimultihopqa, musique or hotpotqa."),
    data_dir: Path = typer.Option(..., "--data-dir", help="The dataset's folder (as in ../shared/datasets)."),
    limit: int = typer.Option(200, "--limit", min=1, help="Questions to run (the first N)."),
    llm: str = typer.Option("loopback", "--llm", help="loopback (in-process test server) or configured."),
    tenant: str = typer.Option("bench", "--tenant", help="Tenant that owns the benchmark corpora (created)."),
    keep_store: bool = typer.Option(False, "--keep-store", help="Start from the experiences already stored."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    from livingrag.cli.common import err_console, open_database
    from livingrag.corpus.progress import NullProgress, RichProgress
    from livingrag.errors import InvalidInput
    from livingrag.pipeline.bench import format_report, run_pipeline_bench
    from livingrag.retrieval.bench import load_dataset

    if llm not in ("loopback", "configured"):
        raise InvalidInput(f"unknown --llm {llm!r}; use loopback or configured")
    settings = load_settings()
    data = load_dataset(dataset, data_dir)
    progress = NullProgress() if quiet else RichProgress(err_console)
    with open_database(settings) as db:
        out = run_pipeline_bench(
            db,
            settings,
            data,
            tenant=tenant,
            limit=limit,
            llm=llm,  # type: ignore[arg-type]
            keep_store=keep_store,
            progress=progress,
            log=None if quiet else (lambda msg: err_console.print(f"[dim]{msg}[/dim]")),
        )
    if as_json:
        print_json(out)
    else:
        console.print(format_report(out), highlight=False)
