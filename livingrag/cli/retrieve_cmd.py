"""``livingrag retrieve``: the LinearRAG retriever from the command line."""

from __future__ import annotations

import typer
from rich.table import Table

from livingrag.cli.common import (
    console,
    examples,
    load_settings,
    open_database,
    print_json,
    resolve_tenant,
    tenant_option,
)

RETRIEVE_HELP = (
    "Retrieve passages for a question: entity linking, semantic bridging and Personalized PageRank over the "
    "corpus graph. Prints the top passages with scores and the activated entities with their tiers "
    "(1 = linked from the question, 2+ = reached by bridging)."
    + examples(
        'livingrag retrieve --corpus wiki "Who directed Casablanca?"',
        'livingrag retrieve --corpus wiki --top-k 10 --preset musique "Where was the director born?" --json',
    )
)


def retrieve(
    question: str = typer.Argument(..., help="The question."),
    corpus: str = typer.Option(..., "--corpus", "-c", help="Corpus name."),
    tenant: str = tenant_option(),
    top_k: int | None = typer.Option(None, "--top-k", "-k", min=1, max=100, help="Passages to return."),
    preset: str | None = typer.Option(
        None, "--preset", help="Retrieval preset (musique, 2wikimultihopqa, hotpotqa, custom)."
    ),
    entities: int = typer.Option(15, "--entities", min=0, help="Activated entities to show."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.corpus import service

    settings = load_settings()
    if preset is not None:
        settings.retrieval.preset = preset  # type: ignore[assignment]  # a str; pydantic validates it (validate_assignment)
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        info = service.get_corpus(db, tid, int(corpus) if corpus.isdigit() else corpus)
        retriever = service.retriever(db, tid, info, settings)
        retriever.graph()  # load the corpus graph first, so the timings below are the retrieval's own
        result = retriever.retrieve(retriever.encode(question), top_k=top_k)
        names = retriever.entity_names(list(result.final_activation))
        retriever.close()
    activated = sorted(result.final_activation.items(), key=lambda kv: (-kv[1], kv[0]))[:entities]
    if as_json:
        print_json(
            {
                "question": question,
                "mentions": list(result.encoding.mentions),
                "seeds": [s.__dict__ for s in result.encoding.seeds],
                "common_words": list(result.encoding.common_words),
                "dense_fallback": result.dense_fallback,
                "passages": [p.__dict__ for p in result.passages],
                "entities": [
                    {"id": e, "name": names.get(e), "activation": w, "tier": result.entity_tiers.get(e)}
                    for e, w in activated
                ],
                "timings_ms": {k: round(v, 3) for k, v in result.timings.items()},
            }
        )
        return
    seeds = ", ".join(f"{s.mention!r} -> {s.name} ({s.score:.2f})" for s in result.encoding.seeds) or "none"
    console.print(f"[bold]mentions[/bold]: {seeds}")
    if result.encoding.common_words:
        console.print(f"[dim]not seeds, common words of the corpus: {', '.join(result.encoding.common_words)}[/dim]")
    if result.dense_fallback:
        console.print("[yellow]no entity linked: dense retrieval[/yellow]")
    table = Table("#", "score", "id", "title", "text", show_lines=False)
    for i, p in enumerate(result.passages, 1):
        snippet = p.text if len(p.text) <= 160 else p.text[:157] + "..."
        table.add_row(str(i), f"{p.score:.5f}", str(p.id), p.title, snippet)
    console.print(table)
    if activated:
        et = Table("entity", "activation", "tier")
        for e, w in activated:
            et.add_row(names.get(e, str(e)), f"{w:.3f}", str(result.entity_tiers.get(e, "")))
        console.print(et)
    t = result.timings
    console.print(
        f"[dim]retrieval {t.get('retrieval_ms', 0):.1f} ms (encoding {t.get('encode_ms', 0):.1f}, "
        f"graph {t.get('graph_ms', 0):.1f})[/dim]"
    )
