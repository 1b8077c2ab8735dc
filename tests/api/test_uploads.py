"""Uploading files into a corpus over HTTP (issue 44, part 4): ``POST /v1/corpora/{id}/uploads``.

* the four documents of tests/data/documents (PDF, DOCX, HTML, Markdown) upload in one call and
  index in one job: four documents titled by their headings, no entity named after a file, and
  the very passages and entities ``livingrag index`` makes of the same files;
* a malformed PDF, an empty DOCX and a binary file renamed ``.md`` (alone or among good files),
  bad base64, an empty file and an unknown suffix each get 422 naming the file and the reason,
  and nothing of that call is written (no passage, no job);
* a body over ``api.max_request_bytes`` gets 413 naming the limit;
* another tenant's corpus is 404 and a read-only key 403;
* ``POST .../index-jobs`` keeps a document's sections and ``title_is_entity`` too, and refuses
  sections that do not match the text.
"""

from __future__ import annotations

import base64
import io
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from typer.testing import CliRunner

from livingrag.cli.main import app as cli_app
from livingrag.corpus.normalize import normalize_entity
from livingrag.db.engine import Database
from livingrag.io.readers import read_document
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import ADMIN_KEY, api_settings, app_client, auth
from tests.corpus_support import DOCUMENT_TITLES, DOCUMENTS

pytestmark = pytest.mark.db

MAX_BYTES = 400_000


@pytest.fixture(scope="module")
def client(db: Database, database_url: str) -> Iterator[TestClient]:
    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"max_request_bytes": MAX_BYTES})
        with app_client(db, settings) as c:
            yield c


