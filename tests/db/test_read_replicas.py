"""Reads from a streaming standby (issue 46), against a real primary and a real hot standby: the
session's embedded test server and a standby made of it with ``pg_basebackup`` (the code behind
``livingrag db replica create``), both on unix sockets of this machine.

The answer pipeline runs with the packaged models and the loopback OpenAI-compatible LLM. Where
the reads went is checked on the standby's own statistics (``pg_stat_user_tables``) and on the
:class:`~livingrag.db.replicas.ReplicaSet`'s counters."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from livingrag.config import Settings, get_settings
from livingrag.corpus import service
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.db.standby import EmbeddedStandby, create_standby, start_standby, stop_standby
from livingrag.errors import ConfigError, StandbyLost
from livingrag.pipeline.answer_pipeline import LivingRAG
from livingrag.retrieval.retriever import shared_graph_cache
from livingrag.testing.openai_server import OpenAICompatServer, qa_reply
from livingrag.types import CorpusInfo
from tests.conftest import db_settings_for
from tests.corpus_support import CORPUS, QUESTIONS

pytestmark = [pytest.mark.db, pytest.mark.slow]

# ---------------------------------------------------------------- fixtures and helpers


@pytest.fixture(scope="module")
def standby(pg_server_url: str) -> Iterator[EmbeddedStandby]:
    """A hot standby of the session's test server, in a temporary folder; stopped and removed after."""
    if os.environ.get("LIVINGRAG_TEST_DB_URL"):
        pytest.skip("needs the embedded test server: the standby is made of it with pg_basebackup")
    folder = Path(tempfile.mkdtemp(prefix="lrg-test-standby-"))
    try:
        yield create_standby(pg_server_url, folder)
    finally:
        stop_standby(folder)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def standby_url(standby: EmbeddedStandby, database_url: str) -> str:
    """The session's database on the standby (as its superuser: the tests pause its replay)."""
    return standby.url(database=make_url(database_url).database)


@pytest.fixture(scope="module")
def llm() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer(responder=qa_reply) as srv:
        yield srv


@pytest.fixture(scope="module")
def indexed(db: Database) -> tuple[int, CorpusInfo]:
    """A tenant and the test corpus, indexed with the packaged models through the primary."""
    settings = get_settings()
    tenant_id, _ = service.ensure_tenant(db, f"replica-{uuid.uuid4().hex[:8]}")
    corpus = service.create_corpus(db, tenant_id, "small", settings)
    service.indexer(db, tenant_id, corpus, settings).index_documents(
        [Document(d["title"], d["text"], source=f"test {i}") for i, d in enumerate(CORPUS)]
    )
    return tenant_id, service.get_corpus(db, tenant_id, corpus.id)


def rag_settings(llm_url: str) -> Settings:
    return get_settings(
        llm={"provider": "openai", "base_url": llm_url, "model": "loopback-qa", "max_retries": 0, "timeout_s": 10.0},
        gates={"verifier": "none"},
    )


@contextmanager
def replica_rag(database_url: str, standby_url: str, llm_url: str, **db: Any) -> Iterator[tuple[Database, LivingRAG]]:
    """A database whose reads go to the standby (retried 0.5 s after a failure) and a pipeline on it."""
    rdb = Database(db_settings_for(database_url, read_urls=[SecretStr(standby_url)], replica_retry_s=0.5, **db))
    rag = LivingRAG(rag_settings(llm_url), db=rdb)
    try:
        yield rdb, rag
    finally:
        rag.close(timeout=60)
        rdb.close()


def standby_reads(rdb: Database) -> int:
    return int(rdb.replica_status()[0]["reads"])


def primary_reads(rdb: Database) -> int:
    assert rdb.replicas is not None
    return sum(rdb.replicas.counters.primary.values())


def scans(url: str, table: str) -> int:
    """Sequential plus index scans of ``table`` counted by the server at ``url``."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            n = conn.execute(
                text(
                    "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = :t"
                ),
                {"t": table},
            ).scalar()
    finally:
        engine.dispose()
    return int(n or 0)


def wait_until(check: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


@contextmanager
def replay_paused(url: str) -> Iterator[None]:
    """The standby's WAL replay paused (it keeps receiving, applies nothing) until the block ends."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_wal_replay_pause()"))
        yield
    finally:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_wal_replay_resume()"))
        engine.dispose()


