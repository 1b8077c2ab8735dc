"""Experience lifecycle against a real PostgreSQL: TTL and expiry, pruning, staleness through the
passage-change hook, time decay, the analytics views (and their row-level security), and the
0001 -> 0002 backfill of unit-normalised entity weights."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import text

from livingrag.corpus.hooks import fire_passage_change
from livingrag.db import migrate
from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as repo
from livingrag.errors import InvalidInput
from livingrag.experience import lifecycle
from livingrag.experience.store import ExperienceStore
from livingrag.types import QueryEncoding
from tests.conftest import db_settings_for
from tests.experience_helpers import CountingVerifier, HashingEncoder, candidate, make_corpus, settings, unit

pytestmark = pytest.mark.db

DIM = 8
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class Clock:
    """A settable clock for the store."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def store_at(db: Database, clock: Clock, verifier: CountingVerifier | None = None, **exp: object) -> ExperienceStore:
    return ExperienceStore(
        db, settings(**exp), encoder=HashingEncoder(), verifier=verifier or CountingVerifier(1.0), clock=clock
    )


def enc(emb: np.ndarray, base: dict[int, float]) -> QueryEncoding:
    return QueryEncoding(question="q?", embedding=emb, mentions=(), seeds=(), base_activation=base)


def test_ttl_expiry_hides_experiences_from_matching_and_novelty(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    clock = Clock(T0)
    store = store_at(db, clock, ttl_days=1.0)
    emb = unit(DIM, (0, 1.0))
    first = store.write_back(candidate(tenant, corpus, emb, {1: 1.0}))
    assert first.stored
    assert store.write_back(candidate(tenant, corpus, emb, {1: 1.0})).decision == "rejected_novelty"
    assert [t.id for t in store.match(tenant, corpus, enc(emb, {1: 1.0})).top] == [first.experience_id]
    clock.now = T0 + timedelta(days=2)
    assert store.match(tenant, corpus, enc(emb, {1: 1.0})).candidates == 0
    assert store.write_back(candidate(tenant, corpus, emb, {1: 1.0})).stored  # the expired one is no duplicate


def test_expire_before_a_timestamp_with_dry_run(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    clock = Clock(T0 - timedelta(days=40))
    store = store_at(db, clock)
    old = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0})).experience_id
    clock.now = T0
    new = store.write_back(candidate(tenant, corpus, unit(DIM, (1, 1.0)), {2: 1.0})).experience_id
    scope = lifecycle.Scope(tenant_id=tenant)
    cut = lifecycle.cutoff(before=None, older_than="30d", now=T0)
    with db.owner_session() as s:
        assert lifecycle.expire(s, created_before=cut, scope=scope, now=T0, dry_run=True) == 1
    with db.owner_session() as s:
        assert (
            s.execute(
                text("SELECT count(*) FROM experiences WHERE id = :i AND expires_at IS NULL"), {"i": old}
            ).scalar()
            == 1
        )
        assert lifecycle.expire(s, created_before=cut, scope=scope, now=T0, dry_run=False) == 1
        assert lifecycle.expire(s, created_before=cut, scope=scope, now=T0, dry_run=False) == 0  # idempotent
    ids = {t.id for t in store.match(tenant, corpus, enc(unit(DIM, (0, 1.0), (1, 1.0)), {1: 1.0, 2: 1.0})).top}
    assert ids == {new}


def test_cutoff_parsing() -> None:
    assert lifecycle.cutoff(before="2026-01-31", older_than=None, now=T0) == datetime(2026, 1, 31, tzinfo=UTC)
    assert lifecycle.cutoff(before=None, older_than="12h", now=T0) == T0 - timedelta(hours=12)
    assert lifecycle.parse_duration("2w") == timedelta(weeks=2)
    assert lifecycle.parse_duration("30") == timedelta(days=30)
    with pytest.raises(InvalidInput, match="exactly one"):
        lifecycle.cutoff(before="2026-01-01", older_than="3d", now=T0)
    with pytest.raises(InvalidInput, match="duration"):
        lifecycle.parse_duration("soon")
    with pytest.raises(InvalidInput, match="timestamp"):
        lifecycle.parse_timestamp("yesterday")


