"""Staleness holds in the database, whoever changes a passage (issue 42, item 3).

Until migration 0012 only the application's passage-change hook marked the experiences citing a
changed passage stale: an ``UPDATE passages SET text = ...`` or ``DELETE FROM passages`` in SQL (an
operator's fix, a future code path) left them active, and one was then reused. The triggers on
``passages`` mark the active experiences citing a passage whose title or text changed, or that was
deleted, stale with the application's reason (``source passage updated: 3, 5``) and a ``stale``
event by ``system``, once; they take the corpus's evidence lock and move its version like the
application does, so a write-back in flight either is marked or checks its evidence afresh."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from livingrag.db.engine import Database
from livingrag.db.repositories import corpora, tenants
from livingrag.db.repositories import experiences as repo
from livingrag.db.repositories import graph_writer as graph_repo
from livingrag.db.repositories.insights import stale_passage_ids
from livingrag.experience.answer_reuse import question_key
from livingrag.experience.trust import serves_answer
from livingrag.types import QueryEncoding
from tests.conftest import db_settings_for
from tests.db import test_hardening_roles as roles
from tests.db.test_hardening_roles import PASSWORD
from tests.experience_helpers import make_corpus, make_store, unit

pytestmark = pytest.mark.db
# the production roles' fixtures (a database owned by a non-superuser, login roles made and dropped)
superuser, owned_url, make_role = roles.superuser, roles.owned_url, roles.make_role
DIM = 8


def _passages(db: Database, tenant: int, corpus: int, n: int) -> list[int]:
    with db.tenant_session(tenant) as s:
        return [
            int(
                s.execute(
                    text(
                        "INSERT INTO passages (tenant_id, corpus_id, title, text, content_hash, length, embedding)"
                        " VALUES (:t, :c, :title, :body, :h, 10, :e) RETURNING id"
                    ),
                    {
                        "t": tenant,
                        "c": corpus,
                        "title": f"P{i}",
                        "body": f"passage {i} says something",
                        "h": f"h{i}",
                        "e": np.ones(DIM, dtype=np.float32),
                    },
                ).scalar_one()
            )
            for i in range(n)
        ]


def _experience(db: Database, tenant: int, corpus: int, cites: Sequence[int], *, hot: int = 0) -> int:
    with db.tenant_session(tenant) as s:
        return repo.insert_experience(
            s,
            repo.NewExperience(
                tenant_id=tenant, corpus_id=corpus, query="Where was Orla born?", query_template="Where was [E] born?",
                embedding=unit(DIM, (hot, 1.0)), activation={1: 1.0}, summary="s", answer="Galway", confidence=1.0,
                grounding={}, source_passage_ids=list(cites), corpus_version=0, created_at=datetime.now(UTC),
                expires_at=None, question_key=question_key("Where was Orla born?"),
            ),
        )  # fmt: skip


def _state(db: Database, tenant: int, experience_id: int) -> tuple[bool, str | None, list[tuple[str, str, str]]]:
    with db.tenant_session(tenant) as s:
        stale, reason = s.execute(
            text("SELECT stale, stale_reason FROM experiences WHERE id = :i"), {"i": experience_id}
        ).one()
        events = [
            (r[0], r[1], r[2])
            for r in s.execute(
                text(
                    "SELECT event, actor, reason FROM experience_events WHERE experience_id = :i AND event = 'stale'"
                    " ORDER BY id"
                ),
                {"i": experience_id},
            )
        ]
    return bool(stale), reason, events


def _version(db: Database, tenant: int, corpus: int) -> tuple[int, int]:
    with db.tenant_session(tenant) as s:
        v, rewrite = s.execute(text("SELECT version, rewrite_version FROM corpora WHERE id = :c"), {"c": corpus}).one()
    return int(v), int(rewrite)


def test_an_sql_update_of_a_cited_passage_marks_the_citing_experience_stale_with_an_event(
    db: Database, tenant: int
) -> None:
    corpus = make_corpus(db, tenant, DIM)
    p1, p2, p3 = _passages(db, tenant, corpus, 3)
    cites_p1 = _experience(db, tenant, corpus, [p1, p3])
    cites_p2 = _experience(db, tenant, corpus, [p2])
    v0, _ = _version(db, tenant, corpus)
    with db.tenant_session(tenant) as s:  # as the application role, under its tenant's RLS
        s.execute(text("UPDATE passages SET text = 'an operator fixed it' WHERE id = :p"), {"p": p1})
    reason = f"source passage updated: {p1}"
    assert _state(db, tenant, cites_p1) == (True, reason, [("stale", "system", reason)])
    assert stale_passage_ids(reason) == {p1}
    assert _state(db, tenant, cites_p2) == (False, None, [])
    # the graph changed outside the application: its version moves (a loaded graph is read again in
    # full, a write-back retrieved before it checks its evidence)
    assert _version(db, tenant, corpus) == (v0 + 1, v0 + 1)
    # a title change counts too, and an experience is marked (and evented) once
    with db.tenant_session(tenant) as s:
        s.execute(text("UPDATE passages SET title = 'New title' WHERE id = ANY(:p)"), {"p": [p1, p2, p3]})
    both = f"source passage updated: {p1}, {p2}, {p3}"
    assert _state(db, tenant, cites_p1) == (True, reason, [("stale", "system", reason)])
    assert _state(db, tenant, cites_p2) == (True, both, [("stale", "system", both)])
    assert stale_passage_ids(both) == {p1, p2, p3}


def test_an_sql_delete_of_a_cited_passage_marks_the_citing_experience_stale_with_an_event(
    db: Database, tenant: int
) -> None:
    corpus = make_corpus(db, tenant, DIM)
    p1, p2 = _passages(db, tenant, corpus, 2)
    cites = _experience(db, tenant, corpus, [p2])
    other = _experience(db, tenant, corpus, [p1])
    with db.tenant_session(tenant) as s:
        s.execute(text("DELETE FROM passages WHERE id = :p"), {"p": p2})
    reason = f"source passage deleted: {p2}"
    assert _state(db, tenant, cites) == (True, reason, [("stale", "system", reason)])
    assert _state(db, tenant, other) == (False, None, [])


def test_an_update_that_keeps_title_and_text_marks_nothing(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    (p,) = _passages(db, tenant, corpus, 1)
    cites = _experience(db, tenant, corpus, [p])
    before = _version(db, tenant, corpus)
    with db.tenant_session(tenant) as s:
        s.execute(text("UPDATE passages SET title = title, text = text WHERE id = :p"), {"p": p})
        s.execute(text("UPDATE passages SET embedding = :e WHERE id = :p"), {"p": p, "e": np.zeros(DIM, np.float32)})
        s.execute(text("UPDATE passages SET token_count = 7, updated_at = now() WHERE id = :p"), {"p": p})
    assert _state(db, tenant, cites) == (False, None, [])
    assert _version(db, tenant, corpus) == before


def test_the_application_path_marks_each_experience_once_and_moves_the_version_once(db: Database, tenant: int) -> None:
    """What ``CorpusIndexer.update_passage`` does in its transaction (the corpus and evidence locks,
    the row update, the version bump, the hook): the trigger and the hook together mark and event
    each citing experience once, with the hook's reason, and the version moves by one."""
    from livingrag.corpus.hooks import fire_passage_change

    corpus = make_corpus(db, tenant, DIM)
    (p,) = _passages(db, tenant, corpus, 1)
    cites = _experience(db, tenant, corpus, [p])
    v0, _ = _version(db, tenant, corpus)
    with db.tenant_session(tenant) as s:
        graph_repo.lock_corpus(s, corpus)
        graph_repo.lock_evidence(s, corpus)
        s.execute(text("UPDATE passages SET text = 'rewritten by the app' WHERE id = :p"), {"p": p})
        corpora.bump_version(s, corpus)
        fire_passage_change(s, corpus, [p], "updated")
    reason = f"source passage updated: {p}"
    assert _state(db, tenant, cites) == (True, reason, [("stale", "system", reason)])
    assert _version(db, tenant, corpus)[0] == v0 + 1