def ask(rag: LivingRAG, tenant_id: int, corpus_id: int, question: str, **kw: Any) -> list[int]:
    """The ids of the passages the answer was given from."""
    answer = rag.answer(question, tenant=tenant_id, corpus=corpus_id, **kw)
    assert answer.answer
    return [p.id for p in answer.passages]


# ---------------------------------------------------------------- the done-when tests


def test_asks_are_answered_with_their_reads_on_the_standby(
    database_url: str, standby_url: str, llm: OpenAICompatServer, indexed: tuple[int, CorpusInfo]
) -> None:
    tenant_id, corpus = indexed
    shared_graph_cache().invalidate(tenant_id, corpus.id)  # the first ask loads the graph, from the standby
    tables = ("corpora", "passages", "experiences")
    before = {t: scans(standby_url, t) for t in tables}
    with replica_rag(database_url, standby_url, llm.base_url) as (rdb, rag):
        for question, _ in QUESTIONS * 2:
            ask(rag, tenant_id, corpus.id, question)
        assert rag.flush(60)
        assert rdb.replicas is not None and rdb.replicas.counters.primary == {}
        # per question: the corpus version check and the experience preselection (and from the second on,
        # the preset check); once, the graph load
        assert standby_reads(rdb) == 6 + 6 + 5 + 1
        rdb.replicas.dispose()  # its backends end and hand their statistics in
    # the standby itself counted the scans: the corpus row, the graph's passages, the experience store
    wait_until(lambda: all(scans(standby_url, t) > before[t] for t in tables), what="the standby's scan counts")


def test_a_passage_added_through_the_primary_is_seen_by_the_writers_next_question(
    database_url: str, standby_url: str, llm: OpenAICompatServer, indexed: tuple[int, CorpusInfo]
) -> None:
    tenant_id, corpus = indexed
    with replica_rag(database_url, standby_url, llm.base_url, read_your_writes_wait_ms=300) as (rdb, rag):
        ask(rag, tenant_id, corpus.id, QUESTIONS[0][0])  # the graph is cached at the current version
        doc = Document("Orla Brennick", "Orla Brennick was born in Keswyn, a harbour town. She designs sailing boats.")
        with replay_paused(standby_url):  # the standby cannot have the passage: only the primary can answer
            report = service.indexer(rdb, tenant_id, corpus, get_settings()).index_documents([doc])
            assert report.indexed == 1
            seen = ask(rag, tenant_id, corpus.id, "Where was Orla Brennick born?")
            assert report.passage_ids[0] in seen
            assert rdb.replicas is not None and rdb.replicas.counters.primary["read_your_writes"] >= 1
        # replay resumed: once the standby has the write (the floor is dropped), the writer's reads go back to it
        assert rdb.replicas.floor(tenant_id) > 0
        wait_until(lambda: rdb.replicas is not None and rdb.replicas.floor(tenant_id) == 0, what="the floor")
        reads = standby_reads(rdb)
        assert report.passage_ids[0] in ask(rag, tenant_id, corpus.id, "Where was Orla Brennick born?")
        assert standby_reads(rdb) > reads


def test_min_corpus_version_after_a_write_through_another_process(
    db: Database, database_url: str, standby_url: str, llm: OpenAICompatServer, indexed: tuple[int, CorpusInfo]
) -> None:
    """A worker that did not make the write (its own process memory knows nothing of it) still
    answers ``min_corpus_version`` from a server that holds that version, without a Conflict."""
    tenant_id, corpus = indexed
    with replica_rag(database_url, standby_url, llm.base_url, read_your_writes_wait_ms=300) as (rdb, rag):
        ask(rag, tenant_id, corpus.id, QUESTIONS[1][0])
        doc = Document("Tamsin Okoro", "Tamsin Okoro was born in Velmoor. She wrote the novel Salt Meridian.")
        with replay_paused(standby_url):
            # written through another Database: none of rdb's read-your-writes floors covers it
            report = service.indexer(db, tenant_id, corpus, get_settings()).index_documents([doc])
            seen = ask(rag, tenant_id, corpus.id, "Where was Tamsin Okoro born?", min_corpus_version=report.version)
            assert report.passage_ids[0] in seen
            assert rdb.replicas is not None and rdb.replicas.counters.primary["requirement"] >= 1


