"""The report of a stream run: ``results.json``, the per-query CSV, ``report.md`` and four PNG figures.

Entry point: :func:`write_report` (what ``livingrag eval stream`` calls when a run finishes, and what
re-reports a finished run from its records). :func:`build_results` computes every table as plain
JSON-able data; :func:`render_markdown` lays them out as the paper does, with the paper's own figure
beside ours wherever the metric is the same, always labelled as the paper's.

The main tables use one stream order (order 0, the dataset order, when every system ran it in full,
else the first such order; see :func:`main_order`); Table 18 gives the
mean and sample standard deviation over all orders.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from livingrag.evaluation import paper
from livingrag.evaluation.datasets import Dataset
from livingrag.evaluation.feedback import feedback_stats, learned_gate_stats
from livingrag.evaluation.metrics import (
    Prices,
    RunSummary,
    passage_recall_at_k,
    relative_delta,
    summarize_run,
)
from livingrag.evaluation.paired import fixed_and_broke, paired_bootstrap
from livingrag.evaluation.plots import plot_experience_use, plot_gate_dynamics, plot_tokens, plot_unavailable
from livingrag.evaluation.records import (
    ABLATION_SYSTEMS,
    SYSTEM_LINEAR,
    SYSTEM_LIVING,
    QueryRecord,
    by_system_and_order,
    system_label,
    write_records_csv,
)
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

DASH = "–"


def _pct(x: float | None, digits: int = 2) -> str:
    return DASH if x is None else f"{100 * x:.{digits}f}"


def _num(x: float | None, digits: int = 1) -> str:
    return DASH if x is None else f"{x:,.{digits}f}"


def _paper(x: float | None, digits: int = 2) -> str:
    return DASH if x is None else f"{x:,.{digits}f}"


def _rel(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:+.1f}%"


def _ms(m: dict[str, Any] | None, scale: float = 100.0, digits: int = 2) -> str:
    if not m or m.get("mean") is None:
        return DASH
    mean = f"{scale * m['mean']:.{digits}f}"
    return mean if m.get("std") is None else f"{mean}±{scale * m['std']:.{digits}f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _mark(b: bool) -> str:
    return "✓" if b else DASH


def _interval(d: dict[str, Any] | None, scale: float, digits: int) -> str:
    if not d:
        return DASH
    return f"{scale * d['diff']:+.{digits}f} [{scale * d['lo']:+.{digits}f}, {scale * d['hi']:+.{digits}f}]"


def _repeats_section(rows: Sequence[dict[str, Any]]) -> str:
    """A repeat stream's LLM calls and completion tokens per system, against LinearRAG's."""
    base = next((r for r in rows if r["system"] == SYSTEM_LINEAR), None)

    def vs(value: int, key: str) -> str:
        if base is None or not base[key]:
            return f"{value:,}"
        return f"{value:,} ({100 * (value - base[key]) / base[key]:+.1f}%)"

    table = [
        [
            r["system"],
            str(r["questions"]),
            str(r["repeats"]),
            str(r["reused"]),
            vs(r["llm_calls"], "llm_calls"),
            vs(r["completion_tokens"], "completion_tokens"),
            f"{r['worse']} / {r['better']}",
        ]
        for r in rows
    ]
    return "\n".join(
        [
            "\n## Repeated questions (answer reuse)\n",
            _table(
                [
                    "System",
                    "Questions",
                    "Repeats",
                    "Answered from the store",
                    "LLM calls (vs LinearRAG)",
                    "Completion tokens (vs LinearRAG)",
                    "Repeats worse / better than their first answer",
                ],
                table,
            ),
            "\nA repeat is a question asked again later in the stream (verbatim or in other case and "
            "punctuation; `--repeat-share`). Worse: the first asking was Contain-correct and the repeat is not.",
        ]
    )


def feedback_words(config: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """What the feedback of a run was, in words: simulated from the gold answers, at which R."""
    rate = config.get("feedback_rate")
    given = sum(r["feedback"] for r in rows)
    policy = config.get("reuse_answers_from")
    served = (
        f"A repeated question is answered from memory without an LLM call only from an experience that "
        f"`experience.reuse_answers_from={policy}` allows"
        + (" (a person verified or corrected it: here, the simulated person)." if policy == "verified" else ".")
        if policy
        else "A repeated question is answered from memory without an LLM call only from an experience that "
        "`experience.reuse_answers_from` allows (by default one a person verified or corrected)."
    )
    if rate is None and not given:
        head = "This run records no feedback rate and no answer got feedback (it predates `--feedback-rate`)."
    elif not rate:
        head = (
            "No feedback was given in this run (`--feedback-rate 0`). Feedback, when given, is simulated from "
            "the gold answers."
        )
    else:
        seed = config.get("feedback_seed")
        head = (
            f"**Feedback and corrections in this run are simulated from the gold answers**, not given by people: "
            f"each answer of a system with memory was drawn for feedback with probability R = {float(rate):g}"
            + (f" (feedback seed {seed})" if seed is not None else "")
            + ", marked right when it is Contain-correct and otherwise marked wrong with the first gold answer "
            "as the corrected answer, as a person who knows the answer would. Answers served from memory got "
            "feedback too. A verdict is given as soon as its question's write-back is decided"
            + (
                f" (with {config['concurrency']} question(s) in flight the next ones may already be answered by "
                "then: a repeat that close to its first asking cannot use the verdict)"
                if config.get("concurrency")
                else ""
            )
            + ". A simulated correction is always Contain-correct and comes at once; people's verdicts are "
            "sparser, later and sometimes wrong, so read these rows as what trust-based reuse does with the "
            "feedback it is given, not as what a deployment will see."
        )
    return f"{head} {served} LinearRAG keeps no memory and gets no feedback."


def _feedback_section(rows: Sequence[dict[str, Any]], config: dict[str, Any]) -> str:
    """Per system (and order): feedback given, LLM calls, answers served from memory and how many of
    them were wrong, Contain-Acc and tokens, with the paired intervals against LinearRAG."""

    def calls(r: dict[str, Any]) -> str:
        base = r.get("linear_llm_calls")
        if r["system"] == SYSTEM_LINEAR or not base:
            return f"{r['llm_calls']:,}"
        return f"{r['llm_calls']:,} ({100 * (r['llm_calls'] - base) / base:+.1f}%)"

    table = [
        [
            system_label(r["system"]),
            str(r["order"]),
            str(r["questions"]),
            DASH if r["system"] == SYSTEM_LINEAR else f"{r['right']} / {r['wrong']} ({r['corrections']})",
            calls(r),
            str(r["served_from_memory"]),
            str(r["served_wrong"]),
            _pct(r["contain_acc"]),
            _interval(r.get("contain"), 100, 1),
            _num(r["prompt_mean"]),
            _interval(r.get("prompt_tokens"), 1, 1),
            _num(r["completion_mean"]),
            _interval(r.get("completion_tokens"), 1, 1),
        ]
        for r in rows
    ]
    return "\n".join(
        [
            "\n## Feedback and answers from memory\n",
            feedback_words(config, rows) + "\n",
            _table(
                [
                    "System",
                    "Order",
                    "Questions",
                    "Feedback right / wrong (corrected)",
                    "LLM calls (vs LinearRAG)",
                    "Served from memory",
                    "… of them wrong",
                    "Contain-Acc (%)",
                    "Δ Contain-Acc (points)",
                    "Prompt tokens / q",
                    "Δ Prompt tokens",
                    "Completion tokens / q",
                    "Δ Completion tokens",
                ],
                table,
            ),
            "\nLLM calls: answers that reached the LLM (neither served from memory nor failed). Served from "
            "memory: answers given again from a stored experience without an LLM call; wrong: not "
            "Contain-correct against the gold answers. Each Δ is the system minus LinearRAG on the same "
            "questions with the 95 % interval of 10,000 paired bootstrap resamples (as in the paired section).",
        ]
    )


def _paired_section(rows: Sequence[dict[str, Any]]) -> str:
    """Each system against LinearRAG, question by question, with 95 % paired bootstrap intervals."""
    out = ["\n## Paired against LinearRAG (95 % bootstrap intervals)\n"]
    if not rows:
        out.append("Needs a LinearRAG run and another system on the same questions.")
        return "\n".join(out)
    table = []
    for r in rows:
        c = r.get("contain")
        table.append(
            [
                r["system"],
                str(r["order"]),
                str(r["n"]),
                f"{_pct(c['mean_a'])} vs {_pct(c['mean_b'])}" if c else DASH,
                _interval(c, 100, 1),
                DASH if r.get("fixed") is None else f"{r['fixed']} / {r['broke']}",
                _interval(r.get("completion_tokens"), 1, 1),
                _interval(r.get("passage_recall_at_5"), 100, 1),
            ]
        )
    out.append(
        _table(
            [
                "System",
                "Order",
                "Questions",
                "Contain-Acc (%) vs LinearRAG",
                "Δ Contain-Acc (points)",
                "Fixed / broke",
                "Δ Completion tokens",
                "Δ per-passage R@5 (points)",
            ],
            table,
        )
    )
    out.append(
        "\nEach difference is the system minus LinearRAG on the same questions, with the percentile interval "
        "of 10,000 paired bootstrap resamples; order `all` averages each question over the orders. Fixed: "
        "questions the system answers right and LinearRAG wrong; broke: the reverse. Questions that failed "
        "in either system are left out."
    )
    return "\n".join(out)


@dataclass(frozen=True)
class _ReportView:
    """What the sections of ``report.md`` read from :func:`build_results`' output."""

    tables: dict[str, Any]
    dataset: dict[str, Any]
    paper_row: str | None
    config: dict[str, Any]
    main_order: int
    acc_name: str
    by_system: dict[str, dict[str, Any]]
    systems_run: list[str]
    orders: list[Any]

    @classmethod
    def of(cls, results: dict[str, Any]) -> _ReportView:
        """The view of one ``results`` dict; ``by_system`` is its accuracy rows by system."""
        t = results["tables"]
        return cls(
            tables=t,
            dataset=results["dataset"],
            paper_row=results["dataset"]["paper_row"],
            config=results["config"],
            main_order=results["main_order"],
            acc_name="LLM-Acc" if results["acc_metric"] == "llm" else "Contain-Acc",
            by_system={r["system"]: r for r in t["accuracy"]},
            systems_run=results["systems"],
            orders=results["orders"],
        )


