"""The corpus graph in PostgreSQL: indexing, skipping, crash safety, update/delete consistency,
malformed input (loading it: tests/corpus/test_graph_loader.py). Model stand-ins from corpus_support keep
these fast; tests/retrieval/test_retriever.py runs the real models."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from livingrag.corpus.graph_loader import load_graph
from livingrag.corpus.hooks import _hooks, register_passage_change_hook
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.db.repositories import graph_writer as graph_repo
from livingrag.db.repositories import passages as passage_repo
from livingrag.errors import InvalidInput, NotFound
from livingrag.generation.llm import Completion, Message
from tests.corpus_support import CORPUS, RuleExtractor
from tests.corpus_support import corpus_documents as _docs
from tests.corpus_support import graph_corpus as _corpus
from tests.corpus_support import graph_counts as _counts
from tests.corpus_support import rule_indexer as _indexer

pytestmark = pytest.mark.db


def _check_consistent(db: Database, tenant: int, corpus_id: int) -> None:
    """Every passage has sentences and edges; mention weights sum to 1; no dangling or orphan rows."""
    with db.tenant_session(tenant) as s:
        q = lambda sql: s.execute(text(sql), {"c": corpus_id}).scalar()  # noqa: E731
        assert q("SELECT count(*) FROM passages p WHERE corpus_id = :c AND NOT EXISTS "
                 "(SELECT 1 FROM sentences x WHERE x.passage_id = p.id)") == 0  # fmt: skip
        assert q("SELECT count(*) FROM passages p WHERE corpus_id = :c AND NOT EXISTS "
                 "(SELECT 1 FROM passage_entities x WHERE x.passage_id = p.id)") == 0  # fmt: skip
        assert q("SELECT count(*) FROM entities e WHERE corpus_id = :c AND NOT EXISTS "
                 "(SELECT 1 FROM passage_entities x WHERE x.entity_id = e.id)") == 0  # fmt: skip
        assert q("SELECT count(*) FROM entities WHERE corpus_id = :c AND embedding IS NULL") == 0
        assert q("SELECT count(*) FROM passages WHERE corpus_id = :c AND embedding IS NULL") == 0
        bad = q("SELECT count(*) FROM (SELECT passage_id, sum(weight) w FROM passage_entities WHERE corpus_id = :c "
                "GROUP BY passage_id) t WHERE abs(w - 1) > 1e-5")  # fmt: skip
        assert bad == 0
        # every entity-sentence edge joins an entity the sentence's passage mentions
        assert q("SELECT count(*) FROM entity_sentences es JOIN sentences x ON x.id = es.sentence_id "
                 "WHERE es.corpus_id = :c AND NOT EXISTS (SELECT 1 FROM passage_entities pe "
                 "WHERE pe.passage_id = x.passage_id AND pe.entity_id = es.entity_id)") == 0  # fmt: skip


def test_index_then_reindex_skips_by_hash(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c, batch_size=4)
    r1 = idx.index_documents(_docs())
    assert r1.indexed == len(CORPUS) and r1.skipped_existing == 0
    assert r1.version == 3  # one version per batch of 4: 4 + 4 + 2
    counts = _counts(db, tenant, c.id)
    assert counts["passages"] == len(CORPUS) and counts["entities"] > 10
    _check_consistent(db, tenant, c.id)
    # re-index: nothing new, models never called, version unchanged
    idx2 = _indexer(db, tenant, c, extractor=RuleExtractor(fail_after=0))
    r2 = idx2.index_documents(_docs() + _docs()[:2])
    assert r2.indexed == 0 and r2.skipped_existing == len(CORPUS) and r2.duplicates_in_input == 2
    assert r2.version == r1.version
    assert _counts(db, tenant, c.id) == counts


def test_adding_indexes_only_new_passages_and_entities_meet(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:5]))
    before = _counts(db, tenant, c.id)
    r = idx.index_documents(_docs())
    assert r.indexed == len(CORPUS) - 5 and r.skipped_existing == 5
    with db.tenant_session(tenant) as s:
        # "Marta Quell" occurs in two passages but is one entity; its surface forms are kept
        row = s.execute(
            text("SELECT count(*), min(name) FROM entities WHERE corpus_id = :c AND normalized_name = 'marta quell'"),
            {"c": c.id},
        ).one()
        assert row == (1, "Marta Quell")
        n_links = s.execute(
            text("SELECT count(*) FROM passage_entities pe JOIN entities e ON e.id = pe.entity_id "
                 "WHERE e.normalized_name = 'marta quell' AND e.corpus_id = :c"), {"c": c.id}
        ).scalar()  # fmt: skip
        assert n_links == 2
    assert _counts(db, tenant, c.id)["entities"] > before["entities"]
    _check_consistent(db, tenant, c.id)


def test_title_becomes_an_entity_of_its_passage(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    _indexer(db, tenant, c).index_documents([Document("Zorbu (river)", "It flows north for ninety miles.")])
    with db.tenant_session(tenant) as s:
        names = s.execute(text("SELECT normalized_name, label FROM entities WHERE corpus_id = :c"), {"c": c.id}).all()
    assert ("zorbu", "TITLE") in names


def test_long_documents_are_chunked_and_linked(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    words = [f"Word{i} sentence number {i}." for i in range(100)]  # 400 tokens
    doc = Document("Long Doc", " ".join(words), external_id="long")
    r = _indexer(db, tenant, c, chunk_tokens=120, chunk_overlap=20, batch_size=2).index_documents([doc])
    assert r.indexed == 4  # windows start at 0, 100, 200, 300
    with db.tenant_session(tenant) as s:
        rows = s.execute(
            text("SELECT id, chunk_index, external_id, token_count FROM passages WHERE corpus_id = :c "
                 "ORDER BY chunk_index"), {"c": c.id}
        ).all()  # fmt: skip
        assert [r[1] for r in rows] == [0, 1, 2, 3]
        assert [r[2] for r in rows] == ["long#0", "long#1", "long#2", "long#3"]
        links = s.execute(
            text("SELECT source_id, target_id FROM passage_links WHERE corpus_id = :c ORDER BY source_id"), {"c": c.id}
        ).all()
    ids = [r[0] for r in rows]
    assert [tuple(x) for x in links] == [(ids[0], ids[1]), (ids[1], ids[2]), (ids[2], ids[3])]


def test_crash_in_a_batch_leaves_whole_batches_and_the_next_run_continues(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    crashing = _indexer(db, tenant, c, extractor=RuleExtractor(fail_after=6), batch_size=4)
    with pytest.raises(RuntimeError, match="simulated crash"):
        crashing.index_documents(_docs())
    assert _counts(db, tenant, c.id)["passages"] == 4  # the first batch only
    _check_consistent(db, tenant, c.id)

    # a failure inside the write transaction (after the passages were inserted) rolls all of it back
    def boom(*_a: object, **_k: object) -> int:
        raise RuntimeError("simulated crash while writing")

    orig = graph_repo.link_chunks
    graph_repo.link_chunks = boom
    try:
        with pytest.raises(RuntimeError, match="while writing"):
            _indexer(db, tenant, c, batch_size=4).index_documents(_docs())
    finally:
        graph_repo.link_chunks = orig
    assert _counts(db, tenant, c.id)["passages"] == 4
    _check_consistent(db, tenant, c.id)

    r = _indexer(db, tenant, c, batch_size=4).index_documents(_docs())
    assert r.skipped_existing == 4 and r.indexed == len(CORPUS) - 4
    _check_consistent(db, tenant, c.id)
    # same graph as a clean run
    clean = _corpus(db, tenant, "clean")
    _indexer(db, tenant, clean).index_documents(_docs())
    a, b = _counts(db, tenant, c.id), _counts(db, tenant, clean.id)
    assert a == b


def test_update_and_delete_keep_the_graph_consistent(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs())
    fired: list[tuple[int, tuple[int, ...], str]] = []

    def hook(session: object, corpus_id: int, ids: object, kind: str) -> None:
        fired.append((corpus_id, tuple(ids), kind))  # type: ignore[arg-type]

    register_passage_change_hook(hook)
    try:
        with db.tenant_session(tenant) as s:
            pid = s.execute(
                text("SELECT id FROM passages WHERE corpus_id = :c AND title = 'Olaf Renning'"), {"c": c.id}
            ).scalar_one()
            v0 = corpora.current_version(s, c.id)
        # Copenhagen is only in this passage; after the update it is gone, Aarhus appears
        idx.update_passage(pid, text="Olaf Renning was a Danish engineer from Aarhus.")
        with db.tenant_session(tenant) as s:
            keys = set(
                s.execute(text("SELECT normalized_name FROM entities WHERE corpus_id = :c"), {"c": c.id}).scalars()
            )
            p = passage_repo.get_passage(s, c.id, pid)
            assert corpora.current_version(s, c.id) == v0 + 1
        assert "copenhagen" not in keys and "aarhus" in keys
        assert p.text.endswith("from Aarhus.") and p.id == pid
        assert fired[-1] == (c.id, (pid,), "updated")
        _check_consistent(db, tenant, c.id)

        # delete two passages by id and by external id; Olaf Renning stays (Brevik's passage names him)
        with db.tenant_session(tenant) as s:
            brevik = s.execute(
                text("SELECT id FROM passages WHERE corpus_id = :c AND title = 'Brevik'"), {"c": c.id}
            ).scalar_one()
        deleted = idx.delete_passages([pid, str(brevik)])
        assert sorted(deleted) == sorted([pid, brevik])
        assert fired[-1] == (c.id, tuple(sorted([pid, brevik])), "deleted")
        with db.tenant_session(tenant) as s:
            keys = set(
                s.execute(text("SELECT normalized_name FROM entities WHERE corpus_id = :c"), {"c": c.id}).scalars()
            )
            assert corpora.current_version(s, c.id) == v0 + 2
        assert "aarhus" not in keys and "telemark" not in keys and "olaf renning" not in keys
        assert "marta quell" in keys
        _check_consistent(db, tenant, c.id)
        with pytest.raises(NotFound):
            idx.delete_passages([999_999_999])
    finally:
        _hooks.remove(hook)


def test_a_failing_hook_rolls_the_change_back(db: Database, tenant: int) -> None:
    c = _corpus(db, tenant)
    idx = _indexer(db, tenant, c)
    idx.index_documents(_docs(CORPUS[:3]))
    before = _counts(db, tenant, c.id)

    def hook(*_a: object) -> None:
        raise RuntimeError("hook refused")

    register_passage_change_hook(hook)
    try:
        with db.tenant_session(tenant) as s:
            pid = s.execute(text("SELECT min(id) FROM passages WHERE corpus_id = :c"), {"c": c.id}).scalar_one()
        with pytest.raises(RuntimeError, match="hook refused"):
            idx.delete_passages([pid])
    finally:
        _hooks.remove(hook)
    assert _counts(db, tenant, c.id) == before


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.json", b'[{"title": "a", "text": "b"},', "not valid JSON"),
        (
            "notext.json",
            b'[{"title": "a", "text": "fine"}, {"title": "b"}]',
            "record at index 1: the record has no 'text' field",
        ),
        ("empty.json", b"", "the file is empty"),
        ("blank.jsonl", b"\n  \n", "the file is empty"),
        ("latin1.json", '[{"title": "Malmö", "text": "Malmö is a city."}]'.encode("latin-1"), "not UTF-8"),
        ("badline.jsonl", b'{"text": "ok"}\n{"text": 3}\n', "line 2: 'text' must be a string"),
        ("emptytext.json", b'[{"title": "x", "text": "   "}]', "record at index 0: 'text' is empty"),
        ("weird.json", b"42", "expected a JSON list"),
    ],
)
def test_malformed_input_names_file_and_record_and_writes_nothing(
    db: Database, tenant: int, tmp_path: Path, name: str, content: bytes, expected: str
) -> None:
    c = _corpus(db, tenant)
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InvalidInput) as ei:
        _indexer(db, tenant, c, extractor=RuleExtractor(fail_after=0)).index_path(path)
    assert name in str(ei.value) and expected in str(ei.value)
    assert _counts(db, tenant, c.id)["passages"] == 0


def test_malformed_file_in_a_folder_writes_nothing(db: Database, tenant: int, tmp_path: Path) -> None:
    c = _corpus(db, tenant)
    (tmp_path / "a.txt").write_text("Marta Quell made films in Brevik.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_bytes(b"\xff\xfe broken")
    with pytest.raises(InvalidInput, match=r"b\.md: not UTF-8"):
        _indexer(db, tenant, c).index_path(tmp_path)
    assert _counts(db, tenant, c.id)["passages"] == 0
    (tmp_path / "sub" / "b.md").write_text("# Notes\nElina Saari played in Helsinki.")
    r = _indexer(db, tenant, c).index_path(tmp_path)
    assert r.indexed == 2
    with db.tenant_session(tenant) as s:
        rows = s.execute(
            text("SELECT title, external_id FROM passages WHERE corpus_id = :c ORDER BY title"), {"c": c.id}
        )
        # the Markdown file is titled by its heading (livingrag.io.readers), the text file by its name
        assert sorted(tuple(r) for r in rows) == [("Notes", "sub/b.md"), ("a", "a.txt")]


def test_corpus_rows_are_invisible_to_other_tenants(db: Database, make_tenant: Callable[..., tuple[int, str]]) -> None:
    t1, t2 = make_tenant()[0], make_tenant()[0]
    c = _corpus(db, t1)
    _indexer(db, t1, c).index_documents(_docs(CORPUS[:2]))
    with db.tenant_session(t2) as s:
        assert s.execute(text("SELECT count(*) FROM passages WHERE corpus_id = :c"), {"c": c.id}).scalar() == 0
    with pytest.raises(NotFound):
        load_graph(db, t2, c.id, 16)


def test_ingest_formats(tmp_path: Path) -> None:
    from livingrag.corpus.ingest import read_corpus

    (tmp_path / "a.json").write_text(json.dumps([{"title": "T", "text": "x", "id": 7}, {"text": "y"}]))
    docs = read_corpus(tmp_path / "a.json")
    assert [(d.title, d.text, d.external_id) for d in docs] == [("T", "x", "7"), ("", "y", None)]
    (tmp_path / "b.json").write_text(json.dumps(["0:first chunk", "1:second chunk"]))
    assert [d.text for d in read_corpus(tmp_path / "b.json")] == ["first chunk", "second chunk"]
    (tmp_path / "c.json").write_text(json.dumps(["10:30 meeting", "plain"]))
    assert [d.text for d in read_corpus(tmp_path / "c.json")] == ["10:30 meeting", "plain"]
    (tmp_path / "d.json").write_text(json.dumps({"Demon Dice": ["Demon Dice is a game.", " It has dice."]}))
    assert [(d.title, d.text) for d in read_corpus(tmp_path / "d.json")] == [
        ("Demon Dice", "Demon Dice is a game. It has dice.")
    ]
    (tmp_path / "e.jsonl").write_text('{"title": "A", "text": "a"}\n\n"b"\n')
    assert [(d.title, d.text) for d in read_corpus(tmp_path / "e.jsonl")] == [("A", "a"), ("", "b")]
    with pytest.raises(InvalidInput, match="unsupported file type"):
        read_corpus(tmp_path / "e.csv") if (tmp_path / "e.csv").write_text("x") else None
    with pytest.raises(InvalidInput, match="no such file"):
        read_corpus(tmp_path / "missing.json")


_KILL_SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
from pydantic import SecretStr
from livingrag.config import DBSettings
from livingrag.corpus.indexer import CorpusIndexer
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from tests.corpus_support import CORPUS, HashEmbedder, RuleExtractor

class Slow(RuleExtractor):
    def extract_passages(self, texts):
        for ex in super().extract_passages(texts):
            time.sleep(0.05)
            yield ex

db = Database(DBSettings(url=SecretStr({url!r})))
with db.tenant_session({tenant}) as s:
    c = corpora.get_corpus(s, {corpus})
docs = [Document(f"{{r['title']}} {{i}}", r["text"] + f" Part {{i}}.") for i in range(8) for r in CORPUS]
CorpusIndexer(db, {tenant}, c, extractor=Slow(), embedder=HashEmbedder(), batch_size=4).index_documents(docs)
"""


