"""The answer pipeline end to end: real PostgreSQL, the small test corpus indexed with the real packaged
models, and a real OpenAI-compatible HTTP server on loopback as the LLM (through the ``openai``
provider). The server answers a QA prompt from its first passage (``qa_reply``), so answers, token
counts and prompts are deterministic and can be compared across modes and ablations."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from sqlalchemy import text

from livingrag.config import Settings, get_settings
from livingrag.corpus import service
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.errors import ConfigError, InvalidInput, LivingRAGError, LLMError, NotFound
from livingrag.experience.grounding import Claim
from livingrag.experience.scaffold_policy import scaffolds_masked, scaffolds_shown
from livingrag.experience.store import ExperienceStore
from livingrag.experience.types import ClaimVerdict, UsedPassage
from livingrag.experience.verifiers import Verifier
from livingrag.pipeline.answer_pipeline import Answer, LivingRAG
from livingrag.testing.openai_server import OpenAICompatServer, Step, qa_reply, words
from livingrag.types import CorpusInfo
from tests.corpus_support import CORPUS

pytestmark = [pytest.mark.db, pytest.mark.slow]

Q1 = "Where was the director of Silver Harbor born?"
Q2 = "In which town was the director of Silver Harbor born?"
SCAFFOLD_MARK = "Reference (a related question answered earlier"
PRICE_IN, PRICE_OUT = 2.0, 10.0


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer(responder=qa_reply) as srv:
        yield srv


@pytest.fixture(scope="module")
def indexed(db: Database) -> Iterator[tuple[int, CorpusInfo]]:
    settings = get_settings()
    tenant_id, _ = service.ensure_tenant(db, f"pipe-{uuid.uuid4().hex[:8]}")
    corpus = service.create_corpus(db, tenant_id, "small", settings)
    docs = [Document(d["title"], d["text"], source=f"test {i}") for i, d in enumerate(CORPUS)]
    assert service.indexer(db, tenant_id, corpus, settings).index_documents(docs).indexed == len(CORPUS)
    yield tenant_id, service.get_corpus(db, tenant_id, corpus.id)


def make_settings(base_url: str, verifier: str = "none", **groups: dict[str, Any]) -> Settings:
    llm = {
        "provider": "openai",
        "base_url": base_url,
        "model": "loopback-qa",
        "max_retries": 0,
        "timeout_s": 10.0,
        "price_prompt_per_m": PRICE_IN,
        "price_completion_per_m": PRICE_OUT,
    } | groups.pop("llm", {})
    gates = {"verifier": verifier} | groups.pop("gates", {})
    return get_settings(llm=llm, gates=gates, **groups)


@pytest.fixture
def clean(db: Database, indexed: tuple[int, CorpusInfo]) -> tuple[int, CorpusInfo]:
    """The indexed corpus with no experiences, write-back decisions or query log rows."""
    tenant_id, corpus = indexed
    with db.tenant_session(tenant_id) as s:
        for table in ("writeback_log", "query_log", "experiences", "answer_feedback", "rejected_answers"):
            s.execute(text(f"DELETE FROM {table} WHERE corpus_id = :c"), {"c": corpus.id})
    return tenant_id, corpus


@pytest.fixture
def make_rag(db: Database, server: OpenAICompatServer) -> Iterator[Callable[..., LivingRAG]]:
    made: list[LivingRAG] = []

    def make(verifier: str = "none", *, store_verifier: Verifier | None = None, **groups: Any) -> LivingRAG:
        settings = make_settings(server.base_url, verifier, **groups)
        store = ExperienceStore(db, settings, verifier=store_verifier) if store_verifier is not None else None
        rag = LivingRAG(settings, db=db, store=store)
        made.append(rag)
        return rag

    yield make
    for rag in made:
        rag.close(timeout=60)


def rows(db: Database, tenant_id: int, sql: str, **params: Any) -> list[dict[str, Any]]:
    with db.tenant_session(tenant_id) as s:
        return [dict(r) for r in s.execute(text(sql), params).mappings().all()]


def counts(db: Database, tenant_id: int) -> dict[str, int]:
    out = {}
    for table in ("query_log", "writeback_log", "experiences"):
        out[table] = rows(db, tenant_id, f"SELECT count(*) AS n FROM {table}")[0]["n"]
    return out


def user_prompt(server: OpenAICompatServer) -> str:
    return server.requests[-1]["body"]["messages"][-1]["content"]


def without_scaffold(prompt: str) -> str:
    """The prompt with its scaffold block cut out (the block ends before "Question:")."""
    if SCAFFOLD_MARK not in prompt:
        return prompt
    head, rest = prompt.split(SCAFFOLD_MARK, 1)
    return head + "Question:" + rest.split("\nQuestion:", 1)[1]


def store_first(rag: LivingRAG, tenant_id: int, corpus: CorpusInfo, question: str = Q1) -> int:
    a = rag.answer(question, tenant=tenant_id, corpus=corpus.id)
    assert a.writeback is not None
    wb = a.writeback.result(timeout=120)
    assert wb.decision == "stored", wb
    assert wb.experience_id is not None
    return wb.experience_id


def keep_only(db: Database, tenant_id: int, corpus: CorpusInfo, keep: Sequence[int]) -> None:
    with db.tenant_session(tenant_id) as s:
        s.execute(
            text("DELETE FROM experiences WHERE corpus_id = :c AND NOT (id = ANY(:k))"),
            {"c": corpus.id, "k": list(keep)},
        )


class GatedVerifier(Verifier):
    """A real verifier that supports every claim, but only once the test releases it (or after
    ``delay_s``): it stands for a slow NLI model."""

    name = "gated"

    def __init__(self, delay_s: float = 60.0) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.delay_s = delay_s
        self.calls = 0

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        self.calls += 1
        self.started.set()
        self.release.wait(self.delay_s)
        return [ClaimVerdict(claim=c.text, source=c.source, score=1.0) for c in claims]


class FailingVerifier(Verifier):
    name = "failing"

    def __init__(self, exc: Callable[[], BaseException]) -> None:
        self.exc = exc

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        raise self.exc()


# ---------------------------------------------------------------- end to end


def test_living_answer_end_to_end(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    rag = make_rag()
    n_req = len(server.requests)
    a = rag.answer(Q1, tenant=tenant_id, corpus=corpus.name)
    assert len(server.requests) == n_req + 1
    body = server.requests[-1]["body"]
    assert body["model"] == "loopback-qa"
    reply = qa_reply(body["messages"])

    assert isinstance(a, Answer)
    assert a.system == "living"
    assert a.passages and a.answer == a.passages[0].title  # qa_reply answers with the first passage's title
    assert a.explanation and a.explanation in a.passages[0].text
    assert {"Silver Harbor", "Marta Quell"} <= {p.title for p in a.passages}
    # token counts are the server's usage (words), cost at the configured prices
    assert a.prompt_tokens == sum(words(m["content"]) for m in body["messages"])
    assert a.completion_tokens == words(reply)
    assert a.completion.usage_source == "server"
    assert a.cost_usd == pytest.approx((a.prompt_tokens * PRICE_IN + a.completion_tokens * PRICE_OUT) / 1e6)
    # an empty store: matched nothing, fused nothing, no scaffold
    assert a.match is not None and a.match.candidates == 0
    assert a.fused == () and a.scaffold is None
    assert SCAFFOLD_MARK not in user_prompt(server)
    assert a.retrieval.start_activation == a.retrieval.encoding.base_activation
    for key in ("setup", "encode", "match", "retrieve", "prompt", "llm", "log", "total", "overhead"):
        assert a.latency_ms[key] >= 0, key
    # setup (name resolution; a corpus's first query loads its models) is not per-query overhead
    lat = a.latency_ms
    assert lat["overhead"] == pytest.approx(lat["total"] - lat["llm"] - lat["setup"])
    assert a.latency_ms["llm"] > 0

    (row,) = rows(db, tenant_id, "SELECT * FROM query_log WHERE id = :i", i=a.query_log_id)
    assert row["corpus_id"] == corpus.id and row["query"] == Q1 and row["mode"] == "living"
    assert row["answer"] == a.answer and row["model"] == "loopback-qa" and row["error"] is None
    assert (row["prompt_tokens"], row["completion_tokens"]) == (a.prompt_tokens, a.completion_tokens)
    assert row["cost_usd"] == pytest.approx(a.cost_usd)
    assert list(row["passage_ids"]) == [p.id for p in a.passages]
    assert list(row["fused_experience_ids"]) == [] and row["scaffold_experience_id"] is None
    for key in ("encode", "match", "retrieve", "prompt", "llm"):
        assert row["latencies"][key] == pytest.approx(a.latency_ms[key], abs=1e-3), key
    # the row holds the times up to its own insert; the answer's total and overhead include it
    assert row["latencies"]["total"] + a.latency_ms["log"] <= a.latency_ms["total"] + 1e-3
    assert a.latency_ms["total"] >= sum(
        a.latency_ms[k] for k in ("encode", "match", "retrieve", "prompt", "llm", "log")
    )

    assert a.writeback is not None
    wb = a.writeback.result(timeout=120)
    assert wb.decision == "stored" and wb.verifier == "none" and wb.grounding == 1.0
    (exp,) = rows(db, tenant_id, "SELECT * FROM experiences WHERE id = :i", i=wb.experience_id)
    assert exp["query"] == Q1 and exp["answer"] == a.answer
    assert list(exp["source_passage_ids"]) == [p.id for p in a.passages]
    assert exp["corpus_version"] == a.retrieval.encoding.graph_version == corpus.version
    (wlog,) = rows(db, tenant_id, "SELECT * FROM writeback_log WHERE corpus_id = :c", c=corpus.id)
    assert wlog["query_log_id"] == a.query_log_id and wlog["experience_id"] == wb.experience_id


def test_linear_answer_reads_and_writes_no_experience(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    rag = make_rag()
    e1 = store_first(rag, tenant_id, corpus)  # an experience a living query would use
    before = counts(db, tenant_id)
    a = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id, mode="linear")
    rag.flush(timeout=60)
    assert a.system == "linear" and a.match is None and a.writeback is None
    assert a.fused == () and a.scaffold is None
    assert a.retrieval.start_activation == a.retrieval.encoding.base_activation
    assert SCAFFOLD_MARK not in user_prompt(server)
    assert "match" not in a.latency_ms
    assert a.answer == a.passages[0].title and a.prompt_tokens > 0 and a.cost_usd > 0
    after = counts(db, tenant_id)
    assert after == before | {"query_log": before["query_log"] + 1}  # logged; nothing read back or written
    (row,) = rows(db, tenant_id, "SELECT * FROM query_log WHERE id = :i", i=a.query_log_id)
    assert row["mode"] == "linear" and list(row["fused_experience_ids"]) == [] and row["scaffold_experience_id"] is None
    rag.uses.flush()  # use counts are written in batches (experience.use_flush_s)
    (exp,) = rows(db, tenant_id, "SELECT fusion_uses, scaffold_uses FROM experiences WHERE id = :i", i=e1)
    assert (exp["fusion_uses"], exp["scaffold_uses"]) == (0, 0)


def test_related_question_reuses_the_first_answers_experience(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    rag = make_rag(experience={"findings_k": 0})  # the eq. 12-13 scaffold alone (findings: below)
    e1 = store_first(rag, tenant_id, corpus)
    a = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    assert a.match is not None and a.match.candidates >= 1
    assert e1 in a.fused_ids and a.match.fusion_applied
    assert a.scaffold_id == e1
    assert a.retrieval.start_activation == a.match.start_activation != a.retrieval.encoding.base_activation
    prompt = user_prompt(server)
    assert SCAFFOLD_MARK in prompt and f"Earlier question: {Q1}" in prompt
    (row,) = rows(db, tenant_id, "SELECT * FROM query_log WHERE id = :i", i=a.query_log_id)
    assert list(row["fused_experience_ids"]) == list(a.fused_ids) and row["scaffold_experience_id"] == e1
    rag.uses.flush()  # use counts are written in batches (experience.use_flush_s)
    (exp,) = rows(db, tenant_id, "SELECT fusion_uses, scaffold_uses, last_used_at FROM experiences WHERE id = :i", i=e1)
    assert exp["fusion_uses"] == 1 and exp["scaffold_uses"] == 1 and exp["last_used_at"] is not None
    assert a.writeback is not None and a.writeback.result(timeout=120).decision in ("stored", "rejected_novelty")


def test_a_masked_scaffold_shows_the_reasoning_pattern_without_names(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    rag = make_rag(experience={"scaffold_entities": "mask", "findings_k": 0})
    assert rag.mask_scaffolds
    e1 = store_first(rag, tenant_id, corpus)
    a = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    assert a.scaffold_id == e1
    block = user_prompt(server).split(SCAFFOLD_MARK, 1)[1].split("Question:", 1)[0]
    assert "Earlier question: Where was the director of [ENT] born?" in block
    assert "Silver Harbor" not in block and a.scaffold is not None
    # the stored summary itself is untouched: masking is how the prompt shows it
    (exp,) = rows(db, tenant_id, "SELECT summary FROM experiences WHERE id = :i", i=e1)
    assert "Silver Harbor" in exp["summary"]


def test_an_earlier_answer_is_stated_as_a_finding_with_its_names(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    """The matched experience over the findings floor is stated as a fact (question, answer, evidence)
    with its names, even where scaffolds are masked, and not again as the masked scaffold; with
    findings_k = 0 the same experience is the masked scaffold again."""
    tenant_id, corpus = clean
    rag = make_rag(experience={"scaffold_entities": "mask", "findings_floor": 0.0})
    e1 = store_first(rag, tenant_id, corpus)
    (exp,) = rows(db, tenant_id, "SELECT answer FROM experiences WHERE id = :i", i=e1)
    a = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    assert a.match is not None and a.match.scaffold_id == e1  # eq. 13 picked it ...
    assert a.scaffold is None and [f.experience_id for f in a.findings] == [e1]  # ... it is shown as a finding
    prompt = user_prompt(server)
    assert SCAFFOLD_MARK not in prompt
    block = prompt.split("Facts found earlier", 1)[1].split("Question:", 1)[0]
    assert f"- {Q1} {exp['answer'].rstrip('.')}." in block and "Silver Harbor" in block
    off = make_rag(experience={"scaffold_entities": "mask", "findings_k": 0})
    b = off.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    assert b.findings == () and b.scaffold_id == e1
    prompt = user_prompt(server)
    assert "Facts found earlier" not in prompt and SCAFFOLD_MARK in prompt
    # findings go with the scaffold: the scaffold ablation removes both
    c = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id, ablations=("scaffold",))
    assert c.findings == () and c.scaffold is None and "Facts found earlier" not in user_prompt(server)
    # a finding counts as a scaffold use (its summary went to the prompt)
    rag.uses.flush()  # use counts are written in batches (experience.use_flush_s)
    off.uses.flush()
    (use,) = rows(db, tenant_id, "SELECT scaffold_uses FROM experiences WHERE id = :i", i=e1)
    assert use["scaffold_uses"] == 2  # the finding (a) and the scaffold (b)


def test_with_the_scaffold_off_the_prompt_states_findings_but_no_scaffold(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    """experience.scaffold=off: eq. 13 picks nothing, so no scaffold block and no scaffold use is
    logged; an experience over the findings floor is still stated as a finding."""
    tenant_id, corpus = clean
    off = make_rag(experience={"scaffold": "off", "findings_k": 0})
    e1 = store_first(off, tenant_id, corpus)
    a = off.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    assert a.match is not None and e1 in [m.id for m in a.match.top]  # matched ...
    assert a.match.scaffold_id is None and a.scaffold is None  # ... but not shown
    assert SCAFFOLD_MARK not in user_prompt(server)
    (row,) = rows(db, tenant_id, "SELECT scaffold_experience_id FROM query_log WHERE id = :i", i=a.query_log_id)
    assert row["scaffold_experience_id"] is None
    stated = make_rag(experience={"scaffold": "off", "findings_floor": 0.0})
    b = stated.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    assert [f.experience_id for f in b.findings] == [e1] and b.scaffold is None
    prompt = user_prompt(server)
    assert "Facts found earlier" in prompt and SCAFFOLD_MARK not in prompt


def test_scaffold_auto_is_off_for_the_local_model_only(server: OpenAICompatServer) -> None:
    assert scaffolds_shown(make_settings(server.base_url))  # openai: eq. 13-14 as written
    assert not scaffolds_shown(get_settings(llm={"provider": "local"}))
    assert scaffolds_shown(get_settings(llm={"provider": "local"}, experience={"scaffold": "on"}))
    assert not scaffolds_shown(make_settings(server.base_url, experience={"scaffold": "off"}))
    assert scaffolds_shown(get_settings(llm={"provider": "local"}, experience={"profile": "paper"}))


def test_an_answer_copied_from_the_masked_scaffold_is_asked_again_without_it(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    """A model that answers a placeholder of the masked pattern ("[ENT]") is asked once more without
    the scaffold; the answer is the second one, both calls' tokens are counted, no scaffold is used."""
    from livingrag.testing.openai_server import qa_reply, words

    tenant_id, corpus = clean
    rag = make_rag(experience={"scaffold_entities": "mask", "findings_k": 0})
    e1 = store_first(rag, tenant_id, corpus)

    copied = "Thought: the reference says so.\nAnswer: [ENT]"

    def copies_placeholders(messages: list[dict[str, Any]]) -> str:
        if SCAFFOLD_MARK in messages[-1]["content"]:
            return copied
        return qa_reply(messages)

    n_req = len(server.requests)
    server.responder = copies_placeholders
    try:
        a = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    finally:
        server.responder = qa_reply
    assert len(server.requests) == n_req + 2
    first, second = (r["body"]["messages"][-1]["content"] for r in server.requests[-2:])
    assert SCAFFOLD_MARK in first and SCAFFOLD_MARK not in second
    assert a.answer and "[ENT]" not in a.answer and a.scaffold is None
    again = qa_reply(server.requests[-1]["body"]["messages"])
    assert a.completion.attempts == 2 and a.completion_tokens == words(copied) + words(again)
    (row,) = rows(db, tenant_id, "SELECT scaffold_experience_id, answer FROM query_log WHERE id = :i", i=a.query_log_id)
    assert row["scaffold_experience_id"] is None and row["answer"] == a.answer
    rag.uses.flush()  # use counts are written in batches (experience.use_flush_s)
    (exp,) = rows(db, tenant_id, "SELECT scaffold_uses FROM experiences WHERE id = :i", i=e1)
    assert exp["scaffold_uses"] == 0