def _heading(title: str) -> str:
    return f"\n## {title}\n"


def _with_paper(rows: list[list[str]], table: dict[str, Any], row: str | None, cells: Callable[..., list[str]]) -> None:
    """Append the paper's row of ``table`` for ``row`` (its values unpacked into ``cells``) when it has one."""
    if row in table:
        rows.append(cells(*table[row]))


def _header(v: _ReportView) -> list[str]:
    """The title, the run's settings and what the **paper** columns are."""
    ds, cfg, row = v.dataset, v.config, v.paper_row
    stats = ds.get("stats") or {}
    first = v.by_system[next(iter(v.by_system))]
    out = [
        f"# Online-stream evaluation: {ds['name']}\n",
        f"- Questions in the stream: {first['queries']}"
        + (
            f" (dataset: {stats.get('questions')} questions, {stats.get('documents')} corpus documents)"
            if stats
            else ""
        ),
        f"- Systems: {', '.join(system_label(s) for s in v.systems_run)}; orders: {len(v.orders)} "
        f"(main tables: order {v.main_order})",
        f"- LLM judge: {cfg['judge'] or 'none configured: LLM-Acc is unavailable (not estimated)'}",
    ]
    p = cfg["prices"]
    out.append(
        f"- Prices: ${p['prompt_per_m']:.2f} per million prompt tokens, "
        f"${p['completion_per_m']:.2f} per million completion tokens"
    )
    for k in ("model", "llm", "experience_profile", "seed", "skip", "limit", "retrieval_preset", "notes"):
        if cfg.get(k) is not None:
            out.append(f"- {k.replace('_', ' ').capitalize()}: {cfg[k]}")
    if row:
        out.append(
            f"\nColumns marked **paper** are the {paper.PAPER}'s own results on its {row} stream (Qwen3.6 Plus, "
            "its corpus and stream size), copied from its tables for orientation. They are not results of this run: "
            "compare directions and rough sizes, not digits."
        )
    else:
        out.append("\nNo paper row corresponds to this dataset, so no paper figures are shown.")
    return out


