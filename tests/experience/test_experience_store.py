"""The experience store against a real PostgreSQL: matching (eq. 7-13), gated write-back
(eq. 5-6, 15-19), tenant isolation and bad input."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.db.repositories import experience_candidates as candidates_repo
from livingrag.errors import InvalidInput, NotFound
from livingrag.experience.grounding import Claim
from livingrag.experience.store import ExperienceStore
from livingrag.experience.template import ENT
from livingrag.experience.types import ClaimVerdict, UsedPassage
from livingrag.types import QueryEncoding
from tests.experience_helpers import (
    CountingVerifier,
    HashingEncoder,
    candidate,
    insert_plain,
    make_corpus,
    make_store,
    settings,
    unit,
)

pytestmark = pytest.mark.db

DIM = 8


def encoding(
    emb: np.ndarray, base: dict[int, float], question: str = "Where was the director of Amber Coast born?"
) -> QueryEncoding:
    return QueryEncoding(question=question, embedding=emb, mentions=(), seeds=(), base_activation=base)


def counts(db: Database, tenant_id: int) -> dict[str, int]:
    with db.owner_session() as s:
        return {
            t: s.execute(text(f"SELECT count(*) FROM {t} WHERE tenant_id = :t"), {"t": tenant_id}).scalar_one()
            for t in ("experiences", "experience_entities", "writeback_log")
        }


def test_empty_store_falls_back_to_the_base_exactly(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db)
    base = {5: 0.9, 6: 0.45}
    m = store.match(tenant, corpus, encoding(unit(DIM, (0, 1.0)), base))
    assert m.start_activation == base
    assert m.fused_ids == () and m.scaffold is None and not m.fusion_applied and m.candidates == 0
    assert {"preselect_ms", "rescore_ms", "total_ms"} <= m.timings.keys()


def test_write_back_stores_experience_entities_and_decision_together(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    verifier = CountingVerifier(1.0)
    store = make_store(db, verifier, ttl_days=7.0, epsilon=0.05, max_map_entities=2)
    final = {1: 0.9, 2: 0.3, 3: 0.4, 4: 0.01}
    c = candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 0.8}, final, mentions=("Winter Harbour",), query_log_id=77)
    r = store.write_back(c)
    assert r.stored and r.novelty == 1.0 and r.grounding == 1.0 and r.verifier == "counting"
    assert verifier.calls == 1
    with db.tenant_session(tenant) as s:
        row = s.execute(
            text(
                "SELECT activation, confidence, query_template, summary, source_passage_ids, expires_at - created_at,"
                " corpus_version FROM experiences WHERE id = :i"
            ),
            {"i": r.experience_id},
        ).one()
        ents: dict[int, float] = dict(
            s.execute(
                text("SELECT entity_id, weight FROM experience_entities WHERE experience_id = :i"),
                {"i": r.experience_id},
            ).all()
        )
        log = s.execute(
            text("SELECT decision, experience_id, verifier, novelty, grounding, query_log_id, details, timings"
                 " FROM writeback_log WHERE id = :i"),
            {"i": r.log_id},
        ).one()  # fmt: skip
    # eq. 5 with epsilon 0.05 and a 2-entity cap
    assert row[0] == {"1": 0.9, "3": 0.4}
    assert row[1] == 1.0  # conf = GS
    assert row[2] == f"Where was the director of {ENT} born?"
    assert row[3].startswith("Question: Where was the director of Winter Harbour born?")
    assert row[3].endswith("Answer: Galway")
    assert row[4] == [101]
    assert row[5].days == 7
    assert row[6] == 0
    n = math.hypot(0.9, 0.4)
    assert ents == pytest.approx({1: 0.9 / n, 3: 0.4 / n}, rel=1e-6)  # unit-normalised weights
    assert log[:6] == ("stored", r.experience_id, "counting", 1.0, 1.0, 77)
    assert log[6]["stage"] == "stored" and log[6]["verifier"] == "counting"
    # each claim's verdict keeps the evidence it was checked against (the console highlights it)
    assert log[6]["claims"] and all(
        cl["passage_id"] == c.passages[0].id and cl["evidence"] == c.passages[0].text for cl in log[6]["claims"]
    )
    assert {"novelty_ms", "grounding_ms", "lock_wait_ms", "insert_ms", "total_ms"} <= log[7].keys()


def test_novelty_rejection_never_calls_the_verifier(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    verifier = CountingVerifier(1.0)
    store = make_store(db, verifier)
    emb = unit(DIM, (0, 1.0))
    assert store.write_back(candidate(tenant, corpus, emb, {1: 1.0})).stored
    assert verifier.calls == 1
    dup = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0), (1, 0.05)), {1: 1.0}))
    assert dup.decision == "rejected_novelty"
    assert dup.novelty is not None and dup.novelty < 0.7 and dup.grounding is None
    assert verifier.calls == 1  # never asked
    with db.tenant_session(tenant) as s:
        row = s.execute(
            text(
                "SELECT verifier, details->>'stage', details->>'nearest_experience_id' FROM writeback_log WHERE id = :i"
            ),
            {"i": dup.log_id},
        ).one()
    assert row[0] == "counting" and row[1] == "precheck" and row[2] is not None
    assert counts(db, tenant)["experiences"] == 1


def test_grounding_rejection_stores_nothing(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db, CountingVerifier(0.2))
    r = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}))
    assert r.decision == "rejected_grounding" and r.grounding == 0.0 and r.novelty == 1.0
    assert r.claims and all(v.score == 0.2 for v in r.claims)
    assert counts(db, tenant) == {"experiences": 0, "experience_entities": 0, "writeback_log": 1}


def test_an_answer_of_the_wrong_form_is_rejected_before_grounding(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    verifier = CountingVerifier(1.0)
    # the fixed gate alone (gates.learn checks every novel candidate's claims, for its features)
    store = ExperienceStore(db, settings(gates={"learn": False}), encoder=HashingEncoder(), verifier=verifier)
    q = "When did the director of Winter Harbour die?"
    r = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, query=q, answer="Orla Brennick"))
    assert r.decision == "rejected_grounding" and r.grounding == 0.0 and r.novelty == 1.0
    assert r.reason is not None and "asks when" in r.reason
    assert verifier.calls == 0  # decided before the verifier was asked
    with db.tenant_session(tenant) as s:
        row = s.execute(
            text("SELECT decision, grounding, reason, details->>'stage', details->>'expected' FROM writeback_log"
                 " WHERE id = :i"), {"i": r.log_id},
        ).one()  # fmt: skip
    assert row[0] == "rejected_grounding" and row[1] == 0.0 and "asks when" in row[2]
    assert row[3] == "answer_form" and row[4] == "a time"
    assert counts(db, tenant)["experiences"] == 0
    # the check is a setting: off, the same candidate goes to the verifier and is stored
    off = ExperienceStore(db, settings(gates={"answer_form": False}), encoder=HashingEncoder(), verifier=verifier)
    assert off.write_back(
        candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, query=q, answer="Orla Brennick")
    ).stored
    assert verifier.calls == 1
    # and an answer of the right form is checked by the verifier as before
    ok = store.write_back(candidate(tenant, corpus, unit(DIM, (1, 1.0)), {3: 1.0}, query=q, answer="12 May 1990"))
    assert ok.stored and verifier.calls == 2


def test_match_scores_weights_and_fusion_by_hand(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(
        db, CountingVerifier(1.0), top_k=2, alpha=0.5, beta=0.5, tau_s=0.1, top_h=None, fusion_floor=-1.0,
        scaffold_template_floor=0.0,
    )  # fmt: skip
    # two stored experiences, orthogonal embeddings; the gate lets both in (NS = 1 for each)
    e1 = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, {1: 1.0, 2: 0.5}, query="q one?"))
    e2 = store.write_back(candidate(tenant, corpus, unit(DIM, (1, 1.0)), {3: 1.0}, {3: 1.0}, query="q two?"))
    assert e1.stored and e2.stored
    q = unit(DIM, (0, 0.6), (1, 0.8))
    base = {1: 0.8}
    m = store.match(tenant, corpus, encoding(q, base), activation_threshold=0.1)
    # eq. 7: s1 = 0.5*0.6 + 0.5*cos({1:.8},{1:1,2:.5}) = 0.3 + 0.5/sqrt(1.25); s2 = 0.5*0.8 + 0 = 0.4
    s1 = 0.3 + 0.5 / math.sqrt(1.25)
    s2 = 0.4
    assert [t.id for t in m.top] == [e1.experience_id, e2.experience_id]
    assert [t.score for t in m.top] == pytest.approx([s1, s2])
    # the embedding term, computed by the server on the stored float32 vectors: exact cosines
    assert [t.embedding_similarity for t in m.top] == pytest.approx([0.6, 0.8], abs=1e-6)
    # eq. 9-10 (confidences are 1)
    z = math.exp(s1 / 0.1) + math.exp(s2 / 0.1)
    w1, w2 = math.exp(s1 / 0.1) / z, math.exp(s2 / 0.1) / z
    assert [t.weight for t in m.top] == pytest.approx([w1, w2])
    # eq. 8: raw = {1: .8 + .5*w1, 2: .5*w1*.5, 3: .5*w2}, rescaled so max = 0.8
    raw = {1: 0.8 + 0.5 * w1, 2: 0.25 * w1, 3: 0.5 * w2}
    scale = 0.8 / max(raw.values())
    assert m.start_activation == pytest.approx({k: v * scale for k, v in raw.items()})
    assert m.fusion_applied and m.fused_ids == (e1.experience_id, e2.experience_id)
    assert m.added_entities == tuple(sorted(e for e in (2, 3) if raw[e] * scale >= 0.1))
    assert m.scaffold is not None and m.scaffold.summary.startswith("Question: q")


def test_the_scaffold_comes_from_a_question_of_the_same_form(db: Database, tenant: int) -> None:
    """A shared entity gives the other-form question the higher s_ret (eq. 7) and eq. 12's score;
    the template floor leaves only the same-form question eligible (eq. 13 over it)."""
    corpus = make_corpus(db, tenant, DIM)
    kw = {"top_k": 2, "alpha": 0.5, "tau_s": 0.1, "top_h": None, "scaffold_lambda": 0.5, "scaffold_floor": 0.0}
    films_q = "Which film came out first, Glass Orchard or The Salt Road?"
    films = candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, query=films_q, answer="Glass Orchard")
    born_q = "Where was the director of Winter Harbour born?"
    born = candidate(tenant, corpus, unit(DIM, (1, 1.0)), {3: 1.0}, query=born_q)
    paper = make_store(db, CountingVerifier(1.0), scaffold_template_floor=0.0, **kw)
    e_films, e_born = paper.write_back(films), paper.write_back(born)
    assert e_films.stored and e_born.stored
    q = encoding(unit(DIM, (0, 0.8), (1, 0.6)), {1: 0.8}, question="Where was the director of Glass Orchard born?")
    m = paper.match(tenant, corpus, q, activation_threshold=0.1)
    assert [t.id for t in m.top] == [e_films.experience_id, e_born.experience_id]  # the shared entity wins s_ret
    assert m.scaffold is not None and m.scaffold.experience_id == e_films.experience_id
    films_tsim = m.scaffold.template_similarity
    gated = make_store(db, CountingVerifier(1.0), scaffold_template_floor=0.7, **kw)
    m = gated.match(tenant, corpus, q, activation_threshold=0.1)
    assert m.scaffold is not None and m.scaffold.experience_id == e_born.experience_id
    assert films_tsim < 0.7 <= m.scaffold.template_similarity


def test_the_fusion_template_floor_fuses_only_questions_of_the_same_form(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    kw = {"top_k": 2, "alpha": 0.5, "beta": 0.5, "tau_s": 0.1, "top_h": None, "fusion_floor": -1.0}
    films_q = "Which film came out first, Amber Coast or Glass Orchard?"
    films = candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, query=films_q, answer="Amber Coast")
    born = candidate(
        tenant, corpus, unit(DIM, (1, 1.0)), {3: 1.0}, query="Where was the director of Winter Harbour born?"
    )
    paper = make_store(db, CountingVerifier(1.0), **kw)
    e_films, e_born = paper.write_back(films), paper.write_back(born)
    assert e_films.stored and e_born.stored
    q = encoding(unit(DIM, (0, 0.8), (1, 0.6)), {1: 0.8}, question="Where was the director of Glass Orchard born?")
    # eq. 7: s_films = 0.5 * 0.8 + 0.5 * 1 = 0.9, s_born = 0.5 * 0.6 + 0 = 0.3; eq. 9 over both
    z = math.exp(9.0) + math.exp(3.0)
    w_films, w_born = math.exp(9.0) / z, math.exp(3.0) / z
    m = paper.match(tenant, corpus, q, activation_threshold=0.1)
    assert m.fused_ids == (e_films.experience_id, e_born.experience_id)
    gated = make_store(db, CountingVerifier(1.0), fusion_template_floor=0.7, **kw)
    m = gated.match(tenant, corpus, q, activation_threshold=0.1)
    assert [t.id for t in m.top] == [e_films.experience_id, e_born.experience_id]
    assert [t.weight for t in m.top] == pytest.approx([0.0, w_born])  # not renormalised: w_films is dropped
    assert m.fused_ids == (e_born.experience_id,)
    # eq. 8: {1: 0.8, 3: 0.5 * w_born}, already at the base's maximum
    assert m.start_activation == pytest.approx({1: 0.8, 3: 0.5 * w_born})
    assert w_films > 0.99  # what the paper's fusion would have given the other form's map
    # with the default s_ret floor (0.5) only the other form would pass: nothing is fused, a0 = a_base
    both = make_store(db, CountingVerifier(1.0), **(kw | {"fusion_floor": 0.5, "fusion_template_floor": 0.7}))
    m = both.match(tenant, corpus, q, activation_threshold=0.1)
    assert m.start_activation == {1: 0.8} and not m.fusion_applied and m.fused_ids == ()


def test_fusion_floor_fuses_only_experiences_at_or_above_it(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    kw = {"top_k": 2, "alpha": 0.5, "beta": 0.5, "tau_s": 0.1, "top_h": None, "scaffold_template_floor": 0.0}
    store = make_store(db, CountingVerifier(1.0), fusion_floor=0.5, **kw)
    e1 = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, {1: 1.0, 2: 0.5}, query="q one?"))
    e2 = store.write_back(candidate(tenant, corpus, unit(DIM, (1, 1.0)), {3: 1.0}, {3: 1.0}, query="q two?"))
    q, base = unit(DIM, (0, 0.6), (1, 0.8)), {1: 0.8}
    m = store.match(tenant, corpus, encoding(q, base), activation_threshold=0.1)
    # s1 = 0.3 + 0.5/sqrt(1.25) = 0.747 >= 0.5 is fused; s2 = 0.4 < 0.5 stays in top with weight 0
    s1, s2 = 0.3 + 0.5 / math.sqrt(1.25), 0.4
    w1 = math.exp(s1 / 0.1) / (math.exp(s1 / 0.1) + math.exp(s2 / 0.1))  # eq. 9 over the top K, not renormalised
    assert [t.id for t in m.top] == [e1.experience_id, e2.experience_id]
    assert [t.weight for t in m.top] == pytest.approx([w1, 0.0])
    raw = {1: 0.8 + 0.5 * w1, 2: 0.25 * w1}
    scale = 0.8 / max(raw.values())
    assert m.start_activation == pytest.approx({k: v * scale for k, v in raw.items()})
    assert m.fusion_applied and m.fused_ids == (e1.experience_id,)
    # a floor over every match: a0 is exactly a_base, nothing is fused, the scaffold still works
    high = make_store(db, CountingVerifier(1.0), fusion_floor=0.9, **kw).match(tenant, corpus, encoding(q, base))
    assert high.start_activation == base and not high.fusion_applied and high.fused_ids == ()
    assert len(high.top) == 2 and high.scaffold is not None


def test_no_seed_entities_means_no_fusion_but_a_scaffold(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db, CountingVerifier(1.0), scaffold_lambda=0.0, scaffold_floor=0.3, scaffold_template_floor=0.0)
    e1 = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}))
    m = store.match(tenant, corpus, encoding(unit(DIM, (0, 1.0)), {}))
    assert m.start_activation == {} and not m.fusion_applied and m.fused_ids == ()
    # lambda = 0: the scaffold is the best retrieval match; s = alpha * 1 = 0.5 >= floor
    assert m.scaffold_id == e1.experience_id and m.scaffold is not None
    assert m.scaffold.score == pytest.approx(0.5)
    store_high_floor = make_store(db, CountingVerifier(1.0), scaffold_lambda=0.0, scaffold_floor=0.6)
    assert store_high_floor.match(tenant, corpus, encoding(unit(DIM, (0, 1.0)), {})).scaffold is None


def test_scaffold_prefers_the_same_question_template(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db, CountingVerifier(1.0), scaffold_lambda=0.9, scaffold_floor=0.0)
    same = store.write_back(
        candidate(tenant, corpus, unit(DIM, (2, 1.0)), {4: 1.0}, query="Where was the director of Glass Orchard born?",
                  mentions=("Glass Orchard",))
    )  # fmt: skip
    other = store.write_back(
        candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, query="How many films did Kestrel Pictures make?",
                  mentions=("Kestrel Pictures",), answer="12")
    )  # fmt: skip
    assert same.stored and other.stored
    enc = QueryEncoding(
        question="Where was the director of Amber Coast born?",
        embedding=unit(DIM, (0, 1.0)),  # the embedding favours `other` ...
        mentions=("Amber Coast",),
        seeds=(),
        base_activation={1: 1.0},
    )
    m = store.match(tenant, corpus, enc)
    assert m.top[0].id == other.experience_id
    assert m.scaffold_id == same.experience_id  # ... the template picks `same` (eq. 12-13)
    assert m.scaffold is not None and m.scaffold.template_similarity == pytest.approx(1.0)


def test_matching_never_returns_another_tenants_experience(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    a, _ = make_tenant("a")
    b, _ = make_tenant("b")
    ca, cb = make_corpus(db, a, DIM), make_corpus(db, b, DIM)
    store = make_store(db, CountingVerifier(1.0))
    emb = unit(DIM, (0, 1.0))
    rb = store.write_back(candidate(b, cb, emb, {1: 1.0}))
    assert rb.stored
    # A has nothing: same embedding and entities, still nothing comes back
    m = store.match(a, ca, encoding(emb, {1: 1.0}))
    assert m.candidates == 0 and m.start_activation == {1: 1.0}
    # novelty does not see B's experience either
    assert store.write_back(candidate(a, ca, emb, {1: 1.0})).stored
    ids_a = {t.id for t in store.match(a, ca, encoding(emb, {1: 1.0})).top}
    assert rb.experience_id not in ids_a and len(ids_a) == 1
    # asking with B's corpus from A's session: RLS hides it
    with pytest.raises(NotFound):
        store.match(a, cb, encoding(emb, {1: 1.0}))
    with pytest.raises(NotFound):
        store.write_back(candidate(a, cb, emb, {1: 1.0}))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"query_embedding": np.ones(DIM + 1)}, "dimension 9"),
        ({"query_embedding": np.array([np.nan] + [1.0] * (DIM - 1))}, "NaN"),
        ({"query_embedding": np.zeros(DIM)}, "zero vector"),
        ({"query_embedding": "not a vector"}, "vector"),
        ({"answer": "   "}, "answer is empty"),
        ({"query": ""}, "query is empty"),
        ({"base_activation": {"Galway": 1.0}}, "not an integer"),
        ({"final_activation": {1: float("inf")}}, "not finite"),
        ({"final_activation": {1: -1.0}}, "negative"),
        ({"passages": ("just text",)}, "UsedPassage"),
        ({"tenant_id": 0}, "tenant_id"),
        ({"corpus_version": -1}, "corpus_version"),
    ],
)
@pytest.mark.parametrize("gated", [True, False])
def test_bad_input_is_refused_and_writes_nothing(
    db: Database, tenant: int, change: dict[str, object], message: str, gated: bool
) -> None:
    corpus = make_corpus(db, tenant, DIM)
    verifier = CountingVerifier(1.0)
    store = make_store(db, verifier)
    good = candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0})
    import dataclasses

    bad = dataclasses.replace(good, **change)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=message):
        store.write_back(bad, gated=gated)
    assert verifier.calls == 0
    assert counts(db, tenant) == {"experiences": 0, "experience_entities": 0, "writeback_log": 0}


def test_ungated_write_back_stores_a_duplicate_and_logs_its_ns_and_nearest(db: Database, tenant: int) -> None:
    """The "w/o quality gate" ablation stores what the novelty gate would reject, in one
    transaction, and still logs NS (eq. 18) and the nearest experience, computed under its locks."""
    corpus = make_corpus(db, tenant, DIM)
    verifier = CountingVerifier(1.0)
    store = make_store(db, verifier)
    first = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}))
    assert first.decision == "stored" and verifier.calls == 1
    again = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}), gated=False)
    assert again.decision == "stored" and verifier.calls == 1  # no verifier ran
    assert again.novelty == pytest.approx(0.0, abs=1e-6) and again.grounding == 1.0
    assert "novelty_ms" not in again.timings and "recheck_ms" in again.timings
    with db.tenant_session(tenant) as s:
        row = s.execute(
            text(
                "SELECT novelty, details->>'gates', (details->>'nearest_experience_id')::bigint,"
                " (details->>'novelty_recheck')::float FROM writeback_log WHERE id = :i"
            ),
            {"i": again.log_id},
        ).one()
    assert row[0] == pytest.approx(0.0, abs=1e-6) and row[1] == "off" and row[2] == first.experience_id
    assert row[3] == pytest.approx(0.0, abs=1e-6)


def test_match_refuses_bad_input(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db)
    with pytest.raises(InvalidInput, match="dimension 3"):
        store.match(tenant, corpus, encoding(np.ones(3), {1: 1.0}))
    with pytest.raises(InvalidInput, match="NaN"):
        store.match(tenant, corpus, encoding(np.full(DIM, np.nan), {1: 1.0}))
    with pytest.raises(InvalidInput, match="not finite"):
        store.match(tenant, corpus, encoding(unit(DIM, (0, 1.0)), {1: float("nan")}))


def test_verifier_failure_is_logged_as_an_error_decision(db: Database, tenant: int) -> None:
    class BrokenVerifier:
        name = "broken"

        def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
            raise RuntimeError("verifier crashed")

    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db, BrokenVerifier())
    r = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}))
    assert r.decision == "error" and "verifier crashed" in (r.reason or "") and r.novelty == 1.0
    with db.tenant_session(tenant) as s:
        row = s.execute(
            text("SELECT decision, reason, verifier FROM writeback_log WHERE id = :i"), {"i": r.log_id}
        ).one()
    assert row[0] == "error" and "verifier crashed" in row[1] and row[2] == "broken"
    assert counts(db, tenant)["experiences"] == 0


def test_record_use_counts_fusion_and_scaffold_uses(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db, CountingVerifier(1.0), scaffold_lambda=0.0, scaffold_floor=0.0)
    e = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0})).experience_id
    m = store.match(tenant, corpus, encoding(unit(DIM, (0, 1.0)), {1: 1.0}))
    assert m.fused_ids == (e,) and m.scaffold_id == e
    assert store.record_use(tenant, fused_ids=m.fused_ids, scaffold_id=m.scaffold_id) == 1
    store.record_use(tenant, fused_ids=m.fused_ids)
    with db.tenant_session(tenant) as s:
        row = s.execute(
            text("SELECT fusion_uses, scaffold_uses, last_used_at IS NOT NULL FROM experiences WHERE id = :i"), {"i": e}
        ).one()
    assert row == (2, 1, True)
    assert store.record_use(tenant) == 0


def test_keysent_summary_uses_entity_names_from_the_corpus(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    with db.tenant_session(tenant) as s:
        ids = [
            s.execute(
                text(
                    "INSERT INTO entities (tenant_id, corpus_id, name, normalized_name, surface_forms)"
                    " VALUES (:t, :c, :n, lower(:n), :f) RETURNING id"
                ),
                {"t": tenant, "c": corpus, "n": n, "f": f},
            ).scalar_one()
            for n, f in (("Orla Brennick", ["Brennick"]), ("Galway", []))
        ]
    store = make_store(db, CountingVerifier(1.0), keysent_count=1)
    explanation = "The question is hard. Brennick directed it. Brennick was born in Galway. Nice weather."
    r = store.write_back(
        candidate(tenant, corpus, unit(DIM, (0, 1.0)), {ids[0]: 1.0}, {ids[0]: 0.9, ids[1]: 0.5},
                  explanation=explanation)
    )  # fmt: skip
    with db.tenant_session(tenant) as s:
        summary = s.execute(text("SELECT summary FROM experiences WHERE id = :i"), {"i": r.experience_id}).scalar_one()
    assert summary == (
        "Question: Where was the director of Winter Harbour born?\n"
        "Key reasoning: Brennick was born in Galway.\nAnswer: Galway"
    )


def test_dimension_384_uses_the_hnsw_channel_with_tenant_filter(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    """300 rows of another tenant lie nearer the query than this tenant's 3 rows; through the HNSW
    index, the iterative scan still finds this tenant's rows (a plain HNSW scan misses them)."""
    from datetime import UTC, datetime

    rng = np.random.default_rng(0)
    me, _ = make_tenant("me")
    noise, _ = make_tenant("noise")
    cm, cn = make_corpus(db, me, 384), make_corpus(db, noise, 384)
    q = rng.normal(size=384)
    q /= np.linalg.norm(q)
    with db.tenant_session(noise) as s:
        for _ in range(300):
            v = q + 0.3 * rng.normal(size=384) / math.sqrt(384)
            s.execute(
                text(
                    "INSERT INTO experiences (tenant_id, corpus_id, query, query_embedding, embedding_dim, activation,"
                    " summary, answer, confidence) VALUES (:t, :c, 'n', :v, 384, '{}', 's', 'a', 1)"
                ),
                {"t": noise, "c": cn, "v": (v / np.linalg.norm(v)).astype(np.float32)},
            )
    with db.owner_session() as s:
        s.execute(text("ANALYZE experiences"))
    store = make_store(db, CountingVerifier(1.0), candidates_m=8)
    mine = []
    for i in range(3):
        v = rng.normal(size=384)
        mine.append(store.write_back(candidate(me, cm, v, {i + 1: 1.0}, query=f"my question {i}?")).experience_id)
    assert {t.id for t in store.match(me, cm, encoding(q, {})).top} == set(mine)

    channel = (
        "SELECT id FROM experiences WHERE embedding_dim = 384 AND tenant_id = :t AND corpus_id = :c"
        " ORDER BY (query_embedding::halfvec(384)) <=> CAST(:q AS halfvec(384)) LIMIT 8"
    )
    params = {"t": me, "c": cm, "q": q.astype(np.float32)}
    with db.tenant_session(me) as s:
        s.execute(text("SET LOCAL enable_sort = off"))  # make the planner take the HNSW index
        plan = "\n".join(s.execute(text("EXPLAIN " + channel), params).scalars())
        assert "ix_experiences_query_embedding_hnsw_384" in plan
        s.execute(text("SET LOCAL hnsw.ef_search = 40"))
        # plain scan: starved by the filter. It keeps the 40 nearest rows it meets, the other
        # tenant's 300 first, and filters after; what else the session's shared index holds (other
        # tests' rows) decides whether one of this tenant's far rows is among them, so it is
        # asserted to miss some of them, not all
        plain = set(s.execute(text(channel), params).scalars().all())
        assert plain < set(mine), plain
        s.execute(text("SET LOCAL enable_sort = on"))  # preselection runs with the planner's defaults
        rows = candidates_repo.preselect(
            s, tenant_id=me, corpus_id=cm, embedding=q, seeds={}, m=8, now=datetime.now(UTC), ef_search=40
        )
    assert {r.id for r in rows} == set(mine)