def test_a_process_killed_mid_run_leaves_whole_batches(db: Database, tenant: int, database_url: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    root = str(Path(__file__).resolve().parents[2])
    c = _corpus(db, tenant)
    script = _KILL_SCRIPT.format(root=root, url=database_url, tenant=tenant, corpus=c.id)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": root})
    try:
        deadline = time.monotonic() + 120
        while _counts(db, tenant, c.id)["passages"] < 8:
            assert proc.poll() is None, "the indexing process ended before it could be killed"
            assert time.monotonic() < deadline, "the indexing process wrote nothing"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    n = _counts(db, tenant, c.id)["passages"]
    assert 8 <= n < 8 * len(CORPUS) and n % 4 == 0  # whole batches of 4, nothing half-written
    _check_consistent(db, tenant, c.id)
    docs = [
        Document(f"{r['title']} {i}", r["text"] + f" Part {i}.") for i in range(8) for r in CORPUS
    ]  # the same input as the killed run
    report = _indexer(db, tenant, c, batch_size=4).index_documents(docs)
    assert report.skipped_existing == n and report.indexed == 8 * len(CORPUS) - n
    _check_consistent(db, tenant, c.id)


class _ScriptedLLM:
    """An LLM stand-in that answers the NER prompts with fixed JSON (tests the parsing, not a model)."""

    name = "scripted"

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.calls = 0

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
    ) -> Completion:
        self.calls += 1
        text = messages[-1]["content"]
        reply = next(v for k, v in self.replies.items() if k in text)
        return Completion(reply, 10, 5, self.name, 0.0)


