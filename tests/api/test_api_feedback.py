"""The feedback API: verdicts on answers (``POST /v1/queries/{id}/feedback``), verifying and
retracting experiences, their history, and provenance and trust on the experience routes, over a
real PostgreSQL with the loopback OpenAI-compatible LLM.

Right verifies the question's experience and the repeat is then answered from memory; wrong
retracts it and a correction is stored verified and served; right stores an answer the gates had
rejected; a repeated verdict changes nothing; a verdict while the write-back is pending is 409 with
Retry-After; the ``feedback`` scope (or ``write``) is needed, a read-only key gets 403 naming it;
another tenant's ids are 404; bad input is 422 naming the problem and stores nothing; the history
lists every event with its actor, also after the experience is deleted."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from livingrag.config import Settings
from livingrag.db.engine import Database
from livingrag.experience.store import ExperienceStore
from livingrag.testing.openai_server import OpenAICompatServer, qa_reply
from tests.api_support import ADMIN_KEY, api_settings, app_client, app_services, auth, flush, seed_corpus

pytestmark = pytest.mark.db

DIRECTOR = "Who directed Silver Harbor?"
FOUNDER = "Who founded the Aurora Quartet?"
# The loopback LLM: the right answer with its evidence for DIRECTOR (the gates store it), a wrong one
# for FOUNDER (the gates reject it: the passage names Elina Saari).
ANSWERS = {
    DIRECTOR: ("Silver Harbor is a 1961 drama film directed by Marta Quell.", "Marta Quell"),
    FOUNDER: ("The Aurora Quartet is a string quartet founded in Helsinki in 1988.", "Olaf Renning"),
}


def _reply(messages: list[dict[str, Any]]) -> str:
    user = "".join(m.get("content") or "" for m in messages if m.get("role") == "user")
    asked = max(ANSWERS, key=user.rfind)
    if asked not in user:
        return qa_reply(messages)
    thought, answer = ANSWERS[asked]
    return f"Thought: {thought}\nAnswer: {answer}"


class HoldableStore(ExperienceStore):
    """The experience store with a write-back that waits while ``hold`` is clear (a pending decision)."""

    def __init__(self, db: Database, settings: Settings) -> None:
        super().__init__(db, settings)
        self.hold = threading.Event()
        self.hold.set()

    def write_back_many(self, items: Sequence[Any]) -> list[Any]:
        self.hold.wait(60)
        return super().write_back_many(items)


@pytest.fixture(scope="module")
def llm() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer(responder=_reply) as server:
        yield server


@pytest.fixture(scope="module")
def store(db: Database, database_url: str, llm: OpenAICompatServer) -> HoldableStore:
    return HoldableStore(db, api_settings(database_url, llm.base_url))


@pytest.fixture(scope="module")
def client(db: Database, database_url: str, llm: OpenAICompatServer, store: HoldableStore) -> Iterator[TestClient]:
    with app_client(db, api_settings(database_url, llm.base_url), store=store) as c:
        yield c


class World:
    """A fresh tenant with the test corpus, its default key and that key's id."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        r = client.post("/v1/tenants", json={"name": f"fb-{uuid.uuid4().hex[:8]}"}, headers=auth(ADMIN_KEY))
        assert r.status_code == 201, r.text
        self.tenant_id, self.key = int(r.json()["id"]), r.json()["api_key"]
        self.cid = seed_corpus(client, self.key)
        [default] = [k for k in self.get("/v1/keys") if k["name"] == "default"]
        self.key_id = int(default["id"])
        self.actor = f"key {self.key_id}"

    def get(self, path: str, key: str | None = None, **params: Any) -> Any:
        r = self.client.get(path, params=params, headers=auth(key or self.key))
        assert r.status_code == 200, r.text
        return r.json()

    def post(self, path: str, body: Any = None, key: str | None = None, headers: dict[str, str] | None = None) -> Any:
        return self.client.post(path, json=body, headers=headers or auth(key or self.key))

    def ask(self, question: str, **extra: Any) -> dict[str, Any]:
        r = self.post("/v1/ask", {"question": question, "corpus": self.cid} | extra)
        assert r.status_code == 200, r.text
        flush(self.client)
        app_services(self.client).rag.uses.flush()
        out: dict[str, Any] = r.json()
        return out

    def feedback(self, query_id: int | str, body: Any, key: str | None = None) -> Any:
        return self.post(f"/v1/queries/{query_id}/feedback", body, key)

    def decision(self, query_id: int) -> dict[str, Any]:
        out: dict[str, Any] = self.get(f"/v1/queries/{query_id}/writeback")
        return out

    def experience(self, exp_id: int) -> dict[str, Any]:
        out: dict[str, Any] = self.get(f"/v1/experiences/{exp_id}")
        return out

    def history(self, exp_id: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self.get(f"/v1/experiences/{exp_id}/history")["events"]
        return out

    def key_with(self, *scopes: str) -> tuple[int, str]:
        r = self.post("/v1/keys", {"name": f"k-{uuid.uuid4().hex[:6]}", "scopes": list(scopes)})
        assert r.status_code == 201, r.text
        return int(r.json()["id"]), r.json()["key"]


@pytest.fixture
def world(client: TestClient) -> World:
    return World(client)


def _rows(db: Database, tenant_id: int) -> dict[str, int]:
    """What a verdict writes, counted for one tenant."""
    with db.owner_session() as s:
        return {
            t: s.execute(text(f"SELECT count(*) FROM {t} WHERE tenant_id = :t"), {"t": tenant_id}).scalar_one()
            for t in ("answer_feedback", "experiences", "experience_events", "rejected_answers")
        } | {
            "trusted": s.execute(
                text("SELECT count(*) FROM experiences WHERE tenant_id = :t AND trust <> 'unverified'"),
                {"t": tenant_id},
            ).scalar_one()
        }


def _events(history: list[dict[str, Any]], uses: bool = False) -> list[tuple[str, str]]:
    """(event, actor) of each event, the uses left out unless ``uses``."""
    return [(e["event"], e["actor"]) for e in history if uses or not e["event"].startswith("used_")]


def _err(r: Any, status: int, *words: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    for w in words:
        assert w.lower() in err["message"].lower(), (w, err)
    return err


# ---------------------------------------------------------------- verdicts


def test_right_verifies_the_experience_and_the_repeat_is_answered_from_memory(world: World) -> None:
    a = world.ask(DIRECTOR)
    qid = a["query_log_id"]
    assert a["query_id"] == qid and a["answer"] == "Marta Quell"
    wb = world.decision(qid)
    assert wb["decision"] == "stored", wb
    exp_id = wb["experience_id"]
    e = world.experience(exp_id)
    assert (e["origin"], e["origin_detail"], e["trust"], e["gated"]) == ("gate", "offline", "unverified", True)
    assert e["trust_actor"] is None and e["answer_uses"] == 0
    # unverified: a repeat is not answered from memory (experience.reuse_answers_from = verified)
    assert world.ask(DIRECTOR)["reused_from"] is None

    r = world.feedback(qid, {"verdict": "right", "note": "checked on the poster"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["verdict"] == "right" and out["query_log_id"] == qid and out["corpus_id"] == world.cid
    assert out["verified_ids"] == [exp_id] and out["retracted_ids"] == [] and not out["repeated"]
    assert out["actor"] == world.actor and out["stored_experience_id"] is None and out["check"] is None
    assert f"experience {exp_id} verified" in out["messages"]
    e = world.experience(exp_id)
    assert (e["trust"], e["trust_actor"], e["trust_reason"]) == ("verified", world.actor, "checked on the poster")
    assert e["trust_at"] is not None
    details = world.get(f"/v1/experiences/{exp_id}/details")
    assert (details["trust"], details["origin"], details["gated"]) == ("verified", "gate", True)
    assert [x["id"] for x in world.get("/v1/experiences", trust="verified")["items"]] == [exp_id]
    assert world.get("/v1/experiences", trust="unverified")["items"] == []

    # the same verdict again changes nothing and returns the first one's outcome
    history = world.history(exp_id)
    again = world.feedback(qid, {"verdict": "right", "note": "checked on the poster"}).json()
    assert again["repeated"] and again["feedback_id"] == out["feedback_id"]
    assert again["verified_ids"] == [exp_id] and again["messages"] == [
        "the same verdict was given before; nothing changed"
    ]
    assert world.history(exp_id) == history

    # verified: the repeat is answered from memory, without an LLM call
    repeat = world.ask(DIRECTOR)
    assert repeat["reused_from"] == exp_id and repeat["answer"] == "Marta Quell" and repeat["completion_tokens"] == 0
    assert world.experience(exp_id)["answer_uses"] >= 1
    events = world.history(exp_id)
    changes = [e for e in events if not e["event"].startswith("used_")]
    assert _events(changes) == [("created", "system"), ("verified", world.actor)]
    verified = changes[1]
    assert verified["key_id"] == world.key_id and verified["query_log_id"] == qid
    assert verified["reason"] == "checked on the poster" and verified["created_at"]
    assert ("used_answer", "system") in _events(events, uses=True)


def test_wrong_retracts_and_the_correction_is_stored_verified_and_served(world: World) -> None:
    a = world.ask(FOUNDER, ablations=["gate"])  # the gates off: the wrong answer is stored
    qid = a["query_log_id"]
    wb = world.decision(qid)
    assert a["answer"] == "Olaf Renning" and wb["decision"] == "stored", wb
    wrong_id = wb["experience_id"]
    assert world.experience(wrong_id)["origin"] == "ungated"

    r = world.feedback(qid, {"verdict": "wrong", "answer": "Elina Saari", "note": "she founded it in 1988"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["verdict"] == "wrong" and out["answer"] == "Elina Saari" and out["remembered_wrong"]
    assert out["retracted_ids"] == [wrong_id]
    new_id = out["stored_experience_id"]
    assert new_id is not None and out["verified_ids"] == [new_id]
    check = out["check"]
    assert check["verifier"] == "offline" and check["grounded"] and check["gs"] == 1.0 and check["claims"]
    assert any("supported by the passages" in m for m in out["messages"])

    wrong = world.experience(wrong_id)
    assert (wrong["trust"], wrong["trust_actor"]) == ("retracted", world.actor)
    assert "marked wrong" in wrong["trust_reason"]
    assert [x["id"] for x in world.get("/v1/experiences", status="retracted")["items"]] == [wrong_id]
    assert [x["id"] for x in world.get("/v1/experiences", trust="retracted")["items"]] == [wrong_id]
    assert wrong_id not in [x["id"] for x in world.get("/v1/experiences", active=True)["items"]]
    new = world.experience(new_id)
    assert (new["origin"], new["origin_detail"], new["trust"], new["gated"]) == (
        "person",
        world.actor,
        "verified",
        False,
    )
    assert new["answer"] == "Elina Saari" and new["confidence"] == 1.0

    # the next time the question is asked, the correction is the answer, from memory
    repeat = world.ask(FOUNDER)
    assert repeat["reused_from"] == new_id and repeat["answer"] == "Elina Saari"
    assert _events(world.history(wrong_id)) == [
        ("created", "system"),
        ("retracted", world.actor),
        ("corrected", world.actor),
    ]
    assert world.history(wrong_id)[-1]["details"] == {"corrected_by": new_id}
    assert _events(world.history(new_id))[:2] == [("created", world.actor), ("verified", world.actor)]

    # a correction no passage supports is stored as asserted by the person, never as grounded
    b = world.ask(DIRECTOR)
    out = world.feedback(b["query_log_id"], {"verdict": "wrong", "answer": "Olaf Renning"}).json()
    assert out["check"]["grounded"] is False and out["stored_experience_id"] is not None
    assert any(f"asserted by {world.actor}: no passage supports it" in m for m in out["messages"])
    asserted = world.experience(out["stored_experience_id"])
    assert (asserted["origin"], asserted["trust"], asserted["confidence"]) == ("person", "verified", 0.0)
    # a linear answer leaves no candidate: the verdict is recorded, the correction not stored
    c = world.ask(FOUNDER, mode="linear")
    out = world.feedback(c["query_log_id"], {"verdict": "wrong", "answer": "Aurora"}).json()
    assert out["check"] is None and out["stored_experience_id"] is None and out["remembered_wrong"]
    assert any("not stored" in m and "not written back" in m for m in out["messages"])


def test_right_on_an_answer_the_gates_rejected_stores_it(world: World) -> None:
    a = world.ask(FOUNDER)
    wb = world.decision(a["query_log_id"])
    assert wb["decision"] == "rejected_grounding", wb
    assert world.get("/v1/experiences")["items"] == []
    out = world.feedback(a["query_log_id"], {"verdict": "right"}).json()
    stored = out["stored_experience_id"]
    assert stored is not None and out["verified_ids"] == [stored]
    assert any("rejected_grounding" in m for m in out["messages"])
    e = world.experience(stored)
    assert (e["origin"], e["trust"], e["answer"]) == ("person", "verified", "Olaf Renning")
    # a later different verdict wins: wrong retracts what right stored
    out = world.feedback(a["query_log_id"], {"verdict": "wrong"}).json()
    assert out["retracted_ids"] == [stored] and not out["repeated"]
    assert world.experience(stored)["trust"] == "retracted"


def test_a_linear_answer_can_be_judged_but_stores_nothing(world: World, db: Database) -> None:
    a = world.ask(DIRECTOR, mode="linear")
    before = _rows(db, world.tenant_id)
    out = world.feedback(a["query_log_id"], {"verdict": "right"}).json()
    assert out["verified_ids"] == [] and out["stored_experience_id"] is None
    assert any("not written back" in m for m in out["messages"])
    assert _rows(db, world.tenant_id) == before | {"answer_feedback": before["answer_feedback"] + 1}


def test_a_verdict_while_the_writeback_is_pending_is_409_with_retry_after(
    world: World, store: HoldableStore, db: Database
) -> None:
    store.hold.clear()
    try:
        r = world.post("/v1/ask", {"question": DIRECTOR, "corpus": world.cid})
        assert r.status_code == 200, r.text
        qid = r.json()["query_log_id"]
        assert world.decision(qid)["decision"] == "pending"
        before = _rows(db, world.tenant_id)
        r = world.feedback(qid, {"verdict": "right"})
        err = _err(r, 409, "pending", str(qid))
        assert err["code"] == "writeback_pending" and r.headers["Retry-After"] == "1"
        assert _rows(db, world.tenant_id) == before
    finally:
        store.hold.set()
    flush(world.client)
    out = world.feedback(qid, {"verdict": "right"}).json()
    assert out["verified_ids"] == [world.decision(qid)["experience_id"]]


# ---------------------------------------------------------------- single experiences and history


def test_verify_retract_expire_delete_and_the_history_with_actors(world: World, client: TestClient) -> None:
    a = world.ask(DIRECTOR)
    exp_id = world.decision(a["query_log_id"])["experience_id"]
    r = world.post(f"/v1/experiences/{exp_id}/verify", {"reason": "matches the credits"})
    assert r.status_code == 200, r.text
    v = r.json()
    assert (v["experience_id"], v["trust"], v["previous"], v["changed"]) == (exp_id, "verified", "unverified", True)
    assert v["actor"] == world.actor and v["experience"]["trust"] == "verified"
    v = world.post(f"/v1/experiences/{exp_id}/verify").json()  # no body: verified already
    assert not v["changed"] and v["previous"] == "verified"
    r = world.post(f"/v1/experiences/{exp_id}/retract", {"reason": "the credits were wrong"})
    assert r.json()["trust"] == "retracted" and r.json()["experience"]["trust_reason"] == "the credits were wrong"
    # a retracted answer is never served for its question: the repeat asks the LLM again
    assert world.ask(DIRECTOR)["reused_from"] is None
    assert world.post(f"/v1/experiences/{exp_id}/verify", {}).json()["previous"] == "retracted"
    # the operator acting for the tenant is recorded as admin
    operator = auth(ADMIN_KEY) | {"X-Livingrag-Tenant": str(world.tenant_id)}
    r = world.post(f"/v1/experiences/{exp_id}/retract", {"reason": "operator check"}, headers=operator)
    assert r.status_code == 200 and r.json()["actor"] == "admin"
    r = world.post(f"/v1/experiences/{exp_id}/expire")
    assert r.status_code == 200 and r.json()["expires_at"] is not None
    assert client.delete(f"/v1/experiences/{exp_id}", headers=auth(world.key)).status_code == 204
    assert client.get(f"/v1/experiences/{exp_id}", headers=auth(world.key)).status_code == 404
    # the history outlives the experience
    events = world.history(exp_id)
    assert _events(events) == [
        ("created", "system"),
        ("verified", world.actor),
        ("retracted", world.actor),
        ("unretracted", world.actor),
        ("verified", world.actor),
        ("retracted", "admin"),
        ("expired", world.actor),
        ("deleted", world.actor),
    ]
    assert [e["reason"] for e in events][1:3] == ["matches the credits", "the credits were wrong"]
    assert events[5]["key_id"] is None and events[6]["key_id"] == world.key_id
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)
    assert set(events[0]) == {"id", "event", "actor", "key_id", "query_log_id", "reason", "details", "created_at"}
    assert len(world.get(f"/v1/experiences/{exp_id}/history", limit=2)["events"]) == 2
    # unknown experiences
    _err(world.post("/v1/experiences/987654321/verify"), 404, "987654321")
    _err(client.get("/v1/experiences/987654321/history", headers=auth(world.key)), 404, "987654321")


def test_prune_records_the_caller(world: World) -> None:
    a = world.ask(DIRECTOR)
    exp_id = world.decision(a["query_log_id"])["experience_id"]
    r = world.post("/v1/experiences/prune", {"keep": 0, "dry_run": False})
    assert r.status_code == 200 and r.json()["counts"]["total"] == 1, r.text
    assert _events(world.history(exp_id))[-1] == ("deleted", world.actor)
    assert world.history(exp_id)[-1]["key_id"] == world.key_id  # the key that asked, too


# ---------------------------------------------------------------- scopes and tenants


def test_scopes_read_only_is_403_feedback_or_write_may(world: World, client: TestClient) -> None:
    [default] = [k for k in world.get("/v1/keys") if k["name"] == "default"]
    assert default["scopes"] == ["read", "write", "feedback", "admin"]  # every scope
    a = world.ask(DIRECTOR)
    qid = a["query_log_id"]
    exp_id = world.decision(qid)["experience_id"]
    _, reader = world.key_with("read")
    for path, body in (
        (f"/v1/queries/{qid}/feedback", {"verdict": "right"}),
        (f"/v1/experiences/{exp_id}/verify", {}),
        (f"/v1/experiences/{exp_id}/retract", {}),
    ):
        err = _err(world.post(path, body, reader), 403, "'feedback' or 'write'", "it has: read")
        assert err["code"] == "forbidden"
    assert world.experience(exp_id)["trust"] == "unverified"
    assert world.get(f"/v1/experiences/{exp_id}/history", reader)["events"]  # reading the history needs read

    fb_id, feedback_only = world.key_with("feedback")
    r = world.feedback(qid, {"verdict": "right"}, feedback_only)
    assert r.status_code == 200 and r.json()["actor"] == f"key {fb_id}", r.text
    r = world.post(f"/v1/experiences/{exp_id}/retract", {"reason": "no"}, feedback_only)
    assert r.status_code == 200 and r.json()["trust"] == "retracted"
    _err(client.get(f"/v1/experiences/{exp_id}/history", headers=auth(feedback_only)), 403, "'read'")
    _err(client.delete(f"/v1/experiences/{exp_id}", headers=auth(feedback_only)), 403, "'write'")
    _err(world.post("/v1/ask", {"question": DIRECTOR, "corpus": world.cid}, feedback_only), 403, "'read'")

    wr_id, writer = world.key_with("write")
    r = world.post(f"/v1/experiences/{exp_id}/verify", {}, writer)
    assert r.status_code == 200 and r.json()["actor"] == f"key {wr_id}"
    history = world.history(exp_id)
    assert [(e["event"], e["key_id"]) for e in history if e["event"] in ("verified", "retracted")] == [
        ("verified", fb_id),
        ("retracted", fb_id),
        ("verified", wr_id),
    ]


def test_another_tenants_question_and_experiences_are_404_and_untouched(
    world: World, client: TestClient, db: Database
) -> None:
    other = World(client)
    b = other.ask(DIRECTOR)
    b_exp = other.decision(b["query_log_id"])["experience_id"]
    a = world.ask(DIRECTOR)
    before = (_rows(db, world.tenant_id), _rows(db, other.tenant_id))
    _err(world.feedback(b["query_log_id"], {"verdict": "wrong"}), 404, str(b["query_log_id"]))
    for action in ("verify", "retract"):
        _err(world.post(f"/v1/experiences/{b_exp}/{action}", {}), 404, f"no experience with id {b_exp}")
    _err(client.get(f"/v1/experiences/{b_exp}/history", headers=auth(world.key)), 404, str(b_exp))
    assert (_rows(db, world.tenant_id), _rows(db, other.tenant_id)) == before
    assert other.experience(b_exp)["trust"] == "unverified"
    # and the other way round
    _err(other.feedback(a["query_log_id"], {"verdict": "right"}), 404)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"verdict": "maybe"}, ("body.verdict", "'right' or 'wrong'")),
        ({}, ("body.verdict", "required")),
        ({"verdict": None}, ("body.verdict",)),
        ({"verdict": "RIGHT"}, ("body.verdict",)),
        ({"verdict": "wrong", "answer": ""}, ("body.answer",)),
        ({"verdict": "wrong", "answer": " \n\t "}, ("body.answer", "white space")),
        ({"verdict": "wrong", "answer": "x" * 2001}, ("body.answer", "2000")),
        ({"verdict": "wrong", "answer": 42}, ("body.answer",)),
        ({"verdict": "wrong", "answer": ["Elina Saari"]}, ("body.answer",)),
        ({"verdict": "wrong", "answer": "Elina\x00 Saari"}, ("body.answer", "NUL")),
        ({"verdict": "wrong", "note": "n" * 2001}, ("body.note", "2000")),
        ({"verdict": "wrong", "because": "x"}, ("body.because",)),
        ({"verdict": "right", "answer": "Elina Saari"}, ("verdict 'wrong'",)),
        ({"verdict": "wrong", "answer": "marta QUELL!"}, ("the answer that was given",)),
        ({"verdict": "wrong", "answer": "?!"}, ("no letters or digits",)),
        ([{"verdict": "wrong"}], ("body",)),
        ("wrong", ("body",)),
    ],
)
def test_bad_feedback_is_422_naming_the_problem_and_stores_nothing(
    world_once: World, db: Database, body: Any, words: tuple[str, ...]
) -> None:
    world, qid = world_once, world_once.qid  # type: ignore[attr-defined]
    before = _rows(db, world.tenant_id)
    err = _err(world.feedback(qid, body), 422, *words)
    assert err["code"] == "invalid_input"
    assert _rows(db, world.tenant_id) == before


@pytest.mark.parametrize(
    ("query_id", "status", "words"),
    [
        ("abc", 422, ("path.query_id", "integer")),
        ("1.5", 422, ("path.query_id",)),
        ("0", 422, ("path.query_id",)),
        ("-3", 422, ("path.query_id",)),
        (str(2**70), 422, ("path.query_id",)),
        ("987654321", 404, ("987654321",)),
    ],
)
def test_bad_question_ids(world_once: World, db: Database, query_id: str, status: int, words: tuple[str, ...]) -> None:
    before = _rows(db, world_once.tenant_id)
    _err(world_once.feedback(query_id, {"verdict": "right"}), status, *words)
    assert _rows(db, world_once.tenant_id) == before


def test_bad_trust_changes_are_422(world_once: World, client: TestClient, db: Database) -> None:
    world = world_once
    before = _rows(db, world.tenant_id)
    exp_id = world.exp_id  # type: ignore[attr-defined]
    _err(world.post(f"/v1/experiences/{exp_id}/verify", {"reason": "r" * 2001}), 422, "body.reason", "2000")
    _err(world.post(f"/v1/experiences/{exp_id}/retract", {"reason": 5}), 422, "body.reason")
    _err(world.post(f"/v1/experiences/{exp_id}/retract", {"why": "x"}), 422, "body.why")
    _err(world.post("/v1/experiences/abc/verify", {}), 422, "path.experience_id")
    r = client.get(f"/v1/experiences/{exp_id}/history", params={"limit": 0}, headers=auth(world.key))
    _err(r, 422, "query.limit")
    _err(client.get("/v1/experiences", params={"trust": "maybe"}, headers=auth(world.key)), 422, "query.trust")
    assert _rows(db, world.tenant_id) == before


@pytest.fixture(scope="module")
def world_once(client: TestClient) -> World:
    """One tenant for the bad-input tests (nothing they send is stored): a stored answer to DIRECTOR."""
    world = World(client)
    a = world.ask(DIRECTOR)
    world.qid = a["query_log_id"]  # type: ignore[attr-defined]
    world.exp_id = world.decision(a["query_log_id"])["experience_id"]  # type: ignore[attr-defined]
    return world


def test_the_schema_says_confidence_is_a_heuristic(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    confidence = schemas["ExperienceOut"]["properties"]["confidence"]["description"]
    assert "heuristic" in confidence and "not a probability" in confidence
    assert {"origin", "trust", "trust_actor", "trust_at", "answer_uses", "gated"} <= set(
        schemas["ExperienceOut"]["properties"]
    )
    assert "/v1/queries/{query_id}/feedback" in spec["paths"]
    assert "feedback" in str(schemas["KeyCreate"]["properties"]["scopes"])


# ---------------------------------------------------------------- the learned gate


def test_a_verdict_labels_the_candidate_and_the_gate_route_shows_it(world: World, db: Database) -> None:
    a = world.ask(DIRECTOR)
    qid = a["query_log_id"]
    assert world.feedback(qid, {"verdict": "wrong", "answer": "Marta Quell Sr."}).status_code == 200
    with db.owner_session() as s:
        (label,) = s.execute(
            text("SELECT label, verdict, corrected, features, writeback_log_id FROM gate_labels WHERE tenant_id = :t"),
            {"t": world.tenant_id},
        ).all()
    assert (label.label, label.verdict, label.corrected) == (False, "wrong", True)
    assert label.features["found_any"] == 1.0 and "gs" in label.features and label.writeback_log_id is not None
    assert world.feedback(qid, {"verdict": "right"}).status_code == 200  # a later verdict replaces the label
    _, reader = world.key_with("read")
    gate = world.get("/v1/gate", key=reader)
    assert gate["tenant_id"] == world.tenant_id and gate["learning"] is True
    assert gate["labels"]["total"] == 1 and gate["labels"]["right"] == 1 and gate["models"] == []
    assert gate["settings"]["learn_min_labels"] == 50
    assert {"gate": "fixed", "decision": "stored", "count": 1} in gate["decisions"]
    _err(world.client.delete("/v1/gate", headers=auth(reader)), 403, "admin")
    r = world.client.delete("/v1/gate", params={"forget_labels": True}, headers=auth(world.key))
    assert r.status_code == 200, r.text
    assert r.json() == {"models_retired": 0, "experiences_demoted": 0, "labels_deleted": 1}
    assert world.get("/v1/gate")["labels"]["total"] == 0
    _err(world.client.delete("/v1/gate", params={"corpus_id": 999_999}, headers=auth(world.key)), 404)