def test_scaffold_entities_auto_masks_for_the_local_model_only(server: OpenAICompatServer) -> None:
    assert not scaffolds_masked(make_settings(server.base_url))  # openai: eq. 6 as written
    assert scaffolds_masked(get_settings(llm={"provider": "local"}))
    assert scaffolds_masked(make_settings(server.base_url, experience={"scaffold_entities": "mask"}))
    assert not scaffolds_masked(get_settings(llm={"provider": "local"}, experience={"scaffold_entities": "keep"}))


# ---------------------------------------------------------------- write-back off the answer path


def test_answer_returns_before_a_slow_verifier_finishes(
    db: Database, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    slow = GatedVerifier(delay_s=60.0)
    rag = make_rag("offline", store_verifier=slow)
    t0 = time.perf_counter()
    a = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id)
    answered_s = time.perf_counter() - t0
    assert a.answer and a.writeback is not None
    assert slow.started.wait(30), "the verifier never ran"
    assert not a.writeback.done()  # the answer is back while the verifier is still working
    assert answered_s < slow.delay_s
    assert rag.pending_writebacks == 1
    assert rows(db, tenant_id, "SELECT count(*) AS n FROM experiences WHERE corpus_id = :c", c=corpus.id)[0]["n"] == 0
    # a second question is answered while the first write-back still waits
    b = rag.answer("Who founded the Aurora Quartet?", tenant=tenant_id, corpus=corpus.id)
    assert b.answer and b.writeback is not None and not b.writeback.done()
    slow.release.set()
    assert rag.flush(timeout=120)
    assert a.writeback.result().decision == "stored" and a.writeback.result().verifier == "gated"
    assert b.writeback.result().decision == "stored"
    assert slow.calls == 2