def test_llm_extractor_places_terms_in_sentences(db: Database, tenant: int) -> None:
    from livingrag.corpus.ner import LLMExtractor
    from livingrag.errors import LLMError

    llm = _ScriptedLLM(
        {
            "Payouts are sent": '```json\n["Payouts", "payout schedule", "Stripe"]\n```',
            "When do I get": 'Here you go: ["payout schedule", "Payouts"]',
            "broken": "I cannot help with that.",
        }
    )
    ex = LLMExtractor(llm)
    (out,) = list(ex.extract_passages(["Payouts are sent weekly. Stripe handles the transfer."]))
    assert out.sentences == ("Payouts are sent weekly.", "Stripe handles the transfer.")
    placed = {(m.key, m.sentence) for m in out.mentions}
    # "payout schedule" occurs in no sentence: attached to the first one
    assert placed == {("payouts", 0), ("payout schedule", 0), ("stripe", 1)}
    assert ex.extract_question("When do I get my payouts?") == ["payout schedule", "Payouts"]
    with pytest.raises(LLMError, match="JSON array"):
        list(ex.extract_passages(["broken text"]))
    # it plugs into the indexer like spaCy does
    c = _corpus(db, tenant)
    r = _indexer(db, tenant, c, extractor=ex).index_documents(
        [Document("Payouts", "Payouts are sent weekly. Stripe handles the transfer.")]
    )
    assert r.indexed == 1
    with db.tenant_session(tenant) as s:
        keys = set(s.execute(text("SELECT normalized_name FROM entities WHERE corpus_id = :c"), {"c": c.id}).scalars())
    assert {"payouts", "payout schedule", "stripe"} <= keys