_PAPER_NAME = {SYSTEM_LINEAR: "LinearRAG", SYSTEM_LIVING: "LivingRAG"}


def _accuracy(v: _ReportView) -> list[str]:
    """Paper Table 2: accuracy per system, then why LLM-Acc is missing or partial, then the paper's baselines."""
    row, accuracy = v.paper_row, v.tables["accuracy"]
    p2 = {name: vals.get(row) for name, vals in paper.TABLE2.items()} if row else {}
    rows = []
    for s, a in v.by_system.items():
        pv = p2.get(_PAPER_NAME.get(s, "")) if row else None
        rows.append(
            [
                system_label(s),
                _pct(a["contain_acc"]),
                _pct(a["llm_acc"]),
                _pct(a["em"]),
                _pct(a["f1"]),
                _paper(pv[0]) if pv else DASH,
                _paper(pv[1]) if pv else DASH,
            ]
        )
    headers = [
        "System",
        "Contain-Acc (%)",
        "LLM-Acc (%)",
        "EM (%)",
        "F1 (%)",
        "paper Contain-Acc (%)",
        "paper LLM-Acc (%)",
    ]
    out = [_heading("Accuracy (paper Table 2)"), _table(headers, rows)]
    missing = [a for a in accuracy if a["llm_acc"] is None and a["llm_acc_reason"]]
    if missing and len({a["llm_acc_reason"] for a in missing}) == 1 and len(missing) == len(accuracy):
        out.append(f"\nLLM-Acc unavailable: {missing[0]['llm_acc_reason']}.")
    else:
        out += [f"\nLLM-Acc unavailable for {system_label(a['system'])}: {a['llm_acc_reason']}." for a in missing]
    out += [
        f"\n{system_label(a['system'])}: LLM-Acc over {a['llm_judged']} of {a['queries']} answers "
        "(the judge gave no verdict on the rest)."
        for a in accuracy
        if a["llm_acc"] is not None and a["llm_judged"] < a["queries"]
    ]
    if row and any(v for k, v in p2.items() if k not in _PAPER_NAME.values()):
        out.append(
            f"\nThe paper's other baselines on {row} (Contain-Acc / LLM-Acc, %): "
            + "; ".join(
                f"{k} {_paper(v[0])} / {_paper(v[1])}" for k, v in p2.items() if v and k not in _PAPER_NAME.values()
            )
            + "."
        )
    return out


