"""``livingrag demo``: the main job on embedded defaults."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from livingrag.cli.common import console, err_console, examples, load_settings, print_json

if TYPE_CHECKING:
    from livingrag.demo.run import DemoReport

DEMO_HELP = (
    "Index a small knowledge base written for this project (invented multi-hop film facts and a support "
    "knowledge base), then answer a stream of related questions with LinearRAG and LivingRAG side by side "
    "and print a report: answers, tokens, experiences stored and rejected, reuse. Then a simulated user who "
    "knows the demo's gold answers marks LivingRAG's answers right or wrong and corrects the wrong ones, and "
    "a few questions are asked again: verified answers and corrections are served from memory without an LLM "
    "call, unverified memory never is; the history of a corrected experience ends the report. Runs offline on "
    "the embedded defaults (embedded PostgreSQL, packaged models, no API key); each run starts with an empty "
    "memory for the demo corpus (tenant 'demo')."
    + examples(
        "livingrag demo",
        "livingrag demo --limit 4",
        "livingrag demo --no-feedback",
        "livingrag demo --json > demo.json",
    )
)


def demo(
    limit: int | None = typer.Option(None, "--limit", min=1, help="Answer only the first N questions."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
    feedback: bool = typer.Option(
        True,
        "--feedback/--no-feedback",
        help="After the questions, simulate a user's verdicts and corrections from the demo's gold answers and "
        "ask some questions again (answers served from memory).",
    ),
) -> None:
    from livingrag.demo.run import DemoRow, run_demo

    settings = load_settings()

    def status(msg: str) -> None:
        err_console.print(f"[dim]{msg}[/dim]")

    def row(i: int, r: DemoRow) -> None:
        if as_json:
            return
        reuse = []
        if r.living is not None and r.living.fused_ids:
            reuse.append("fused " + ",".join(f"#{e}" for e in r.living.fused_ids))
        if r.living is not None and r.living.scaffold_id is not None:
            reuse.append(f"scaffold #{r.living.scaffold_id}")
        if r.living is not None and r.living.findings:
            reuse.append("findings " + ",".join(f"#{f.experience_id}" for f in r.living.findings))
        mark = {True: "[green]ok[/green]", False: "[red]x[/red]"}

        def said(system: str) -> str:
            text = r.text(system)
            return repr(text) if text is not None else f"[red]failed: {r.errors.get(system, '?')}[/red]"

        console.print(
            f"[bold]{i + 1:>2}. {r.question}[/bold]  [dim](gold: {r.gold})[/dim]\n"
            f"    linear {mark[r.linear_ok]} {said('linear')}\n"
            f"    living {mark[r.living_ok]} {said('living')}"
            + (f"  [cyan]{'; '.join(reuse)}[/cyan]" if reuse else "")
            + f"\n    [dim]write-back: {r.decision}"
            + (f" NS={r.novelty:.2f}" if r.novelty is not None else "")
            + (f" GS={r.grounding:.2f}" if r.grounding is not None else "")
            + "[/dim]",
            highlight=False,
        )

    report = run_demo(settings, limit=limit, feedback=feedback, on_row=row, on_status=status)
    if as_json:
        print_json(report.as_dict())
        _exit_on_failures(report)
        return
    n = len(report.rows)
    table = Table("system", "correct", "prompt tokens", "completion tokens", "LLM time", "overhead p50")
    for name, t in report.tallies.items():
        over = sorted(t.overhead_ms)
        p50 = over[len(over) // 2] if over else 0.0
        table.add_row(
            name,
            f"{t.correct}/{n}",
            str(t.prompt_tokens),
            str(t.completion_tokens),
            f"{t.llm_ms / 1000:.1f} s",
            f"{p50:.0f} ms",
        )
    console.print(table)
    decisions = ", ".join(f"{k} {v}" for k, v in sorted(report.decisions.items()))
    console.print(
        f"experiences: {report.stored} stored ({decisions}); LivingRAG reused experiences on "
        f"{report.fused_queries} of {n} questions (fusion), {report.scaffold_queries} (scaffold) and "
        f"{report.finding_queries} (findings)\n"
        f"[dim]model {report.model}, verifier {report.verifier}; indexing {report.index_seconds:.1f} s, "
        f"total {report.seconds:.1f} s[/dim]",
        highlight=False,
    )
    if feedback:
        _print_feedback(report)
    _exit_on_failures(report)


def _print_feedback(report: DemoReport) -> None:
    """The review, the questions asked again, the memory summary and the timelines."""
    mark = {True: "[green]ok[/green]", False: "[red]x[/red]"}
    console.print(
        "\n[bold]Feedback[/bold] [dim](simulated feedback from the demo's gold answers: a user who knows them "
        "marks LivingRAG's answers right or wrong and gives the right answer for each wrong one)[/dim]",
        highlight=False,
    )
    if not report.reviews:
        console.print("  no LivingRAG answer to review", highlight=False)
    for v in report.reviews:
        g = v.given
        said = (
            "[red]no verdict[/red]"
            if g.verdict is None
            else "[green]right[/green]"
            if g.verdict == "right"
            else f"[red]wrong[/red], corrected to {g.correction_text!r}"
            if g.correction
            else "[red]wrong[/red]"
        )
        what = "; ".join(g.messages) if g.verdict is not None else (g.error or "")
        console.print(f"  {v.index + 1:>2}. {v.answer!r}: {said}\n      [dim]{what}[/dim]", highlight=False)
    if report.again:
        console.print("\n[bold]Asked again[/bold]", highlight=False)
    for a in report.again:
        if a.answer is None:
            how = f"[red]failed: {a.error}[/red]"
        elif a.from_memory:
            how = (
                f"from memory: {a.answer.answer!r} (experience #{a.answer.reused_from}), no LLM call  {mark[a.correct]}"
            )
        else:
            how = (
                f"asked the LLM: {a.answer.answer!r}  {mark[a.correct]}  [dim](no verified memory for it: "
                "unverified answers are not served)[/dim]"
            )
        console.print(
            f"  {a.index + 1:>2}. {a.question}  [dim]({a.review}; gold: {a.gold})[/dim]\n      {how}",
            highlight=False,
        )
    if report.again:
        console.print(
            f"memory: {report.llm_calls_saved} of {len(report.again)} questions asked again answered from memory "
            f"({report.llm_calls_saved} LLM calls saved); wrong answers served from memory: "
            f"{report.wrong_from_memory}",
            highlight=False,
        )
    for t in report.timelines:
        console.print(f"\n[bold]History of experience #{t.experience_id}[/bold] [dim]({t.what})[/dim]", highlight=False)
        for e in t.events:
            reason = f"  [dim]{e.reason}[/dim]" if e.reason else ""
            console.print(f"  {e.created_at:%H:%M:%S}  {e.event:<12} {e.actor}{reason}", highlight=False)


def _exit_on_failures(report: DemoReport) -> None:
    """Exit 1 (after the whole report) when any answer failed: the demo went on, but did not succeed."""
    failed, questions = report.failed_answers, len(report.rows)
    if failed:
        err_console.print(
            f"[red]error:[/red] {failed} of {2 * questions} answers failed (see the rows above); the demo went on "
            "without them. `livingrag doctor` checks the model runtime.",
            highlight=False,
        )
    if report.failed_again:
        err_console.print(
            f"[red]error:[/red] {report.failed_again} of {len(report.again)} questions asked again failed (see "
            "above). `livingrag doctor` checks the model runtime.",
            highlight=False,
        )
    if failed or report.failed_again:
        raise typer.Exit(1)