@pytest.mark.parametrize("failure", ["verifier", "database"])
def test_failing_writeback_never_breaks_answering(
    db: Database, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG], failure: str
) -> None:
    tenant_id, corpus = clean

    def db_error() -> BaseException:
        try:
            with db.owner_session() as s:
                s.execute(text("SELECT 1 / 0"))
        except Exception as exc:  # a real error from the server
            return exc
        raise AssertionError("division by zero did not fail")

    boom = (lambda: RuntimeError("verifier exploded")) if failure == "verifier" else db_error
    rag = make_rag("offline", store_verifier=FailingVerifier(boom))
    a = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id)
    assert a.answer and a.query_log_id is not None and a.writeback is not None
    wb = a.writeback.result(timeout=120)
    assert wb.decision == "error" and wb.experience_id is None
    assert ("verifier exploded" if failure == "verifier" else "division by zero") in (wb.reason or "")
    (wlog,) = rows(db, tenant_id, "SELECT * FROM writeback_log WHERE corpus_id = :c", c=corpus.id)
    assert wlog["decision"] == "error" and wlog["query_log_id"] == a.query_log_id
    assert wlog["reason"] == wb.reason
    # the pipeline keeps answering (and queueing write-backs)
    b = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id)
    assert b.answer and b.writeback is not None and b.writeback.result(timeout=120).decision == "error"
    assert rows(db, tenant_id, "SELECT count(*) AS n FROM experiences WHERE corpus_id = :c", c=corpus.id)[0]["n"] == 0