def test_other_dimension_gets_its_own_hnsw_index(db: Database, tenant: int) -> None:
    from livingrag.db.repositories import experiences as repo

    with db.tenant_session(tenant) as s:  # the application role may ask for it
        name = repo.ensure_hnsw_index(s, 12)
        assert repo.ensure_hnsw_index(s, 12) == name  # idempotent
    with db.owner_session() as s:
        defn = s.execute(text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"), {"n": name}).scalar_one()
    assert "hnsw" in defn and "halfvec(12)" in defn and "embedding_dim = 12" in defn
    with db.tenant_session(tenant) as s, pytest.raises(InvalidInput, match="at most 4000"):
        repo.ensure_hnsw_index(s, 4096)


def test_store_can_use_passages_given_as_used_passage(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = ExperienceStore(db, settings(), verifier=CountingVerifier(1.0))
    c = candidate(
        tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, passages=(UsedPassage(5, "t", "T"), UsedPassage(6, "u"))
    )
    assert store.write_back(c).stored


def test_entity_channel_ranks_by_eq7_not_by_overlap_alone(db: Database, tenant: int) -> None:
    """Four experiences share the seed entity more strongly but answer unrelated questions
    (orthogonal embeddings); the relevant one shares it less but is close to the query. With one
    embedding slot (taken by a nearer experience without the entity) and two entity slots, the
    entity channel must still surface it: it re-ranks its overlap hits by eq. 7."""
    corpus = make_corpus(db, tenant, DIM)

    def put(emb: np.ndarray, activation: dict[int, float]) -> int:
        return insert_plain(db, tenant, corpus, emb, activation)

    nearest = put(unit(DIM, (0, 1.0)), {99: 1.0})  # s = 0.5 * 1 + 0.5 * 0
    crowd = [put(unit(DIM, (2 + i, 1.0)), {1: 1.0}) for i in range(4)]  # s = 0.5 * 0 + 0.5 * 1
    target = put(unit(DIM, (0, 1.0), (1, 1.0)), {1: 0.5, 5: math.sqrt(0.75)})  # s = 0.5 * .707 + 0.5 * .5
    store = make_store(db, candidates_m=2)
    m = store.match(tenant, corpus, encoding(unit(DIM, (0, 1.0)), {1: 1.0}))
    ids = {t.id for t in m.top}
    assert m.top[0].id == target
    assert m.top[0].score == pytest.approx(0.5 / math.sqrt(2) + 0.25)
    assert nearest in ids and len(set(crowd) & ids) <= 1


def test_entity_hits_bounds_the_entity_channel(db: Database, tenant: int) -> None:
    """``experience.entity_hits`` is how many overlap hits eq. 7 re-ranks. The embedding slot goes
    to a nearer experience without the entity; four unrelated experiences share the seed more
    strongly than the relevant one. With one hit only the strongest overlap is considered and the
    relevant experience is missed; with five, eq. 7 finds it. A limit under 1 is refused by name."""
    corpus = make_corpus(db, tenant, DIM)

    def put(emb: np.ndarray, activation: dict[int, float]) -> int:
        return insert_plain(db, tenant, corpus, emb, activation)

    nearest = put(unit(DIM, (0, 1.0)), {99: 1.0})
    crowd = [put(unit(DIM, (2 + i, 1.0)), {1: 1.0}) for i in range(4)]
    target = put(unit(DIM, (0, 1.0), (1, 1.0)), {1: 0.5, 5: math.sqrt(0.75)})
    q = encoding(unit(DIM, (0, 1.0)), {1: 1.0})
    narrow = make_store(db, candidates_m=2, entity_hits=1).match(tenant, corpus, q)
    wide = make_store(db, candidates_m=2, entity_hits=5).match(tenant, corpus, q)
    assert {t.id for t in narrow.top} == {nearest, crowd[0]}  # overlap ties go to the smaller id
    assert wide.top[0].id == target
    with pytest.raises(InvalidInput, match="preselection m_hits must be a positive integer"):
        candidates_repo._preselect_sql(DIM, 1, 1, 0, 1, tenant, corpus)
    with pytest.raises(InvalidInput, match="preselection tenant_id must be a positive integer"):
        candidates_repo._preselect_sql(DIM, 1, 1, 1, 1, 0, corpus)


def test_stale_experiences_take_no_slot_of_the_entity_channel(db: Database, tenant: int) -> None:
    """Two stale experiences share the seed entity more strongly than the active one; the entity
    channel ranks active experiences only, so with two slots the active one is still found (it
    used to fill its slots first and lose the stale ones afterwards, leaving fewer candidates)."""
    corpus = make_corpus(db, tenant, DIM)
    nearest = insert_plain(db, tenant, corpus, unit(DIM, (0, 1.0)), {99: 1.0})
    stale = [insert_plain(db, tenant, corpus, unit(DIM, (0, 1.0), (2 + i, 0.1)), {1: 1.0}) for i in range(2)]
    target = insert_plain(db, tenant, corpus, unit(DIM, (5, 1.0)), {1: 0.5, 6: math.sqrt(0.75)})
    with db.tenant_session(tenant) as s:
        s.execute(text("UPDATE experiences SET stale = true WHERE id = ANY(:ids)"), {"ids": stale})
    m = make_store(db, candidates_m=2, entity_hits=3).match(tenant, corpus, encoding(unit(DIM, (0, 1.0)), {1: 1.0}))
    assert {t.id for t in m.top} == {nearest, target} and m.candidates == 2


def test_the_packed_activation_follows_the_jsonb_map(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant, DIM)
    store = make_store(db, CountingVerifier(1.0))
    r = store.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {7: 1.0}, {7: 1.0, 9: 0.25}))
    assert r.stored

    def packed() -> dict[int, float]:
        with db.tenant_session(tenant) as s:
            data = s.execute(
                text("SELECT activation_packed FROM experiences WHERE id = :i"), {"i": r.experience_id}
            ).scalar_one()
        ids, ws = candidates_repo.unpack_activation(data)
        return dict(zip(ids.tolist(), ws.tolist(), strict=True))

    assert packed() == {7: 1.0, 9: 0.25}
    # an operator's edit of the jsonb map is what preselection reads next (a generated column)
    with db.tenant_session(tenant) as s:
        s.execute(text("""UPDATE experiences SET activation = '{"7": 0.5}' WHERE id = :i"""), {"i": r.experience_id})
    assert packed() == {7: 0.5}
    m = store.match(tenant, corpus, encoding(unit(DIM, (0, 1.0)), {7: 1.0}))
    assert m.top and m.top[0].id == r.experience_id
    # a weight that is not a number is refused, and the stored map is unchanged
    with pytest.raises(Exception, match="double precision"), db.tenant_session(tenant) as s:
        s.execute(text("""UPDATE experiences SET activation = '{"7": "high"}' WHERE id = :i"""), {"i": r.experience_id})
    assert packed() == {7: 0.5}