def test_the_standby_stopped_during_a_run_of_asks_leaves_no_failed_answer(
    database_url: str,
    standby: EmbeddedStandby,
    standby_url: str,
    llm: OpenAICompatServer,
    indexed: tuple[int, CorpusInfo],
) -> None:
    tenant_id, corpus = indexed
    with replica_rag(database_url, standby_url, llm.base_url) as (rdb, rag):
        ask(rag, tenant_id, corpus.id, QUESTIONS[0][0])
        answered: list[str] = []
        failed: list[str] = []
        stop = threading.Event()

        def asker(n: int) -> None:
            i = n
            while not stop.is_set():
                question = QUESTIONS[i % len(QUESTIONS)][0]
                i += 1
                try:
                    ask(rag, tenant_id, corpus.id, question)
                    answered.append(question)
                except Exception as exc:
                    failed.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=asker, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: len(answered) >= 6, what="asks on the standby")
            assert stop_standby(standby.data_dir)
            at_stop = len(answered)
            wait_until(lambda: len(answered) >= at_stop + 6, what="asks after the stop")
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        assert failed == []
        status = rdb.replica_status()[0]
        assert status["state"] == "down" and status["error"]
        assert rdb.replicas is not None and rdb.replicas.counters.primary["no_usable_standby"] > 0
        # back: retried after db.replica_retry_s, and the reads return to it
        start_standby(standby.data_dir)
        wait_until(lambda: rdb.replica_status()[0]["state"] == "up", what="the standby to be used again")
        reads = standby_reads(rdb)
        ask(rag, tenant_id, corpus.id, QUESTIONS[1][0])
        assert standby_reads(rdb) > reads


def test_replay_paused_past_the_lag_bound_sends_reads_to_the_primary(
    database_url: str,
    standby_url: str,
    llm: OpenAICompatServer,
    indexed: tuple[int, CorpusInfo],
    make_tenant: Callable[..., tuple[int, str]],
) -> None:
    tenant_id, corpus = indexed
    with replica_rag(database_url, standby_url, llm.base_url, max_replica_lag_ms=300) as (rdb, rag):
        ask(rag, tenant_id, corpus.id, QUESTIONS[0][0])
        wait_until(lambda: rdb.replica_status()[0]["lag_ms"] == 0.0, what="the standby to catch up")
        with replay_paused(standby_url):
            make_tenant()  # a write on the primary that the standby does not apply
            wait_until(lambda: rdb.replica_status()[0]["state"] == "lagging", what="the standby to lag")
            status = rdb.replica_status()[0]
            assert status["replay_paused"] and status["lag_ms"] > 300
            reads, on_primary = standby_reads(rdb), primary_reads(rdb)
            ask(rag, tenant_id, corpus.id, QUESTIONS[1][0])
            assert standby_reads(rdb) == reads
            assert primary_reads(rdb) >= on_primary + 3
        wait_until(lambda: rdb.replica_status()[0]["state"] == "up", what="the standby to catch up again")
        ask(rag, tenant_id, corpus.id, QUESTIONS[2][0])
        assert standby_reads(rdb) > reads


def test_a_standby_lost_while_a_session_reads_from_it_is_named_and_skipped(
    database_url: str, standby: EmbeddedStandby, standby_url: str, indexed: tuple[int, CorpusInfo]
) -> None:
    """A graph load (a tenant session on the reader) whose standby goes away half-way raises
    StandbyLost, which the pipeline answers by loading again; the next read goes elsewhere at once."""
    tenant_id, corpus = indexed
    rdb = Database(db_settings_for(database_url, read_urls=[SecretStr(standby_url)], replica_retry_s=0.5))
    try:
        rdb.check_replicas()
        with pytest.raises(StandbyLost) as err, rdb.reader.tenant_session(tenant_id) as s:
            assert s.execute(text("SELECT count(*) FROM passages")).scalar_one() > 0
            stop_standby(standby.data_dir)
            s.execute(text("SELECT count(*) FROM passages")).scalar_one()
        assert "read standby" in str(err.value)
        assert rdb.replica_status()[0]["state"] == "down"
        with rdb.reader.tenant_session(tenant_id) as s:  # on the primary, without waiting
            assert s.execute(text("SELECT count(*) FROM corpora WHERE id = :c"), {"c": corpus.id}).scalar_one() == 1
    finally:
        start_standby(standby.data_dir)
        rdb.close()


