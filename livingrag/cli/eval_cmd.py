"""``livingrag eval``: online-stream evaluation (the paper's tables and figures)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from livingrag.cli.common import console, err_console, examples, load_settings

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.evaluation.datasets import Dataset
    from livingrag.evaluation.metrics import Judge
    from livingrag.evaluation.records import QueryRecord
    from livingrag.evaluation.stream import StreamConfig

app = typer.Typer(
    help="Online-stream evaluation of LinearRAG and LivingRAG on a benchmark."
    + examples(
        "livingrag eval stream --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa "
        "--limit 100 --out runs/2wiki-100",
        "livingrag eval report --dataset 2wikimultihopqa --out runs/2wiki-100",
    ),
    no_args_is_help=True,
)

DATASET_HELP = "Benchmark: 2wikimultihopqa, musique, hotpotqa, linearrag, wixqa or jsonl."
DATA_DIR_HELP = "The dataset's folder (as in ../shared/datasets/<name>); a file for jsonl or linearrag."


@app.command(
    help="Answer a benchmark's questions as an online stream with each system, from an empty experience store "
    "per run, and write results.json, queries.csv, report.md and the figures into --out. Records are appended "
    "to --out/records.jsonl as the stream goes: run the same command again to resume an interrupted run. "
    "LLM-Acc needs --judge configured (the configured LLM judges with the prompts of figures 6/7); without it "
    "LLM-Acc is reported as unavailable."
    + examples(
        "livingrag eval stream --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa "
        "--limit 100 --out runs/2wiki-100",
        "livingrag eval stream --dataset musique --data-dir ../shared/datasets/musique --systems linear,living "
        "--ablations fusion,scaffold,gate --orders 3 --seed 7 --out runs/musique",
        "livingrag eval stream --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa "
        "--limit 60 --repeat-share 0.3 --feedback-rate 1 --out runs/2wiki-feedback",
    )
)
def stream(
    dataset: str = typer.Option(..., "--dataset", "-d", help=DATASET_HELP),
    data_dir: Path = typer.Option(..., "--data-dir", help=DATA_DIR_HELP),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for records and the report (resumed if it holds one)."),
    systems: str = typer.Option("linear,living", "--systems", help="Comma-separated: linear, living."),
    ablations: str = typer.Option("", "--ablations", help="Also run LivingRAG without: fusion, scaffold, gate."),
    orders: int = typer.Option(1, "--orders", min=1, max=100, help="Stream orders (0 = dataset order)."),
    only_orders: str | None = typer.Option(
        None,
        "--only-orders",
        help="Comma-separated: run only these of the --orders orders now (e.g. 1,2 to leave out the dataset "
        "order); run the others later into the same --out. LinearRAG answers each question once in any case.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the shuffled orders."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="The first N questions only (after --skip)."),
    skip: int = typer.Option(
        0,
        "--skip",
        min=0,
        help="Leave out the dataset's first N questions (e.g. held-out questions 301-600: --skip 300 --limit 300); "
        "the corpus stays whole.",
    ),
    repeat_share: float = typer.Option(
        0.0,
        "--repeat-share",
        min=0.0,
        max=1.0,
        help="Ask this share of the questions again later (verbatim or in other case and punctuation; ids end "
        "in #repeat): a repeat stream for answer reuse. 0: none.",
    ),
    feedback_rate: str = typer.Option(
        "0",
        "--feedback-rate",
        metavar="R",
        help="Simulated feedback from the gold answers: this share (0 to 1) of a living system's answers, drawn "
        "with --feedback-seed, is marked right (Contain-correct) or wrong with the first gold answer as the "
        "correction, once its write-back is decided. Repeated questions are served from memory only from "
        "verified experiences, so with 0 none is. LinearRAG gets none.",
    ),
    feedback_seed: int | None = typer.Option(
        None, "--feedback-seed", help="Seed of the draw of the answers that get feedback (default: --seed)."
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", min=1, max=64, help="Questions in flight (default: llm.concurrency; 2 for local)."
    ),
    judge: str = typer.Option("none", "--judge", help="LLM-Acc judge: none or configured (the configured LLM)."),
    tenant: str = typer.Option("eval", "--tenant", help="Tenant that owns the evaluation corpora (created)."),
    corpus: str | None = typer.Option(
        None,
        "--corpus",
        help="Corpus to index the dataset into (default eval-<dataset>); an existing corpus that already holds "
        "the dataset's documents (e.g. the retrieval benchmark's bench-<dataset>) is reused without re-indexing.",
    ),
    fresh: bool = typer.Option(False, "--fresh", help="Discard the records already in --out and start over."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    from livingrag.corpus.progress import NullProgress, RichProgress
    from livingrag.errors import InvalidInput
    from livingrag.evaluation.feedback import parse_feedback_rate
    from livingrag.evaluation.stream import StreamConfig, StreamRun, parse_only_orders, parse_systems

    chosen = parse_only_orders(only_orders, orders)
    rate = parse_feedback_rate(feedback_rate.strip())
    if judge not in ("none", "configured"):
        raise InvalidInput(f"--judge must be none or configured, got {judge!r}")
    settings = load_settings()
    names = parse_systems(systems, ablations)
    data = _stream_data(dataset, data_dir, limit=limit, skip=skip, repeat_share=repeat_share, seed=seed)
    if concurrency is None:
        concurrency = 2 if settings.llm.provider == "local" else settings.llm.concurrency
    judge_obj = _stream_judge(judge, settings, dataset)
    cfg = StreamConfig(
        dataset=dataset,
        systems=names,
        orders=orders,
        seed=seed,
        limit=limit,
        skip=skip,
        tenant=tenant,
        corpus=corpus or f"eval-{dataset}",
        concurrency=concurrency,
        judge=judge_obj.name if judge_obj else None,
        question_ids=tuple(q.id for q in data.questions),
        repeat_share=repeat_share,
        feedback_rate=rate,
        feedback_seed=feedback_seed,
    )
    _announce_stream(cfg, data, settings)
    progress = NullProgress() if quiet else RichProgress(err_console)
    with progress:
        run = StreamRun(
            settings,
            data,
            cfg,
            out,
            judge=judge_obj,
            progress=progress,
            log=lambda m: err_console.print(f"[dim]{m}[/dim]"),
            only_orders=chosen,
        )
        records = run.run(fresh=fresh)
    paths = _write_stream_report(out, records, cfg, data, settings)
    _print_summary(out)
    console.print(f"[dim]wrote {', '.join(str(p) for p in paths.values())}[/dim]")


def _stream_judge(judge: str, settings: Settings, dataset: str) -> Judge | None:
    """The LLM-Acc judge of ``--judge``: None (``none``) or the configured LLM (``configured``)."""
    from livingrag.evaluation.metrics import Judge, judge_kind_for

    if judge != "configured":
        return None
    from livingrag.generation.providers import build_llm

    return Judge(build_llm(settings.llm, data_dir=settings.db.data_dir), judge_kind_for(dataset))


def _stream_data(
    dataset: str, data_dir: Path, *, limit: int | None, skip: int, repeat_share: float, seed: int
) -> Dataset:
    """The dataset's questions (``--skip``, ``--limit``), with ``--repeat-share`` of them asked again."""
    from livingrag.errors import InvalidInput
    from livingrag.evaluation.datasets import load_dataset

    data = load_dataset(dataset, data_dir, limit=limit, skip=skip)
    if repeat_share:
        from dataclasses import replace

        from livingrag.evaluation.repeats import with_repeats

        try:
            data = replace(data, questions=with_repeats(data.questions, repeat_share, seed=seed))
        except ValueError as exc:
            raise InvalidInput(f"--repeat-share: {exc}") from None
    return data


