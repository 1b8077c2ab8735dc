"""Write-back of several candidates at once (``ExperienceStore.write_back_many``), against the real
database: each candidate's outcome is what it would get alone; consecutive ungated candidates of a
corpus share one transaction; one bad or failing candidate is its own."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from livingrag.config import get_settings
from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as repo
from livingrag.errors import InvalidInput, NotFound
from livingrag.experience.store import ExperienceStore
from livingrag.experience.store_writeback import ExperienceWriter
from livingrag.experience.types import WriteBackResult
from tests.experience_helpers import CountingVerifier, HashingEncoder, candidate, make_corpus, make_store, unit

pytestmark = pytest.mark.db

DIM = 8


def _log(db: Database, tenant: int) -> list[tuple[str, str | None, Any]]:
    """(decision, stage, nearest experience) of the tenant's write-back log, in order."""
    with db.owner_session() as s:
        rows = s.execute(
            text(
                "SELECT decision, details->>'stage', details->'nearest_experience_id' FROM writeback_log"
                " WHERE tenant_id = :t ORDER BY id"
            ),
            {"t": tenant},
        ).all()
    return [(r[0], r[1], r[2]) for r in rows]


def _ids(out: list[Any]) -> list[int]:
    """The experience ids of outcomes that must all be stored."""
    ids: list[int] = []
    for o in out:
        assert isinstance(o, WriteBackResult) and o.stored and o.experience_id is not None, o
        ids.append(o.experience_id)
    return ids


def _stored_in_one_transaction(db: Database, ids: list[int]) -> bool:
    with db.owner_session() as s:
        xmins = s.execute(text("SELECT DISTINCT xmin::text FROM experiences WHERE id = ANY(:i)"), {"i": ids}).all()
    return len(xmins) == 1


def test_a_run_of_ungated_candidates_is_stored_in_one_transaction(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db)
    near = [candidate(tenant, corpus, unit(DIM, (0, 1.0), (1, 0.1 * i)), {1: 1.0}, query=f"q {i}?") for i in range(4)]
    out = store.write_back_many([(c, False) for c in near])
    ids = _ids(out)
    assert ids == sorted(ids) and _stored_in_one_transaction(db, ids)
    log = _log(db, tenant)
    assert [d for d, _, _ in log] == ["stored"] * 4
    # NS was computed against the experiences stored before each one in the same transaction
    assert log[0][2] is None and [n for _, _, n in log[1:]] == ids[:3]
    assert isinstance(out[0], WriteBackResult) and out[0].novelty == 1.0
    assert all(o.novelty is not None and o.novelty < 0.1 for o in out[1:] if isinstance(o, WriteBackResult))


def test_a_bad_candidate_in_a_batch_is_its_own(db: Database, tenant: int) -> None:
    """A candidate of the wrong dimension fails the shared transaction; the batch is then written
    one by one, so it alone is refused (and nothing of it written); a corpus the tenant does not
    have is refused on its own."""
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db)
    items = [
        (candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, query="first?"), False),
        (candidate(tenant, corpus, unit(DIM + 1, (0, 1.0)), {1: 1.0}, query="wrong dimension?"), False),
        (candidate(tenant, corpus, unit(DIM, (3, 1.0)), {4: 1.0}, query="third?"), False),
        (candidate(tenant, 10**9, unit(DIM, (0, 1.0)), {1: 1.0}, query="no such corpus?"), False),
    ]
    out = store.write_back_many(items)
    assert isinstance(out[0], WriteBackResult) and out[0].stored
    assert isinstance(out[1], InvalidInput) and "dimension" in str(out[1])
    assert isinstance(out[2], WriteBackResult) and out[2].stored
    assert isinstance(out[3], NotFound)
    assert [d for d, _, _ in _log(db, tenant)] == ["stored", "stored"]
    # a candidate that does not validate at all is refused before anything is tried
    out = store.write_back_many([(candidate(tenant, corpus, unit(DIM, (5, 1.0)), {6: 1.0}, answer=" "), False)])
    assert isinstance(out[0], InvalidInput) and "answer is empty" in str(out[0])


