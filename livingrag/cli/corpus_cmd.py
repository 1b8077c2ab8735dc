"""``livingrag corpus``, ``livingrag index`` and ``livingrag passage``: build and change corpora."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from livingrag.cli.common import (
    console,
    err_console,
    examples,
    load_settings,
    open_database,
    print_json,
    resolve_tenant,
    tenant_option,
)

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.types import CorpusInfo

app = typer.Typer(
    help="Corpora: named document collections of a tenant." + examples("livingrag corpus create wiki"),
    no_args_is_help=True,
)
passage_app = typer.Typer(
    help="List, add, update or delete single passages of an indexed corpus."
    + examples('livingrag passage add --corpus wiki --title "Casablanca" --text "Casablanca is a 1942 film."'),
    no_args_is_help=True,
)


@app.command(
    help="Create an empty corpus with the configured embedding model and entity extractor."
    + examples("livingrag corpus create wiki", "livingrag corpus create docs --tenant acme --json")
)
def create(
    name: str = typer.Argument(..., help="Corpus name (unique within the tenant)."),
    tenant: str = tenant_option(),
    preset: str | None = typer.Option(
        None,
        "--preset",
        help="Retrieval preset the corpus is searched with (2wikimultihopqa, hotpotqa, musique, custom; "
        "default: retrieval.preset). An explicitly set LIVINGRAG_RETRIEVAL__PRESET still wins at query time.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    from livingrag.corpus import service

    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        info = service.create_corpus(db, tid, name, settings, preset=preset)
    if as_json:
        print_json(
            {
                "id": info.id,
                "name": info.name,
                "tenant": tenant,
                "embedding_model": info.embedding_model,
                "retrieval_preset": info.settings.get("retrieval_preset"),
            }
        )
        return
    console.print(
        f"created corpus [bold]{info.name}[/bold] (id {info.id}, {info.embedding_model} {info.embedding_dim}-d, "
        f"extractor {info.extractor}, retrieval preset {info.settings.get('retrieval_preset')})"
    )


@app.command(name="list", help="List the tenant's corpora with their sizes." + examples("livingrag corpus list --json"))
def list_(
    tenant: str = tenant_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    from livingrag.corpus import service

    with open_database() as db:
        rows = service.corpora_with_counts(db, resolve_tenant(db, tenant))
    if as_json:
        print_json(
            [
                {"id": c.id, "name": c.name, "version": c.version, "embedding_model": c.embedding_model, **n}
                for c, n in rows
            ]
        )
        return
    table = Table("id", "name", "version", "passages", "entities", "sentences", "model")
    for c, n in rows:
        table.add_row(
            str(c.id), c.name, str(c.version), str(n["passages"]), str(n["entities"]), str(n["sentences"]),
            c.embedding_model,
        )  # fmt: skip
    console.print(table)


@app.command(
    help="Show one corpus: sizes, version, models, chunking and the retrieval preset it is searched with."
    + examples("livingrag corpus info wiki", "livingrag corpus info 3 --json")
)
def info(
    name: str = typer.Argument(..., help="Corpus name or id."),
    tenant: str = tenant_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    from livingrag.corpus import service

    settings = load_settings()
    with open_database(settings) as db:
        c, counts = service.corpus_with_counts(db, resolve_tenant(db, tenant), _ref(name))
    out = corpus_info(c, counts, settings)
    if as_json:
        print_json(out)
        return
    table = Table("field", "value", title=f"corpus {c.name}")
    for key, value in out.items():
        table.add_row(key, str(value))
    console.print(table)


def corpus_info(c: CorpusInfo, counts: dict[str, int], settings: Settings) -> dict[str, Any]:
    """What ``corpus info`` shows: the corpus row, its graph sizes, its stored chunking settings and
    its recorded retrieval preset next to the one questions are searched with now (an explicitly
    set ``retrieval.preset`` overrides the recorded one)."""
    from livingrag.retrieval.presets import preset_for

    stored = c.settings or {}
    recorded = stored.get("retrieval_preset")
    return {
        "id": c.id,
        "name": c.name,
        "passages": counts["passages"],
        "entities": counts["entities"],
        "sentences": counts["sentences"],
        "version": c.version,
        "embedding_model": c.embedding_model,
        "embedding_dim": c.embedding_dim,
        "extractor": c.extractor,
        "ner_model": c.ner_model,
        "chunk_tokens": stored.get("chunk_tokens"),
        "chunk_overlap": stored.get("chunk_overlap"),
        "title_entities": stored.get("title_entities"),
        "sentence_embeddings": stored.get("sentence_embeddings"),
        "retrieval_preset": recorded,
        "effective_preset": preset_for(settings.retrieval, recorded),
        "preset_overridden": "preset" in settings.retrieval.model_fields_set and recorded != settings.retrieval.preset,
        "created_at": c.created_at.isoformat() if c.created_at else None,
    }


@app.command(
    name="set-preset",
    help="Change the retrieval preset a corpus is searched with (2wikimultihopqa, hotpotqa, musique, custom); "
    "the graph and version stay as they are, and a running service uses the new preset from its next question. "
    "An explicitly set LIVINGRAG_RETRIEVAL__PRESET still wins at query time."
    + examples("livingrag corpus set-preset wiki musique", "livingrag corpus set-preset 3 hotpotqa --json"),
)
def set_preset(
    name: str = typer.Argument(..., help="Corpus name or id."),
    preset: str = typer.Argument(..., help="Preset name."),
    tenant: str = tenant_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    from livingrag.corpus import service

    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        before = service.get_corpus(db, tid, _ref(name)).settings.get("retrieval_preset")
        c = service.set_retrieval_preset(db, tid, _ref(name), preset)
    if as_json:
        print_json({"id": c.id, "name": c.name, "retrieval_preset": preset, "previous": before})
        return
    console.print(f"corpus [bold]{c.name}[/bold]: retrieval preset {before} -> {preset}")


@app.command(
    help="Delete a corpus and its whole graph (passages, sentences, entities, edges)."
    + examples("livingrag corpus delete wiki --yes")
)
def delete(
    name: str = typer.Argument(..., help="Corpus name or id."),
    tenant: str = tenant_option(),
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation."),
) -> None:
    from livingrag.corpus import service

    with open_database() as db:
        tid = resolve_tenant(db, tenant)
        info = service.get_corpus(db, tid, _ref(name))
        if not yes and not typer.confirm(f"Delete corpus {info.name!r} and its whole graph?"):
            raise typer.Exit(1)
        service.delete_corpus(db, tid, info.id)
    console.print(f"deleted corpus [bold]{info.name}[/bold]")


def _ref(name: str) -> str | int:
    return int(name) if name.isdigit() else name


def index(
    path: Path = typer.Argument(
        ..., help="A .json or .jsonl corpus, a document (.pdf, .docx, .html, .md, .txt) or a folder of documents."
    ),
    corpus: str = typer.Option(..., "--corpus", "-c", help="Corpus name."),
    tenant: str = tenant_option(),
    create: bool = typer.Option(False, "--create", help="Create the corpus if it does not exist."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    from livingrag.corpus import service
    from livingrag.corpus.indexer import IndexReport
    from livingrag.corpus.ingest import read_inputs
    from livingrag.corpus.progress import NullProgress, RichProgress
    from livingrag.errors import NotFound

    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        try:
            info = service.get_corpus(db, tid, _ref(corpus))
        except NotFound:
            if not create:
                raise NotFound(
                    f"no corpus {corpus!r}: create it with `livingrag corpus create {corpus}` or pass --create"
                ) from None
            info = None
        # Every file is read and validated before the corpus is created or a passage written.
        report = IndexReport(corpus=info.name if info is not None else corpus)
        with report.timed("read"):
            inputs = read_inputs(path)
        for skipped in inputs.skipped:
            err_console.print(f"[yellow]skipped[/yellow] {skipped.path}: {skipped.reason}", highlight=False)
        if info is None:
            info = service.create_corpus(db, tid, corpus, settings)
            err_console.print(f"created corpus [bold]{info.name}[/bold]")
        progress = NullProgress() if quiet else RichProgress(err_console)
        report = service.indexer(db, tid, info, settings, progress=progress).index_documents(
            inputs.documents, report=report
        )
    if as_json:
        print_json(report.as_dict())
        return
    console.print(
        f"corpus [bold]{report.corpus}[/bold] v{report.version}: {report.indexed} passages indexed, "
        f"{report.skipped_existing} already present, {report.duplicates_in_input} duplicates in the input "
        f"({report.documents} documents, {report.new_entities} new entities) in {report.phases.get('total', 0):.1f} s"
    )
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in report.phases.items() if k != "total")
    console.print(f"[dim]{phases}[/dim]")


INDEX_HELP = (
    "Index documents into a corpus: chunk, extract entities, embed, and store the graph. PDF, DOCX, HTML and "
    "Markdown files keep their structure (the title from the first heading or the metadata, sections from "
    "the headings, tables as text). Every file is read and validated first: one that cannot be read stops "
    "the run, named with the reason, before the corpus is created or a passage written; a folder's other "
    "files are named as skipped. Passages already in the corpus (same content hash) are skipped, so "
    "re-running continues an interrupted run."
    + examples(
        "livingrag index --corpus wiki corpus.json",
        "livingrag index --corpus notes --create ./notes/",
        "livingrag index --corpus wiki --tenant acme more.jsonl --json",
    )
)


@passage_app.command(
    help="Index one passage (not chunked) and print its id."
    + examples('livingrag passage add --corpus wiki --title "Casablanca" --text "Casablanca is a 1942 film."')
)
def add(
    corpus: str = typer.Option(..., "--corpus", "-c", help="Corpus name."),
    text: str = typer.Option(..., "--text", help="Passage text."),
    title: str = typer.Option("", "--title", help="Passage title."),
    external_id: str | None = typer.Option(None, "--external-id", help="Your own id for the passage."),
    tenant: str = tenant_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    from livingrag.corpus import service

    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        info = service.get_corpus(db, tid, _ref(corpus))
        pid = service.indexer(db, tid, info, settings).add_passage(text, title=title, external_id=external_id)
    if as_json:
        print_json({"id": pid})
        return
    console.print(f"passage {pid}")


@passage_app.command(
    help="Replace a passage's text and/or title; its sentences, entities and edges are rebuilt and the corpus "
    "version bumped in one transaction." + examples('livingrag passage update --corpus wiki 42 --text "New text."')
)
def update(
    passage: str = typer.Argument(..., help="Passage id or external id."),
    corpus: str = typer.Option(..., "--corpus", "-c", help="Corpus name."),
    text: str | None = typer.Option(None, "--text", help="New text."),
    title: str | None = typer.Option(None, "--title", help="New title."),
    tenant: str = tenant_option(),
) -> None:
    from livingrag.corpus import service
    from livingrag.errors import InvalidInput

    if text is None and title is None:
        raise InvalidInput("give --text and/or --title")
    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        info = service.get_corpus(db, tid, _ref(corpus))
        pid = service.indexer(db, tid, info, settings).update_passage(passage, text=text, title=title)
    console.print(f"updated passage {pid}")


@passage_app.command(
    name="delete",
    help="Delete passages with their sentences and edges (entities left without mentions go too)."
    + examples("livingrag passage delete --corpus wiki 42 43"),
)
def delete_passage(
    passages: list[str] = typer.Argument(..., help="Passage ids or external ids."),
    corpus: str = typer.Option(..., "--corpus", "-c", help="Corpus name."),
    tenant: str = tenant_option(),
) -> None:
    from livingrag.corpus import service

    settings = load_settings()
    with open_database(settings) as db:
        tid = resolve_tenant(db, tenant)
        info = service.get_corpus(db, tid, _ref(corpus))
        deleted = service.indexer(db, tid, info, settings).delete_passages(passages)
    console.print(f"deleted passages {', '.join(map(str, deleted))}")


@passage_app.command(
    name="list",
    help="List a corpus's passages (id, external id, title, length in characters), a page at a time, in id order; "
    "--search keeps those whose title or text contains the text (case-insensitive). Read-only."
    + examples(
        "livingrag passage list --corpus wiki --limit 20",
        'livingrag passage list --corpus wiki --search "Casablanca" --json',
    ),
)
def list_passages(
    corpus: str = typer.Option(..., "--corpus", "-c", help="Corpus name or id."),
    tenant: str = tenant_option(),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="At most this many."),
    offset: int = typer.Option(0, "--offset", min=0, help="Skip this many."),
    search: str | None = typer.Option(None, "--search", help="Only passages whose title or text contains this."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    from livingrag.corpus import service

    with open_database() as db:
        tid = resolve_tenant(db, tenant)
        info = service.get_corpus(db, tid, _ref(corpus))
        rows = service.list_passages(db, tid, info.id, limit=limit, offset=offset, q=search)
    items = [
        {"id": p.id, "external_id": p.external_id, "title": p.title, "length": len(p.text), "doc_key": p.doc_key}
        for p in rows
    ]
    if as_json:
        print_json(
            {"corpus": info.name, "items": items, "limit": limit, "offset": offset,
             "next_offset": offset + len(rows) if len(rows) == limit else None}
        )  # fmt: skip
        return
    span = f"passages {offset + 1} to {offset + len(rows)}" if rows else "no passages"
    table = Table("id", "external id", "title", "length", title=f"corpus {info.name}: {span}")
    for p in rows:
        table.add_row(str(p.id), p.external_id or "-", p.title, str(len(p.text)))
    console.print(table)
    if len(rows) == limit:
        console.print(f"[dim]more: --offset {offset + limit}[/dim]")
