"""Indexing a folder of documents (PDF, DOCX, HTML, Markdown) with ``livingrag index``.

* the fixtures of tests/data/documents/ index in one call with the real packaged models: four
  documents titled by their headings, no entity named after a file, and a question about a fact
  inside the PDF retrieves the PDF's passage first;
* a malformed PDF, an empty DOCX or a binary file renamed ``.md`` stops the call with a message
  naming the file, before the corpus is created or a passage written (``--create`` included);
* a title that is only a file's name is no entity, also after the passage is updated.
"""

from __future__ import annotations

import io
import json
import shutil
import uuid
from pathlib import Path

import docx
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from livingrag.cli.main import app
from livingrag.corpus.indexer import CorpusIndexer
from livingrag.corpus.ingest import Document, read_corpus
from livingrag.corpus.normalize import normalize_entity
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora, tenants
from livingrag.errors import InvalidInput
from tests.corpus_support import HashEmbedder, RuleExtractor

DOCS = Path(__file__).resolve().parents[1] / "data" / "documents"
runner = CliRunner()
pytestmark = pytest.mark.db


@pytest.fixture
def cli_tenant(db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """A fresh tenant that the CLI uses (LIVINGRAG_TENANT), on the test database."""
    name = f"docs-{uuid.uuid4().hex[:8]}"
    with db.owner_session() as s:
        rec, _ = tenants.create_tenant(s, name)
    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)
    monkeypatch.setenv("LIVINGRAG_TENANT", name)
    return rec.id


def _ok(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, (args, res.output, res.exception)
    return res.stdout


def _corpus_names() -> set[str]:
    return {c["name"] for c in json.loads(_ok(["corpus", "list", "--json"]))}


def _rows(db: Database, tenant: int, sql: str, corpus: str) -> list[tuple[object, ...]]:
    with db.tenant_session(tenant) as s:
        query = sql.replace(":corpus_id", "(SELECT id FROM corpora WHERE tenant_id = :t AND name = :n)")
        return [tuple(r) for r in s.execute(text(query), {"t": tenant, "n": corpus})]


@pytest.mark.slow
def test_a_folder_of_documents_indexes_in_one_call(db: Database, cli_tenant: int, tmp_path: Path) -> None:
    report = json.loads(_ok(["index", "--corpus", "docs", "--create", str(DOCS), "--json", "--quiet"]))
    assert report["documents"] == 4 and report["indexed"] == 4, report
    passages = _rows(db, cli_tenant, "SELECT title, external_id FROM passages WHERE corpus_id = :corpus_id", "docs")
    assert sorted(passages) == [
        ("Brindlewood Logistics Driver Handbook", "handbook.docx"),
        ("Nordline Freight Annual Review 2025", "annual_review.pdf"),
        ("Welcome to the Varik Studio", "onboarding.md"),
        ("Winter timetable for the Saltfjord ferry", "ferry_news.html"),
    ]
    keys = {
        str(k)
        for (k,) in _rows(db, cli_tenant, "SELECT normalized_name FROM entities WHERE corpus_id = :corpus_id", "docs")
    }
    names = {str(n) for (n,) in _rows(db, cli_tenant, "SELECT name FROM entities WHERE corpus_id = :corpus_id", "docs")}
    for f in DOCS.iterdir():
        assert normalize_entity(f.stem) not in keys and f.stem not in names and f.name not in names, f.name
    assert not any("#" in n or "\n" in n for n in names), names
    assert normalize_entity("Nordline Freight Annual Review 2025") in keys  # a heading title may be an entity

    out = json.loads(_ok(["retrieve", "--corpus", "docs", "Who runs the Tromsø depot?", "--json"]))
    top = out["passages"][0]
    assert top["title"] == "Nordline Freight Annual Review 2025" and "Halvard Lien" in top["text"], out["passages"]
    assert "Depots\nThe Tromsø depot" in top["text"]  # the section's heading path stays with its text


def _empty_docx() -> bytes:
    buf = io.BytesIO()
    docx.Document().save(buf)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("broken.pdf", (DOCS / "annual_review.pdf").read_bytes()[:4000], "not a readable PDF"),
        ("empty.docx", _empty_docx(), "the document has no text"),
        ("renamed.md", (DOCS / "handbook.docx").read_bytes(), "binary data, not text"),
    ],
)
def test_a_bad_document_stops_the_call_before_anything_is_written(
    db: Database, cli_tenant: int, tmp_path: Path, name: str, content: bytes, expected: str
) -> None:
    folder = tmp_path / "docs"
    shutil.copytree(DOCS, folder)
    (folder / name).write_bytes(content)
    res = runner.invoke(app, ["index", "--corpus", "fresh", "--create", str(folder), "--quiet"])
    assert isinstance(res.exception, InvalidInput), (res.output, res.exception)
    assert f"{folder / name}: {expected}" in str(res.exception) and "nothing was indexed" in str(res.exception)
    assert "fresh" not in _corpus_names()  # --create made no corpus

    _ok(["corpus", "create", "kept"])
    res = runner.invoke(app, ["index", "--corpus", "kept", str(folder / name), "--quiet"])
    assert isinstance(res.exception, InvalidInput) and name in str(res.exception)
    assert _rows(db, cli_tenant, "SELECT count(*) FROM passages WHERE corpus_id = :corpus_id", "kept") == [(0,)]


