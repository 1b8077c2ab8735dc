"""The text pieces of ``report.md``: how a cell shows a number, an interval or a missing value, and
the prose of the repeats, feedback and paired-comparison sections."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from livingrag.evaluation.records import SYSTEM_LINEAR, system_label

DASH = "–"


def fmt_pct(x: float | None, digits: int = 2) -> str:
    return DASH if x is None else f"{100 * x:.{digits}f}"


def fmt_num(x: float | None, digits: int = 1) -> str:
    return DASH if x is None else f"{x:,.{digits}f}"


def fmt_paper(x: float | None, digits: int = 2) -> str:
    return DASH if x is None else f"{x:,.{digits}f}"


def fmt_rel(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:+.1f}%"


def fmt_ms(m: dict[str, Any] | None, scale: float = 100.0, digits: int = 2) -> str:
    if not m or m.get("mean") is None:
        return DASH
    mean = f"{scale * m['mean']:.{digits}f}"
    return mean if m.get("std") is None else f"{mean}±{scale * m['std']:.{digits}f}"


def fmt_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def fmt_mark(b: bool) -> str:
    return "✓" if b else DASH


def fmt_interval(d: dict[str, Any] | None, scale: float, digits: int) -> str:
    if not d:
        return DASH
    return f"{scale * d['diff']:+.{digits}f} [{scale * d['lo']:+.{digits}f}, {scale * d['hi']:+.{digits}f}]"


def repeats_section(rows: Sequence[dict[str, Any]]) -> str:
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
            fmt_table(
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


def feedback_section(rows: Sequence[dict[str, Any]], config: dict[str, Any]) -> str:
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
            fmt_pct(r["contain_acc"]),
            fmt_interval(r.get("contain"), 100, 1),
            fmt_num(r["prompt_mean"]),
            fmt_interval(r.get("prompt_tokens"), 1, 1),
            fmt_num(r["completion_mean"]),
            fmt_interval(r.get("completion_tokens"), 1, 1),
        ]
        for r in rows
    ]
    return "\n".join(
        [
            "\n## Feedback and answers from memory\n",
            feedback_words(config, rows) + "\n",
            fmt_table(
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


def paired_section(rows: Sequence[dict[str, Any]]) -> str:
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
                f"{fmt_pct(c['mean_a'])} vs {fmt_pct(c['mean_b'])}" if c else DASH,
                fmt_interval(c, 100, 1),
                DASH if r.get("fixed") is None else f"{r['fixed']} / {r['broke']}",
                fmt_interval(r.get("completion_tokens"), 1, 1),
                fmt_interval(r.get("passage_recall_at_5"), 100, 1),
            ]
        )
    out.append(
        fmt_table(
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