def test_a_gated_candidate_sees_what_the_batch_stored_before_it(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    verifier = CountingVerifier(1.0)
    store = make_store(db, verifier)
    emb = unit(DIM, (0, 1.0))
    out = store.write_back_many(
        [
            (candidate(tenant, corpus, emb, {1: 1.0}, query="ungated?"), False),
            (candidate(tenant, corpus, emb, {1: 1.0}, query="gated duplicate?"), True),
            (candidate(tenant, corpus, unit(DIM, (6, 1.0)), {7: 1.0}, query="gated new?"), True),
        ]
    )
    decisions = [o.decision for o in out if isinstance(o, WriteBackResult)]
    assert decisions == ["stored", "rejected_novelty", "stored"]
    assert [stage for _, stage, _ in _log(db, tenant)] == ["stored", "precheck", "stored"]
    assert verifier.calls == 1  # the duplicate was turned away before its claims were checked


def test_a_failing_batch_is_written_one_by_one(db: Database, tenant: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure inside the shared transaction keeps nothing of it; each candidate is then written
    alone: the failing one is logged as an error, the others are stored once each."""
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db)
    real = repo.insert_experience

    def flaky(session: Any, new: repo.NewExperience) -> int:
        if new.query == "explodes?":
            raise RuntimeError("disk on fire")
        return real(session, new)

    monkeypatch.setattr(repo, "insert_experience", flaky)
    items = [
        (candidate(tenant, corpus, unit(DIM, (i, 1.0)), {i + 1: 1.0}, query=q), False)
        for i, q in enumerate(["one?", "explodes?", "three?"])
    ]
    out = store.write_back_many(items)
    assert [o.decision for o in out if isinstance(o, WriteBackResult)] == ["stored", "error", "stored"]
    assert isinstance(out[1], WriteBackResult) and "disk on fire" in (out[1].reason or "")
    with db.owner_session() as s:
        queries = s.execute(text("SELECT query FROM experiences WHERE tenant_id = :t ORDER BY id"), {"t": tenant})
        assert [q for (q,) in queries] == ["one?", "three?"]
    assert [d for d, _, _ in _log(db, tenant)] == ["stored", "error", "stored"]


def test_the_quota_holds_inside_a_batch(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    s = get_settings(experience={"scaffold": "on"}, api={"max_experiences_per_tenant": 2})
    store = ExperienceStore(db, s, encoder=HashingEncoder(), verifier=CountingVerifier())
    items = [(candidate(tenant, corpus, unit(DIM, (i, 1.0)), {i + 1: 1.0}, query=f"q{i}?"), False) for i in range(4)]
    out = store.write_back_many(items)
    assert [o.decision for o in out if isinstance(o, WriteBackResult)] == ["stored", "stored", "dropped", "dropped"]
    assert all("max_experiences_per_tenant = 2" in (o.reason or "") for o in out[2:] if isinstance(o, WriteBackResult))


def test_two_corpora_in_one_batch_are_stored_apart(db: Database, tenant: int) -> None:
    a, b = make_corpus(db, tenant, DIM), make_corpus(db, tenant, DIM)
    store = make_store(db)
    emb = unit(DIM, (0, 1.0))
    items = [(candidate(tenant, c, emb, {1: 1.0}, query=f"{c} {i}?"), False) for i in range(2) for c in (a, b)]
    out = store.write_back_many(items)
    ids = _ids(out)
    with db.owner_session() as s:
        per: dict[int, int] = dict(
            s.execute(
                text("SELECT corpus_id, count(*) FROM experiences WHERE tenant_id = :t GROUP BY corpus_id"),
                {"t": tenant},
            ).all()
        )
    assert per == {a: 2, b: 2}
    # one transaction per corpus (a's two, then b's two), and each corpus's second candidate found
    # its own corpus's first as nearest, not the other corpus's
    assert [n for _, _, n in _log(db, tenant)] == [None, ids[0], None, ids[1]]
    assert _stored_in_one_transaction(db, [ids[0], ids[2]]) and _stored_in_one_transaction(db, [ids[1], ids[3]])
    assert not _stored_in_one_transaction(db, [ids[0], ids[1]])


def test_a_failure_write_back_does_not_decide_is_returned_and_the_rest_go_on(db: Database, tenant: int) -> None:
    """A failure that write_back raises rather than decides (a verifier that cannot be built) is
    returned as that candidate's outcome; the candidates after it are still written."""
    corpus = make_corpus(db, tenant, DIM)

    class VerifierFailsOnce(ExperienceWriter):
        failed = False

        @property
        def verifier(self) -> Any:
            if not self.failed:
                self.failed = True
                raise RuntimeError("NLI model could not be loaded")
            return super().verifier

    settings = get_settings(experience={"scaffold": "on"})
    store = ExperienceStore(db, settings, encoder=HashingEncoder(), verifier=CountingVerifier())
    store.writer = VerifierFailsOnce(db, settings, store.matcher, verifier=CountingVerifier())
    out = store.write_back_many(
        [
            (candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, query="first?"), True),
            (candidate(tenant, corpus, unit(DIM, (3, 1.0)), {4: 1.0}, query="second?"), False),
        ]
    )
    assert isinstance(out[0], RuntimeError) and "could not be loaded" in str(out[0])
    assert isinstance(out[1], WriteBackResult) and out[1].stored
