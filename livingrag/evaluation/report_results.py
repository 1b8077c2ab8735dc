"""The tables of a stream run's report as plain JSON-able data: :func:`build_results` (``results.json``).

The main tables use one stream order (order 0, the dataset order, when every system ran it in full,
else the first such order; see :func:`main_order`); Table 18 gives the mean and sample standard
deviation over all orders. :mod:`livingrag.evaluation.report_markdown` lays the tables out as
``report.md``; :func:`livingrag.evaluation.report.write_report` writes every file of a report.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from livingrag.evaluation import paper
from livingrag.evaluation.datasets import Dataset
from livingrag.evaluation.feedback import feedback_stats, learned_gate_stats
from livingrag.evaluation.metrics import Prices, RunSummary, passage_recall_at_k, relative_delta, summarize_run
from livingrag.evaluation.paired import fixed_and_broke, paired_bootstrap
from livingrag.evaluation.records import SYSTEM_LINEAR, SYSTEM_LIVING, QueryRecord, by_system_and_order
from livingrag.evaluation.repeats import REPEAT_MARK, repeat_stats
from livingrag.evaluation.reuse import (
    GRAPH_TOP_K,
    JACCARD_THRESHOLD,
    TEMPLATE_THRESHOLD,
    experience_clusters,
    experience_coverage,
    gate_stats,
    order_robustness,
    paired_deltas,
    realised_reuse,
    reuse_opportunities,
)

RESULTS_JSON = "results.json"
QUERIES_CSV = "queries.csv"
REPORT_MD = "report.md"
FIGURES: dict[str, str] = {
    "fig2": "fig2_completion_tokens.png",
    "fig3": "fig3_gate_dynamics.png",
    "fig8": "fig8_prompt_tokens.png",
    "fig9": "fig9_experience_use.png",
}
REPORT_FILES: tuple[str, ...] = (RESULTS_JSON, QUERIES_CSV, REPORT_MD, *FIGURES.values())


def paper_row_for(dataset_name: str, paper_row: str | None = "auto") -> str | None:
    """The paper's row to compare with: ``auto`` maps our dataset name (None for generic formats)."""
    if paper_row == "auto":
        return paper.DATASET_ROWS.get(dataset_name)
    if paper_row is not None and paper_row not in paper.PAPER_ROWS:
        raise ValueError(f"paper_row must be one of {paper.PAPER_ROWS}, 'auto' or None; got {paper_row!r}")
    return paper_row


# --------------------------------------------------------------------------------------------------
# Computing


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    return x


def main_order(runs: dict[tuple[str, int], list[QueryRecord]], systems: list[str], orders: list[int]) -> int:
    """The order of the main tables: the first order every system ran in full (the longest run's
    length), order 0 first; else the first order every system ran in; else the first order."""
    longest = max((len(v) for v in runs.values()), default=0)
    full = [o for o in orders if all(len(runs.get((s, o), ())) == longest for s in systems)]
    shared = [o for o in orders if all((s, o) in runs for s in systems)]
    return (full or shared or orders)[0]