def _recall(v: _ReportView) -> list[str]:
    """Passage recall per system (the paper reports none)."""
    headers = [
        "System",
        "all-gold R@2 (%)",
        "all-gold R@5 (%)",
        "per-passage R@2 (%)",
        "per-passage R@5 (%)",
        "questions with gold",
    ]
    rows = [
        [
            system_label(r["system"]),
            _pct(r["all_gold_recall_at_2"]),
            _pct(r["all_gold_recall_at_5"]),
            _pct(r["passage_recall_at_2"]),
            _pct(r["passage_recall_at_5"]),
            str(r["questions_with_gold"]),
        ]
        for r in v.tables["retrieval"]
    ]
    return [
        _heading("Passage recall"),
        _table(headers, rows),
        "\nA question is recalled at k when all its gold passages are in the top k; per-passage recall counts "
        "each gold passage. The paper reports no recall.",
    ]


def _tokens(v: _ReportView) -> list[str]:
    """Paper Table 3: tokens and cost per system, and LivingRAG against LinearRAG when both ran."""
    t, row = v.tables, v.paper_row
    rows = [
        [
            system_label(r["system"]),
            str(r["queries"]),
            _num(r["prompt_mean"]),
            _num(r["completion_mean"]),
            f"${r['cost_usd']:.4f}",
        ]
        for r in t["tokens"]
    ]
    headers = ["System", "# Queries", "Prompt tokens / q", "Completion tokens / q", "Run cost (USD)"]
    out = [_heading("Tokens and cost (paper Table 3)"), _table(headers, rows)]
    if "tokens_delta" not in t:
        return out
    tok = {r["system"]: r for r in t["tokens"]}
    lt, vt, d = tok[SYSTEM_LINEAR], tok[SYSTEM_LIVING], t["tokens_delta"]
    hdr = [
        "",
        "# Queries",
        "Prompt Linear",
        "Prompt Living",
        "Rel. Δ",
        "Completion Linear",
        "Completion Living",
        "Rel. Δ",
        "Cost Linear",
        "Cost Living",
        "Rel. Δ",
    ]
    rows = [
        [
            "this run",
            str(lt["queries"]),
            _num(lt["prompt_mean"]),
            _num(vt["prompt_mean"]),
            _rel(d["prompt"]),
            _num(lt["completion_mean"]),
            _num(vt["completion_mean"]),
            _rel(d["completion"]),
            f"${lt['cost_usd']:.4f}",
            f"${vt['cost_usd']:.4f}",
            _rel(d["cost"]),
        ]
    ]
    _with_paper(
        rows,
        paper.TABLE3,
        row,
        lambda q, pl, pv, cl, cv, kl, kv: [
            f"**paper** ({row})",
            f"{q:,}",
            _paper(pl, 1),
            _paper(pv, 1),
            _rel(relative_delta(pv, pl)),
            _paper(cl, 1),
            _paper(cv, 1),
            _rel(relative_delta(cv, cl)),
            f"${kl:.2f}",
            f"${kv:.2f}",
            _rel(relative_delta(kv, kl)),
        ],
    )
    return [
        *out,
        "\n" + _table(hdr, rows),
        "\nRel. Δ = (LivingRAG − LinearRAG) / LinearRAG; negative is a saving. Tokens are per query; "
        "judge calls are not counted.",
    ]


