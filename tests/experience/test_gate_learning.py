"""The gate that learns from each tenant's feedback (livingrag.experience.gate_learning) against a
real PostgreSQL: labels stay with their tenant, a tenant without enough labels is gated exactly as
before, an earned calibrator decides (and auto-verifies), a reset hands the decision back."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as experience_repo
from livingrag.db.repositories import gate as gate_repo
from livingrag.experience.gate_features import FEATURES
from livingrag.experience.store import ExperienceStore
from livingrag.experience.trust import serves_answer
from livingrag.experience.types import UsedPassage
from tests.experience_helpers import CountingVerifier, HashingEncoder, candidate, make_corpus, settings, unit

pytestmark = pytest.mark.db

DIM = 8
FOUND = (UsedPassage(101, "Orla Brennick was born in Galway.", "Orla Brennick"),)
NOT_FOUND = (UsedPassage(101, "Orla Brennick directed Winter Harbour.", "Winter Harbour"),)


def store(db: Database, **gates: Any) -> ExperienceStore:
    s = settings(gates={"answer_form": False, "learn_min_labels": 30, "learn_min_support": 5, **gates})
    return ExperienceStore(db, s, encoder=HashingEncoder(), verifier=CountingVerifier(1.0))


def add_labels(db: Database, tenant: int, corpus: int, n: int, *, seed: int = 0) -> None:
    """``n`` labels whose answer was found in a passage exactly when it was right (the other
    features constant): a calibrator that learns anything learns that."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    with db.tenant_session(tenant) as s:
        for i in range(n):
            right = rng.random() < 0.5
            features = dict.fromkeys(FEATURES, 0.0) | {"found_any": float(right)}
            gate_repo.upsert_label(
                s, tenant_id=tenant, corpus_id=corpus, query_log_id=10_000 + i, writeback_log_id=None,
                label=right, verdict="right" if right else "wrong", corrected=False, features=features,
                actor="test", now=now,
            )  # fmt: skip


def cand(tenant: int, corpus: int, k: int, passages: tuple[UsedPassage, ...]) -> Any:
    # far-apart embeddings and maps: every candidate is novel
    return candidate(tenant, corpus, unit(DIM, (k % DIM, 1.0)), {1000 + k: 1.0}, passages=passages)


def logged(db: Database, tenant: int) -> list[dict[str, Any]]:
    with db.tenant_session(tenant) as s:
        rows = s.execute(
            text("SELECT decision, gate, probability, gate_model_id, details FROM writeback_log ORDER BY id")
        ).mappings()
        return [dict(r) for r in rows]