def _tenant(client: TestClient, prefix: str) -> tuple[int, str, str]:
    """A fresh tenant: (id, name, key)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    r = client.post("/v1/tenants", json={"name": name}, headers=auth(ADMIN_KEY))
    assert r.status_code == 201, r.text
    return int(r.json()["id"]), name, r.json()["api_key"]


def _corpus(client: TestClient, key: str, name: str) -> int:
    r = client.post("/v1/corpora", json={"name": name}, headers=auth(key))
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _file(name: str, data: bytes) -> dict[str, str]:
    return {"name": name, "content_base64": base64.b64encode(data).decode()}


def _fixtures() -> list[dict[str, str]]:
    return [_file(name, (DOCUMENTS / name).read_bytes()) for name in sorted(DOCUMENT_TITLES)]


def _poll(client: TestClient, key: str, job: str, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        r = client.get(f"/v1/index-jobs/{job}", headers=auth(key))
        assert r.status_code == 200, r.text
        if r.json()["state"] in ("succeeded", "failed"):
            return dict(r.json())
        assert time.monotonic() < deadline, r.json()
        time.sleep(0.2)


def _passages(db: Database, tid: int, cid: int) -> list[tuple[str, str, str]]:
    with db.tenant_session(tid) as s:
        rows = s.execute(
            text("SELECT title, text, external_id FROM passages WHERE corpus_id = :c ORDER BY external_id, text"),
            {"c": cid},
        )
        return [(str(t), str(x), str(e)) for t, x, e in rows]


def _entities(db: Database, tid: int, cid: int) -> set[str]:
    with db.tenant_session(tid) as s:
        return {str(n) for (n,) in s.execute(text("SELECT name FROM entities WHERE corpus_id = :c"), {"c": cid})}


def _state(client: TestClient, key: str, cid: int) -> tuple[int, list[str]]:
    """The corpus's passage count and the tenant's index jobs."""
    counts = client.get(f"/v1/corpora/{cid}", headers=auth(key)).json()["counts"]
    jobs = [j["id"] for j in client.get("/v1/index-jobs", headers=auth(key)).json()]
    return int(counts["passages"]), jobs


def _err(r: Any, status: int, *words: str) -> str:
    assert r.status_code == status, r.text
    message = str(r.json()["error"]["message"])
    for w in words:
        assert w in message, (w, message)
    return message


def test_uploaded_documents_index_as_livingrag_index_indexes_them(
    client: TestClient, db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tid, tenant_name, key = _tenant(client, "upload")
    cid = _corpus(client, key, "uploaded")
    r = client.post(f"/v1/corpora/{cid}/uploads", json={"files": _fixtures()}, headers=auth(key))
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["documents"] == 4 and body["state"] in ("queued", "running", "succeeded")
    assert {f["name"]: f["title"] for f in body["files"]} == DOCUMENT_TITLES
    assert all(f["title_is_entity"] and f["sections"] >= 3 and f["characters"] > 100 for f in body["files"])
    done = _poll(client, key, body["id"])
    assert done["state"] == "succeeded" and done["result"]["indexed"] == 4, done
    assert done["progress"]

    uploaded = _passages(db, tid, cid)
    assert sorted((t, e) for t, _, e in uploaded) == sorted((t, n) for n, t in DOCUMENT_TITLES.items())
    pdf = next(x for t, x, e in uploaded if e == "annual_review.pdf")
    assert "Depots\nThe Tromsø depot" in pdf  # the section's heading path stays with its text
    names = _entities(db, tid, cid)
    keys = {normalize_entity(n) for n in names}
    for f in DOCUMENTS.iterdir():
        assert normalize_entity(f.stem) not in keys and f.stem not in names and f.name not in names, f.name
    assert normalize_entity("Nordline Freight Annual Review 2025") in keys  # a heading title may be an entity

    # the same files given to `livingrag index` make the same passages and entities
    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)
    monkeypatch.setenv("LIVINGRAG_TENANT", tenant_name)
    res = CliRunner().invoke(cli_app, ["index", "--corpus", "by-cli", "--create", str(DOCUMENTS), "--json", "--quiet"])
    assert res.exit_code == 0, (res.output, res.exception)
    assert json.loads(res.stdout)["indexed"] == 4
    cli_cid = next(
        c["id"] for c in client.get("/v1/corpora", headers=auth(key)).json()["items"] if c["name"] == "by-cli"
    )
    assert _passages(db, tid, cli_cid) == uploaded
    assert _entities(db, tid, cli_cid) == names


def _empty_docx() -> bytes:
    buf = io.BytesIO()
    docx.Document().save(buf)
    return buf.getvalue()


BAD_FILES = [
    ("broken.pdf", (DOCUMENTS / "annual_review.pdf").read_bytes()[:4000], "not a readable PDF"),
    ("empty.docx", _empty_docx(), "the document has no text"),
    ("renamed.md", (DOCUMENTS / "handbook.docx").read_bytes(), "binary data, not text"),
    ("blank.txt", b"", "the file is empty"),
    ("corpus.json", b'[{"text": "a record"}, {"title": "none"}]', "record at index 1: the record has no 'text'"),
    ("lines.jsonl", b'{"text": "one"}\nnot json\n', "line 2: not valid JSON"),
    ("notes.odt", b"PK\x03\x04", "unsupported file type .odt"),
]


@pytest.mark.parametrize(("name", "content", "expected"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_file_that_cannot_be_read_is_named_and_nothing_is_written(
    client: TestClient, name: str, content: bytes, expected: str
) -> None:
    _, _, key = _tenant(client, "bad-upload")
    cid = _corpus(client, key, "kept")
    before = _state(client, key, cid)
    alone = client.post(f"/v1/corpora/{cid}/uploads", json={"files": [_file(name, content)]}, headers=auth(key))
    assert _err(alone, 422, f"{name}: {expected}", "(nothing was indexed)").startswith(f"{name}: ")
    # among the good files: still nothing of the call is written, and only the bad file is named
    files = [*_fixtures()[:2], _file(name, content), *_fixtures()[2:]]
    among = client.post(f"/v1/corpora/{cid}/uploads", json={"files": files}, headers=auth(key))
    message = _err(among, 422, f"1 file of 5 cannot be read (nothing was indexed):\n  {name}: {expected}")
    assert "onboarding.md" not in message
    assert _state(client, key, cid) == before == (0, [])


def test_every_bad_file_of_a_call_is_named(client: TestClient) -> None:
    _, _, key = _tenant(client, "bad-uploads")
    cid = _corpus(client, key, "kept")
    files = [_file(n, c) for n, c, _ in BAD_FILES] + [{"name": "garbled.md", "content_base64": "not base64!"}]
    message = _err(client.post(f"/v1/corpora/{cid}/uploads", json={"files": files}, headers=auth(key)), 422)
    assert message.startswith("8 files of 8 cannot be read (nothing was indexed):")
    for n, _, expected in BAD_FILES:
        assert f"{n}: {expected}" in message
    assert "garbled.md: content_base64 is not base64" in message
    assert _state(client, key, cid) == (0, [])


def test_a_data_url_and_a_text_file_upload(client: TestClient) -> None:
    _, _, key = _tenant(client, "data-url")
    cid = _corpus(client, key, "notes")
    data = b"Marta Quell made films in Brevik.\n"
    f = {"name": "notes.txt", "content_base64": "data:text/plain;base64," + base64.b64encode(data).decode()}
    r = client.post(f"/v1/corpora/{cid}/uploads", json={"files": [f]}, headers=auth(key))
    assert r.status_code == 202, r.text
    (read,) = r.json()["files"]
    assert read == {
        "name": "notes.txt",
        "title": "notes",
        "title_is_entity": False,
        "sections": 0,
        "characters": len(data.strip()),
        "size_bytes": len(data),
        "documents": 1,
    }
    done = _poll(client, key, r.json()["id"])
    assert done["state"] == "succeeded" and done["result"]["indexed"] == 1, done


def test_a_body_over_the_byte_limit_is_413_naming_the_limit(client: TestClient) -> None:
    _, _, key = _tenant(client, "big-upload")
    cid = _corpus(client, key, "kept")
    big = _file("big.txt", b"word " * (MAX_BYTES // 4))
    _err(client.post(f"/v1/corpora/{cid}/uploads", json={"files": [big]}, headers=auth(key)), 413, str(MAX_BYTES))
    assert _state(client, key, cid) == (0, [])


def test_other_tenants_corpus_is_404_and_a_read_key_403(client: TestClient) -> None:
    _, _, a = _tenant(client, "upload-a")
    _, _, b = _tenant(client, "upload-b")
    b_cid = _corpus(client, b, "private")
    files = {"files": [_file("onboarding.md", (DOCUMENTS / "onboarding.md").read_bytes())]}
    _err(client.post(f"/v1/corpora/{b_cid}/uploads", json=files, headers=auth(a)), 404)
    r = client.post("/v1/keys", json={"name": "reader", "scopes": ["read"]}, headers=auth(b))
    assert r.status_code == 201, r.text
    _err(client.post(f"/v1/corpora/{b_cid}/uploads", json=files, headers=auth(r.json()["key"])), 403, "write")
    assert _state(client, b, b_cid) == (0, [])


def _document_in(path: Path) -> dict[str, Any]:
    """A file's document as ``POST .../index-jobs`` takes it, with its sections."""
    d = read_document(path)
    return {
        "title": d.title,
        "text": d.text,
        "external_id": d.external_id,
        "title_is_entity": d.title_is_entity,
        "sections": [{"path": list(s.path), "text": s.text} for s in d.sections],
    }


