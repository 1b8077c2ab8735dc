"""``report.md`` of a stream run: :func:`render_markdown` lays out the tables of
:func:`~livingrag.evaluation.report_results.build_results` as the paper does, with the paper's own
figure beside ours wherever the metric is the same, always labelled as the paper's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from livingrag.evaluation import paper
from livingrag.evaluation.metrics import relative_delta
from livingrag.evaluation.records import ABLATION_SYSTEMS, SYSTEM_LINEAR, SYSTEM_LIVING, system_label
from livingrag.evaluation.report_results import FIGURES
from livingrag.evaluation.report_text import (
    DASH,
    feedback_section,
    fmt_mark,
    fmt_ms,
    fmt_num,
    fmt_paper,
    fmt_pct,
    fmt_rel,
    fmt_table,
    paired_section,
    repeats_section,
)


@dataclass(frozen=True)
class _ReportView:
    """What the sections of ``report.md`` read from the output of
    :func:`~livingrag.evaluation.report_results.build_results`."""

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
                fmt_pct(a["contain_acc"]),
                fmt_pct(a["llm_acc"]),
                fmt_pct(a["em"]),
                fmt_pct(a["f1"]),
                fmt_paper(pv[0]) if pv else DASH,
                fmt_paper(pv[1]) if pv else DASH,
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
    out = [_heading("Accuracy (paper Table 2)"), fmt_table(headers, rows)]
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
                f"{k} {fmt_paper(v[0])} / {fmt_paper(v[1])}"
                for k, v in p2.items()
                if v and k not in _PAPER_NAME.values()
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
            fmt_pct(r["all_gold_recall_at_2"]),
            fmt_pct(r["all_gold_recall_at_5"]),
            fmt_pct(r["passage_recall_at_2"]),
            fmt_pct(r["passage_recall_at_5"]),
            str(r["questions_with_gold"]),
        ]
        for r in v.tables["retrieval"]
    ]
    return [
        _heading("Passage recall"),
        fmt_table(headers, rows),
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
            fmt_num(r["prompt_mean"]),
            fmt_num(r["completion_mean"]),
            f"${r['cost_usd']:.4f}",
        ]
        for r in t["tokens"]
    ]
    headers = ["System", "# Queries", "Prompt tokens / q", "Completion tokens / q", "Run cost (USD)"]
    out = [_heading("Tokens and cost (paper Table 3)"), fmt_table(headers, rows)]
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
            fmt_num(lt["prompt_mean"]),
            fmt_num(vt["prompt_mean"]),
            fmt_rel(d["prompt"]),
            fmt_num(lt["completion_mean"]),
            fmt_num(vt["completion_mean"]),
            fmt_rel(d["completion"]),
            f"${lt['cost_usd']:.4f}",
            f"${vt['cost_usd']:.4f}",
            fmt_rel(d["cost"]),
        ]
    ]
    _with_paper(
        rows,
        paper.TABLE3,
        row,
        lambda q, pl, pv, cl, cv, kl, kv: [
            f"**paper** ({row})",
            f"{q:,}",
            fmt_paper(pl, 1),
            fmt_paper(pv, 1),
            fmt_rel(relative_delta(pv, pl)),
            fmt_paper(cl, 1),
            fmt_paper(cv, 1),
            fmt_rel(relative_delta(cv, cl)),
            f"${kl:.2f}",
            f"${kv:.2f}",
            fmt_rel(relative_delta(kv, kl)),
        ],
    )
    return [
        *out,
        "\n" + fmt_table(hdr, rows),
        "\nRel. Δ = (LivingRAG − LinearRAG) / LinearRAG; negative is a saving. Tokens are per query; "
        "judge calls are not counted.",
    ]


def _timing(v: _ReportView) -> list[str]:
    """Paper Table 15: module-level seconds per question."""
    row = v.paper_row
    rows = [
        [
            system_label(r["system"]),
            fmt_num(r["llm_s"], 3),
            fmt_num(r["retrieval_s"], 3),
            fmt_pct(r["retrieval_over_llm"], 1) + ("%" if r["retrieval_over_llm"] is not None else ""),
            fmt_num(r["validation_s"], 3) if r["validation_s"] is not None else "N/A",
        ]
        for r in v.tables["timing"]
    ]
    if row in paper.TABLE15:
        rows += [
            [
                f"**paper** {system_label(s)} ({row})",
                fmt_paper(llm_s),
                fmt_paper(ret_s),
                f"{ratio:.1f}%",
                fmt_paper(val) if val is not None else "N/A",
            ]
            for s, (llm_s, ret_s, ratio, val) in paper.TABLE15[row].items()
        ]
    return [
        _heading("Time per query (paper Table 15)"),
        fmt_table(["Method", "LLM s/q", "Retrieval s/q", "Retrieval / LLM", "Validation s/q"], rows),
        "\nModule-level means per question (concurrent LLM calls overlap, so these are not wall-clock latency). "
        "Validation is LivingRAG's post-answer novelty and grounding checks.",
    ]


def _opportunities(v: _ReportView) -> list[str]:
    """Paper Table 1: the reuse opportunities of the fixed run."""
    o, cfg, row = v.tables["opportunities"], v.config, v.paper_row
    rows = [
        [
            f"this run ({system_label(o['source_system'])}, order {v.main_order})",
            fmt_pct(o["entity_reuse"]),
            fmt_pct(o["graph_reuse"]),
            fmt_pct(o["graph_reuse_passages"]),
            fmt_pct(o["graph_reuse_entities"]),
            fmt_pct(o["template_reuse"]),
        ]
    ]
    _with_paper(
        rows,
        paper.TABLE1,
        row,
        lambda e, g, tp: [f"**paper** ({row})", fmt_paper(e), fmt_paper(g), DASH, DASH, fmt_paper(tp)],
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
        fmt_table(headers, rows),
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
            fmt_pct(rz["graph_transfer"]),
            fmt_pct(t["opportunities"]["template_reuse"]),
            fmt_pct(rz["template_reuse"]),
            fmt_pct(rz["activation_map_use"]),
            fmt_pct(rz["scaffold_use"]),
        ]
    ]
    _with_paper(
        rows,
        paper.TABLE4,
        row,
        lambda g, op, ru: [f"**paper** ({row})", fmt_paper(g), fmt_paper(op), fmt_paper(ru), DASH, DASH],
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
        fmt_table(headers, rows),
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
                fmt_pct(a["acc"]),
                fmt_pct(a["completion_reduction"], 1),
                fmt_paper(pv[col]) if pv and col is not None else DASH,
                fmt_paper(pv[3], 1) if pv else DASH,
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
        fmt_table(headers, rows),
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
            fmt_pct(g["ns_pass"]),
            str(g["gs_checked"]),
            fmt_pct(g["gs_pass"]),
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
            fmt_paper(ns),
            str(gc),
            fmt_paper(gp),
            str(gr),
            str(st),
        ],
    )
    headers = ["", "Questions", "NS pass (%)", "GS checked", "GS pass (%)", "GS reject", "Stored experiences"]
    return [
        title,
        fmt_table(headers, rows),
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
            fmt_pct(c["topk_coverage"]),
            str(c["scaffold_uses"]),
            fmt_pct(c["scaffold_coverage"]),
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
            fmt_paper(tc),
            f"{su:,}",
            fmt_paper(sc),
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
    return [title, fmt_table(headers, rows), "\nCoverage: the share of stored experiences selected at least once."]


def _paired(v: _ReportView) -> list[str]:
    """Each system against LinearRAG, question by question (:func:`paired_section`)."""
    return [paired_section(v.tables.get("paired") or [])]


def _feedback(v: _ReportView) -> list[str]:
    """Feedback and answers from memory per system (:func:`feedback_section`), when a system with
    memory ran."""
    rows = v.tables.get("feedback") or []
    if not any(r["system"] != SYSTEM_LINEAR for r in rows):
        return []
    return [feedback_section(rows, v.config)]


def _learned_gate(v: _ReportView) -> list[str]:
    """The learned gate per system with memory (:class:`~livingrag.evaluation.feedback.LearnedGateStats`),
    when a calibrator watched or decided at least one write-back."""
    rows = [r for r in v.tables.get("learned_gate") or [] if r["watched"] or r["served_unverified"]]
    if not rows:
        return []

    def prec(n: int, p: float | None) -> str:
        return f"{n} ({fmt_pct(p)} right)" if p is not None else str(n)

    table = [
        [
            system_label(r["system"]),
            str(r["order"]),
            str(r["watched"]),
            f"{r['decided_learned']}" + (f" (from #{r['first_learned_position']})" if r["decided_learned"] else ""),
            fmt_num(r["online_auc"], 3) if r["online_auc"] is not None else DASH,
            fmt_num(r["online_auc_late"], 3) if r["online_auc_late"] is not None else DASH,
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
        fmt_table(
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
    """The repeated questions of a repeat stream (:func:`repeats_section`), when there are any."""
    return [repeats_section(v.tables["repeats"])] if v.tables.get("repeats") else []


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
                fmt_mark(d["graph"]),
                fmt_mark(d["template"]),
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
        fmt_table(headers, rows),
        "\nΔ = LivingRAG − LinearRAG on the same question in the same order; negative token values are savings. "
        "Rows without questions are left out.",
    ]


def _pair(m: dict[str, Any], scale: float = 100.0, digits: int = 2) -> str:
    return f"{fmt_ms(m.get(SYSTEM_LINEAR), scale, digits)} / {fmt_ms(m.get(SYSTEM_LIVING), scale, digits)}"


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
            fmt_ms(od["graph_transfer"]),
            fmt_ms(od["template_reuse"]),
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
        fmt_table(headers, rows),
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
            fmt_pct(c["coverage"], 1),
            fmt_num(c["avg_size"], 1),
            str(c["max_size"]),
        ]
        for label, c in (
            ("this stream (sub-question = support passage + answer)", t["clusters"]),
            ("this stream (sub-question = MuSiQue id)", t["clusters_by_id"]),
        )
    ]
    rows += [
        [f"**paper** ({name})", f"{q:,}", f"{ch:,}", str(cl), fmt_paper(cov, 1), fmt_paper(avg, 1), str(mx)]
        for name, (q, ch, cl, cov, avg, mx) in paper.TABLE8.items()
    ]
    return [
        _heading("Experience clusters in MuSiQue decompositions (paper Table 8)"),
        fmt_table(["", "#Q", "#Chunks", "#Clusters", "Coverage (%)", "Avg. size", "Max size"], rows),
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
    """``report.md`` from the output of :func:`~livingrag.evaluation.report_results.build_results`:
    the :data:`SECTIONS` in order."""
    view = _ReportView.of(results)
    return "\n".join(block for section in SECTIONS for block in section(view)).rstrip() + "\n"