def test_matching_read_returns_what_the_in_transaction_preselection_returns(db: Database, tenant: int) -> None:
    """Matching reads its candidates in one round trip (binary rows, prepared generic plan); the
    write-back's novelty re-check reads them inside its own transaction. Same statement, same rows."""
    from datetime import UTC, datetime

    corpus = make_corpus(db, tenant, DIM)
    rng = np.random.default_rng(3)
    for i in range(12):
        insert_plain(db, tenant, corpus, rng.normal(size=DIM), {1 + i % 4: 1.0, 10 + i: 0.5})
    q = rng.normal(size=DIM)
    args: dict[str, Any] = dict(
        tenant_id=tenant, corpus_id=corpus, embedding=q, seeds={1: 1.0, 2: 0.4}, m=6, now=datetime.now(UTC)
    )
    with db.tenant_session(tenant) as s:
        inside = candidates_repo.preselect(s, **args)
    for _ in range(7):  # past psycopg's preparation threshold: the generic plan answers the same
        alone = candidates_repo.preselect_read(db, **args)
        assert [r.id for r in alone] == [r.id for r in inside] and len(alone) == 6
        for a, b in zip(alone, inside, strict=True):
            assert a.channel_rank == b.channel_rank and a.summary == b.summary and a.created_at == b.created_at
            assert a.embedding_cosine == b.embedding_cosine
            assert a.activation == b.activation and a.confidence == b.confidence
    assert candidates_repo.preselect_read(db, **{**args, "m": 0}) == []