def paired_rows(runs: dict[tuple[str, int], list[QueryRecord]]) -> list[dict[str, Any]]:
    """Each system's runs against LinearRAG, question by question (:mod:`livingrag.evaluation.paired`).

    One row per (system, order), and for a system run in several orders one more (``order`` "all")
    whose per-question value is the mean over its orders. LinearRAG keeps no memory, so its run of
    the same order (else its first) is the baseline. A question that failed in either system is left
    out (``excluded``). Per row: Contain-Acc with the fixed and broke counts, prompt and completion
    tokens, and per-passage Recall@5 where gold passages are known; each a :class:`PairedDiff` as a dict.
    """
    linear_orders = sorted(o for s, o in runs if s == SYSTEM_LINEAR)
    if not linear_orders:
        return []
    rows: list[dict[str, Any]] = []
    systems = list(dict.fromkeys(s for s, _ in runs if s != SYSTEM_LINEAR))
    for system in systems:
        orders = sorted(o for s, o in runs if s == system)
        per_order: list[dict[str, QueryRecord]] = []
        for o in orders:
            base = {r.question_id: r for r in runs[(SYSTEM_LINEAR, o if o in linear_orders else linear_orders[0])]}
            mine = {r.question_id: r for r in runs[(system, o)]}
            both = [q for q in mine if q in base]
            ok = [q for q in both if mine[q].error is None and base[q].error is None]
            per_order.append({q: mine[q] for q in ok})
            rows.append(_paired_row(system, o, [mine[q] for q in ok], [base[q] for q in ok], len(both) - len(ok)))
        if len(orders) > 1:
            # LinearRAG's answer to a question is the same in every order: take it from any run that has it
            base = {}
            for lo in linear_orders:
                for r in runs[(SYSTEM_LINEAR, lo)]:
                    if r.error is None:
                        base.setdefault(r.question_id, r)
            qs = sorted(set.intersection(*(set(m) for m in per_order)) & base.keys())
            mean_acc = [sum(m[q].contain_correct for m in per_order) / len(per_order) for q in qs]
            mean_tok = [sum(m[q].completion_tokens for m in per_order) / len(per_order) for q in qs]
            mean_prompt = [sum(m[q].prompt_tokens for m in per_order) / len(per_order) for q in qs]
            contain = paired_bootstrap(mean_acc, [float(base[q].contain_correct) for q in qs]) if qs else None
            tokens = paired_bootstrap(mean_tok, [float(base[q].completion_tokens) for q in qs]) if qs else None
            prompt = paired_bootstrap(mean_prompt, [float(base[q].prompt_tokens) for q in qs]) if qs else None
            rows.append(
                {
                    "system": system,
                    "order": "all",
                    "n": len(qs),
                    "excluded": None,
                    "contain": asdict(contain) if contain else None,
                    "fixed": None,
                    "broke": None,
                    "completion_tokens": asdict(tokens) if tokens else None,
                    "prompt_tokens": asdict(prompt) if prompt else None,
                    "passage_recall_at_5": None,
                }
            )
    return rows


def _paired_row(
    system: str, order: int, mine: list[QueryRecord], base: list[QueryRecord], excluded: int
) -> dict[str, Any]:
    row: dict[str, Any] = {"system": system, "order": order, "n": len(mine), "excluded": excluded}
    if not mine:
        return row | {
            "contain": None,
            "fixed": 0,
            "broke": 0,
            "completion_tokens": None,
            "prompt_tokens": None,
            "passage_recall_at_5": None,
        }
    fixed, broke = fixed_and_broke([r.contain_correct for r in mine], [r.contain_correct for r in base])
    recall = [
        (passage_recall_at_k(a.retrieved_keys, a.gold_keys, 5), passage_recall_at_k(b.retrieved_keys, b.gold_keys, 5))
        for a, b in zip(mine, base, strict=True)
    ]
    pairs = [(x, y) for x, y in recall if x is not None and y is not None]

    def diff(values: Callable[[QueryRecord], float]) -> dict[str, Any]:
        return asdict(paired_bootstrap([values(r) for r in mine], [values(r) for r in base]))

    return row | {
        "contain": diff(lambda r: float(r.contain_correct)),
        "fixed": fixed,
        "broke": broke,
        "completion_tokens": diff(lambda r: float(r.completion_tokens)),
        "prompt_tokens": diff(lambda r: float(r.prompt_tokens)),
        "passage_recall_at_5": (
            asdict(paired_bootstrap([x for x, _ in pairs], [y for _, y in pairs])) if pairs else None
        ),
    }


