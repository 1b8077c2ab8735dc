"""``livingrag demo``: the main job on embedded defaults."""

from __future__ import annotations

import typer
from rich.table import Table

from livingrag.cli.common import console, err_console, examples, load_settings, print_json

DEMO_HELP = (
    "Index a small knowledge base written for this project (invented multi-hop film facts and a support "
    "knowledge base), then answer a stream of related questions with LinearRAG and LivingRAG side by side "
    "and print a report: answers, tokens, experiences stored and rejected, reuse. Runs offline on the "
    "embedded defaults (embedded PostgreSQL, packaged models, no API key); each run starts with an empty "
    "experience store for the demo corpus (tenant 'demo')."
    + examples("livingrag demo", "livingrag demo --limit 4", "livingrag demo --json > demo.json")
)


def demo(
    limit: int | None = typer.Option(None, "--limit", min=1, help="Answer only the first N questions."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
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

    report = run_demo(settings, limit=limit, on_row=row, on_status=status)
    if as_json:
        print_json(report.as_dict())
        _exit_on_failures(report.failed_answers, len(report.rows))
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
    _exit_on_failures(report.failed_answers, n)


def _exit_on_failures(failed: int, questions: int) -> None:
    """Exit 1 (after the whole report) when any answer failed: the demo went on, but did not succeed."""
    if failed:
        err_console.print(
            f"[red]error:[/red] {failed} of {2 * questions} answers failed (see the rows above); the demo went on "
            "without them. `livingrag doctor` checks the model runtime.",
            highlight=False,
        )
        raise typer.Exit(1)