def _seed_four(db: Database, tenant: int, corpus: int) -> list[int]:
    """Four experiences: (uses, confidence, age) chosen so the prune order is unambiguous."""
    clock = Clock(T0)
    ids: list[int] = []
    for i, (conf, days_ago) in enumerate([(0.9, 1), (0.6, 2), (0.95, 50), (0.7, 3)]):
        clock.now = T0 - timedelta(days=days_ago)
        store = store_at(db, clock, CountingVerifier(1.0))
        r = store.write_back(candidate(tenant, corpus, unit(DIM, (i, 1.0)), {10 + i: 1.0}))
        assert r.experience_id is not None
        ids.append(r.experience_id)
        with db.tenant_session(tenant) as s:
            s.execute(text("UPDATE experiences SET confidence = :c WHERE id = :i"), {"c": conf, "i": r.experience_id})
    with db.tenant_session(tenant) as s:
        repo.record_use(s, fused_ids=[ids[1], ids[1], ids[2]], scaffold_id=ids[1], now=T0 - timedelta(days=1))
    return ids


def test_prune_least_useful_first_and_by_criteria(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    ids = _seed_four(db, tenant, corpus)
    # uses: ids[1] 2, ids[2] 1, others 0; among unused ids[0] (0.9) beats ids[3] (0.7)
    scope = lifecycle.Scope(tenant_id=tenant)

    def remaining() -> set[int]:
        with db.tenant_session(tenant) as s:
            return set(s.execute(text("SELECT id FROM experiences")).scalars())

    with db.owner_session() as s:
        dry = lifecycle.prune(s, repo.PruneCriteria(max_per_tenant=2), scope=scope, now=T0, dry_run=True)
    assert dry == {"max_per_tenant": 2, "total": 2} and remaining() == set(ids)
    with db.owner_session() as s:
        lifecycle.prune(s, repo.PruneCriteria(max_per_tenant=3), scope=scope, now=T0, dry_run=False)
    assert remaining() == {ids[0], ids[1], ids[2]}  # ids[3]: unused and least confident
    with db.owner_session() as s:
        out = lifecycle.prune(s, repo.PruneCriteria(min_confidence=0.65), scope=scope, now=T0, dry_run=False)
    assert out["total"] == 1 and remaining() == {ids[0], ids[2]}  # ids[1] had confidence 0.6
    with db.owner_session() as s:
        crit = repo.PruneCriteria(unused_since=T0 - timedelta(days=10))
        out = lifecycle.prune(s, crit, scope=scope, now=T0, dry_run=False)
    # ids[2] was created 50 days ago but used a day ago; ids[0] was created a day ago
    assert out["total"] == 0 and remaining() == {ids[0], ids[2]}
    with db.owner_session() as s, pytest.raises(InvalidInput, match="criterion"):
        lifecycle.prune(s, repo.PruneCriteria(), scope=scope, now=T0, dry_run=True)


def test_prune_keeps_decision_log_rows(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    ids = _seed_four(db, tenant, corpus)
    with db.owner_session() as s:
        lifecycle.prune(s, repo.PruneCriteria(max_per_tenant=0), scope=lifecycle.Scope(tenant), now=T0, dry_run=False)
    with db.tenant_session(tenant) as s:
        assert s.execute(text("SELECT count(*) FROM experiences")).scalar() == 0
        assert s.execute(text("SELECT count(*) FROM experience_entities")).scalar() == 0
        logs = s.execute(text("SELECT count(*), count(experience_id) FROM writeback_log")).one()
    assert logs == (len(ids), 0)  # the log survives, its links are cleared


def test_passage_change_marks_citing_experiences_stale(db: Database, tenant: int) -> None:
    from livingrag.experience.types import UsedPassage

    corpus = make_corpus(db, tenant, DIM)
    clock = Clock(T0)
    store = store_at(db, clock)
    cites = store.write_back(
        candidate(
            tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, passages=(UsedPassage(501, "x"), UsedPassage(502, "y"))
        )
    ).experience_id
    other = store.write_back(
        candidate(tenant, corpus, unit(DIM, (1, 1.0)), {2: 1.0}, passages=(UsedPassage(503, "z"),))
    ).experience_id
    with db.tenant_session(tenant) as s:  # what a corpus update does, inside its own transaction
        fire_passage_change(s, corpus, [502], "updated")
    with db.tenant_session(tenant) as s:
        rows: dict[int, str | None] = dict(
            s.execute(text("SELECT id, stale_reason FROM experiences WHERE stale")).all()
        )
    assert rows == {cites: "source passage updated: 502"}
    ids = {t.id for t in store.match(tenant, corpus, enc(unit(DIM, (0, 1.0), (1, 1.0)), {1: 1.0, 2: 1.0})).top}
    assert ids == {other}
    # a stale experience is no duplicate: the same question can be stored afresh
    assert store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0})).stored
    with db.owner_session() as s:
        out = lifecycle.prune(s, repo.PruneCriteria(stale=True), scope=lifecycle.Scope(tenant), now=T0, dry_run=False)
    assert out["total"] == 1


