"""Answer reuse in the answer pipeline: a repeated question answered from its experience without the
LLM, and never from a changed passage, an ungated experience or with reuse off. The fixtures
(PostgreSQL, the indexed test corpus, the loopback LLM) are tests/pipeline/test_pipeline.py's."""

# ruff: noqa: F811  (the fixtures imported from tests/pipeline/test_pipeline.py are parameters here)
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from livingrag.corpus import hooks
from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as experience_repo
from livingrag.experience.feedback import TrustService
from livingrag.experience.trust import Actor
from livingrag.pipeline.answer_pipeline import LivingRAG
from livingrag.testing.openai_server import OpenAICompatServer
from livingrag.types import CorpusInfo
from tests.pipeline.test_pipeline import Q1, Q2, clean, indexed, make_rag, rows, server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.db, pytest.mark.slow]


REPEAT = "  where was the DIRECTOR of Silver Harbor born  "  # Q1 in other case, spacing and punctuation


@pytest.fixture
def stored(
    clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> Iterator[tuple[LivingRAG, int, CorpusInfo, int, str]]:
    tenant_id, corpus = clean
    rag = make_rag()
    first = rag.answer(Q1, tenant=tenant_id, corpus=corpus.name)
    assert first.writeback is not None
    wb = first.writeback.result(timeout=120)
    assert wb.decision == "stored" and wb.experience_id is not None
    yield rag, tenant_id, corpus, wb.experience_id, first.answer


def test_a_repeated_question_is_answered_from_its_experience_without_the_llm(
    db: Database, server: OpenAICompatServer, stored: tuple[LivingRAG, int, CorpusInfo, int, str]
) -> None:
    rag, tenant_id, corpus, exp_id, first_answer = stored
    n_req = len(server.requests)
    # stored by the gates but verified by nobody: not served from memory (experience.reuse_answers_from)
    assert rag.answer(REPEAT, tenant=tenant_id, corpus=corpus.name).reused_from is None
    assert len(server.requests) == n_req + 1
    TrustService(db, rag.settings, rag.store).verify(tenant_id, exp_id, actor=Actor.operator())
    n_req = len(server.requests)
    a = rag.answer(REPEAT, tenant=tenant_id, corpus=corpus.name)
    assert len(server.requests) == n_req  # no LLM call
    assert a.reused_from == exp_id and a.answer == first_answer
    assert (a.prompt_tokens, a.completion_tokens, a.cost_usd) == (0, 0, 0.0)
    assert a.completion.usage_source == "reuse" and a.writeback is None and a.passages
    assert f"experience {exp_id}" in a.explanation
    (row,) = rows(db, tenant_id, "SELECT * FROM query_log WHERE id = :i", i=a.query_log_id)
    assert row["reused_experience_id"] == exp_id and row["answer"] == first_answer and row["completion_tokens"] == 0
    # a question with other words, and the linear mode, still ask the LLM
    b = rag.answer(Q2, tenant=tenant_id, corpus=corpus.name)
    assert b.reused_from is None and len(server.requests) == n_req + 1
    c = rag.answer(REPEAT, tenant=tenant_id, corpus=corpus.name, mode="linear")
    assert c.reused_from is None and len(server.requests) == n_req + 2
    (row,) = rows(db, tenant_id, "SELECT * FROM query_log WHERE id = :i", i=c.query_log_id)
    assert row["reused_experience_id"] is None


def test_no_reuse_once_a_cited_passage_changed(
    db: Database, server: OpenAICompatServer, stored: tuple[LivingRAG, int, CorpusInfo, int, str]
) -> None:
    rag, tenant_id, corpus, exp_id, _ = stored
    (exp,) = rows(db, tenant_id, "SELECT source_passage_ids FROM experiences WHERE id = :i", i=exp_id)
    with db.tenant_session(tenant_id) as s:
        hooks.mark_stale_on_passage_change(s, corpus.id, [exp["source_passage_ids"][0]], "updated")
    n_req = len(server.requests)
    a = rag.answer(REPEAT, tenant=tenant_id, corpus=corpus.name)
    assert a.reused_from is None and len(server.requests) == n_req + 1


def test_no_reuse_of_an_ungated_experience(
    server: OpenAICompatServer,
    clean: tuple[int, CorpusInfo],
    make_rag: Callable[..., LivingRAG],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tenant_id, corpus = clean
    rag = make_rag()
    first = rag.answer(Q1, tenant=tenant_id, corpus=corpus.name, ablations=["gate"])  # stored without the gates
    assert first.writeback is not None
    wb = first.writeback.result(timeout=120)
    assert wb.decision == "stored" and wb.experience_id is not None
    n_req = len(server.requests)
    looked_up: list[list[int]] = []
    real = experience_repo.reusable_experiences

    def spy(session: Any, ids: Any, **kw: Any) -> Any:
        looked_up.append(list(ids))
        return real(session, ids, **kw)

    monkeypatch.setattr(experience_repo, "reusable_experiences", spy)
    for policy in ("verified", "gated"):
        rag = make_rag(experience={"reuse_answers_from": policy})
        assert rag.answer(REPEAT, tenant=tenant_id, corpus=corpus.name, ablations=["gate"]).reused_from is None
    assert len(server.requests) == n_req + 2
    assert looked_up == []  # not even looked up: neither verified nor gated, as the match says
    # once a person verifies it, it is served from memory
    TrustService(rag.db, rag.settings, rag.store).verify(tenant_id, wb.experience_id, actor=Actor.operator())
    assert rag.answer(REPEAT, tenant=tenant_id, corpus=corpus.name).reused_from == wb.experience_id
    assert looked_up == [[wb.experience_id]] and len(server.requests) == n_req + 2


def test_no_reuse_when_switched_off(
    server: OpenAICompatServer,
    stored: tuple[LivingRAG, int, CorpusInfo, int, str],
    make_rag: Callable[..., LivingRAG],
) -> None:
    _, tenant_id, corpus, _, _ = stored
    n_req = len(server.requests)
    off = make_rag(experience={"answer_reuse": False})
    assert off.answer(REPEAT, tenant=tenant_id, corpus=corpus.name).reused_from is None
    assert len(server.requests) == n_req + 1