def test_writeback_that_raises_is_logged_as_an_error_decision(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo]
) -> None:
    """A verifier that cannot even be built (gates.verifier=llm without an LLM given to the store)
    fails the whole write-back; answering goes on and the failure is recorded."""
    tenant_id, corpus = clean
    settings = make_settings(server.base_url, "llm")
    rag = LivingRAG(settings, db=db, store=ExperienceStore(db, settings))
    try:
        a = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id)
        assert a.answer and a.writeback is not None
        with pytest.raises(ConfigError, match="needs a configured LLM"):
            a.writeback.result(timeout=120)
        b = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id)
        assert b.answer
        rag.flush(timeout=60)
    finally:
        rag.close(timeout=60)
    logged = rows(db, tenant_id, "SELECT * FROM writeback_log WHERE corpus_id = :c ORDER BY id", c=corpus.id)
    assert [r["decision"] for r in logged] == ["error", "error"]
    assert [r["query_log_id"] for r in logged] == [a.query_log_id, b.query_log_id]
    assert "needs a configured LLM" in logged[0]["reason"]


def test_llm_failure_raises_and_is_logged(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    rag = make_rag()
    server.script.append(Step(status=400, error_message="bad request from the test"))
    with pytest.raises(LLMError, match="bad request from the test"):
        rag.answer(Q1, tenant=tenant_id, corpus=corpus.id)
    rag.flush(timeout=30)
    (row,) = rows(db, tenant_id, "SELECT * FROM query_log WHERE corpus_id = :c", c=corpus.id)
    assert row["answer"] is None and "bad request from the test" in row["error"]
    assert row["prompt_tokens"] == 0 and "llm" in row["latencies"]
    assert counts(db, tenant_id)["writeback_log"] == 0  # no answer, no candidate


def test_flush_and_close_drain_the_queue(
    db: Database, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    slow = GatedVerifier(delay_s=0.3)  # never released: each write-back takes 0.3 s
    rag = make_rag("offline", store_verifier=slow)
    questions = [Q1, "Who founded the Aurora Quartet?", "In which town was the author of The Glass Orchard born?"]
    answers = [rag.answer(q, tenant=tenant_id, corpus=corpus.id) for q in questions]
    assert rag.pending_writebacks >= 1
    assert not rag.flush(timeout=0.01)  # still working
    rag.close()
    assert rag.pending_writebacks == 0
    assert all(a.writeback is not None and a.writeback.done() for a in answers)
    assert [a.writeback.result().decision for a in answers] == ["stored"] * 3  # type: ignore[union-attr]
    assert slow.calls == 3
    logged = rows(db, tenant_id, "SELECT query FROM writeback_log WHERE corpus_id = :c ORDER BY id", c=corpus.id)
    assert [r["query"] for r in logged] == questions  # in arrival order
    with pytest.raises(LivingRAGError, match="closed"):
        rag.answer(Q1, tenant=tenant_id, corpus=corpus.id)
    rag.close()  # idempotent


# ---------------------------------------------------------------- ablations


def test_each_ablation_changes_exactly_what_it_names(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    rag = make_rag(experience={"findings_k": 0})  # the paper's three components (findings: below)
    e1 = store_first(rag, tenant_id, corpus)

    def run(mode: str = "living", ablations: tuple[str, ...] = ()) -> tuple[Answer, str]:
        a = rag.answer(Q2, tenant=tenant_id, corpus=corpus.id, mode=mode, ablations=ablations)
        prompt = user_prompt(server)
        rag.flush(timeout=120)
        keep_only(db, tenant_id, corpus, [e1])  # every run sees the same store
        return a, prompt

    linear, p_linear = run("linear")
    full, p_full = run()
    no_fusion, p_no_fusion = run(ablations=("fusion",))
    no_scaffold, p_no_scaffold = run(ablations=("no-scaffold",))

    assert full.system == "living" and no_fusion.system == "living-no-fusion"
    assert no_scaffold.system == "living-no-scaffold"
    base = full.retrieval.encoding.base_activation
    assert base == linear.retrieval.encoding.base_activation == no_fusion.retrieval.encoding.base_activation

    # full LivingRAG: fusion changed the start activation, and the scaffold is in the prompt
    assert full.match is not None
    assert full.retrieval.start_activation == full.match.start_activation != base
    assert full.fused_ids and full.scaffold_id == e1 and SCAFFOLD_MARK in p_full

    # no fusion: retrieval starts from the base activation (exactly LinearRAG's retrieval), scaffold kept
    assert no_fusion.retrieval.start_activation == base
    assert no_fusion.fused == () and no_fusion.scaffold_id == e1
    assert [p.id for p in no_fusion.passages] == [p.id for p in linear.passages]
    assert SCAFFOLD_MARK in p_no_fusion and without_scaffold(p_no_fusion) == p_linear

    # no scaffold: the same fused retrieval as full LivingRAG, the prompt without the scaffold block
    assert no_scaffold.retrieval.start_activation == full.retrieval.start_activation
    assert no_scaffold.fused_ids == full.fused_ids and no_scaffold.scaffold is None
    assert [p.id for p in no_scaffold.passages] == [p.id for p in full.passages]
    assert SCAFFOLD_MARK not in p_no_scaffold and p_no_scaffold == without_scaffold(p_full)

    logged = rows(
        db, tenant_id, "SELECT * FROM query_log WHERE corpus_id = :c AND query = :q ORDER BY id", c=corpus.id, q=Q2
    )
    assert [r["mode"] for r in logged] == ["linear", "living", "living-no-fusion", "living-no-scaffold"]
    assert [list(r["fused_experience_ids"]) for r in logged] == [[], list(full.fused_ids), [], list(full.fused_ids)]
    assert [r["scaffold_experience_id"] for r in logged] == [None, e1, e1, None]


def test_no_gate_stores_what_the_novelty_gate_rejects(
    db: Database, clean: tuple[int, CorpusInfo], make_rag: Callable[..., LivingRAG]
) -> None:
    tenant_id, corpus = clean
    # answer reuse off: the same question again must reach the gates, not the stored answer
    rag = make_rag(
        "offline", store_verifier=GatedVerifier(delay_s=0), experience={"answer_reuse": False, "findings_k": 0}
    )
    e1 = store_first(rag, tenant_id, corpus)
    # the same question again: a duplicate, which the novelty gate rejects
    gated = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id)
    assert gated.writeback is not None
    wb = gated.writeback.result(timeout=120)
    assert wb.decision == "rejected_novelty" and wb.novelty is not None and wb.novelty < 0.7
    # without the gate it is stored, at confidence 1.0, and no verifier runs
    ungated = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id, ablations=["gate"])
    assert ungated.system == "living-no-gate"
    assert ungated.fused_ids and ungated.scaffold_id == e1  # reading experience is unchanged
    assert ungated.writeback is not None
    wb2 = ungated.writeback.result(timeout=120)
    assert wb2.decision == "stored" and wb2.experience_id not in (None, e1)
    assert wb2.novelty is not None and wb2.novelty < 0.7  # NS still computed
    (exp,) = rows(db, tenant_id, "SELECT confidence, grounding FROM experiences WHERE id = :i", i=wb2.experience_id)
    assert exp["confidence"] == 1.0
    (wlog,) = rows(db, tenant_id, "SELECT details FROM writeback_log WHERE experience_id = :i", i=wb2.experience_id)
    assert wlog["details"]["gates"] == "off" and "claims" not in wlog["details"]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("question", "kwargs", "error", "message"),
    [
        ("", {}, InvalidInput, "question is empty"),
        ("   \n\t ", {}, InvalidInput, "question is empty"),
        ("x" * 4001, {}, InvalidInput, "4001 characters long; the limit is 4000"),
        ("Who founded\x00 the Aurora Quartet?", {}, InvalidInput, "NUL"),
        (None, {}, InvalidInput, "question must be text"),
        (Q1, {"mode": "hybrid"}, InvalidInput, "unknown mode 'hybrid'"),
        (Q1, {"ablations": ["rerank"]}, InvalidInput, "unknown ablation 'rerank'"),
        (Q1, {"mode": "linear", "ablations": ["fusion"]}, InvalidInput, "living mode only"),
        (Q1, {"corpus": "no-such-corpus"}, NotFound, "no-such-corpus"),
        (Q1, {"corpus": "other-tenant"}, NotFound, "corpus"),
        (Q1, {"tenant": "no-such-tenant"}, NotFound, "no-such-tenant"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(
    db: Database,
    server: OpenAICompatServer,
    clean: tuple[int, CorpusInfo],
    make_rag: Callable[..., LivingRAG],
    make_tenant: Callable[..., tuple[int, str]],
    question: Any,
    kwargs: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    tenant_id, corpus = clean
    rag = make_rag()
    call: dict[str, Any] = {"tenant": tenant_id, "corpus": corpus.id} | kwargs
    if call["corpus"] == "other-tenant":  # a corpus id that exists, but belongs to another tenant
        other, _ = make_tenant()
        call["corpus"] = service.create_corpus(db, other, "theirs", get_settings()).id
    before, n_req = counts(db, tenant_id), len(server.requests)
    with pytest.raises(error, match=message):
        rag.answer(question, **call)
    rag.flush(timeout=30)
    assert counts(db, tenant_id) == before
    assert len(server.requests) == n_req


def test_a_corpus_recreated_under_the_same_name_is_the_new_one(
    db: Database, make_rag: Callable[..., LivingRAG], make_tenant: Callable[..., tuple[int, str]]
) -> None:
    tenant_id, _ = make_tenant()
    rag = make_rag()
    docs = [Document(d["title"], d["text"]) for d in CORPUS[:3]]
    first = service.create_corpus(db, tenant_id, "kb", get_settings())
    service.indexer(db, tenant_id, first, get_settings()).index_documents(docs)
    assert rag.answer("Who founded it?", tenant=tenant_id, corpus="kb").passages
    with db.tenant_session(tenant_id) as s:
        corpora.delete_corpus(s, first.id)
    with pytest.raises(NotFound):
        rag.answer("Who founded it?", tenant=tenant_id, corpus="kb")
    second = service.create_corpus(db, tenant_id, "kb", get_settings())
    service.indexer(db, tenant_id, second, get_settings()).index_documents(docs[:1])
    a = rag.answer("Who founded it?", tenant=tenant_id, corpus="kb")
    assert {p.title for p in a.passages} == {docs[0].title}


# ---------------------------------------------------------------- defaults


def test_store_without_verifier_or_encoder_resolves_the_offline_verifier(
    db: Database, server: OpenAICompatServer, clean: tuple[int, CorpusInfo]
) -> None:
    """Regression: resolving the verifier takes the encoder under the same lock (it deadlocked)."""
    tenant_id, corpus = clean
    settings = make_settings(server.base_url, "offline")
    store = ExperienceStore(db, settings)
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(store.verifier), daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), "resolving the verifier deadlocked"
    assert got[0].name == "offline" and got[0].requested == "offline"
    # and the pipeline's own store (built from settings alone) writes back through it
    with LivingRAG(settings, db=db) as rag:
        a = rag.answer(Q1, tenant=tenant_id, corpus=corpus.id)
        assert a.writeback is not None
        wb = a.writeback.result(timeout=120)
    assert wb.verifier == "offline" and wb.decision in ("stored", "rejected_grounding")
    assert wb.grounding is not None


# ---------------------------------------------------------------- the benchmark


def test_bench_pipeline_on_a_tiny_dataset(db: Database, tmp_path: Any) -> None:
    from livingrag.bench.pipeline import format_report, run_pipeline_bench
    from livingrag.bench.retrieval import BenchDataset, BenchQuestion
    from tests.corpus_support import QUESTIONS

    docs = [Document(d["title"], d["text"], source=f"test {i}") for i, d in enumerate(CORPUS)]
    questions = [BenchQuestion(q, ()) for q, _ in QUESTIONS] * 2
    data = BenchDataset("tiny", docs, questions)
    settings = get_settings(db={"data_dir": tmp_path}, gates={"verifier": "none"})
    out = run_pipeline_bench(db, settings, data, tenant=f"bench-{uuid.uuid4().hex[:8]}", limit=None, warmup=1)
    assert out["questions"] == 6 and out["llm"] == "loopback" and out["mode"] == "living"
    for k in ("overhead", "total", "llm", "encode", "match", "retrieve", "prompt", "log"):
        assert out[f"{k}_ms_p50"] > 0 and out[f"{k}_ms_p95"] >= out[f"{k}_ms_p50"], k
    assert out["overhead_ms_p50"] < out["total_ms_p50"]
    assert sum(out["writeback_decisions"].values()) == 6
    assert out["writeback_decisions"].get("stored", 0) >= 3  # three distinct questions, then repeats
    assert out["questions_fused"] >= 3  # the repeats at least meet their first answer's experience
    assert out["settings"]["llm"]["provider"] == "openai" and out["settings"]["gates"]["verifier_resolved"] == "none"
    assert "overhead p50" in format_report(out)


def test_bench_retrieval_runs_a_window_of_questions_and_keeps_each_ones_figures(db: Database, tmp_path: Any) -> None:
    """``--start``/``--limit`` choose the questions (1-based) and ``--per-question`` keeps one record
    per question, whose mean is the run's figure (what `bench paired` compares)."""
    from livingrag.bench.retrieval import BenchDataset, BenchQuestion, run_retrieval_bench
    from livingrag.corpus.chunking import document_key
    from tests.corpus_support import QUESTIONS

    docs = [Document(d["title"], d["text"], source=f"test {i}") for i, d in enumerate(CORPUS)]
    key = {d.title: document_key(d) for d in docs}
    questions = [BenchQuestion(q, tuple(key[t] for t in gold if t in key)) for q, gold in QUESTIONS]
    data = BenchDataset("tiny", docs, [q for q in questions if q.gold])
    settings = get_settings(db={"data_dir": tmp_path})
    records: list[dict[str, Any]] = []
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    out = run_retrieval_bench(db, settings, data, tenant=tenant, start=2, limit=2, per_question=records)
    assert out["questions"] == 2 and out["first_question"] == 2
    assert [r["number"] for r in records] == [2, 3]
    assert [r["question"] for r in records] == [q.question for q in data.questions[1:3]]
    mean = sum(r["passage_recall_at_5"] for r in records) / 2
    assert out["passage_recall_at_5"] == round(mean, 4)
    with pytest.raises(InvalidInput, match="no question from number 9"):
        run_retrieval_bench(db, settings, data, tenant=tenant, start=9)