def test_passage_change_hook_aborts_with_the_corpus_update(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = store_at(db, Clock(T0))
    eid = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0})).experience_id
    with pytest.raises(RuntimeError), db.tenant_session(tenant) as s:
        fire_passage_change(s, corpus, [101], "deleted")
        raise RuntimeError("the corpus update failed after the hook ran")
    with db.tenant_session(tenant) as s:
        assert s.execute(text("SELECT stale FROM experiences WHERE id = :i"), {"i": eid}).scalar() is False


def test_time_decay_reorders_matches_and_off_reproduces_the_paper(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    clock = Clock(T0 - timedelta(days=20))
    writer = store_at(db, clock)
    old = writer.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {})).experience_id
    clock.now = T0
    new = writer.write_back(candidate(tenant, corpus, unit(DIM, (1, 1.0)), {})).experience_id
    q = unit(DIM, (0, 1.0), (1, 1.0))
    s = 0.5 * (1 / math.sqrt(2))  # alpha * cos; no activation term
    paper = store_at(db, Clock(T0)).match(tenant, corpus, enc(q, {}))
    assert [t.id for t in paper.top[:2]] == [old, new]  # a tie: the smaller id first
    assert [t.score for t in paper.top[:2]] == pytest.approx([s, s])
    decayed = store_at(db, Clock(T0), decay_half_life_days=10.0).match(tenant, corpus, enc(q, {}))
    assert [t.id for t in decayed.top[:2]] == [new, old]
    assert [t.score for t in decayed.top[:2]] == pytest.approx([s, s * 0.25])


def test_analytics_views_table6_table16_and_health(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    clock = Clock(datetime.now(UTC))
    ok = store_at(
        db, clock, CountingVerifier(0.9), scaffold_lambda=0.0, scaffold_floor=0.0, scaffold_template_floor=0.0
    )
    bad = store_at(db, clock, CountingVerifier(0.1))
    e1 = ok.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0})).experience_id
    e2 = ok.write_back(candidate(tenant, corpus, unit(DIM, (1, 1.0)), {2: 1.0})).experience_id
    assert e1 is not None and e2 is not None
    assert ok.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0})).decision == "rejected_novelty"
    assert bad.write_back(candidate(tenant, corpus, unit(DIM, (2, 1.0)), {3: 1.0})).decision == "rejected_grounding"
    m = ok.match(tenant, corpus, enc(unit(DIM, (0, 1.0)), {1: 1.0}))
    ok.record_use(tenant, fused_ids=m.fused_ids, scaffold_id=m.scaffold_id)
    ok.record_use(tenant, fused_ids=[e1], scaffold_id=e1)
    with db.tenant_session(tenant) as s:
        s.execute(text("UPDATE experiences SET stale = true WHERE id = :i"), {"i": e2})
    with db.tenant_session(tenant) as s:
        g = s.execute(
            text(
                "SELECT questions, ns_pass_pct, gs_checked, gs_pass_pct, gs_reject, stored FROM writeback_gate_stats"
                " WHERE corpus_id = :c"
            ),
            {"c": corpus},
        ).one()
        r = s.execute(
            text(
                "SELECT stored_experiences, topk_selections, fusion_coverage_pct, scaffold_uses, scaffold_coverage_pct,"
                " max_scaffold_uses FROM experience_reuse_coverage WHERE corpus_id = :c"
            ),
            {"c": corpus},
        ).one()
        h = s.execute(
            text("SELECT experiences, active, stale, expired FROM experience_health WHERE corpus_id = :c"),
            {"c": corpus},
        ).one()
        growth = s.execute(
            text(
                "SELECT sum(stored), max(cumulative_stored), sum(candidates), sum(written)"
                " FROM experience_store_growth WHERE corpus_id = :c"
            ),
            {"c": corpus},
        ).one()
    # 4 candidates: 2 stored, 1 NS reject, 1 GS reject -> NS pass 75 %, GS checked 3, GS pass 66.67 %
    assert tuple(float(x) for x in g) == (4, 75.0, 3, 66.67, 1, 2)
    fused = set(m.fused_ids)
    assert tuple(float(x) for x in r) == (
        2,
        len(fused) + 1,
        100.0 * len(fused) / 2,
        2,
        50.0,
        2,
    )
    assert h == (2, 1, 1, 0)
    assert tuple(int(x) for x in growth) == (2, 2, 4, 2)
    with db.owner_session() as s:
        stats = lifecycle.stats(s, scope=lifecycle.Scope(tenant_id=tenant))
    assert len(stats) == 1 and stats[0]["stored"] == 2 and stats[0]["stale"] == 1