def _timing(v: _ReportView) -> list[str]:
    """Paper Table 15: module-level seconds per question."""
    row = v.paper_row
    rows = [
        [
            system_label(r["system"]),
            _num(r["llm_s"], 3),
            _num(r["retrieval_s"], 3),
            _pct(r["retrieval_over_llm"], 1) + ("%" if r["retrieval_over_llm"] is not None else ""),
            _num(r["validation_s"], 3) if r["validation_s"] is not None else "N/A",
        ]
        for r in v.tables["timing"]
    ]
    if row in paper.TABLE15:
        rows += [
            [
                f"**paper** {system_label(s)} ({row})",
                _paper(llm_s),
                _paper(ret_s),
                f"{ratio:.1f}%",
                _paper(val) if val is not None else "N/A",
            ]
            for s, (llm_s, ret_s, ratio, val) in paper.TABLE15[row].items()
        ]
    return [
        _heading("Time per query (paper Table 15)"),
        _table(["Method", "LLM s/q", "Retrieval s/q", "Retrieval / LLM", "Validation s/q"], rows),
        "\nModule-level means per question (concurrent LLM calls overlap, so these are not wall-clock latency). "
        "Validation is LivingRAG's post-answer novelty and grounding checks.",
    ]


def _opportunities(v: _ReportView) -> list[str]:
    """Paper Table 1: the reuse opportunities of the fixed run."""
    o, cfg, row = v.tables["opportunities"], v.config, v.paper_row
    rows = [
        [
            f"this run ({system_label(o['source_system'])}, order {v.main_order})",
            _pct(o["entity_reuse"]),
            _pct(o["graph_reuse"]),
            _pct(o["graph_reuse_passages"]),
            _pct(o["graph_reuse_entities"]),
            _pct(o["template_reuse"]),
        ]
    ]
    _with_paper(
        rows, paper.TABLE1, row, lambda e, g, tp: [f"**paper** ({row})", _paper(e), _paper(g), DASH, DASH, _paper(tp)]
    )
    headers = [
        "",
        "Entity reuse (%)",
        "Graph-neigh. reuse (%)",
        "… by passages (%)",
        "… by entities (%)",
        "Template reuse (%)",
    ]
    return [
        _heading("Reuse opportunities (paper Table 1)"),
        _table(headers, rows),
        f"\nCausal: each query is compared with earlier queries only. Graph-neighbourhood reuse: Jaccard ≥ "
        f"{cfg['jaccard_threshold']} on the top-{cfg['graph_top_k']} passages or on the context entities, on the fixed "
        f"LinearRAG run{'' if o['graph_reuse'] is not None else ' (not measured: this run has no LinearRAG system)'}. "
        f"Template reuse: no shared seed entity and masked-question TF-IDF cosine ≥ {cfg['template_threshold']}"
        + (" (not measured: the records carry no masked questions)." if o["template_reuse"] is None else "."),
    ]


def _realised(v: _ReportView) -> list[str]:
    """Paper Table 4: the reuse LivingRAG realised."""
    t, row = v.tables, v.paper_row
    title = _heading("Realised reuse (paper Table 4)")
    if "realised" not in t:
        return [title, "Needs a LivingRAG run."]
    rz = t["realised"]
    rows = [
        [
            "this run (LivingRAG)",
            _pct(rz["graph_transfer"]),
            _pct(t["opportunities"]["template_reuse"]),
            _pct(rz["template_reuse"]),
            _pct(rz["activation_map_use"]),
            _pct(rz["scaffold_use"]),
        ]
    ]
    _with_paper(
        rows, paper.TABLE4, row, lambda g, op, ru: [f"**paper** ({row})", _paper(g), _paper(op), _paper(ru), DASH, DASH]
    )
    headers = [
        "",
        "Graph trans. (%)",
        "Template Opp. (%)",
        "Template Reuse (%)",
        "Act.-map fusion used (%)",
        "Scaffold used (%)",
    ]
    return [
        title,
        _table(headers, rows),
        "\nGraph transfer: fusion added new above-threshold entities. "
        "Template reuse: the scaffold's masked-template "
        f"similarity ≥ {v.config['template_threshold']}. Opportunity and realised values are measured differently: "
        "read them as a trend.",
    ]


