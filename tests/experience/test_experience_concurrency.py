"""Concurrent write-back on real parallel connections: near-duplicates raced by 8 writers store one
experience, and a writer killed with -9 in the middle of its transaction leaves no partial rows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from livingrag.db.engine import Database
from livingrag.experience.grounding import Claim
from livingrag.experience.types import ClaimVerdict, UsedPassage, WriteBackResult
from tests.experience_helpers import candidate, make_corpus, make_store, unit

pytestmark = pytest.mark.db

DIM = 8
ROOT = Path(__file__).resolve().parents[2]


class BarrierVerifier:
    """Supports every claim, but only once all writers have reached it: every writer has passed the
    novelty pre-check before any of them can insert, so the race is certain."""

    name = "barrier"

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=60)

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        self.barrier.wait()
        return [ClaimVerdict(claim=c.text, source=c.source, score=1.0) for c in claims]


def test_eight_writers_racing_near_duplicates_store_one(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    writers = 8
    store = make_store(db, BarrierVerifier(writers))
    rng = np.random.default_rng(1)
    base = unit(DIM, (0, 1.0), (1, 0.5))
    results = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def write(i: int) -> None:
        try:
            emb = base + 0.01 * rng.normal(size=DIM)
            r = store.write_back(candidate(tenant, corpus, emb, {1: 1.0, 2: 0.5}, query=f"near duplicate {i}?"))
            with lock:
                results.append(r)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    decisions = sorted(r.decision for r in results)
    assert decisions == ["rejected_novelty"] * (writers - 1) + ["stored"]
    with db.tenant_session(tenant) as s:
        assert s.execute(text("SELECT count(*) FROM experiences")).scalar() == 1
        stages = s.execute(text("SELECT details->>'stage', count(*) FROM writeback_log GROUP BY 1 ORDER BY 1")).all()
    assert dict(stages) == {"recheck": writers - 1, "stored": 1}  # all passed the pre-check; the lock decided


_WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from tests.conftest import db_settings_for
    from tests.experience_helpers import candidate, make_store, unit
    from livingrag.db.engine import Database

    url, tenant, corpus = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    db = Database(db_settings_for(url))
    store = make_store(db, gates={"verifier": "none"})
    print("writing", flush=True)
    store.write_back(candidate(tenant, corpus, unit(8, (0, 1.0)), {1: 1.0}, {1: 1.0, 2: 0.5}))
    print("finished", flush=True)
    """
)
PAUSE_KEY = 7_340_001


def test_writer_killed_mid_transaction_leaves_no_partial_rows(database_url: str, db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    owner = create_engine(db.owner_url, isolation_level="AUTOCOMMIT")
    fn = f"lrg_test_pause_{tenant}"
    with owner.connect() as c:
        # Pause the writer inside its transaction, after the experience and its entity rows are
        # inserted and while its decision row is being inserted: the trigger waits on a lock we hold.
        c.execute(
            text(
                f"CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                f" PERFORM pg_advisory_xact_lock({PAUSE_KEY}); RETURN NEW; END $$"
            )
        )
        c.execute(
            text(
                f"CREATE TRIGGER {fn} BEFORE INSERT ON writeback_log FOR EACH ROW"
                f" WHEN (NEW.tenant_id = {tenant}) EXECUTE FUNCTION {fn}()"
            )
        )
    holder = owner.connect()
    proc = None
    try:
        holder.execute(text("SELECT pg_advisory_lock(:k)"), {"k": PAUSE_KEY})
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, database_url, str(tenant), str(corpus)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        backend = None
        deadline = time.monotonic() + 120
        while backend is None and time.monotonic() < deadline:
            with owner.connect() as c:
                backend = c.execute(
                    text("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = :k AND NOT granted"),
                    {"k": PAUSE_KEY},
                ).scalar()
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        assert backend is not None, f"the writer never reached the pause: {proc.communicate(timeout=5)}"
        with owner.connect() as c:  # inside its open transaction it has written its rows ...
            state = c.execute(
                text("SELECT state, xact_start IS NOT NULL FROM pg_stat_activity WHERE pid = :p"), {"p": backend}
            ).one()
            written = set(
                c.execute(
                    text("SELECT relation::regclass::text FROM pg_locks WHERE pid = :p AND mode = 'RowExclusiveLock'"),
                    {"p": backend},
                ).scalars()
            )
        assert state == ("active", True)
        assert {"experiences", "experience_entities", "writeback_log"} <= written
        os.kill(proc.pid, signal.SIGKILL)  # ... and now dies before it can commit
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    finally:
        holder.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PAUSE_KEY})
        holder.close()
        with owner.connect() as c:
            c.execute(text(f"DROP TRIGGER IF EXISTS {fn} ON writeback_log"))
            c.execute(text(f"DROP FUNCTION IF EXISTS {fn}()"))
        if proc is not None and proc.poll() is None:
            proc.kill()
    # the server notices the dead client and rolls its transaction back
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with owner.connect() as c:
            if c.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"), {"p": backend}).scalar() == 0:
                break
        time.sleep(0.1)
    with owner.connect() as c:
        for table in ("experiences", "experience_entities", "writeback_log"):
            n = c.execute(text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": tenant}).scalar()
            assert n == 0, f"{n} partial rows left in {table}"
    owner.dispose()
    # the per-corpus lock died with the transaction: the next writer goes straight through
    store = make_store(db, gates={"verifier": "none"})
    r = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}))
    assert r.stored and r.timings["lock_wait_ms"] < 5000