def _announce_stream(cfg: StreamConfig, data: Dataset, settings: Settings) -> None:
    """One line on what the run will do (and a note when feedback can have no effect)."""
    rate = cfg.feedback_rate
    err_console.print(
        f"[dim]{cfg.dataset}: {len(data.questions)} questions, {len(data.corpus)} documents; systems "
        f"{', '.join(cfg.systems)}; {cfg.orders} order(s), seed {cfg.seed}; LLM {settings.llm.provider}:"
        f"{settings.llm.model}; {cfg.concurrency} in flight; judge {cfg.judge or 'none'}"
        + (
            f"; simulated feedback from the gold answers on {100 * rate:g} % of the answers "
            f"(seed {cfg.feedback_seed_used})"
            if rate
            else ""
        )
        + "[/dim]"
    )
    if rate and all(n == "linear" for n in cfg.systems):
        err_console.print("[dim]--feedback-rate: LinearRAG keeps no memory, so no answer gets feedback[/dim]")


def _write_stream_report(
    out: Path, records: list[QueryRecord], cfg: StreamConfig, data: Dataset, settings: Settings
) -> dict[str, Path]:
    """The run's report (results.json, queries.csv, report.md, the figures) written into ``out``."""
    from livingrag.evaluation.metrics import Prices
    from livingrag.evaluation.report import write_report

    prices = Prices(settings.llm.price_prompt_per_m, settings.llm.price_completion_per_m)
    return write_report(
        out,
        records,
        dataset_name=cfg.dataset,
        dataset=data,
        judge=cfg.judge,
        prices=prices,
        config=cfg.identity()
        | {
            "concurrency": cfg.concurrency,
            "llm": f"{settings.llm.provider}:{settings.llm.model}",
            "experience_profile": settings.experience.profile,
            "reuse_answers_from": settings.experience.reuse_answers_from,
        },
    )


