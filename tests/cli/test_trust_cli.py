"""``livingrag feedback``, ``livingrag experience ...``, ``livingrag passage list`` and the trust
columns of ``livingrag admin list`` end to end: real PostgreSQL, the small test corpus indexed with
the packaged models, and the loopback OpenAI-compatible server as the LLM (it answers with the
title of the first passage, so most answers are wrong in a known way)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from livingrag.cli.main import app
from livingrag.db.engine import Database
from livingrag.errors import Conflict, InvalidInput, NotFound
from livingrag.experience.feedback import TrustService
from livingrag.testing.openai_server import OpenAICompatServer, qa_reply
from tests.cli.test_cli import _run_main
from tests.conftest import loopback_llm_env
from tests.corpus_support import CORPUS, tenant_with_small_corpus

pytestmark = [pytest.mark.db, pytest.mark.slow]
runner = CliRunner()

Q_DIRECTOR = "Where was the director of Silver Harbor born?"
Q_FOUNDER = "Who founded the Aurora Quartet?"
Q_AUTHOR = "In which town was the author of The Glass Orchard born?"
Q_MINE = "Which company operates the iron ore mine in Kiruna?"


def _env(mp: pytest.MonkeyPatch, database_url: str, server: OpenAICompatServer) -> None:
    loopback_llm_env(mp, database_url, server.base_url, verifier="none")  # every novel answer is stored
    mp.delenv("LIVINGRAG_TENANT", raising=False)


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer(responder=qa_reply) as srv:
        yield srv


@pytest.fixture(scope="module")
def corpus_tenant(db: Database) -> tuple[int, str]:
    """A tenant (id, name) with the small test corpus indexed as ``small``."""
    return tenant_with_small_corpus(db, "trust")


@pytest.fixture
def llm_env(database_url: str, server: OpenAICompatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _env(monkeypatch, database_url, server)


def ok(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, (args, res.output, res.exception)
    return res.stdout


def ok_json(*args: str) -> Any:
    return json.loads(ok(*args, "--json"))


def fails(*args: str, error: type[Exception], message: str) -> None:
    res = runner.invoke(app, list(args))
    assert res.exit_code != 0, (args, res.output)
    assert isinstance(res.exception, error), (args, res.exception)
    assert message in str(res.exception), (args, str(res.exception))


def ask(tenant: str, question: str) -> tuple[int, int | None]:
    """Ask through ``livingrag ask`` (its text output): (the query id it prints, the experience stored)."""
    out = ok("ask", "--tenant", tenant, "--corpus", "small", question)
    m = re.search(r"^query (\d+)", out, re.M)
    assert m is not None, out
    stored = re.search(r"write-back: stored .*experience #(\d+)", out)
    return int(m.group(1)), int(stored.group(1)) if stored else None


@pytest.fixture(scope="module")
def answered(
    database_url: str, server: OpenAICompatServer, corpus_tenant: tuple[int, str]
) -> tuple[int, str, int, int]:
    """(tenant id, tenant name, query id, experience id) of one question answered and stored (the
    tests that use it leave it as it is)."""
    tenant_id, tenant = corpus_tenant
    with pytest.MonkeyPatch.context() as mp:
        _env(mp, database_url, server)
        qid, exp = ask(tenant, Q_MINE)
    assert exp is not None
    return tenant_id, tenant, qid, exp


def events(tenant: str, exp: int) -> list[tuple[str, str]]:
    return [(e["event"], e["actor"]) for e in ok_json("experience", "history", str(exp), "--tenant", tenant)]


# ---------------------------------------------------------------- the walk-through


def test_walk_through_wrong_right_correction(llm_env: None, corpus_tenant: tuple[int, str]) -> None:
    _, tenant = corpus_tenant
    # a question answered and stored; `ask` printed its query id
    q1, e1 = ask(tenant, Q_DIRECTOR)
    assert e1 is not None
    shown = ok_json("experience", "show", str(e1), "--tenant", tenant)
    assert shown["question"] == Q_DIRECTOR and shown["answer"] == "Silver Harbor"  # the loopback's wrong answer
    assert (shown["origin"], shown["trust"], shown["state"]) == ("gate", "unverified", "active")
    assert shown["origin_detail"] == "none" and shown["gated"] is True
    assert shown["uses"] == {"fusion": 0, "scaffold": 0, "answer": 0}
    assert shown["source_passages"] and all(p["exists"] and not p["changed"] for p in shown["source_passages"])
    table = ok("experience", "show", str(e1), "--tenant", tenant)
    assert "heuristic GS" in table and "confidence" not in table and "Silver Harbor" in table

    # --wrong retracts it; its history shows who
    out = ok("feedback", str(q1), "--tenant", tenant, "--wrong", "--note", "the film is not a birthplace")
    assert f"question {q1} marked wrong by operator" in out and f"experience {e1} retracted" in out
    assert f"retracted: {e1}" in out
    assert ("retracted", "operator") in events(tenant, e1)
    shown = ok_json("experience", "show", str(e1), "--tenant", tenant)
    assert (shown["trust"], shown["state"], shown["trust_actor"]) == ("retracted", "retracted", "operator")
    assert "the film is not a birthplace" in shown["trust_reason"]
    history = ok("experience", "history", str(e1), "--tenant", tenant)
    assert "retracted" in history and "operator" in history and str(q1) in history
    again = ok_json("feedback", str(q1), "--tenant", tenant, "--wrong", "--note", "the film is not a birthplace")
    assert again["repeated"] is True and again["retracted_ids"] == [e1]

    # --right on another answer verifies its experience
    q2, e2 = ask(tenant, Q_FOUNDER)
    assert e2 is not None
    right = ok_json("feedback", str(q2), "--tenant", tenant, "--right")
    assert right["verdict"] == "right" and right["verified_ids"] == [e2] and right["actor"] == "operator"
    shown = ok_json("experience", "show", str(e2), "--tenant", tenant)
    assert (shown["trust"], shown["trust_actor"], shown["state"]) == ("verified", "operator", "active")

    # --wrong --answer stores the person's answer, verified, of origin person
    q3, e3 = ask(tenant, Q_AUTHOR)
    assert e3 is not None
    out = ok(
        "feedback", str(q3), "--tenant", tenant, "--wrong", "--answer", "Kiruna",
        "--note", "Henrik Tallberg was born in Kiruna",
    )  # fmt: skip
    assert f"experience {e3} retracted" in out and "correction: asserted" in out  # verifier none: no check
    e4 = int(re.search(r"stored: (\d+)", out).group(1))  # type: ignore[union-attr]
    shown = ok_json("experience", "show", str(e4), "--tenant", tenant)
    assert (shown["answer"], shown["question"]) == ("Kiruna", Q_AUTHOR)
    assert (shown["origin"], shown["origin_detail"], shown["trust"], shown["gated"]) == (
        "person", "operator", "verified", False,
    )  # fmt: skip
    assert shown["support"].startswith("asserted by operator")
    assert [e for e, _ in events(tenant, e4)] == ["created", "verified"]
    assert ("corrected", "operator") in events(tenant, e3)

    # the admin listing shows trust and origin and filters by trust
    verified = ok_json("admin", "list", "--tenant", tenant, "--trust", "verified")
    assert {r["id"] for r in verified} == {e2, e4}
    assert all(r["trust"] == "verified" and r["state"] == "active" for r in verified)
    assert {r["origin"] for r in verified} == {"gate", "person"}
    retracted = ok_json("admin", "list", "--tenant", tenant, "--trust", "retracted")
    assert {r["id"] for r in retracted} == {e1, e3} and {r["state"] for r in retracted} == {"retracted"}
    assert e1 not in {r["id"] for r in ok_json("admin", "list", "--tenant", tenant, "--active")}
    assert ok("admin", "list", "--tenant", tenant, "--trust", "verified")
    fails("admin", "list", "--tenant", tenant, "--trust", "trusted", error=InvalidInput, message="trust must be one")

    # a verified answer is given again without the LLM, and its answer use is counted
    again_json = json.loads(ok("ask", "--tenant", tenant, "--corpus", "small", Q_FOUNDER, "--json"))
    assert again_json["reused_from"] == e2
    assert ok_json("experience", "show", str(e2), "--tenant", tenant)["uses"]["answer"] >= 1


def test_experience_verify_retract_delete_history(llm_env: None, corpus_tenant: tuple[int, str]) -> None:
    _, tenant = corpus_tenant
    _, exp = ask(tenant, "Who taught at the Sibelius Academy for twenty years?")
    assert exp is not None
    out = ok("experience", "retract", str(exp), "--tenant", tenant, "--reason", "she taught, she did not found")
    assert f"experience {exp} retracted (was unverified) by operator" in out
    assert ok_json("experience", "show", str(exp), "--tenant", tenant)["state"] == "retracted"
    same = ok_json("experience", "retract", str(exp), "--tenant", tenant, "--reason", "again")
    assert same["changed"] is False and same["trust"] == "retracted"

    out = ok("experience", "verify", str(exp), "--tenant", tenant, "--reason", "checked after all")
    assert f"experience {exp} verified (was retracted)" in out
    assert "was verified already" in ok("experience", "verify", str(exp), "--tenant", tenant)
    shown = ok_json("experience", "show", str(exp), "--tenant", tenant)
    assert (shown["trust"], shown["trust_reason"], shown["state"]) == ("verified", "checked after all", "active")
    assert [e for e, _ in events(tenant, exp)][-3:] == ["retracted", "unretracted", "verified"]
    limited = ok_json("experience", "history", str(exp), "--tenant", tenant, "--limit", "2")
    assert [e["event"] for e in limited] == ["unretracted", "verified"]  # the newest, oldest first

    # delete asks first; "n" keeps it
    res = runner.invoke(app, ["experience", "delete", str(exp), "--tenant", tenant], input="n\n")
    assert res.exit_code == 1 and "Delete experience" in res.output
    assert ok_json("experience", "show", str(exp), "--tenant", tenant)["id"] == exp
    out = ok("experience", "delete", str(exp), "--tenant", tenant, "--reason", "a test", "--yes")
    assert f"deleted experience {exp}" in out
    fails("experience", "show", str(exp), "--tenant", tenant, error=NotFound, message=f"no experience with id {exp}")
    hist = ok_json("experience", "history", str(exp), "--tenant", tenant)
    assert (hist[-1]["event"], hist[-1]["actor"], hist[-1]["reason"]) == ("deleted", "operator", "a test")
    fails("experience", "delete", str(exp), "--tenant", tenant, "--yes", error=NotFound, message="no experience")


def test_a_correction_the_passages_support_is_stored_as_grounded(
    llm_env: None, corpus_tenant: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, tenant = corpus_tenant
    qid, _ = ask(tenant, "In which city is the novel The Glass Orchard set?")
    monkeypatch.setenv("LIVINGRAG_GATES__VERIFIER", "offline")  # the correction is checked by this verifier
    out = ok_json(
        "feedback", str(qid), "--tenant", tenant, "--wrong", "--answer", "Uppsala",
        "--note", "The Glass Orchard is set in Uppsala",
    )  # fmt: skip
    assert out["check"]["verifier"] == "offline" and out["check"]["grounded"] is True and out["check"]["gs"] > 0
    shown = ok_json("experience", "show", str(out["stored_experience_id"]), "--tenant", tenant)
    assert (shown["answer"], shown["origin"], shown["trust"]) == ("Uppsala", "person", "verified")
    assert shown["support"] == "grounded: the passages support it" and shown["verifier"] == "offline"


def test_passage_list(llm_env: None, corpus_tenant: tuple[int, str]) -> None:
    _, tenant = corpus_tenant
    page = ok_json("passage", "list", "--tenant", tenant, "--corpus", "small")
    items = page["items"]
    assert [p["title"] for p in items] == [d["title"] for d in CORPUS]
    assert [p["length"] for p in items] == [len(d["text"]) for d in CORPUS]
    assert page["next_offset"] is None
    ids = [p["id"] for p in items]
    part = ok_json("passage", "list", "--tenant", tenant, "--corpus", "small", "--limit", "3", "--offset", "2")
    assert [p["id"] for p in part["items"]] == ids[2:5] and part["next_offset"] == 5
    found = ok_json("passage", "list", "--tenant", tenant, "--corpus", "small", "--search", "brevik")
    assert {p["title"] for p in found["items"]} == {"Marta Quell", "Brevik"}
    out = ok("passage", "list", "--tenant", tenant, "--corpus", "small", "--limit", "4")
    assert "Silver Harbor" in out and "more: --offset 4" in out
    fails("passage", "list", "--tenant", tenant, "--corpus", "nope", error=NotFound, message="nope")


# ---------------------------------------------------------------- bad input


def test_feedback_needs_exactly_one_verdict(llm_env: None, answered: tuple[int, str, int, int]) -> None:
    _, tenant, qid, _ = answered
    for flags in ([], ["--right", "--wrong"]):
        fails("feedback", str(qid), "--tenant", tenant, *flags, error=InvalidInput, message="exactly one of --right")
    fails(
        "feedback", str(qid), "--tenant", tenant, "--right", "--answer", "Someone else",
        error=InvalidInput, message="a corrected answer goes with verdict 'wrong'",
    )  # fmt: skip
    res = runner.invoke(app, ["feedback", "0", "--tenant", tenant, "--right"])
    assert res.exit_code == 2  # a usage error: ids are positive


def test_unknown_ids_are_clear_errors(
    llm_env: None,
    answered: tuple[int, str, int, int],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, tenant, _, _ = answered
    missing = "987654321"
    fails("feedback", missing, "--tenant", tenant, "--right", error=NotFound, message="no answered question with id")
    for cmd in (["show"], ["verify"], ["retract", "--reason", "x"], ["delete", "--yes"], ["history"]):
        fails("experience", cmd[0], missing, "--tenant", tenant, *cmd[1:], error=NotFound, message="no experience")
    code, err = _run_main(monkeypatch, capsys, "experience", "show", missing, "--tenant", tenant)
    assert code == 1 and f"no experience with id {missing}" in err and "Traceback" not in err
    code, err = _run_main(monkeypatch, capsys, "feedback", missing, "--tenant", tenant, "--wrong")
    assert code == 1 and f"no answered question with id {missing}" in err
    res = runner.invoke(app, ["experience", "retract", missing, "--tenant", tenant])
    assert res.exit_code == 2 and "--reason" in res.output  # required
    fails("experience", "retract", missing, "--tenant", tenant, "--reason", " ", error=InvalidInput, message="why")


def test_another_tenants_ids_are_not_visible(
    llm_env: None, answered: tuple[int, str, int, int], make_tenant: Callable[..., tuple[int, str]], db: Database
) -> None:
    tenant_id, tenant, qid, exp = answered
    other = str(make_tenant("trust-other")[0])  # --tenant takes a name or an id
    before = ok_json("experience", "show", str(exp), "--tenant", tenant)
    for args in (["show"], ["verify"], ["retract", "--reason", "mine now"], ["history"], ["delete", "--yes"]):
        fails("experience", args[0], str(exp), "--tenant", other, *args[1:], error=NotFound, message="no experience")
    for verdict in ("--right", "--wrong"):
        fails("feedback", str(qid), "--tenant", other, verdict, error=NotFound, message="no answered question")
    assert ok_json("experience", "show", str(exp), "--tenant", tenant) == before
    with db.tenant_session(tenant_id) as s:
        assert not s.execute(text("SELECT count(*) FROM answer_feedback WHERE query_log_id = :q"), {"q": qid}).scalar()


def test_feedback_waits_while_the_write_back_is_pending(
    llm_env: None, db: Database, corpus_tenant: tuple[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_id, tenant = corpus_tenant
    qid, exp = ask(tenant, "Who designed several harbours in Copenhagen?")
    assert exp is not None
    with db.tenant_session(tenant_id) as s:  # as if the decision were still to come
        log_id = s.execute(
            text("UPDATE writeback_log SET query_log_id = NULL WHERE query_log_id = :q RETURNING id"), {"q": qid}
        ).scalar_one()
    fails("feedback", str(qid), "--tenant", tenant, "--right", "--wait", "0", error=Conflict, message="still pending")
    t0 = time.monotonic()
    fails("feedback", str(qid), "--tenant", tenant, "--right", "--wait", "0.6", error=Conflict, message="waited 0.6 s")
    assert time.monotonic() - t0 >= 0.6

    calls: list[int] = []
    real = TrustService.feedback

    def pending_twice(self: TrustService, *args: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) <= 2:
            raise Conflict(f"the write-back of question {qid} is still pending")
        return real(self, *args, **kw)

    monkeypatch.setattr(TrustService, "feedback", pending_twice)
    with db.tenant_session(tenant_id) as s:  # the decision, back in place
        s.execute(text("UPDATE writeback_log SET query_log_id = :q WHERE id = :i"), {"q": qid, "i": log_id})
    out = ok_json("feedback", str(qid), "--tenant", tenant, "--right", "--wait", "5")
    assert len(calls) == 3 and out["verified_ids"] == [exp]