def _ablations(v: _ReportView) -> list[str]:
    """Paper Table 5: accuracy and completion-token reduction of LivingRAG and its ablations."""
    row = v.paper_row
    title = _heading("Ablations (paper Table 5)")
    abl = [a for a in v.tables.get("ablations", []) if a["system"] in (SYSTEM_LIVING, *ABLATION_SYSTEMS.values())]
    if not (len(abl) > 1 or any(a["system"] != SYSTEM_LIVING for a in abl)):
        return [title, "No ablation systems in this run (`--ablations fusion,scaffold,gate`)."]
    col = {"2Wiki": 0, "MuSiQue-full": 1, "WixQA": 2}.get(row or "")
    rows = []
    for a in abl:
        pv = paper.TABLE5.get(a["system"])
        rows.append(
            [
                system_label(a["system"]),
                _pct(a["acc"]),
                _pct(a["completion_reduction"], 1),
                _paper(pv[col]) if pv and col is not None else DASH,
                _paper(pv[3], 1) if pv else DASH,
            ]
        )
    headers = [
        "Variant",
        f"{v.acc_name} (%)",
        "Red. (%)",
        f"paper LLM-Acc (%){f' ({row})' if col is not None else ''}",
        "paper Red. (%)",
    ]
    return [
        title,
        _table(headers, rows),
        "\nRed. = completion-token reduction against LinearRAG in this run. The paper's Red. is its average over "
        "2Wiki, MuSiQue-full and WixQA.",
    ]


def _gates(v: _ReportView) -> list[str]:
    """Paper Table 6: the write-back gates' pass rates and what was stored."""
    row = v.paper_row
    title = _heading("Write-back gates (paper Table 6)")
    if not v.tables["gates"]:
        return [title, "No system in this run made write-back decisions."]
    rows = [
        [
            system_label(g["system"]),
            str(g["questions"]),
            _pct(g["ns_pass"]),
            str(g["gs_checked"]),
            _pct(g["gs_pass"]),
            str(g["gs_reject"]),
            str(g["stored"]),
        ]
        for g in v.tables["gates"]
    ]
    _with_paper(
        rows,
        paper.TABLE6,
        row,
        lambda q, ns, gc, gp, gr, st: [
            f"**paper** LivingRAG ({row})",
            f"{q:,}",
            _paper(ns),
            str(gc),
            _paper(gp),
            str(gr),
            str(st),
        ],
    )
    headers = ["", "Questions", "NS pass (%)", "GS checked", "GS pass (%)", "GS reject", "Stored experiences"]
    return [
        title,
        _table(headers, rows),
        "\nNS pass is over all questions; GS runs only on candidates that passed NS, "
        "and GS pass is among those checked.",
    ]


def _coverage(v: _ReportView) -> list[str]:
    """Paper Table 16: how much of the experience store was used."""
    t, row = v.tables, v.paper_row
    title = _heading("Experience coverage (paper Table 16)")
    if "coverage" not in t:
        return [title, "Needs a LivingRAG run."]
    c = t["coverage"]
    rows = [
        [
            "this run (LivingRAG)",
            str(c["stored"]),
            str(c["topk_selections"]),
            _pct(c["topk_coverage"]),
            str(c["scaffold_uses"]),
            _pct(c["scaffold_coverage"]),
            str(c["max_scaffold_uses"]),
        ]
    ]
    _with_paper(
        rows,
        paper.TABLE16,
        row,
        lambda st, ts, tc, su, sc, mx: [
            f"**paper** ({row})",
            str(st),
            f"{ts:,}",
            _paper(tc),
            f"{su:,}",
            _paper(sc),
            str(mx),
        ],
    )
    headers = [
        "",
        "Stored experiences",
        "Top-K selections",
        "Coverage (%)",
        "Scaffold uses",
        "Coverage (%)",
        "Max uses",
    ]
    return [title, _table(headers, rows), "\nCoverage: the share of stored experiences selected at least once."]


def _paired(v: _ReportView) -> list[str]:
    """Each system against LinearRAG, question by question (:func:`_paired_section`)."""
    return [_paired_section(v.tables.get("paired") or [])]


def _feedback(v: _ReportView) -> list[str]:
    """Feedback and answers from memory per system (:func:`_feedback_section`), when a system with
    memory ran."""
    rows = v.tables.get("feedback") or []
    if not any(r["system"] != SYSTEM_LINEAR for r in rows):
        return []
    return [_feedback_section(rows, v.config)]