def test_decode_candidates_by_hand() -> None:
    """Rows as the preselection statement returns them: the embedding's cosine with the query (NaN
    for a zero embedding, scored 0) and the packed map (big-endian int8 id, float8 weight pairs)."""
    import struct
    from datetime import UTC, datetime

    def packed(*pairs: tuple[int, float]) -> bytes:
        return b"".join(struct.pack(">qd", e, w) for e, w in pairs)

    t = datetime(2026, 1, 2, tzinfo=UTC)
    rows = [
        (5, "q5", "T5", 0.75, packed((7, 0.5), (9, 0.25)), 0.75, t, "s5", 1),
        (3, "q3", None, float("nan"), None, 1.0, t, "s3", 2),  # a zero embedding, an empty map
        (8, "q8", "T8", -0.5, memoryview(packed((1, 1.0))), 0.5, t, "s8", 2),
    ]
    got = candidates_repo.decode_candidates(rows)
    assert [c.id for c in got] == [5, 3, 8] and [c.channel_rank for c in got] == [1, 2, 2]
    assert [c.embedding_cosine for c in got] == [0.75, 0.0, -0.5]
    assert [c.activation for c in got] == [{7: 0.5, 9: 0.25}, {}, {1: 1.0}]
    assert got[0].query_template == "T5" and got[1].query_template is None and got[2].summary == "s8"
    # the flat arrays rescoring reads: the cosines, the maps concatenated with their lengths
    assert got.embedding_cosines.tolist() == [0.75, 0.0, -0.5]
    assert got.entity_ids.tolist() == [7, 9, 1] and got.weights.tolist() == [0.5, 0.25, 1.0]
    assert got.lengths.tolist() == [2, 0, 1]
    again = candidates_repo.Candidates(list(got))  # gathered from rows alone: the same arrays
    assert again.embedding_cosines.tolist() == [0.75, 0.0, -0.5]
    assert again.entity_ids.tolist() == [7, 9, 1] and again.lengths.tolist() == [2, 0, 1]
    assert candidates_repo.decode_candidates([]) == []