def test_index_jobs_keep_sections_and_title_is_entity(client: TestClient, db: Database) -> None:
    tid, _, key = _tenant(client, "sections")
    by_job, by_upload = _corpus(client, key, "by-job"), _corpus(client, key, "by-upload")
    doc = _document_in(DOCUMENTS / "onboarding.md") | {"title": "onboarding", "title_is_entity": False}
    r = client.post(f"/v1/corpora/{by_job}/index-jobs", json={"documents": [doc]}, headers=auth(key))
    assert r.status_code == 202, r.text
    assert _poll(client, key, r.json()["id"])["state"] == "succeeded"
    (passage,) = _passages(db, tid, by_job)
    assert passage[1].startswith("Ilse Varik founded") and "Tools › Fonts\nThe studio licenses" in passage[1]
    assert "onboarding" not in _entities(db, tid, by_job)  # the title is no entity
    # the same file uploaded: the same passage text, titled by its heading
    md = _file("onboarding.md", (DOCUMENTS / "onboarding.md").read_bytes())
    r = client.post(f"/v1/corpora/{by_upload}/uploads", json={"files": [md]}, headers=auth(key))
    assert r.status_code == 202 and _poll(client, key, r.json()["id"])["state"] == "succeeded"
    assert [(t, x) for t, x, _ in _passages(db, tid, by_upload)] == [("Welcome to the Varik Studio", passage[1])]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"text": "Another text."}, ("documents[0].text is not the text of its sections",)),
        ({"sections": [{"path": ["Two\nlines"], "text": "x"}]}, ("documents[0].sections[0].path[0]", "one line")),
        ({"sections": [{"path": [], "text": "   "}]}, ("documents[0].sections[0].text is empty",)),
        ({"sections": [{"path": [""], "text": "x"}]}, ("sections.0.path.0",)),
        ({"sections": [{"text": "x", "level": 2}]}, ("level",)),
        ({"title_is_entity": "perhaps"}, ("title_is_entity",)),
    ],
)
def test_bad_sections_are_422_and_submit_nothing(
    client: TestClient, change: dict[str, Any], words: tuple[str, ...]
) -> None:
    _, _, key = _tenant(client, "bad-sections")
    cid = _corpus(client, key, "kept")
    doc = _document_in(DOCUMENTS / "onboarding.md") | change
    _err(client.post(f"/v1/corpora/{cid}/index-jobs", json={"documents": [doc]}, headers=auth(key)), 422, *words)
    assert _state(client, key, cid) == (0, [])