def test_views_respect_row_level_security(db: Database, make_tenant: Callable[..., tuple[int, str]]) -> None:
    a, _ = make_tenant("a")
    b, _ = make_tenant("b")
    for t in (a, b):
        c = make_corpus(db, t, DIM)
        store_at(db, Clock(datetime.now(UTC))).write_back(candidate(t, c, unit(DIM, (0, 1.0)), {1: 1.0}))
    views = ("experience_store_growth", "writeback_gate_stats", "experience_reuse_coverage", "experience_health")
    for view in views:
        with db.tenant_session(a) as s:
            assert set(s.execute(text(f"SELECT DISTINCT tenant_id FROM {view}")).scalars()) == {a}, view
        with db.app_session() as s:
            assert s.execute(text(f"SELECT count(*) FROM {view}")).scalar() == 0, view
        with db.owner_session() as s:
            assert {a, b} <= set(s.execute(text(f"SELECT DISTINCT tenant_id FROM {view}")).scalars()), view


def test_upgrade_from_0001_normalises_entity_weights(make_database_url: Callable[[], str]) -> None:
    fresh = Database(db_settings_for(make_database_url()))
    try:
        migrate.upgrade(fresh, "0001")
        with fresh.owner_session() as s:
            s.execute(text("INSERT INTO tenants (id, name, api_key_hash, api_key_prefix) VALUES (1, 'm', 'h', 'p')"))
            s.execute(
                text(
                    "INSERT INTO corpora (id, tenant_id, name, embedding_model, embedding_dim, ner_model)"
                    " VALUES (2, 1, 'c', 'm', 3, 'n')"
                )
            )
            s.execute(
                text(
                    "INSERT INTO experiences (id, tenant_id, corpus_id, query, query_embedding, embedding_dim,"
                    " activation, summary, answer, confidence) VALUES (3, 1, 2, 'q', '[1,0,0]', 3,"
                    " '{\"7\": 3.0, \"8\": 4.0}', 's', 'a', 0.5)"
                )
            )
            s.execute(text("INSERT INTO experience_entities VALUES (3, 7, 1, 2, 3.0), (3, 8, 1, 2, 4.0)"))
        migrate.upgrade(fresh)
        with fresh.owner_session() as s:
            weights: dict[int, float] = dict(s.execute(text("SELECT entity_id, weight FROM experience_entities")).all())
            template = s.execute(text("SELECT query_template FROM experiences WHERE id = 3")).scalar()
        assert weights == pytest.approx({7: 0.6, 8: 0.8})
        assert template is None
        migrate.downgrade(fresh, "0001")
        migrate.upgrade(fresh)
    finally:
        fresh.dispose()
