"""``livingrag bench``: performance benchmarks (never part of the test suite)."""

from __future__ import annotations

import sys

import typer

from livingrag.cli.common import console, examples, load_settings, print_json

app = typer.Typer(
    help="Benchmarks (never part of the test suite)."
    + examples(
        "livingrag bench retrieval --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa",
        "livingrag bench store --experiences 100000",
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