# ---------------------------------------------------------------- start, health, status


def test_an_unreachable_read_url_is_refused_at_start_naming_it(
    database_url: str, standby_url: str, llm: OpenAICompatServer
) -> None:
    bad = "postgresql+psycopg://livingrag_web:s3cret-pw@127.0.0.1:1/livingrag"
    rdb = Database(db_settings_for(database_url, read_urls=[SecretStr(standby_url), SecretStr(bad)]))
    try:
        with pytest.raises(ConfigError) as err:
            LivingRAG(rag_settings(llm.base_url), db=rdb)
    finally:
        rdb.close()
    message = str(err.value)
    assert "LIVINGRAG_DB__READ_URLS" in message and "127.0.0.1:1" in message
    assert "s3cret-pw" not in message


def test_health_and_db_status_show_each_standby(
    database_url: str, standby_url: str, llm: OpenAICompatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.api_support import api_settings, app_client

    settings = api_settings(database_url, llm.base_url)
    rdb = Database(db_settings_for(database_url, read_urls=[SecretStr(standby_url)]))
    try:
        with app_client(rdb, settings) as client:
            body = client.get("/health").json()
    finally:
        rdb.close()
    (replica,) = body["replicas"]
    assert replica["state"] == "up" and replica["lag_ms"] is not None and replica["url"] == standby_url

    from livingrag.cli.main import app

    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)
    monkeypatch.setenv("LIVINGRAG_DB__READ_URLS", standby_url)
    res = CliRunner().invoke(app, ["db", "status", "--json"])
    assert res.exit_code == 0, res.output
    (shown,) = json.loads(res.stdout)["replicas"]
    assert shown["state"] == "up" and shown["replay_lsn"]


def test_db_replica_create_makes_a_running_standby_of_the_embedded_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from livingrag.cli.main import app

    if os.environ.get("LIVINGRAG_TEST_DB_URL"):
        pytest.skip("needs embedded servers")
    root = Path(tempfile.mkdtemp(prefix="lrg-test-replica-cli-"))  # not under /root: see conftest
    primary_dir, standby_dir = root / "primary", root / "standby"
    monkeypatch.delenv("LIVINGRAG_DB__URL", raising=False)
    monkeypatch.setenv("LIVINGRAG_DB__DATA_DIR", str(primary_dir))
    monkeypatch.setenv("LIVINGRAG_DB__PREWARM", "false")
    runner = CliRunner()
    try:
        res = runner.invoke(app, ["db", "replica", "create", "--data-dir", str(standby_dir), "--port", "5440", "--url"])
        assert res.exit_code == 0, res.output
        url = res.stdout.strip().splitlines()[-1]
        assert "port=5440" in url and str(standby_dir) in url
        engine = create_engine(url)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT pg_is_in_recovery()")).scalar() is True
            # the copy has the schema: the primary's was brought to head first
            assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
        engine.dispose()
        monkeypatch.setenv("LIVINGRAG_DB__READ_URLS", url)
        # a standby made a moment ago may still be replaying its first WAL on a busy machine: the
        # lag bound is wide here, this test is about the command, not the lag (test_lag_* are)
        monkeypatch.setenv("LIVINGRAG_DB__MAX_REPLICA_LAG_MS", "60000")
        res = runner.invoke(app, ["db", "status", "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.stdout)["replicas"][0]["state"] == "up"
        overlap = runner.invoke(app, ["db", "replica", "create", "--data-dir", str(primary_dir)])
        assert overlap.exit_code != 0 and "overlaps" in str(overlap.exception)
    finally:
        res = runner.invoke(app, ["db", "replica", "stop", "--data-dir", str(standby_dir)])
        shutil.rmtree(root, ignore_errors=True)
    assert res.exit_code == 0 and "stopped" in res.output