def test_a_tenant_without_enough_labels_is_gated_exactly_as_before(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    add_labels(db, tenant, corpus, 29)  # one short of learn_min_labels
    learning, fixed = store(db), store(db, learn=False)
    assert learning.learner.refit(tenant) == []
    a = [learning.write_back(cand(tenant, corpus, k, FOUND if k % 2 else NOT_FOUND)) for k in range(2)]
    corpus2 = make_corpus(db, tenant, DIM)
    b = [fixed.write_back(cand(tenant, corpus2, k, FOUND if k % 2 else NOT_FOUND)) for k in range(2)]
    assert [(r.decision, r.grounding, r.novelty) for r in a] == [(r.decision, r.grounding, r.novelty) for r in b]
    assert [r.decision for r in a] == ["stored", "stored"]
    rows = logged(db, tenant)
    assert [(r["gate"], r["probability"], r["gate_model_id"]) for r in rows] == [("fixed", None, None)] * 4
    assert "features" in rows[0]["details"] and "features" not in rows[2]["details"]  # learning only records
    with db.tenant_session(tenant) as s:
        assert gate_repo.current_models(s) == []
        trusts = s.execute(text("SELECT DISTINCT trust FROM experiences")).scalars().all()
    assert trusts == ["unverified"]


def test_one_tenants_labels_never_train_another_tenants_gate(db: Database, make_tenant: Any) -> None:
    a, b = make_tenant()[0], make_tenant()[0]
    corpus_a, corpus_b = make_corpus(db, a, DIM), make_corpus(db, b, DIM)
    add_labels(db, a, corpus_a, 90)
    add_labels(db, b, corpus_b, 5)
    st = store(db)
    assert {r.corpus_id for r in st.learner.refit(a)} == {None, corpus_a}
    assert st.learner.refit(b) == []  # b's 5 labels: nothing to fit, whatever a has
    rep_b = st.learner.report(b)
    assert rep_b["labels"]["total"] == 5 and rep_b["models"] == []
    with db.tenant_session(b) as s:
        assert gate_repo.labels(s) != [] and len(gate_repo.labels(s)) == 5
        assert s.execute(text("SELECT count(*) FROM gate_models")).scalar_one() == 0
        assert s.execute(text("SELECT count(*) FROM gate_labels WHERE tenant_id = :a"), {"a": a}).scalar_one() == 0
        assert st.learner.active_in(s, corpus_b) is None
    # b's write-backs are the fixed gate's, with no probability from a's model
    r = st.write_back(cand(b, corpus_b, 0, NOT_FOUND))
    assert r.decision == "stored" and logged(db, b)[0]["gate"] == "fixed" and logged(db, b)[0]["probability"] is None
    assert st.learner.report(a)["labels"]["total"] == 90


def test_an_earned_gate_decides_auto_verifies_and_a_reset_hands_back(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    add_labels(db, tenant, corpus, 90)
    st = store(db)
    fitted = st.learner.refit(tenant)
    per_corpus = next(m for m in fitted if m.corpus_id == corpus)
    assert per_corpus.earned and per_corpus.metrics["auc"] == 1.0
    assert per_corpus.store_threshold is not None and per_corpus.serve_threshold is not None

    found = st.write_back(cand(tenant, corpus, 0, FOUND))
    missing = st.write_back(cand(tenant, corpus, 1, NOT_FOUND))
    assert found.decision == "stored" and missing.decision == "rejected_grounding"  # GS is 1 for both
    assert found.experience_id is not None
    assert "learned gate (corpus" in (missing.reason or "") and "below the store threshold" in (missing.reason or "")
    rows = logged(db, tenant)
    assert [r["gate"] for r in rows] == ["learned", "learned"]
    assert rows[0]["probability"] > 0.9 > 0.1 > rows[1]["probability"]
    assert rows[0]["gate_model_id"] == per_corpus.id and rows[1]["details"]["stage"] == "learned_gate"
    with db.tenant_session(tenant) as s:
        x = experience_repo.get_experience(s, found.experience_id)
        events = s.execute(
            text("SELECT event, actor FROM experience_events WHERE experience_id = :x ORDER BY id"),
            {"x": found.experience_id},
        ).all()
    assert x.trust == "auto_verified"
    assert [tuple(e) for e in events] == [("created", "system"), ("auto_verified", "system")]

    # served without feedback at the default policy, not at "verified"
    with db.tenant_session(tenant) as s:
        kw: dict[str, Any] = {"now": datetime.now(UTC), "question_key": "q", "answer_key": str.lower}
        ids = [found.experience_id]

        def policy(name: str) -> Any:
            return lambda trust, gated, c: serves_answer(name, trust=trust, gated=gated, confidence=c, floor=0.6)

        assert [
            e.id for e in experience_repo.reusable_experiences(s, ids, allowed=policy("auto_verified"), **kw)
        ] == ids
        assert experience_repo.reusable_experiences(s, ids, allowed=policy("verified"), **kw) == []

    out = st.learner.reset(tenant)
    assert out == {"models_retired": 2, "experiences_demoted": 1, "labels_deleted": 0}
    with db.tenant_session(tenant) as s:
        assert experience_repo.get_experience(s, found.experience_id).trust == "unverified"
        last = s.execute(
            text("SELECT event, reason FROM experience_events WHERE experience_id = :x ORDER BY id DESC LIMIT 1"),
            {"x": found.experience_id},
        ).one()
        assert gate_repo.current_models(s) == []
    assert tuple(last) == ("demoted", "the learned gate was reset")
    again = st.write_back(cand(tenant, corpus, 2, NOT_FOUND))
    assert again.decision == "stored" and logged(db, tenant)[-1]["gate"] == "fixed"


def test_a_refit_that_loses_the_serve_threshold_demotes(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    add_labels(db, tenant, corpus, 90)
    st = store(db)
    st.learner.refit(tenant)
    stored = st.write_back(cand(tenant, corpus, 0, FOUND))
    assert stored.experience_id is not None
    with db.tenant_session(tenant) as s:
        assert experience_repo.get_experience(s, stored.experience_id).trust == "auto_verified"
        # people now say the found answers are wrong half the time: precision 0.95 is out of reach
        s.execute(text("UPDATE gate_labels SET label = (id % 2 = 0) WHERE (features ->> 'found_any')::float = 1"))
    st.learner.refit(tenant, force=True)
    with db.tenant_session(tenant) as s:
        assert experience_repo.get_experience(s, stored.experience_id).trust == "unverified"
        ev = s.execute(
            text("SELECT event FROM experience_events WHERE experience_id = :x ORDER BY id DESC LIMIT 1"),
            {"x": stored.experience_id},
        ).scalar_one()
    assert ev == "demoted"


def test_labels_follow_the_latest_verdict(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    now = datetime.now(UTC)
    with db.tenant_session(tenant) as s:
        for verdict in ("right", "wrong"):
            gate_repo.upsert_label(
                s, tenant_id=tenant, corpus_id=corpus, query_log_id=7, writeback_log_id=None,
                label=verdict == "right", verdict=verdict, corrected=verdict == "wrong", features={"gs": 0.5},
                actor="key 1", now=now,
            )  # fmt: skip
        assert [lb.label for lb in gate_repo.labels(s)] == [False]
        assert gate_repo.label_counts(s) == {corpus: (1, 0)}


def test_a_run_that_starts_afresh_forgets_what_the_gate_learned_from_its_corpus(
    db: Database, tenant: int, caplog: pytest.LogCaptureFixture
) -> None:
    """``empty_memory`` (what `eval stream` and the demo run before a fresh run) forgets the corpus's
    labels and retires its calibrator and the tenant-wide one, so that no earlier run's verdicts
    decide this run's write-backs; another corpus's labels stay, with a warning."""
    from livingrag.evaluation.stream import empty_memory

    corpus, other = make_corpus(db, tenant, DIM), make_corpus(db, tenant, DIM)
    add_labels(db, tenant, corpus, 90)
    st = store(db)
    assert {r.corpus_id for r in st.learner.refit(tenant)} == {None, corpus}
    with db.tenant_session(tenant) as s:
        assert st.learner.active_in(s, corpus) is not None
    empty_memory(db, tenant, corpus)
    with db.tenant_session(tenant) as s:
        assert st.learner.active_in(s, corpus) is None and gate_repo.label_counts(s) == {}
        retired = s.execute(text("SELECT count(*) FROM gate_models WHERE retired_at IS NOT NULL")).scalar_one()
        assert retired == 2  # kept, as history
    add_labels(db, tenant, other, 10)
    with caplog.at_level("WARNING", logger="livingrag.evaluation.stream"):
        empty_memory(db, tenant, corpus)
    assert "10 learned-gate labels of other corpora" in caplog.text
    with db.tenant_session(tenant) as s:
        assert gate_repo.label_counts(s) == {other: (10, gate_repo.label_counts(s)[other][1])}