def test_findings_are_the_top_k_experiences_over_the_floor(db: Database, tenant: int) -> None:
    """Both matched experiences are stated as findings, best first, the scaffold's (eq. 13, the same
    form) among them; under the floor, or with findings_k = 0, nothing is stated."""
    corpus = make_corpus(db, tenant, DIM)
    kw = {"top_k": 2, "alpha": 0.5, "tau_s": 0.1, "top_h": None, "scaffold_lambda": 0.5, "scaffold_floor": 0.0}
    films = candidate(
        tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, query="Who directed Glass Orchard?", answer="Mara Quell"
    )
    born_q = "Where was the director of Winter Harbour born?"
    born = candidate(tenant, corpus, unit(DIM, (1, 1.0)), {3: 1.0}, query=born_q)
    store = make_store(db, CountingVerifier(1.0), scaffold_template_floor=0.7, findings_k=2, findings_floor=0.0, **kw)
    e_films, e_born = store.write_back(films), store.write_back(born)
    assert e_films.stored and e_born.stored
    q = encoding(unit(DIM, (0, 0.8), (1, 0.6)), {1: 0.8}, question="Where was the director of Glass Orchard born?")
    m = store.match(tenant, corpus, q, activation_threshold=0.1)
    assert m.scaffold is not None and m.scaffold.experience_id == e_born.experience_id
    assert m.finding_ids == (e_films.experience_id, e_born.experience_id) == tuple(t.id for t in m.top)
    assert [f.retrieval_score for f in m.findings] == pytest.approx([t.score for t in m.top])
    assert "Answer: Mara Quell" in m.findings[0].summary
    # s_ret: films 0.5 * 0.8 + 0.5 * 1 = 0.9, born 0.5 * 0.6 + 0.5 * 0 = 0.3
    assert [t.score for t in m.top] == pytest.approx([0.9, 0.3])
    mid = make_store(db, CountingVerifier(1.0), scaffold_template_floor=0.7, findings_k=2, findings_floor=0.5, **kw)
    assert mid.match(tenant, corpus, q, activation_threshold=0.1).finding_ids == (e_films.experience_id,)
    one = make_store(db, CountingVerifier(1.0), scaffold_template_floor=0.7, findings_k=1, findings_floor=0.0, **kw)
    assert one.match(tenant, corpus, q, activation_threshold=0.1).finding_ids == (e_films.experience_id,)
    high = make_store(db, CountingVerifier(1.0), scaffold_template_floor=0.7, findings_k=2, findings_floor=0.95, **kw)
    assert high.match(tenant, corpus, q, activation_threshold=0.1).findings == ()
    off = make_store(db, CountingVerifier(1.0), scaffold_template_floor=0.7, findings_k=0, findings_floor=0.0, **kw)
    assert off.match(tenant, corpus, q, activation_threshold=0.1).findings == ()