def test_a_stale_experience_is_not_reused(db: Database, tenant: int) -> None:
    """Matching and answer reuse skip an experience once its cited passage changed in SQL."""
    corpus = make_corpus(db, tenant, DIM)
    (p,) = _passages(db, tenant, corpus, 1)
    eid = _experience(db, tenant, corpus, [p])
    store = make_store(db)
    q = QueryEncoding(
        question="Where was Orla born?", embedding=unit(DIM, (0, 1.0)), mentions=(), seeds=(), base_activation={1: 1.0}
    )

    def reusable() -> list[int]:
        with db.tenant_session(tenant) as s:
            found = repo.reusable_experiences(
                s,
                [eid],
                allowed=lambda trust, gated, confidence: serves_answer(
                    "gated", trust=trust, gated=gated, confidence=confidence, floor=0.5
                ),
                now=datetime.now(UTC),
                question_key=question_key("Where was Orla born?"),
                answer_key=question_key,
            )
        return [e.id for e in found]

    assert [t.id for t in store.match(tenant, corpus, q).top] == [eid] and reusable() == [eid]
    with db.tenant_session(tenant) as s:
        s.execute(text("UPDATE passages SET text = 'Orla was born in Cork.' WHERE id = :p"), {"p": p})
    assert list(store.match(tenant, corpus, q).top) == [] and reusable() == []


