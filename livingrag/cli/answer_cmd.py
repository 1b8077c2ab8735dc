"""``livingrag ask`` and ``livingrag chat``: answer questions over a corpus from the command line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from livingrag.cli.common import (
    console,
    err_console,
    examples,
    load_settings,
    print_json,
    resolve_tenant,
    tenant_option,
)

if TYPE_CHECKING:
    from livingrag.pipeline.answer_pipeline import Answer, LivingRAG

ASK_HELP = (
    "Answer one question over a corpus: experience match, activation fusion, LinearRAG retrieval, the "
    "reasoning scaffold and the LLM. On a terminal the model's text is printed as it is made; then the answer, "
    "a short explanation with numbered citations, the sources, the experiences that helped, tokens, latencies "
    "and the query id (`livingrag feedback ID --right|--wrong` judges the answer); then the write-back "
    "decision (novelty and grounding gates) for this answer."
    + examples(
        'livingrag ask --corpus wiki "Who directed Casablanca?"',
        'livingrag ask --corpus wiki --mode linear "Who directed Casablanca?" --json',
        'livingrag ask --corpus wiki --no fusion --no gate "Where was the director of Casablanca born?"',
    )
)
CHAT_HELP = (
    "Interactive question answering over a corpus (one question per line; an empty line or Ctrl-D ends). "
    "Every answer can write an experience that later questions reuse."
    + examples("livingrag chat --corpus wiki", "livingrag chat --corpus wiki --mode linear")
)


def _mode_options() -> tuple[Any, Any]:
    mode = typer.Option("living", "--mode", "-m", help="linear (no experience read or write) or living.")
    ablations = typer.Option(
        [],
        "--no",
        help="Ablate a LivingRAG component (repeatable): fusion, scaffold or gate (write back without the gates).",
    )
    return mode, ablations


_MODE, _ABLATIONS = _mode_options()


def _open(corpus: str, tenant: str) -> tuple[LivingRAG, int, int]:
    from livingrag.pipeline.answer_pipeline import LivingRAG

    settings = load_settings()
    rag = LivingRAG(settings)
    try:
        tid = resolve_tenant(rag.db, tenant)
        _, info = rag.resolve(tid, int(corpus) if corpus.isdigit() else corpus)
    except BaseException:
        rag.close()
        raise
    return rag, tid, info.id


class TerminalTokens:
    """Prints the model's text as it is made, dimmed (the pipeline's ``TokenSink``); :meth:`end` closes
    the line before the formatted answer."""

    def __init__(self) -> None:
        self.printed = False

    def token(self, text: str) -> None:
        console.print(escape(text), end="", style="dim", highlight=False)
        self.printed = True

    def restart(self, reason: str) -> None:
        self.end()
        console.print(f"[yellow]({escape(reason)})[/yellow]", highlight=False)

    def end(self) -> None:
        if self.printed:
            console.print()
            self.printed = False


def _streams(stream: bool | None, as_json: bool) -> bool:
    """``--stream`` / ``--no-stream`` as given; by default only on a terminal, and never with ``--json``."""
    if stream is not None:
        return stream and not as_json
    return not as_json and console.is_terminal


def _answer_shown(rag: LivingRAG, question: str, stream: bool, **kw: Any) -> Answer:
    """``rag.answer(question, **kw)``, its text printed as the model makes it when ``stream``."""
    sink = TerminalTokens() if stream else None
    try:
        return rag.answer(question, tokens=sink, **kw)
    finally:
        if sink is not None:
            sink.end()


def answer_dict(a: Answer) -> dict[str, Any]:
    """A JSON-ready view of an answer (the write-back decision is added by the caller); ``citations``
    are the numbers ``[n]`` of the passages the answer rests on (``livingrag.generation.citations``)."""
    from livingrag.generation.citations import cite

    return {
        "question": a.question,
        "answer": a.answer,
        "explanation": a.explanation,
        "system": a.system,
        "passages": [{"id": p.id, "title": p.title, "score": p.score, "text": p.text} for p in a.passages],
        "citations": [
            {"number": n, "passage_id": a.passages[n - 1].id, "title": a.passages[n - 1].title}
            for n in cite(a.answer, a.explanation, a.passages).numbers
        ],
        "fused_experiences": [
            {"id": m.id, "query": m.query, "score": m.score, "weight": m.weight, "confidence": m.confidence}
            for m in a.fused
        ],
        "scaffold": (
            {"id": a.scaffold.experience_id, "score": a.scaffold.score, "summary": a.scaffold.summary}
            if a.scaffold
            else None
        ),
        "findings": [{"id": f.experience_id, "score": f.retrieval_score, "summary": f.summary} for f in a.findings],
        "prompt_tokens": a.prompt_tokens,
        "completion_tokens": a.completion_tokens,
        "cost_usd": a.cost_usd,
        "latency_ms": {k: round(v, 2) for k, v in a.latency_ms.items()},
        "query_log_id": a.query_log_id,
        "reused_from": a.reused_from,
    }


def _writeback(a: Answer, timeout: float) -> dict[str, Any] | None:
    if a.writeback is None:
        return None
    try:
        wb = a.writeback.result(timeout=timeout)
    except TimeoutError:
        return {"decision": "pending", "reason": f"not decided within {timeout:.0f} s; it continues in the background"}
    except Exception as exc:
        return {"decision": "error", "reason": str(exc)}
    return {
        "decision": wb.decision,
        "novelty": wb.novelty,
        "grounding": wb.grounding,
        "verifier": wb.verifier,
        "experience_id": wb.experience_id,
        "reason": wb.reason,
    }


def _show(a: Answer, passages: int) -> None:
    """The answer, a short explanation ending in numbered citations ``[n]``, and the sources: the
    passages given to the model, numbered as in its prompt (``livingrag.generation.citations``)."""
    from livingrag.generation.citations import cite

    cited = cite(a.answer, a.explanation, a.passages)
    console.print(f"[bold]Answer:[/bold] [bold green]{escape(a.answer or '(no answer)')}[/bold green]")
    if cited.explanation:
        console.print(f"[bold]Why:[/bold] {escape(cited.explanation)}", highlight=False)
    sources = [n for n in range(1, len(a.passages) + 1) if n <= passages or n in cited.numbers]
    if sources:
        console.print("[bold]Sources:[/bold]")
    for n in sources:
        p = a.passages[n - 1]
        mark = "[bold]" if n in cited.numbers else ""
        end = "[/bold]" if mark else ""
        title = escape(p.title or "(untitled)")
        console.print(f"  {mark}\\[{n}] {title}{end} [dim](passage {p.id}, score {p.score:.3f})[/dim]", highlight=False)
        snippet = " ".join(p.text.split())
        snippet = snippet if len(snippet) <= 160 else snippet[:157] + "..."
        console.print(f"      [dim]{escape(snippet)}[/dim]", highlight=False)
    if a.fused:
        fused = "; ".join(f"#{m.id} {m.query!r} (w={m.weight:.2f})" for m in a.fused)
        console.print(f"[bold]experiences fused[/bold]: {fused}")
    if a.scaffold:
        console.print(f"[bold]scaffold[/bold]: #{a.scaffold.experience_id} (s={a.scaffold.score:.2f})")
    if a.findings:
        shown = "; ".join(f"#{f.experience_id} (s={f.retrieval_score:.2f})" for f in a.findings)
        console.print(f"[bold]findings stated[/bold]: {shown}")
    if a.reused_from is not None:
        console.print(f"[bold]answer reused[/bold] from experience #{a.reused_from} (a repeated question; no LLM call)")
    lat = a.latency_ms
    console.print(
        f"[dim]{a.system}: {a.prompt_tokens} prompt + {a.completion_tokens} completion tokens, "
        f"${a.cost_usd:.6f}; LLM {lat.get('llm', 0):.0f} ms, pipeline overhead {lat.get('overhead', 0):.0f} ms[/dim]"
    )
    if a.query_log_id is not None:
        console.print(
            f"query {a.query_log_id} [dim](say whether it is right: livingrag feedback {a.query_log_id} --right "
            "or --wrong)[/dim]"
        )


def _show_writeback(wb: dict[str, Any] | None) -> None:
    if wb is None:
        return
    parts = [f"write-back: [bold]{wb['decision']}[/bold]"]
    for key, label in (("novelty", "NS"), ("grounding", "GS")):
        if wb.get(key) is not None:
            parts.append(f"{label}={wb[key]:.3f}")
    if wb.get("experience_id"):
        parts.append(f"experience #{wb['experience_id']}")
    if wb.get("reason"):
        parts.append(str(wb["reason"]))
    console.print("[dim]" + " ".join(parts) + "[/dim]")


def ask(
    question: str = typer.Argument(..., help="The question."),
    corpus: str = typer.Option(..., "--corpus", "-c", help="Corpus name or id."),
    tenant: str = tenant_option(),
    mode: str = _MODE,
    ablations: list[str] = _ABLATIONS,
    top_k: int | None = typer.Option(None, "--top-k", "-k", min=1, max=100, help="Passages given to the LLM."),
    passages: int = typer.Option(5, "--passages", min=0, help="Passages to print."),
    wait: float = typer.Option(300.0, "--wait", min=0, help="Seconds to wait for the write-back decision."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    stream: bool | None = typer.Option(
        None,
        "--stream/--no-stream",
        help="Print the model's text as it is made (default: on a terminal, never with --json).",
    ),
) -> None:
    rag, tid, cid = _open(corpus, tenant)
    try:
        shown = _streams(stream, as_json)
        a = _answer_shown(rag, question, shown, tenant=tid, corpus=cid, mode=mode, ablations=ablations, top_k=top_k)
        if not as_json:
            _show(a, passages)
        wb = _writeback(a, wait)
        if as_json:
            print_json(answer_dict(a) | {"writeback": wb})
        else:
            _show_writeback(wb)
    finally:
        rag.close(timeout=wait)


def chat(
    corpus: str = typer.Option(..., "--corpus", "-c", help="Corpus name or id."),
    tenant: str = tenant_option(),
    mode: str = _MODE,
    ablations: list[str] = _ABLATIONS,
    top_k: int | None = typer.Option(None, "--top-k", "-k", min=1, max=100, help="Passages given to the LLM."),
    passages: int = typer.Option(3, "--passages", min=0, help="Passages to print per answer."),
    stream: bool | None = typer.Option(
        None, "--stream/--no-stream", help="Print the model's text as it is made (default: on a terminal)."
    ),
) -> None:
    from livingrag.errors import InvalidInput, LLMError
    from livingrag.pipeline.modes import Mode

    m = Mode.parse(mode, ablations)  # a bad mode fails before the models load
    rag, tid, cid = _open(corpus, tenant)
    err_console.print(f"[dim]{m.system} over corpus {corpus!r}; an empty line or Ctrl-D ends.[/dim]")
    try:
        while True:
            try:
                line = console.input("[bold]? [/bold]")
            except (EOFError, KeyboardInterrupt):
                break
            if not line.strip():
                break
            try:
                a = _answer_shown(rag, line, _streams(stream, False), tenant=tid, corpus=cid, mode=m, top_k=top_k)
            except (InvalidInput, LLMError) as exc:
                err_console.print(f"[red]{exc}[/red]")
                continue
            _show(a, passages)
    finally:
        pending = rag.pending_writebacks
        if pending:
            err_console.print(f"[dim]finishing {pending} write-back(s)...[/dim]")
        rag.close()
