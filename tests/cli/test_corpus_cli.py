"""The corpus commands end to end: corpus create/list/delete, index, passage add/update/delete, retrieve."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livingrag.cli.main import app
from livingrag.db.engine import Database
from livingrag.errors import InvalidInput, NotFound
from tests.corpus_support import CORPUS

runner = CliRunner()
pytestmark = [pytest.mark.db, pytest.mark.slow]


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)
    tenant = f"cli-{uuid.uuid4().hex[:8]}"
    runner.invoke(app, ["tenant", "create", tenant])
    monkeypatch.setenv("LIVINGRAG_TENANT", tenant)
    return tenant


def _ok(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, (args, res.output, res.exception)
    return res.stdout


def test_corpus_lifecycle(cli_env: str, tmp_path: Path) -> None:
    data = tmp_path / "corpus.json"
    data.write_text(json.dumps(CORPUS))
    created = json.loads(_ok(["corpus", "create", "wiki", "--json"]))
    assert created["name"] == "wiki" and created["retrieval_preset"] == "2wikimultihopqa"
    mq = json.loads(_ok(["corpus", "create", "mq", "--preset", "musique", "--json"]))
    assert mq["retrieval_preset"] == "musique"
    bad = runner.invoke(app, ["corpus", "create", "other", "--preset", "wixqa"])
    assert bad.exit_code != 0 and "unknown retrieval preset 'wixqa'" in str(bad.exception)
    assert "other" not in {c["name"] for c in json.loads(_ok(["corpus", "list", "--json"]))}

    report = json.loads(_ok(["index", "--corpus", "wiki", str(data), "--json", "--quiet"]))
    assert report["indexed"] == len(CORPUS) and report["skipped_existing"] == 0
    assert {"ner", "embed", "write", "total"} <= set(report["phases"])
    again = json.loads(_ok(["index", "--corpus", "wiki", str(data), "--json", "--quiet"]))
    assert again["indexed"] == 0 and again["skipped_existing"] == len(CORPUS)

    listed = json.loads(_ok(["corpus", "list", "--json"]))
    (row,) = [c for c in listed if c["name"] == "wiki"]
    assert row["passages"] == len(CORPUS) and row["entities"] > 0

    out = json.loads(_ok(["retrieve", "--corpus", "wiki", "Who founded the Aurora Quartet?", "--json"]))
    assert out["passages"][0]["title"] == "Aurora Quartet"
    assert out["entities"] and all(e["tier"] >= 1 for e in out["entities"])
    assert out["common_words"] == []  # ten passages: no word reaches the floor of 20
    text_out = _ok(["retrieve", "--corpus", "wiki", "Who founded the Aurora Quartet?"])
    assert "Aurora Quartet" in text_out and "tier" in text_out

    pid = json.loads(
        _ok(
            [
                "passage",
                "add",
                "--corpus",
                "wiki",
                "--title",
                "Pekka Lund",
                "--text",
                "Pekka Lund is a Finnish cellist.",
                "--json",
            ]
        )
    )["id"]
    assert "updated passage" in _ok(
        ["passage", "update", "--corpus", "wiki", str(pid), "--text", "Pekka Lund is a Finnish cellist from Turku."]
    )
    out = json.loads(_ok(["retrieve", "--corpus", "wiki", "Where is Pekka Lund from?", "--json"]))
    assert out["passages"][0]["id"] == pid
    assert "deleted passages" in _ok(["passage", "delete", "--corpus", "wiki", str(pid)])
    res = runner.invoke(app, ["passage", "delete", "--corpus", "wiki", str(pid)])
    assert isinstance(res.exception, NotFound)

    assert "deleted corpus" in _ok(["corpus", "delete", "wiki", "--yes"])
    assert "wiki" not in [c["name"] for c in json.loads(_ok(["corpus", "list", "--json"]))]


def test_index_errors_name_the_file(cli_env: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"title": "no text"}\n')
    res = runner.invoke(app, ["index", "--corpus", "new", "--create", str(bad), "--quiet"])
    assert isinstance(res.exception, InvalidInput)
    assert "bad.jsonl: line 2" in str(res.exception)
    missing = runner.invoke(app, ["index", "--corpus", "nope", str(bad)])
    assert isinstance(missing.exception, NotFound) and "--create" in str(missing.exception)


def test_default_tenant_is_created_on_first_use(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)
    monkeypatch.delenv("LIVINGRAG_TENANT", raising=False)
    _ok(["corpus", "list", "--json"])
    tenants = json.loads(_ok(["tenant", "list", "--json"]))
    assert "default" in [t["name"] for t in tenants]
    unknown = runner.invoke(app, ["corpus", "list", "--tenant", f"nobody-{uuid.uuid4().hex[:6]}"])
    assert isinstance(unknown.exception, NotFound)


def test_passage_update_and_delete_in_a_fresh_process_mark_citing_experiences_stale(
    cli_env: str, database_url: str, db: Database, tmp_path: Path
) -> None:
    """`livingrag passage update|delete` in a process of its own (nothing else imported) marks the
    experiences that cited the passage stale, in the same transaction as the change."""
    import os
    import subprocess
    import sys

    import numpy as np
    from sqlalchemy import text

    from livingrag.db.repositories import corpora, tenants
    from livingrag.experience.store import ExperienceStore
    from livingrag.experience.types import UsedPassage
    from tests.experience_helpers import CountingVerifier, HashingEncoder, candidate, settings

    data = tmp_path / "corpus.json"
    data.write_text(json.dumps(CORPUS[:4]))
    _ok(["corpus", "create", "wiki"])
    _ok(["index", "--corpus", "wiki", str(data), "--quiet"])
    with db.owner_session() as s:
        tenant_id = tenants.get_tenant(s, cli_env).id
    with db.tenant_session(tenant_id) as s:
        corpus = corpora.get_corpus(s, "wiki")
        (p1, t1, x1), (p2, t2, x2) = s.execute(
            text("SELECT id, title, text FROM passages WHERE corpus_id = :c ORDER BY id LIMIT 2"), {"c": corpus.id}
        ).all()
    store = ExperienceStore(db, settings(), encoder=HashingEncoder(), verifier=CountingVerifier(1.0))
    ids = []
    for i, (pid, title, body) in enumerate([(p1, t1, x1), (p2, t2, x2)]):
        emb = np.zeros(corpus.embedding_dim)
        emb[i] = 1.0
        wb = store.write_back(
            candidate(tenant_id, corpus.id, emb, {10 + i: 1.0}, passages=(UsedPassage(pid, body, title),))
        )
        assert wb.stored and wb.experience_id is not None, wb
        ids.append(wb.experience_id)

    def cli(*args: str) -> str:
        env = {**os.environ, "LIVINGRAG_DB__URL": database_url, "LIVINGRAG_TENANT": cli_env}
        out = subprocess.run(
            [sys.executable, "-m", "livingrag.cli.main", *args], env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out.stdout

    def state(exp_id: int) -> tuple[bool, str | None]:
        with db.tenant_session(tenant_id) as s:
            row = s.execute(text("SELECT stale, stale_reason FROM experiences WHERE id = :i"), {"i": exp_id}).one()
        return bool(row[0]), row[1]

    assert state(ids[0]) == (False, None) and state(ids[1]) == (False, None)
    cli("passage", "update", "--corpus", "wiki", str(p1), "--text", x1 + " It was renamed in 1990.")
    assert state(ids[0]) == (True, f"source passage updated: {p1}")
    assert state(ids[1]) == (False, None)
    cli("passage", "delete", "--corpus", "wiki", str(p2))
    assert state(ids[1]) == (True, f"source passage deleted: {p2}")


def test_corpus_info_and_set_preset(cli_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "corpus.json"
    data.write_text(json.dumps(CORPUS))
    created = json.loads(_ok(["corpus", "create", "mq", "--preset", "musique", "--json"]))
    _ok(["index", "--corpus", "mq", str(data), "--json", "--quiet"])
    info = json.loads(_ok(["corpus", "info", "mq", "--json"]))
    (listed,) = [c for c in json.loads(_ok(["corpus", "list", "--json"])) if c["name"] == "mq"]
    assert info["id"] == created["id"] and info["name"] == "mq"
    assert {k: info[k] for k in ("passages", "entities", "sentences", "version", "embedding_model")} == {
        k: listed[k] for k in ("passages", "entities", "sentences", "version", "embedding_model")
    }
    assert info["passages"] == len(CORPUS) and info["embedding_dim"] == 384
    assert info["extractor"] == "spacy" and info["ner_model"] and info["chunk_tokens"] and info["chunk_overlap"]
    assert (info["retrieval_preset"], info["effective_preset"], info["preset_overridden"]) == (
        "musique",
        "musique",
        False,
    )
    assert "musique" in _ok(["corpus", "info", str(created["id"])])  # by id, as a table

    changed = json.loads(_ok(["corpus", "set-preset", "mq", "hotpotqa", "--json"]))
    assert changed == {"id": created["id"], "name": "mq", "retrieval_preset": "hotpotqa", "previous": "musique"}
    after = json.loads(_ok(["corpus", "info", "mq", "--json"]))
    assert after["retrieval_preset"] == "hotpotqa" and after["version"] == info["version"]
    assert {k: v for k, v in after.items() if "preset" not in k} == {k: v for k, v in info.items() if "preset" not in k}

    bad = runner.invoke(app, ["corpus", "set-preset", "mq", "wixqa"])
    assert bad.exit_code != 0 and isinstance(bad.exception, InvalidInput)
    assert "unknown retrieval preset 'wixqa'; known: 2wikimultihopqa, custom, hotpotqa, musique" in str(bad.exception)
    assert json.loads(_ok(["corpus", "info", "mq", "--json"]))["retrieval_preset"] == "hotpotqa"
    missing = runner.invoke(app, ["corpus", "set-preset", "nope", "musique"])
    assert missing.exit_code != 0 and isinstance(missing.exception, NotFound)

    # an explicitly set preset wins at query time, and info says so
    monkeypatch.setenv("LIVINGRAG_RETRIEVAL__PRESET", "musique")
    told = json.loads(_ok(["corpus", "info", "mq", "--json"]))
    assert (told["retrieval_preset"], told["effective_preset"], told["preset_overridden"]) == (
        "hotpotqa",
        "musique",
        True,
    )