def test_a_missing_file_creates_no_corpus(cli_tenant: int, tmp_path: Path) -> None:
    res = runner.invoke(app, ["index", "--corpus", "never", "--create", str(tmp_path / "missing.md"), "--quiet"])
    assert isinstance(res.exception, InvalidInput) and "missing.md: no such file or folder" in str(res.exception)
    assert "never" not in _corpus_names()


def test_skipped_files_are_named(cli_tenant: int, tmp_path: Path) -> None:
    (tmp_path / "note.md").write_text("# Harbour note\nThe pier opens at six.\n")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n")
    (tmp_path / "README").write_text("no suffix")
    _ok(["corpus", "create", "notes"])
    res = runner.invoke(app, ["index", "--corpus", "notes", str(tmp_path), "--quiet", "--json"])
    assert res.exit_code == 0, res.output
    assert "skipped photo.png: not a document type (.png" in res.stderr
    assert "skipped README: not a document type (no suffix" in res.stderr


def test_a_file_name_title_is_no_entity_even_after_an_update(db: Database, tenant: int, tmp_path: Path) -> None:
    with db.tenant_session(tenant) as s:
        c = corpora.create_corpus(s, tenant, "files", embedding_model="hash16", embedding_dim=16, ner_model="rules")
    idx = CorpusIndexer(db, tenant, c, extractor=RuleExtractor(), embedder=HashEmbedder())
    (tmp_path / "Kestrel.txt").write_text("Marta Quell made films in Brevik.")
    (tmp_path / "Harbour.md").write_text("The pier of Brevik opens at six.")  # no heading: titled by its name
    docs = read_corpus(tmp_path)
    assert [(d.title, d.title_is_entity) for d in docs] == [("Harbour", False), ("Kestrel", False)]
    idx.index_documents([*docs, Document("Aurora Quartet", "It plays in Oslo.", source="record")])

    def keys() -> set[str]:
        with db.tenant_session(tenant) as s:
            rows = s.execute(text("SELECT normalized_name FROM entities WHERE corpus_id = :c"), {"c": c.id})
            return {str(k) for (k,) in rows}

    assert {"marta quell", "brevik", "aurora quartet"} <= keys()  # a record's title is an entity, as before
    assert not {"kestrel", "harbour"} & keys()
    idx.update_passage("Kestrel.txt", text="Marta Quell made films in Brevik and Oslo.")
    assert "kestrel" not in keys() and "oslo" in keys()
