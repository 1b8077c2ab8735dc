"""The report of a stream run: ``results.json``, the per-query CSV, ``report.md`` and four PNG figures.

Entry point: :func:`write_report` (what ``livingrag eval stream`` calls when a run finishes, and what
re-reports a finished run from its records). :func:`~livingrag.evaluation.report_results.build_results`
computes every table as plain JSON-able data (:mod:`livingrag.evaluation.report_results`);
:func:`~livingrag.evaluation.report_markdown.render_markdown` lays them out as the paper does, with
the paper's own figure beside ours wherever the metric is the same, always labelled as the paper's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from livingrag.evaluation.datasets import Dataset
from livingrag.evaluation.metrics import Prices
from livingrag.evaluation.plots import plot_experience_use, plot_gate_dynamics, plot_tokens, plot_unavailable
from livingrag.evaluation.records import (
    SYSTEM_LINEAR,
    SYSTEM_LIVING,
    QueryRecord,
    by_system_and_order,
    write_records_csv,
)
from livingrag.evaluation.report_markdown import render_markdown
from livingrag.evaluation.report_results import (
    FIGURES,
    QUERIES_CSV,
    REPORT_FILES,
    REPORT_MD,
    RESULTS_JSON,
    build_results,
)
from livingrag.evaluation.reuse import JACCARD_THRESHOLD, TEMPLATE_THRESHOLD


def write_report(
    out_dir: str | Path,
    records: Sequence[QueryRecord],
    *,
    dataset_name: str,
    dataset: Dataset | None = None,
    judge: str | None = None,
    prices: Prices | None = None,
    paper_row: str | None = "auto",
    template_threshold: float = TEMPLATE_THRESHOLD,
    jaccard_threshold: float = JACCARD_THRESHOLD,
    config: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``results.json``, ``queries.csv``, ``report.md`` and the four figures into ``out_dir``.

    ``judge`` names the judge LLM that filled ``llm_correct`` (None: LLM-Acc is reported unavailable).
    Returns the written paths by file name.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = build_results(
        records,
        dataset_name=dataset_name,
        dataset=dataset,
        judge=judge,
        prices=prices,
        paper_row=paper_row,
        template_threshold=template_threshold,
        jaccard_threshold=jaccard_threshold,
        config=config,
    )
    results["files"] = list(REPORT_FILES)
    paths = {name: out / name for name in REPORT_FILES}
    paths[RESULTS_JSON].write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    ordered = sorted(records, key=lambda r: (r.order, r.position, r.system))
    write_records_csv(paths[QUERIES_CSV], ordered)

    runs = by_system_and_order(records)
    linear = [run for (s, _), run in runs.items() if s == SYSTEM_LINEAR]
    living = [run for (s, _), run in runs.items() if s == SYSTEM_LIVING]
    name = dataset_name
    n_orders = len({o for _, o in runs})
    suffix = f" — {name}" + (f", {n_orders} orders pooled" if n_orders > 1 else "")
    plot_tokens(
        paths[FIGURES["fig2"]],
        linear,
        living,
        field="completion_tokens",
        title=f"Completion tokens over the stream{suffix}",
        shade=True,
    )
    plot_tokens(
        paths[FIGURES["fig8"]],
        linear,
        living,
        field="prompt_tokens",
        title=f"Prompt tokens over the stream{suffix}",
        shade=False,
    )
    if living and any(r.writeback for run in living for r in run):
        plot_gate_dynamics(paths[FIGURES["fig3"]], living, title=f"Write-back gate dynamics (LivingRAG){suffix}")
        plot_experience_use(
            paths[FIGURES["fig9"]], living, title=f"Experience use during inference (LivingRAG){suffix}"
        )
    else:
        for k, what in (("fig3", "Write-back gate dynamics"), ("fig9", "Experience use")):
            plot_unavailable(
                paths[FIGURES[k]], f"{what}{suffix}", "This run has no LivingRAG system with write-back decisions."
            )
    paths[REPORT_MD].write_text(render_markdown(results), encoding="utf-8")
    return paths