def test_a_write_back_raced_against_a_passage_update_never_stays_active_on_old_text(db: Database, tenant: int) -> None:
    """A candidate grounded on a passage's old text: stored before the update, the update marks it
    stale; checked after it, it is rejected; raced (both released together, many rounds), one of
    the two, never an active experience on the old text."""
    from livingrag.corpus.indexer import CorpusIndexer
    from livingrag.corpus.ingest import Document
    from livingrag.db.repositories import corpora
    from tests.corpus_support import CORPUS, HashEmbedder, RuleExtractor

    with db.tenant_session(tenant) as s:
        corpus = corpora.create_corpus(s, tenant, "race", embedding_model="hash16", embedding_dim=16, ner_model="rules")
    indexer = CorpusIndexer(db, tenant, corpus, embedder=HashEmbedder(), extractor=RuleExtractor())
    indexer.index_documents([Document(r["title"], r["text"]) for r in CORPUS[:3]])
    with db.tenant_session(tenant) as s:
        pid, title = s.execute(
            text("SELECT id, title FROM passages WHERE corpus_id = :c ORDER BY id LIMIT 1"), {"c": corpus.id}
        ).one()
    store = make_store(db, top_k=3)

    def offer(i: int, passage_text: str, version: int) -> WriteBackResult:
        emb = np.zeros(16)
        emb[i % 16] = 1.0
        emb[(i * 7 + 3) % 16] = 0.5  # distinct candidates: novelty never decides
        c = candidate(
            tenant, corpus.id, emb, {1000 + i: 1.0}, passages=(UsedPassage(pid, passage_text, title),),
            corpus_version=version, query=f"Question number {i}?",
        )  # fmt: skip
        return store.write_back(c)

    def state() -> tuple[int, str]:
        with db.tenant_session(tenant) as s:
            version = corpora.current_version(s, corpus.id)
            now = s.execute(text("SELECT text FROM passages WHERE id = :p"), {"p": pid}).scalar_one()
        return version, now

    # the update first, then the write-back of a candidate retrieved before it: rejected, naming the passage
    v0, old = state()
    indexer.update_passage(pid, text=old + " Revised once.")
    wb = offer(0, old, v0)
    assert wb.decision == "rejected_grounding" and wb.experience_id is None
    assert f"source passage(s) {pid} changed" in (wb.reason or "")
    # an unchanged cited passage under a moved version (another passage changed): stored
    v1, now_text = state()
    with db.tenant_session(tenant) as s:
        other = s.execute(
            text("SELECT id FROM passages WHERE corpus_id = :c AND id <> :p ORDER BY id LIMIT 1"),
            {"c": corpus.id, "p": pid},
        ).scalar_one()
    indexer.update_passage(other, text="A different passage entirely, about Ostrava.")
    assert offer(1, now_text, v1).stored

    def race(round_: int) -> WriteBackResult:
        version, current = state()
        go = threading.Barrier(2, timeout=60)
        result: dict[str, WriteBackResult] = {}

        def write() -> None:
            go.wait()
            result["wb"] = offer(round_, current, version)

        def update() -> None:
            go.wait()
            time.sleep(0.002 * (round_ % 4))
            indexer.update_passage(pid, text=current + f" Revised in round {round_}.")

        threads = [threading.Thread(target=write), threading.Thread(target=update)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        return result["wb"]

    outcomes: list[str] = []
    for round_ in range(2, 14):
        wb = race(round_)
        if wb.stored:
            with db.tenant_session(tenant) as s:
                stale = s.execute(
                    text("SELECT stale FROM experiences WHERE id = :i"),
                    {"i": wb.experience_id},
                ).scalar_one()
            assert stale, f"round {round_}: stored on the old text and left active"
            outcomes.append("stored, then stale")
        else:
            assert wb.decision == "rejected_grounding", wb
            outcomes.append("rejected")
    with db.tenant_session(tenant) as s:
        active_on_old = s.execute(
            text(
                "SELECT count(*) FROM experiences WHERE corpus_id = :c AND NOT stale AND :p = ANY(source_passage_ids)"
            ),
            {"c": corpus.id, "p": pid},
        ).scalar_one()
    assert active_on_old == 0, outcomes


def test_passage_adds_do_not_wait_for_a_storing_write_back_but_updates_do(db: Database, tenant: int) -> None:
    """A write-back's storing transaction holds the corpus's evidence lock shared: a passage add
    (no experience's evidence changes) goes through meanwhile; a passage update (whose hook marks
    the experiences citing it stale) waits until that transaction ends."""
    from livingrag.corpus.indexer import CorpusIndexer
    from livingrag.corpus.ingest import Document
    from livingrag.db.repositories import corpora
    from livingrag.db.repositories import graph_writer as graph_repo
    from tests.corpus_support import CORPUS, HashEmbedder, RuleExtractor

    with db.tenant_session(tenant) as s:
        corpus = corpora.create_corpus(
            s, tenant, "locks", embedding_model="hash16", embedding_dim=16, ner_model="rules"
        )
    indexer = CorpusIndexer(db, tenant, corpus, embedder=HashEmbedder(), extractor=RuleExtractor())
    indexer.index_documents([Document(r["title"], r["text"]) for r in CORPUS[:2]])
    with db.tenant_session(tenant) as s:
        pid = s.execute(text("SELECT min(id) FROM passages WHERE corpus_id = :c"), {"c": corpus.id}).scalar_one()
    done: dict[str, float] = {}

    def add() -> None:
        indexer.index_documents([Document("Lock town", "Lock town lies on the river Ostra in the county of Vell.")])
        done["add"] = time.monotonic()

    def update() -> None:
        indexer.update_passage(pid, text="Revised while a write-back stored.")
        done["update"] = time.monotonic()

    with db.tenant_session(tenant) as held:  # what the write-back's storing transaction takes
        graph_repo.lock_evidence_shared(held, corpus.id)
        adder, updater = threading.Thread(target=add), threading.Thread(target=update)
        adder.start()
        adder.join(60)
        assert "add" in done, "the passage add waited for the write-back"
        updater.start()
        time.sleep(1.0)
        assert "update" not in done, "the passage update did not wait for the write-back"
        released = time.monotonic()
    updater.join(60)
    assert done["update"] >= released


def test_questions_counting_the_same_experiences_at_once_never_deadlock(db: Database, tenant: int) -> None:
    """Many transactions counting uses of overlapping experiences at once, each also holding its
    rows while it writes more (as /v1/ask logs the question after counting): all commit, and
    every use is counted."""
    from livingrag.db.repositories import experiences as repo

    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db)
    ids = []
    for i in range(6):
        r = store.write_back(candidate(tenant, corpus, unit(DIM, (i % DIM, 1.0)), {i + 1: 1.0}, query=f"q{i}?"))
        assert r.experience_id is not None
        ids.append(r.experience_id)
    workers, rounds = 8, 25
    errors: list[BaseException] = []
    barrier = threading.Barrier(workers)

    def count(w: int) -> None:
        rng = np.random.default_rng(w)
        try:
            barrier.wait(30)
            for _ in range(rounds):
                chosen = [int(x) for x in rng.permutation(ids)[:4]]
                with db.tenant_session(tenant) as s:
                    repo.record_use(s, fused_ids=chosen[:3], scaffold_id=chosen[3])
                    time.sleep(0.001)  # the rest of the transaction, while the rows stay locked
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=count, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[:3]
    with db.owner_session() as s:
        fused, shown = s.execute(
            text("SELECT sum(fusion_uses), sum(scaffold_uses) FROM experiences WHERE id = ANY(:i)"), {"i": ids}
        ).one()
    assert (fused, shown) == (workers * rounds * 3, workers * rounds)