def _learned_gate(v: _ReportView) -> list[str]:
    """The learned gate per system with memory (:class:`~livingrag.evaluation.feedback.LearnedGateStats`),
    when a calibrator watched or decided at least one write-back."""
    rows = [r for r in v.tables.get("learned_gate") or [] if r["watched"] or r["served_unverified"]]
    if not rows:
        return []

    def prec(n: int, p: float | None) -> str:
        return f"{n} ({_pct(p)} right)" if p is not None else str(n)

    table = [
        [
            system_label(r["system"]),
            str(r["order"]),
            str(r["watched"]),
            f"{r['decided_learned']}" + (f" (from #{r['first_learned_position']})" if r["decided_learned"] else ""),
            _num(r["online_auc"], 3) if r["online_auc"] is not None else DASH,
            _num(r["online_auc_late"], 3) if r["online_auc_late"] is not None else DASH,
            prec(r["stored_fixed"], r["stored_fixed_precision"]),
            prec(r["stored_learned"], r["stored_learned_precision"]),
            prec(r["stored_late"], r["stored_late_precision"]),
            str(r["stored_auto_verified"]),
            f"{r['served_unverified']} ({r['served_unverified_wrong']} wrong)",
        ]
        for r in rows
    ]
    return [
        "\n## The learned gate\n",
        "Each tenant's gate learns from the verdicts (here simulated from the gold answers): a calibrator fitted "
        "on the labels of earlier questions watches every write-back (its P(right) is logged) and decides once "
        "its time-ordered held-out AUC reaches gates.learn_min_auc. Online AUC is the logged P(right) against "
        "Contain-correctness, each from a model that had not seen that question: a held-out figure.\n",
        _table(
            [
                "System",
                "Order",
                "Watched",
                "Decided by the learned gate",
                "Online AUC",
                "Online AUC, 2nd half",
                "Stored by the fixed gate",
                "Stored by the learned gate",
                "Stored in the 2nd half",
                "Auto-verified",
                "Served without feedback",
            ],
            table,
        ),
    ]


def _repeats(v: _ReportView) -> list[str]:
    """The repeated questions of a repeat stream (:func:`_repeats_section`), when there are any."""
    return [_repeats_section(v.tables["repeats"])] if v.tables.get("repeats") else []


def _benefit(v: _ReportView) -> list[str]:
    """Paper Table 17: LivingRAG − LinearRAG by the reuse signals realised."""
    t, row = v.tables, v.paper_row
    title = _heading("Benefit by realised reuse signal (paper Table 17)")
    if "paired_deltas" not in t:
        return [title, "Needs both a LinearRAG and a LivingRAG run."]
    pd = paper.TABLE17.get(row or "", {})
    rows = []
    for d in t["paired_deltas"]:
        pv = pd.get((d["graph"], d["template"]))
        rows.append(
            [
                _mark(d["graph"]),
                _mark(d["template"]),
                str(d["n"]),
                f"{100 * d['delta_acc']:+.2f}",
                f"{d['delta_completion_tokens']:+.1f}",
                f"{pv[0]:+.2f}" if pv else DASH,
                f"{pv[1]:+.1f}" if pv else DASH,
            ]
        )
    headers = [
        "Graph",
        "Template",
        "Questions",
        f"Δ{v.acc_name} (points)",
        "Δ Completion tokens",
        "paper ΔLLM-Acc",
        "paper Δ Completion tokens",
    ]
    return [
        title,
        _table(headers, rows),
        "\nΔ = LivingRAG − LinearRAG on the same question in the same order; negative token values are savings. "
        "Rows without questions are left out.",
    ]


def _pair(m: dict[str, Any], scale: float = 100.0, digits: int = 2) -> str:
    return f"{_ms(m.get(SYSTEM_LINEAR), scale, digits)} / {_ms(m.get(SYSTEM_LIVING), scale, digits)}"


def _paper_pair(v: Any, digits: int = 2) -> str:
    return DASH if v is None else " / ".join(f"{m:.{digits}f}±{s:.{digits}f}" for m, s in v)


def _paper_ms(v: Any) -> str:
    return f"{v[0]:.2f}±{v[1]:.2f}" if v else DASH