def test_the_console_knows_the_apis_suffixes_and_limits() -> None:
    """The console's file picker accepts what the readers read, and its text fields say the API's limits."""
    from livingrag.api.routes.uploads import RECORD_SUFFIXES
    from livingrag.api.schemas import MAX_DOCUMENT_CHARS, PassageIn
    from livingrag.io.readers import DOCUMENT_SUFFIXES

    js = (Path(__file__).resolve().parents[2] / "livingrag" / "api" / "ui" / "views" / "corpus.js").read_text()
    suffixes = re.search(r"const SUFFIXES = \[(.*?)\];", js)
    assert suffixes is not None and json.loads(f"[{suffixes.group(1)}]") == [*DOCUMENT_SUFFIXES, *RECORD_SUFFIXES]
    assert f"const DOCUMENT_CHARS = {MAX_DOCUMENT_CHARS};" in js
    passage_max = next(m.max_length for m in PassageIn.model_fields["text"].metadata if hasattr(m, "max_length"))
    assert f"const PASSAGE_CHARS = {passage_max};" in js


def test_a_document_over_the_text_limit_is_named(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from livingrag.api.routes import uploads

    monkeypatch.setattr(uploads, "MAX_DOCUMENT_CHARS", 100)
    _, _, key = _tenant(client, "long-upload")
    cid = _corpus(client, key, "kept")
    files = {"files": [_file("onboarding.md", (DOCUMENTS / "onboarding.md").read_bytes())]}
    r = client.post(f"/v1/corpora/{cid}/uploads", json=files, headers=auth(key))
    _err(r, 422, "onboarding.md: the document's text is", "the limit of one document is 100 (split the file)")
    assert _state(client, key, cid) == (0, [])


def test_records_files_index_one_document_a_record_as_livingrag_index_does(client: TestClient) -> None:
    """A .json list of records and a .jsonl file: each record is a document (its title, text and
    id), as `livingrag index corpus.json` reads the same file."""
    _, _, key = _tenant(client, "records-upload")
    cid = _corpus(client, key, "records")
    records = [
        {"id": "r1", "title": "Ferry Teisten", "text": "The ferry Teisten sails from Bergen at dawn."},
        {"id": "r2", "title": "Harbour Office", "text": "The harbour office in Bergen opens at eight."},
    ]
    lines = "\n".join(
        json.dumps(r) for r in [{"title": "Night Crossing", "text": "The night crossing takes nine hours."}]
    )
    files = [_file("corpus.json", json.dumps(records).encode()), _file("more.jsonl", lines.encode())]
    r = client.post(f"/v1/corpora/{cid}/uploads", json={"files": files}, headers=auth(key))
    assert r.status_code == 202, r.text
    shown = {f["name"]: f for f in r.json()["files"]}
    assert shown["corpus.json"]["documents"] == 2 and shown["corpus.json"]["title"] == "2 records"
    assert shown["more.jsonl"]["documents"] == 1 and shown["more.jsonl"]["title"] == "Night Crossing"
    job = _poll(client, key, r.json()["id"])
    assert job["state"] == "succeeded", job
    passages = client.get(f"/v1/corpora/{cid}/passages", headers=auth(key)).json()["items"]
    assert sorted(p["title"] for p in passages) == ["Ferry Teisten", "Harbour Office", "Night Crossing"]
    assert {p["external_id"] for p in passages} >= {"r1", "r2"}
