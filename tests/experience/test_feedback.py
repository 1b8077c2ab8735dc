"""Memory people can trust and correct (livingrag.experience.feedback): the new user's walk-through
as a test, with the loopback LLM over the small test corpus and a real PostgreSQL.

The walk-through: an unverified experience is not served to a repeated question without an LLM
call; after ``wrong`` the experience is retracted and that answer is never served (nor stored) for
the question again; a correction is stored as verified and served; after ``right`` on an answer the
repeat is served from memory; the history lists every event with its actor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as experience_repo
from livingrag.errors import Conflict, InvalidInput, NotFound
from livingrag.experience.feedback import TrustService
from livingrag.experience.store_writeback import MARKED_WRONG
from livingrag.experience.trust import Actor
from livingrag.pipeline.answer_pipeline import LivingRAG
from livingrag.testing.openai_server import OpenAICompatServer
from livingrag.types import CorpusInfo
from tests.experience_helpers import CountingVerifier
from tests.pipeline.test_pipeline import Q1, Q2, clean, indexed, make_rag, rows, server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.db, pytest.mark.slow]

REPEAT = "where was the director of silver harbor born"
ALICE = Actor.key(7)


@pytest.fixture
def rag(make_rag: Callable[..., LivingRAG]) -> LivingRAG:  # noqa: F811
    # the answer-form check off: the loopback model answers with a passage title, whatever the question
    return make_rag(gates={"answer_form": False})


def trust(rag: LivingRAG) -> TrustService:
    return TrustService(rag.db, rag.settings, rag.store)


def ask(rag: LivingRAG, tenant_id: int, corpus: CorpusInfo, question: str) -> Any:
    a = rag.answer(question, tenant=tenant_id, corpus=corpus.id)
    assert rag.flush(timeout=120)
    rag.uses.flush()
    return a


def events(db: Database, tenant_id: int, experience_id: int) -> list[tuple[str, str]]:
    return [
        (r["event"], r["actor"])
        for r in rows(
            db,
            tenant_id,
            "SELECT event, actor FROM experience_events WHERE experience_id = :x ORDER BY id",
            x=experience_id,
        )
    ]


def test_the_walk_through(
    db: Database,
    server: OpenAICompatServer,  # noqa: F811
    clean: tuple[int, CorpusInfo],  # noqa: F811
    rag: LivingRAG,
) -> None:
    tenant_id, corpus = clean
    svc = trust(rag)
    first = ask(rag, tenant_id, corpus, Q1)
    assert first.writeback is not None and first.writeback.result().decision == "stored"
    exp_id = first.writeback.result().experience_id
    (row,) = rows(db, tenant_id, "SELECT origin, origin_detail, trust, gated FROM experiences WHERE id = :i", i=exp_id)
    assert row == {"origin": "gate", "origin_detail": "none", "trust": "unverified", "gated": True}

    # 1. unverified: the repeat goes to the LLM
    n = len(server.requests)
    again = ask(rag, tenant_id, corpus, REPEAT)
    assert again.reused_from is None and len(server.requests) == n + 1

    # 2. wrong: retracted, the pair remembered; the same answer is refused by the gate from now on
    out = svc.feedback(tenant_id, first.query_log_id, "wrong", actor=ALICE, note="a film title, not a town")
    assert out.retracted_ids == (exp_id,) and out.remembered_wrong and not out.repeated
    (row,) = rows(db, tenant_id, "SELECT trust, trust_actor, trust_reason FROM experiences WHERE id = :i", i=exp_id)
    assert row["trust"] == "retracted" and row["trust_actor"] == "key 7" and "film title" in row["trust_reason"]
    third = ask(rag, tenant_id, corpus, REPEAT)
    assert third.reused_from is None and third.answer == first.answer  # the model says it again ...
    assert third.writeback.result().decision == "rejected_grounding"  # ... and the gate refuses it
    assert third.writeback.result().reason == MARKED_WRONG

    # 3. a correction: stored verified, asserted by the person (no passage says so), and served
    fix = svc.feedback(tenant_id, third.query_log_id, "wrong", actor=ALICE, answer="Porto Vell")
    assert fix.stored_experience_id is not None and fix.check is not None and fix.check.grounded is False
    fixed = fix.stored_experience_id
    (row,) = rows(
        db,
        tenant_id,
        "SELECT origin, origin_detail, trust, answer, grounding FROM experiences WHERE id = :i",
        i=fixed,
    )
    assert (row["origin"], row["origin_detail"], row["trust"], row["answer"]) == (
        "person",
        "key 7",
        "verified",
        "Porto Vell",
    )
    assert row["grounding"]["grounded"] is False and row["grounding"]["asserted_by"] == "key 7"
    n = len(server.requests)
    served = ask(rag, tenant_id, corpus, REPEAT)
    assert served.reused_from == fixed and served.answer == "Porto Vell" and len(server.requests) == n

    # 4. right on another question's answer, which the novelty gate had rejected (its question is
    # close to the first one): stored now as verified, and its repeat is served from memory
    other = ask(rag, tenant_id, corpus, Q2)
    assert other.writeback.result().decision == "rejected_novelty"
    ok = svc.feedback(tenant_id, other.query_log_id, "right", actor=Actor.operator())
    other_id = ok.stored_experience_id
    assert other_id is not None and ok.verified_ids == (other_id,)
    n = len(server.requests)
    assert ask(rag, tenant_id, corpus, Q2.upper()).reused_from == other_id and len(server.requests) == n

    # 5. the history lists every event with its actor
    assert events(db, tenant_id, exp_id) == [("created", "system"), ("retracted", "key 7"), ("corrected", "key 7")]
    assert events(db, tenant_id, fixed) == [("created", "key 7"), ("verified", "key 7"), ("used_answer", "system")]
    assert events(db, tenant_id, other_id) == [
        ("created", "operator"),
        ("verified", "operator"),
        ("used_answer", "system"),
    ]
    history = svc.history(tenant_id, exp_id)
    assert [h.event for h in history] == ["created", "retracted", "corrected"]
    assert history[2].details == {"corrected_by": fixed} and history[1].query_log_id == first.query_log_id
    (uses,) = rows(db, tenant_id, "SELECT answer_uses FROM experiences WHERE id = :i", i=fixed)
    assert uses["answer_uses"] == 1


def test_a_verdict_given_twice_changes_nothing_the_second_time(
    db: Database,
    clean: tuple[int, CorpusInfo],  # noqa: F811
    rag: LivingRAG,
) -> None:
    tenant_id, corpus = clean
    a = ask(rag, tenant_id, corpus, Q1)
    svc = trust(rag)
    one = svc.feedback(tenant_id, a.query_log_id, "wrong", actor=ALICE)
    two = svc.feedback(tenant_id, a.query_log_id, "wrong", actor=ALICE)
    assert two.repeated and two.feedback_id == one.feedback_id and two.retracted_ids == one.retracted_ids
    (n,) = rows(db, tenant_id, "SELECT count(*) AS n FROM answer_feedback WHERE query_log_id = :q", q=a.query_log_id)
    assert n["n"] == 1
    exp_id = a.writeback.result().experience_id
    assert [e for e, _ in events(db, tenant_id, exp_id)] == ["created", "retracted"]
    # a change of mind: right after wrong verifies it again and forgets the wrong pair
    back = svc.feedback(tenant_id, a.query_log_id, "right", actor=ALICE)
    assert back.verified_ids == (exp_id,)
    assert [e for e, _ in events(db, tenant_id, exp_id)] == ["created", "retracted", "unretracted", "verified"]
    assert rows(db, tenant_id, "SELECT * FROM rejected_answers WHERE corpus_id = :c", c=corpus.id) == []


def test_right_stores_what_the_gates_rejected(
    db: Database,
    server: OpenAICompatServer,  # noqa: F811
    clean: tuple[int, CorpusInfo],  # noqa: F811
    make_rag: Callable[..., LivingRAG],  # noqa: F811
) -> None:
    tenant_id, corpus = clean
    rag = make_rag(gates={"answer_form": False}, store_verifier=CountingVerifier(score=0.0, name="never"))
    a = ask(rag, tenant_id, corpus, Q1)
    wb = a.writeback.result()
    assert wb.decision == "rejected_grounding" and wb.experience_id is None
    (kept,) = rows(db, tenant_id, "SELECT candidate FROM writeback_log WHERE id = :i", i=wb.log_id)
    assert len(kept["candidate"]["embedding"]) > 0 and kept["candidate"]["passages"]
    out = trust(rag).feedback(tenant_id, a.query_log_id, "right", actor=ALICE)
    stored = out.stored_experience_id
    assert stored is not None and out.verified_ids == (stored,)
    (row,) = rows(
        db, tenant_id, "SELECT origin, trust, answer, source_passage_ids FROM experiences WHERE id = :i", i=stored
    )
    assert (row["origin"], row["trust"], row["answer"]) == ("person", "verified", a.answer)
    assert row["source_passage_ids"] == [p.id for p in a.passages]
    n = len(server.requests)
    assert ask(rag, tenant_id, corpus, REPEAT).reused_from == stored and len(server.requests) == n


def test_right_stores_nothing_once_a_cited_passage_changed(
    db: Database,
    clean: tuple[int, CorpusInfo],  # noqa: F811
    make_rag: Callable[..., LivingRAG],  # noqa: F811
) -> None:
    tenant_id, corpus = clean
    rag = make_rag(gates={"answer_form": False}, store_verifier=CountingVerifier(score=0.0, name="never"))
    a = ask(rag, tenant_id, corpus, Q1)
    with db.tenant_session(tenant_id) as s:  # the cited text changes behind the candidate's back
        s.execute(text("UPDATE passages SET text = text || ' (revised)' WHERE id = :p"), {"p": a.passages[0].id})
    try:
        out = trust(rag).feedback(tenant_id, a.query_log_id, "right", actor=ALICE)
        assert out.stored_experience_id is None and any("changed" in m for m in out.messages)
        assert rows(db, tenant_id, "SELECT id FROM experiences WHERE corpus_id = :c", c=corpus.id) == []
    finally:
        with db.tenant_session(tenant_id) as s:
            s.execute(
                text("UPDATE passages SET text = replace(text, ' (revised)', '') WHERE id = :p"),
                {"p": a.passages[0].id},
            )


def test_no_verdict_while_the_write_back_is_pending(
    db: Database,
    clean: tuple[int, CorpusInfo],  # noqa: F811
    rag: LivingRAG,
) -> None:
    tenant_id, corpus = clean
    a = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id, defer_writeback=True)  # nothing decided yet
    assert a.query_log_id is not None
    with pytest.raises(Conflict, match="still pending"):
        trust(rag).feedback(tenant_id, a.query_log_id, "right", actor=ALICE)
    assert rows(db, tenant_id, "SELECT id FROM answer_feedback WHERE query_log_id = :q", q=a.query_log_id) == []
    rag.submit_writeback(a)
    assert rag.flush(timeout=120)
    assert trust(rag).feedback(tenant_id, a.query_log_id, "right", actor=ALICE).verified_ids


@pytest.mark.parametrize(
    ("verdict", "kw", "error", "match"),
    [
        ("maybe", {}, InvalidInput, "verdict must be 'right' or 'wrong'"),
        ("right", {"answer": "Somewhere Else"}, InvalidInput, "goes with verdict 'wrong'"),
        ("wrong", {"answer": "x" * 2001}, InvalidInput, "at most 2000"),
        ("wrong", {"answer": "?!"}, InvalidInput, "no letters or digits"),
        ("wrong", {"note": 5}, InvalidInput, "note must be text"),
    ],
)
def test_bad_verdicts_are_refused_and_change_nothing(
    db: Database,
    clean: tuple[int, CorpusInfo],  # noqa: F811
    rag: LivingRAG,
    verdict: str,
    kw: dict[str, Any],
    error: type[Exception],
    match: str,
) -> None:
    tenant_id, corpus = clean
    a = ask(rag, tenant_id, corpus, Q1)
    before = rows(db, tenant_id, "SELECT id, trust FROM experiences WHERE corpus_id = :c ORDER BY id", c=corpus.id)
    with pytest.raises(error, match=match):
        trust(rag).feedback(tenant_id, a.query_log_id, verdict, actor=ALICE, **kw)
    assert (
        rows(db, tenant_id, "SELECT id, trust FROM experiences WHERE corpus_id = :c ORDER BY id", c=corpus.id) == before
    )
    assert rows(db, tenant_id, "SELECT id FROM answer_feedback WHERE query_log_id = :q", q=a.query_log_id) == []
    assert rows(db, tenant_id, "SELECT * FROM rejected_answers WHERE corpus_id = :c", c=corpus.id) == []


def test_another_tenants_question_and_experience_are_not_found(
    db: Database,
    clean: tuple[int, CorpusInfo],  # noqa: F811
    rag: LivingRAG,
    make_tenant: Callable[..., tuple[int, str]],
) -> None:
    tenant_id, corpus = clean
    a = ask(rag, tenant_id, corpus, Q1)
    exp_id = a.writeback.result().experience_id
    stranger, _ = make_tenant("stranger")
    svc = trust(rag)
    with pytest.raises(NotFound):
        svc.feedback(stranger, a.query_log_id, "wrong", actor=ALICE)
    for call in (svc.verify, svc.retract):
        with pytest.raises(NotFound):
            call(stranger, exp_id, actor=ALICE)
    with pytest.raises(NotFound):
        svc.history(stranger, exp_id)
    (row,) = rows(db, tenant_id, "SELECT trust FROM experiences WHERE id = :i", i=exp_id)
    assert row["trust"] == "unverified"


def test_verify_retract_and_the_reuse_policy(
    db: Database,
    server: OpenAICompatServer,  # noqa: F811
    clean: tuple[int, CorpusInfo],  # noqa: F811
    make_rag: Callable[..., LivingRAG],  # noqa: F811
) -> None:
    tenant_id, corpus = clean
    rag = make_rag(gates={"answer_form": False})
    exp_id = ask(rag, tenant_id, corpus, Q1).writeback.result().experience_id
    # reuse_answers_from=gated is the old behaviour: a gated, unverified experience is served ...
    gated = make_rag(gates={"answer_form": False}, experience={"reuse_answers_from": "gated"})
    assert ask(gated, tenant_id, corpus, REPEAT).reused_from == exp_id
    svc = trust(rag)
    change = svc.retract(tenant_id, exp_id, actor=Actor.operator(), reason="outdated")
    assert (change.previous, change.trust, change.changed) == ("unverified", "retracted", True)
    # ... but never once retracted, under either policy
    for r in (rag, gated):
        n = len(server.requests)
        assert ask(r, tenant_id, corpus, REPEAT).reused_from is None and len(server.requests) == n + 1
    # retracted experiences are inactive: the list filter, the health view and matching agree
    with db.tenant_session(tenant_id) as s:
        listed = experience_repo.list_experiences(s, corpus_id=corpus.id, status="retracted")
        assert [r.id for r in listed] == [exp_id] and listed[0].trust_reason == "outdated"
        health = s.execute(
            text("SELECT active, retracted FROM experience_health WHERE corpus_id = :c"), {"c": corpus.id}
        ).one()
    assert health.retracted == 1
    assert svc.retract(tenant_id, exp_id, actor=Actor.operator()).changed is False
    assert svc.verify(tenant_id, exp_id, actor=Actor.operator()).previous == "retracted"
    assert ask(rag, tenant_id, corpus, REPEAT).reused_from == exp_id


def test_scaffolds_and_fusion_follow_their_trust_settings(
    clean: tuple[int, CorpusInfo],  # noqa: F811
    make_rag: Callable[..., LivingRAG],  # noqa: F811
) -> None:
    tenant_id, corpus = clean
    rag = make_rag(gates={"answer_form": False})
    exp_id = ask(rag, tenant_id, corpus, Q1).writeback.result().experience_id
    strict = make_rag(
        gates={"answer_form": False},
        experience={"scaffolds_from": "verified", "fusion_from": "verified", "findings_floor": 0.0},
    )
    a = strict.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    assert exp_id not in a.fused_ids and a.scaffold is None and not a.findings
    assert strict.flush(timeout=120)
    trust(rag).verify(tenant_id, exp_id, actor=ALICE)
    b = strict.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    assert exp_id in {f.experience_id for f in b.findings} or b.scaffold is not None or exp_id in b.fused_ids


def test_a_write_back_never_decided_does_not_block_verdicts_for_ever(
    db: Database,
    clean: tuple[int, CorpusInfo],  # noqa: F811
    rag: LivingRAG,
) -> None:
    """A question whose process ended before its write-back was decided: past api.recovery_grace_s
    the verdict is taken (retracting and remembering work; nothing can be stored)."""
    from datetime import UTC, datetime, timedelta

    tenant_id, corpus = clean
    a = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id, defer_writeback=True)  # never submitted
    assert a.query_log_id is not None
    later = datetime.now(UTC) + timedelta(seconds=rag.settings.api.recovery_grace_s + 1)
    svc = TrustService(db, rag.settings, rag.store, clock=lambda: later)
    out = svc.feedback(tenant_id, a.query_log_id, "right", actor=ALICE)
    assert out.stored_experience_id is None and any("never decided" in m for m in out.messages)
    assert svc.feedback(tenant_id, a.query_log_id, "wrong", actor=ALICE).remembered_wrong


def test_a_write_back_decided_while_the_verdict_is_taken_is_read_again(
    db: Database,
    clean: tuple[int, CorpusInfo],  # noqa: F811
    rag: LivingRAG,
) -> None:
    """The verdict reads the question's write-back outside the corpus lock (it then embeds the
    question, unlocked); a write-back decided in that moment (here a late one, past the grace) must
    not be judged as "none": the verdict reads it again under the lock and verifies what it stored."""
    from datetime import UTC, datetime, timedelta

    tenant_id, corpus = clean
    a = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id, defer_writeback=True)
    assert a.query_log_id is not None
    later = datetime.now(UTC) + timedelta(seconds=rag.settings.api.recovery_grace_s + 1)
    svc = TrustService(db, rag.settings, rag.store, clock=lambda: later)
    unlocked = svc._material
    calls: list[Any] = []

    def material_then_decided(*args: Any, **kw: Any) -> Any:
        out = unlocked(*args, **kw)
        if not calls:  # the write-back is decided right after the verdict read "none"
            future = rag.submit_writeback(a)
            assert future is not None and rag.flush(timeout=120)
            calls.append(future.result().experience_id)
        else:
            calls.append(None)
        return out

    svc._material = material_then_decided  # type: ignore[method-assign]
    out = svc.feedback(tenant_id, a.query_log_id, "right", actor=ALICE)
    stored = calls[0]
    assert stored is not None and len(calls) == 2
    assert list(out.verified_ids) == [stored] and out.stored_experience_id is None
    (row,) = rows(db, tenant_id, "SELECT trust FROM experiences WHERE id = :i", i=stored)
    assert row == {"trust": "verified"}
    assert len(rows(db, tenant_id, "SELECT id FROM experiences WHERE corpus_id = :c", c=corpus.id)) == 1