def _orders(v: _ReportView) -> list[str]:
    """Paper Table 18: mean ± sample standard deviation over the stream orders."""
    od, row = v.tables["orders"], v.paper_row
    rows = [
        [
            f"this run, {od['orders']} order(s)",
            _pair(od["contain_acc"]),
            _pair(od["llm_acc"]),
            _pair(od["completion_tokens"], 1.0, 1),
            _ms(od["graph_transfer"]),
            _ms(od["template_reuse"]),
        ]
    ]
    if row in paper.TABLE18:
        p18 = paper.TABLE18[row]
        rows.append(
            [
                f"**paper**, 3 orders ({row})",
                _paper_pair(p18["contain_acc"]),
                _paper_pair(p18["llm_acc"]),
                _paper_pair(p18["completion_tokens"], 1),
                _paper_ms(p18["graph_transfer"]),
                _paper_ms(p18["template_reuse"]),
            ]
        )
    headers = ["Setting", "Cont.-Acc (%)", "LLM-Acc (%)", "Completion tokens", "Graph trans. (%)", "Template reuse (%)"]
    return [
        _heading("Query-order robustness (paper Table 18)"),
        _table(headers, rows),
        "\nCells are LinearRAG / LivingRAG, mean ± sample standard deviation over orders (no ± with one order).",
    ]


def _clusters(v: _ReportView) -> list[str]:
    """Paper Table 8: experience clusters in the stream's decompositions, when the dataset has them."""
    t = v.tables
    if "clusters" not in t:
        return []
    rows = [
        [
            label,
            str(c["questions"]),
            str(c["documents"]),
            str(c["clusters"]),
            _pct(c["coverage"], 1),
            _num(c["avg_size"], 1),
            str(c["max_size"]),
        ]
        for label, c in (
            ("this stream (sub-question = support passage + answer)", t["clusters"]),
            ("this stream (sub-question = MuSiQue id)", t["clusters_by_id"]),
        )
    ]
    rows += [
        [f"**paper** ({name})", f"{q:,}", f"{ch:,}", str(cl), _paper(cov, 1), _paper(avg, 1), str(mx)]
        for name, (q, ch, cl, cov, avg, mx) in paper.TABLE8.items()
    ]
    return [
        _heading("Experience clusters in MuSiQue decompositions (paper Table 8)"),
        _table(["", "#Q", "#Chunks", "#Clusters", "Coverage (%)", "Avg. size", "Max size"], rows),
        "\nQuestions are linked when they share a decomposed single-hop question; clusters are connected "
        "components of at least two questions. #Chunks here is the corpus size in documents.",
    ]


FIGURE_CAPTIONS: dict[str, str] = {
    "fig2": "Figure 2: completion tokens per stream segment (LinearRAG blue, LivingRAG orange; green where "
    "LivingRAG uses fewer, red where more; the first 10 % expanded).",
    "fig3": "Figure 3: write-back gate dynamics (NS pass and write-back per segment, GS pass among the checked, "
    "cumulative stored).",
    "fig8": "Figure 8: prompt tokens per stream segment.",
    "fig9": "Figure 9: experience use (activation-map retrieval, scaffold use, write-back, cumulative stored).",
}


def _figures(v: _ReportView) -> list[str]:
    """The four figures, each with its caption."""
    return [_heading("Figures")] + [
        f"![{FIGURE_CAPTIONS[k]}]({name})\n\n{FIGURE_CAPTIONS[k]}\n" for k, name in FIGURES.items()
    ]


def _dataset_notes(v: _ReportView) -> list[str]:
    """The dataset loader's notes on what it skipped or repaired, when there are any."""
    problems = v.dataset.get("problems") or []
    return [_heading("Dataset notes"), *(f"- {p}" for p in problems)] if problems else []


SECTIONS: tuple[Callable[[_ReportView], list[str]], ...] = (
    _header,
    _accuracy,
    _recall,
    _tokens,
    _timing,
    _opportunities,
    _realised,
    _ablations,
    _gates,
    _coverage,
    _paired,
    _feedback,
    _learned_gate,
    _repeats,
    _benefit,
    _orders,
    _clusters,
    _figures,
    _dataset_notes,
)
"""The sections of ``report.md`` in order; each returns its blocks, which are joined by newlines."""


def render_markdown(results: dict[str, Any]) -> str:
    """``report.md`` from :func:`build_results`' output: the :data:`SECTIONS` in order."""
    view = _ReportView.of(results)
    return "\n".join(block for section in SECTIONS for block in section(view)).rstrip() + "\n"


# --------------------------------------------------------------------------------------------------
# Files


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
