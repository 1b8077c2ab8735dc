"""``livingrag bench paired``: two runs' per-question records compared question by question
(:mod:`livingrag.bench.paired_runs`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from livingrag.cli.common import console, examples, print_json

HELP = (
    "Compare two runs of a benchmark over the same questions, question by question: for each figure, run A's and "
    "run B's means, the paired difference B - A with its 95 % bootstrap interval, and in how many questions B is "
    "higher and lower. The runs are per-question files (`livingrag bench retrieval --per-question FILE`), matched "
    "by question number (the question texts must agree)."
    + examples(
        "livingrag bench paired before.jsonl after.jsonl",
        "livingrag bench paired before.jsonl after.jsonl --figure passage_recall_at_2 --json",
    )
)


def paired(
    a: Path = typer.Argument(..., help="Run A's per-question file (the baseline)."),
    b: Path = typer.Argument(..., help="Run B's per-question file (the change)."),
    figure: list[str] = typer.Option(
        ["passage_recall_at_5"], "--figure", help="A per-question figure to compare (repeatable)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap resampling."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.bench.paired_runs import compare_runs, read_records

    rows = [c.as_dict() for c in compare_runs(read_records(a), read_records(b), figure, seed=seed)]
    if as_json:
        print_json({"a": str(a), "b": str(b), "figures": rows})
        return
    table = Table("figure", "questions", "A", "B", "B - A", "95 % interval", "B higher", "B lower")
    for r in rows:
        table.add_row(
            r["figure"], str(r["questions"]), f"{r['a']:.4f}", f"{r['b']:.4f}", f"{r['diff']:+.4f}",
            f"[{r['lo']:+.4f}, {r['hi']:+.4f}]", str(r["better"]), str(r["worse"]),
        )  # fmt: skip
    console.print(table)