def test_an_sql_update_waits_for_a_write_back_and_then_marks_it(db: Database, tenant: int) -> None:
    """The race the evidence lock closes, on the SQL path: a write-back holds the lock (shared)
    while it checks and stores; the UPDATE waits for it and then marks what it stored."""
    corpus = make_corpus(db, tenant, DIM)
    (p,) = _passages(db, tenant, corpus, 1)
    done = threading.Event()
    errors: list[BaseException] = []

    def operator_update() -> None:
        try:
            with db.tenant_session(tenant) as s:
                s.execute(text("UPDATE passages SET text = 'changed while storing' WHERE id = :p"), {"p": p})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    with db.tenant_session(tenant) as s:
        graph_repo.lock_evidence_shared(s, corpus)  # the write-back's lock
        worker = threading.Thread(target=operator_update)
        worker.start()
        time.sleep(0.5)
        assert not done.is_set(), "the passage update did not wait for the write-back"
        eid = repo.insert_experience(
            s,
            repo.NewExperience(
                tenant_id=tenant, corpus_id=corpus, query="q?", query_template="q?", embedding=unit(DIM, (0, 1.0)),
                activation={}, summary="s", answer="a", confidence=1.0, grounding={}, source_passage_ids=[p],
                corpus_version=0, created_at=datetime.now(UTC), expires_at=None,
            ),
        )  # fmt: skip
    worker.join(30)
    assert done.is_set() and not errors
    assert _state(db, tenant, eid)[0] is True


def test_the_trigger_stays_in_the_tenant_and_corpus_of_the_changed_passage(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    """An experience of another tenant (or another corpus) naming the same passage id is not
    touched, even when the owner route changes the passage."""
    a = make_tenant("a")[0]
    b = make_tenant("b")[0]
    ca, ca2 = make_corpus(db, a, DIM), make_corpus(db, a, DIM)
    cb = make_corpus(db, b, DIM)
    (p,) = _passages(db, a, ca, 1)
    mine = _experience(db, a, ca, [p])
    other_corpus = _experience(db, a, ca2, [p])
    other_tenant = _experience(db, b, cb, [p])
    with db.owner_session() as s:
        s.execute(text("UPDATE passages SET text = 'fixed by the operator' WHERE id = :p"), {"p": p})
    assert _state(db, a, mine)[0] is True
    assert _state(db, a, other_corpus)[0] is False
    assert _state(db, b, other_tenant)[0] is False


def test_deleting_a_corpus_or_a_tenant_with_cited_passages_still_works(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    """Deleting a corpus (or a tenant) deletes its passages by cascade: the trigger has nothing to
    mark there (the experiences go too) and must not write events for a corpus that is gone."""
    t = make_tenant("del")[0]
    c1, c2 = make_corpus(db, t, DIM), make_corpus(db, t, DIM)
    for c in (c1, c2):
        (p,) = _passages(db, t, c, 1)
        _experience(db, t, c, [p])
    with db.tenant_session(t) as s:
        corpora.delete_corpus(s, c1)
    with db.tenant_session(t) as s:
        assert s.execute(text("SELECT count(*) FROM experience_events WHERE corpus_id = :c"), {"c": c1}).scalar() == 0
    with db.owner_session() as s:
        tenants.delete_tenant(s, t)
    with db.owner_session() as s:
        assert s.execute(text("SELECT count(*) FROM experiences WHERE tenant_id = :t"), {"t": t}).scalar() == 0


def test_the_trigger_binds_a_login_role_and_serves_the_non_superuser_owner_route(
    owned_url: str, make_role: Callable[..., str]
) -> None:
    """The production roles: a non-superuser owner (forced RLS, the owner route) and a login role
    that is a member of livingrag_app. The trigger runs as whoever changed the passages."""
    login = make_role(f"LOGIN PASSWORD '{PASSWORD}' IN ROLE livingrag_app")
    app_url = make_url(owned_url).set(username=login, password=PASSWORD).render_as_string(hide_password=False)
    database = Database(db_settings_for(owned_url, app_url=app_url))
    try:
        database.check_app_role()
        with database.owner_session() as s:
            t = tenants.create_tenant(s, f"stale-{uuid.uuid4().hex[:8]}")[0].id
        corpus = make_corpus(database, t, DIM)
        p1, p2 = _passages(database, t, corpus, 2)
        first, second = _experience(database, t, corpus, [p1]), _experience(database, t, corpus, [p2])
        with database.tenant_session(t) as s:
            assert s.execute(text("SELECT current_user")).scalar() == login
            s.execute(text("UPDATE passages SET text = 'changed by the login' WHERE id = :p"), {"p": p1})
        with database.owner_session() as s:
            s.execute(text("DELETE FROM passages WHERE id = :p"), {"p": p2})
        assert _state(database, t, first)[1] == f"source passage updated: {p1}"
        assert _state(database, t, second)[1] == f"source passage deleted: {p2}"
        assert [len(_state(database, t, e)[2]) for e in (first, second)] == [1, 1]
    finally:
        database.dispose()
