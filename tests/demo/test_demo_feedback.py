"""``livingrag demo``'s feedback loop end to end with the loopback OpenAI-compatible server as the LLM
(real PostgreSQL, the packaged retrieval models): the simulated user's verdicts from the demo's gold
answers, the questions asked again (served from memory only when verified or corrected), the summary
and the history of a corrected experience."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from livingrag.cli.main import app
from livingrag.demo.run import demo_questions, reviewed_count
from livingrag.evaluation.metrics import contain_match
from livingrag.testing.openai_server import OpenAICompatServer, qa_reply

pytestmark = [pytest.mark.db, pytest.mark.slow]
runner = CliRunner()
N = 6  # the smallest demo with an unreviewed question


def _right_on_the_first(messages: list[dict[str, Any]]) -> str:
    """The loopback model: the gold answer to the first demo question, else the first passage's title
    (wrong for most demo questions)."""
    first = demo_questions()[0]
    if first["question"] in messages[-1]["content"]:
        return f"Thought: the passages say so.\nAnswer: {first['answer']}"
    return qa_reply(messages)


@pytest.fixture
def env(make_database_url: Callable[[], str], monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAICompatServer]:
    from livingrag.db import migrate
    from livingrag.db.engine import Database
    from tests.conftest import db_settings_for, loopback_llm_env

    url = make_database_url()
    db = Database(db_settings_for(url))
    migrate.upgrade(db)
    db.dispose()
    with OpenAICompatServer(responder=_right_on_the_first) as server:
        loopback_llm_env(monkeypatch, url, server.base_url, verifier="offline")
        yield server


def test_the_demo_verifies_corrects_and_serves_from_memory(env: OpenAICompatServer) -> None:
    res = runner.invoke(app, ["demo", "--limit", str(N), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    fb = report["feedback"]
    assert "gold answers" in fb["simulated"]
    golds = {q["question"]: [q["answer"], *q.get("aliases", [])] for q in demo_questions()[:N]}

    # the user reviews all but the last question, from the gold answers, and corrects each wrong answer
    reviews = fb["reviews"]
    assert reviewed_count(N) == N - 1 and len(reviews) == N - 1
    for v in reviews:
        right = contain_match(v["answer"], golds[v["question"]])
        assert v["verdict"] == ("right" if right else "wrong") and v["error"] is None
        assert (v["correction"] is not None) == (not right)
        if not right:
            assert v["correction"] == v["gold"] and v["correction_experience"] is not None
    assert reviews[0]["verdict"] == "right" and any(v["verdict"] == "wrong" for v in reviews)

    # asked again: the right and the corrected ones from memory (no LLM call), the unreviewed one by the LLM
    again = {a["question"]: a for a in fb["asked_again"]}
    assert {a["review"] for a in again.values()} == {"right", "corrected", "not reviewed"}
    for a in again.values():
        assert a["error"] is None
        if a["review"] == "not reviewed":
            assert not a["from_memory"] and a["completion_tokens"] > 0
        else:
            assert a["from_memory"] and a["completion_tokens"] == 0 and a["correct"]
    corrected = [v for v in reviews if v["correction"] and v["question"] in again]
    assert corrected and all(again[v["question"]]["experience"] == v["correction_experience"] for v in corrected)
    assert all(again[v["question"]]["answer"] == v["correction"] for v in corrected)
    assert fb["llm_calls_saved"] == len(again) - 1 and fb["wrong_answers_from_memory"] == 0
    assert len(env.requests) == 2 * N + 1, "both systems on every question, then one LLM call asked again"

    # the history of the first corrected question's correction: created and verified by the simulated
    # user, then used to answer the question again
    timeline = fb["timelines"][-1]
    assert timeline["experience"] == corrected[0]["correction_experience"]
    events = [e["event"] for e in timeline["events"]]
    assert events[:2] == ["created", "verified"] and "used_answer" in events
    assert all(e["actor"].startswith("simulated user") for e in timeline["events"][:2])

    # the same on screen; and a second run starts from an empty memory (no earlier verdict acts on it)
    res = runner.invoke(app, ["demo", "--limit", str(N)])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "simulated feedback from the demo's gold answers" in out
    assert "from memory:" in out and "no LLM call" in out and "asked the LLM" in out
    assert f"({fb['llm_calls_saved']} LLM calls saved); wrong answers served from memory: 0" in out
    assert "History of experience #" in out and "used_answer" in out


def test_the_demo_without_feedback_asks_nothing_again(env: OpenAICompatServer) -> None:
    res = runner.invoke(app, ["demo", "--limit", "2", "--no-feedback", "--json"])
    assert res.exit_code == 0, res.output
    fb = json.loads(res.stdout)["feedback"]
    assert fb["reviews"] == [] and fb["asked_again"] == [] and fb["llm_calls_saved"] == 0
    assert len(env.requests) == 4