@app.command(
    help="Rewrite the report of a run from its --out/records.jsonl (no question is answered)."
    + examples("livingrag eval report --dataset musique --data-dir ../shared/datasets/musique --out runs/musique")
)
def report(
    dataset: str = typer.Option(..., "--dataset", "-d", help=DATASET_HELP),
    out: Path = typer.Option(..., "--out", "-o", help="The run's folder."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help=DATA_DIR_HELP + " (for Table 8)."),
) -> None:
    import json

    from livingrag.errors import InvalidInput
    from livingrag.evaluation.datasets import load_dataset
    from livingrag.evaluation.metrics import Prices
    from livingrag.evaluation.records import read_records_jsonl
    from livingrag.evaluation.report import write_report
    from livingrag.evaluation.stream import RECORDS_JSONL, RUN_JSON

    path = out / RECORDS_JSONL
    if not path.exists():
        raise InvalidInput(f"{path} does not exist: run `livingrag eval stream --out {out}` first")
    records = read_records_jsonl(path, allow_truncated_tail=True)
    run_cfg = json.loads((out / RUN_JSON).read_text()) if (out / RUN_JSON).exists() else {}
    data = (
        load_dataset(dataset, data_dir, limit=run_cfg.get("limit"), skip=run_cfg.get("skip", 0))
        if data_dir is not None
        else None
    )
    settings = load_settings()
    write_report(
        out,
        records,
        dataset_name=dataset,
        dataset=data,
        judge=run_cfg.get("judge"),
        prices=Prices(settings.llm.price_prompt_per_m, settings.llm.price_completion_per_m),
        config=run_cfg or None,
    )
    _print_summary(out)


def _print_summary(out: Path) -> None:
    """The headline of report.md: one line per system (main order)."""
    import json

    from rich.table import Table

    results = json.loads((out / "results.json").read_text())
    tables = results.get("tables", {})
    by_system: dict[str, dict[str, Any]] = {}  # rows of results.json
    for key in ("accuracy", "retrieval", "tokens"):
        for row in tables.get(key, []):
            by_system.setdefault(str(row["system"]), {}).update(row)
    memory = {  # the feedback table's main-order rows (absent from reports written before it)
        str(row["system"]): row for row in tables.get("feedback", []) if row["order"] == results.get("main_order")
    }
    table = Table(
        "system",
        "Contain-Acc",
        "LLM-Acc",
        "Recall@2",
        "Recall@5",
        "prompt tok/q",
        "completion tok/q",
        "LLM calls",
        "from memory (wrong)",
    )

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * float(v):.2f}"

    def num(v: float | None) -> str:
        return "-" if v is None else f"{float(v):.1f}"

    for name, r in by_system.items():
        table.add_row(
            name,
            pct(r.get("contain_acc")),
            pct(r.get("llm_acc")),
            pct(r.get("passage_recall_at_2")),
            pct(r.get("passage_recall_at_5")),
            num(r.get("prompt_mean")),
            num(r.get("completion_mean")),
            str(memory[name]["llm_calls"]) if name in memory else "-",
            f"{memory[name]['served_from_memory']} ({memory[name]['served_wrong']})" if name in memory else "-",
        )
    console.print(table)