def test_write_back_caches_the_template_vector_the_question_pass_made(db: Database, tenant: int) -> None:
    """A candidate carrying its template's vector (embedded with the question, living mode) puts
    that vector into the eq. 12 cache; one without it, or for another text, is embedded by the store."""
    from livingrag.experience.template import mask

    seen: list[str] = []

    class Counting(HashingEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            seen.extend(texts)
            return super().encode(texts)

    corpus = make_corpus(db, tenant, DIM)
    encoder = Counting()
    store = ExperienceStore(db, settings(), encoder=encoder, verifier=CountingVerifier(1.0))
    q = "Where was the director of Winter Harbour born?"
    given = unit(encoder.dim, (2, 3.0))  # the query encoder's dimension, as the forward pass makes it
    c = candidate(
        tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}, query=q, template_text=mask(q, ()), template_embedding=given
    )
    r = store.write_back(c)
    assert r.stored and r.experience_id is not None
    assert mask(q, ()) not in seen  # not embedded again
    kept = store.template_vector(tenant, mask(q, ()))
    assert kept is not None
    np.testing.assert_allclose(kept, given)
    q2 = "Where was the director of Amber Coast born?"
    other = candidate(
        tenant, corpus, unit(DIM, (3, 1.0)), {4: 1.0}, query=q2, template_text="another text", template_embedding=given
    )
    r2 = store.write_back(other)
    assert r2.stored and r2.experience_id is not None and mask(q2, ()) in seen
    kept2 = store.template_vector(tenant, mask(q2, ()))
    assert kept2 is not None and not np.allclose(kept2, given)
    # a third candidate of a form met before, without a vector of its own, is not embedded again
    seen.clear()
    r3 = store.write_back(candidate(tenant, corpus, unit(DIM, (5, 1.0)), {6: 1.0}, query=q))
    assert r3.stored and seen == []


def test_templates_are_embedded_only_where_matching_compares_them(db: Database, tenant: int) -> None:
    """With no scaffold shown (the local model's default) and no fusion template floor, eq. 12 is
    never computed: a write-back caches no template, and the store says so to the pipeline."""
    seen: list[str] = []

    class Counting(HashingEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            seen.extend(texts)
            return super().encode(texts)

    def store(**kw: object) -> ExperienceStore:
        return ExperienceStore(db, settings(**kw), encoder=Counting(), verifier=CountingVerifier(1.0))

    assert store(scaffold="off").templates_needed is False
    assert store(scaffold="on").templates_needed is True
    assert store(scaffold="on", scaffold_lambda=0.0, scaffold_template_floor=0.0).templates_needed is False
    assert store(scaffold="off", fusion_template_floor=0.5).templates_needed is True
    corpus = make_corpus(db, tenant, DIM)
    off = store(scaffold="off")
    r = off.write_back(candidate(tenant, corpus, unit(DIM, (0, 1.0)), {1: 1.0}))
    assert r.stored and not off.matcher._templates and seen == []