def test_separate_sentence_embeddings_build_the_same_graph(db: Database, tenant: int) -> None:
    a, b = _corpus(db, tenant, "late"), _corpus(db, tenant, "separate")
    _indexer(db, tenant, a).index_documents(_docs())
    _indexer(db, tenant, b, sentence_embeddings="separate").index_documents(_docs())
    assert _counts(db, tenant, a.id) == _counts(db, tenant, b.id)
    _check_consistent(db, tenant, b.id)


def test_link_chunks_links_a_passage_to_its_stored_neighbours_on_both_sides(db: Database, tenant: int) -> None:
    """A chunk linked after its neighbours were stored (the next one and the previous one, both
    found through an index), links of another document untouched, none stored twice."""
    c = _corpus(db, tenant)
    vec = np.ones(16, dtype=np.float32)

    def rows(doc: str, chunks: list[int]) -> graph_repo.GraphBatch:
        ps = [
            graph_repo.PassageRow(f"{doc}{k}", f"{doc} chunk {k}.", f"h{doc}{k}", 9, 3, doc, k, None, vec)
            for k in chunks
        ]
        return graph_repo.GraphBatch(passages=ps, sentences=[], entities=[], entity_sentences=[], passage_entities=[])

    with db.tenant_session(tenant) as s:
        graph_repo.lock_corpus(s, c.id)
        p0, p2 = graph_repo.write_batch(s, tenant, c.id, rows("d", [0, 2])).passage_ids
        (e0, e1) = graph_repo.write_batch(s, tenant, c.id, rows("e", [0, 1])).passage_ids
        (p1,) = graph_repo.write_batch(s, tenant, c.id, rows("d", [1])).passage_ids
        assert graph_repo.link_chunks(s, tenant, c.id, [p1]) == 2  # (d0, d1) and (d1, d2)
        assert graph_repo.link_chunks(s, tenant, c.id, [p0, p1, p2]) == 0  # already there
        assert graph_repo.link_chunks(s, tenant, c.id, [e1]) == 1  # (e0, e1)
        links = s.execute(
            text("SELECT source_id, target_id FROM passage_links WHERE corpus_id = :c ORDER BY 1, 2"), {"c": c.id}
        ).all()
    assert sorted(tuple(r) for r in links) == sorted([(p0, p1), (p1, p2), (e0, e1)])