def feedback_rows(
    runs: dict[tuple[str, int], list[QueryRecord]], paired: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The feedback table: per (system, order) run its :class:`~livingrag.evaluation.feedback.FeedbackStats`,
    LinearRAG's LLM calls in the same order (else its first order) as ``linear_llm_calls``, and the paired
    differences against LinearRAG of :func:`paired_rows` (``contain``, ``prompt_tokens``,
    ``completion_tokens``; None for LinearRAG itself)."""
    by_key = {(r["system"], r["order"]): r for r in paired}
    stats = {k: feedback_stats(run) for k, run in runs.items()}
    linear = {o: st for (s, o), st in stats.items() if s == SYSTEM_LINEAR}
    out = []
    for (system, order), st in stats.items():
        base = linear.get(order) or (linear[min(linear)] if linear else None)
        p = by_key.get((system, order), {})
        out.append(
            asdict(st)
            | {
                "linear_llm_calls": base.llm_calls if base is not None else None,
                "contain": p.get("contain"),
                "prompt_tokens": p.get("prompt_tokens"),
                "completion_tokens": p.get("completion_tokens"),
            }
        )
    return out


def _summary_tables(main_sum: dict[str, RunSummary]) -> dict[str, Any]:
    """Tables 2, 3 and 15 and passage recall: one row per system of the main order."""
    return {
        "accuracy": [
            {
                "system": s,
                "contain_acc": v.contain_acc,
                "llm_acc": v.llm_acc.value,
                "llm_acc_reason": v.llm_acc.reason,
                "llm_judged": v.llm_acc.judged,
                "em": v.em,
                "f1": v.f1,
                "queries": v.queries,
                "errors": v.errors,
            }
            for s, v in main_sum.items()
        ],
        "retrieval": [
            {
                "system": s,
                "all_gold_recall_at_2": v.all_gold_recall_at_2,
                "all_gold_recall_at_5": v.all_gold_recall_at_5,
                "passage_recall_at_2": v.passage_recall_at_2,
                "passage_recall_at_5": v.passage_recall_at_5,
                "questions_with_gold": v.questions_with_gold,
            }
            for s, v in main_sum.items()
        ],
        "tokens": [{"system": s, **asdict(v.tokens)} for s, v in main_sum.items()],
        "timing": [
            {"system": s, **asdict(v.timing), "retrieval_over_llm": v.timing.retrieval_over_llm}
            for s, v in main_sum.items()
        ],
    }


def _tokens_delta(linear: RunSummary, living: RunSummary) -> dict[str, float | None]:
    """LivingRAG's relative token and cost change against LinearRAG."""
    lt, vt = linear.tokens, living.tokens
    return {
        "prompt": relative_delta(vt.prompt_mean, lt.prompt_mean),
        "completion": relative_delta(vt.completion_mean, lt.completion_mean),
        "cost": relative_delta(vt.cost_usd, lt.cost_usd),
    }


def _ablation_rows(main_sum: dict[str, RunSummary], acc: Callable[[str], float | None]) -> list[dict[str, Any]]:
    """Table 5: each system but LinearRAG with its accuracy and completion-token reduction against LinearRAG."""
    base = main_sum[SYSTEM_LINEAR].tokens.completion_mean
    return [
        {
            "system": s,
            "acc": acc(s),
            "completion_reduction": -d
            if (d := relative_delta(main_sum[s].tokens.completion_mean, base)) is not None
            else None,
        }
        for s in main_sum
        if s != SYSTEM_LINEAR
    ]


def _cluster_tables(records: Sequence[QueryRecord], dataset: Dataset) -> dict[str, Any]:
    """Table 8 (by support passage + answer, and by MuSiQue id) when the streamed questions have decompositions."""
    ids = {r.question_id for r in records}
    qs = [q for q in dataset.questions if q.id in ids] or list(dataset.questions)
    if not any(q.decomposition for q in qs):
        return {}
    return {
        "clusters": asdict(experience_clusters(qs, documents=len(dataset.corpus))),
        "clusters_by_id": asdict(experience_clusters(qs, documents=len(dataset.corpus), by="id")),
    }


def build_results(
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
) -> dict[str, Any]:
    """Every table of the report as JSON-able data (fractions, not percentages)."""
    prices = prices or Prices()
    if not records:
        raise ValueError("no records: nothing to report")
    runs = by_system_and_order(records)
    orders = sorted({o for _, o in runs})
    systems = list(dict.fromkeys(s for s, _ in runs))
    main = main_order(runs, systems, orders)
    summaries = {k: summarize_run(v, prices=prices, judge=judge) for k, v in runs.items()}
    main_runs = {s: runs[(s, main)] for s in systems if (s, main) in runs}
    main_sum = {s: summaries[(s, main)] for s in main_runs}
    linear, living = main_runs.get(SYSTEM_LINEAR), main_runs.get(SYSTEM_LIVING)
    judged = judge is not None and any(s.llm_acc.value is not None for s in main_sum.values())
    acc_metric = "llm" if judged else "contain"

    def acc(system: str) -> float | None:
        s = main_sum[system]
        return s.llm_acc.value if acc_metric == "llm" else s.contain_acc

    tables = _summary_tables(main_sum)
    if linear and living:
        tables["tokens_delta"] = _tokens_delta(main_sum[SYSTEM_LINEAR], main_sum[SYSTEM_LIVING])
    fixed = linear or next(iter(main_runs.values()))
    opp = reuse_opportunities(
        fixed,
        graph=linear is not None,
        top_k=GRAPH_TOP_K,
        jaccard_threshold=jaccard_threshold,
        template_threshold=template_threshold,
    )
    tables["opportunities"] = {"source_system": fixed[0].system, **asdict(opp)}
    if living:
        tables["realised"] = asdict(realised_reuse(living, template_threshold=template_threshold))
        tables["coverage"] = asdict(experience_coverage(living))
    tables["gates"] = [
        {"system": s, **asdict(gate_stats(run))} for s, run in main_runs.items() if any(r.writeback for r in run)
    ]
    if linear:
        tables["ablations"] = _ablation_rows(main_sum, acc)
    if linear and living:
        all_living = [r for (s, _), run in runs.items() if s == SYSTEM_LIVING for r in run]
        all_linear = [r for (s, _), run in runs.items() if s == SYSTEM_LINEAR for r in run]
        tables["paired_deltas"] = [
            asdict(row)
            for row in paired_deltas(all_living, all_linear, metric=acc_metric, template_threshold=template_threshold)
        ]
    tables["paired"] = paired_rows(runs)
    tables["feedback"] = feedback_rows(runs, tables["paired"])
    tables["learned_gate"] = [
        asdict(learned_gate_stats(run)) for (system, _), run in sorted(runs.items()) if system != SYSTEM_LINEAR
    ]
    if any(r.question_id.endswith(REPEAT_MARK) for r in records):
        tables["repeats"] = [asdict(x) for x in repeat_stats(records)]
    tables["orders"] = asdict(
        order_robustness(records, prices=prices, judge=judge, template_threshold=template_threshold)
    )
    if dataset is not None:
        tables |= _cluster_tables(records, dataset)

    return _jsonable(
        {
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "dataset": _dataset_info(dataset_name, dataset, paper_row),
            "config": {
                "judge": judge,
                "prices": asdict(prices),
                "template_threshold": template_threshold,
                "jaccard_threshold": jaccard_threshold,
                "graph_top_k": GRAPH_TOP_K,
                **(config or {}),
            },
            "systems": systems,
            "orders": orders,
            "main_order": main,
            "acc_metric": acc_metric,
            "runs": [asdict(v) for v in summaries.values()],
            "tables": tables,
        }
    )


def _dataset_info(dataset_name: str, dataset: Dataset | None, paper_row: str | None) -> dict[str, Any]:
    """The ``dataset`` block of the results: name, paper row, statistics and the loader's first 50 problems."""
    return {
        "name": dataset_name,
        "paper_row": paper_row_for(dataset_name, paper_row),
        "stats": dataset.stats() if dataset is not None else None,
        "problems": list(dataset.problems[:50]) if dataset is not None else [],
    }


# --------------------------------------------------------------------------------------------------
# Markdown
