"""``livingrag eval stream`` end to end: real Postgres, real embedding and NER models, a real
OpenAI-compatible server on loopback as the LLM; records, resume, fresh stores, the report."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from livingrag.cli.main import app
from livingrag.demo.run import demo_corpus_path, demo_questions
from livingrag.errors import InvalidInput
from livingrag.evaluation.records import read_records_jsonl
from livingrag.evaluation.stream import RECORDS_JSONL, parse_systems
from livingrag.testing.openai_server import OpenAICompatServer

runner = CliRunner()
pytestmark = [pytest.mark.db, pytest.mark.slow]
N = 6


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """The demo knowledge base as a generic JSONL dataset, gold passages by title."""
    folder = tmp_path / "ds"
    folder.mkdir()
    corpus = json.loads(Path(demo_corpus_path()).read_text())
    (folder / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"id": f"d{i}", "title": d["title"], "text": d["text"]}) + "\n" for i, d in enumerate(corpus)
        )
    )
    qs = demo_questions()[:N]
    (folder / "questions.jsonl").write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": q["question"], "answers": [q["answer"], *q.get("aliases", [])]})
            + "\n"
            for i, q in enumerate(qs)
        )
    )
    return folder


@pytest.fixture
def env(make_database_url: Callable[[], str], monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAICompatServer]:
    from livingrag.db import migrate
    from livingrag.db.engine import Database
    from tests.conftest import db_settings_for

    url = make_database_url()  # a database of its own: the runner empties its corpus's experiences
    db = Database(db_settings_for(url))
    migrate.upgrade(db)
    db.dispose()
    with OpenAICompatServer() as server:
        monkeypatch.setenv("LIVINGRAG_DB__URL", url)
        monkeypatch.setenv("LIVINGRAG_LLM__PROVIDER", "openai")
        monkeypatch.setenv("LIVINGRAG_LLM__BASE_URL", server.base_url)
        monkeypatch.setenv("LIVINGRAG_LLM__API_KEY", "test-key")
        monkeypatch.setenv("LIVINGRAG_LLM__MODEL", "loopback")
        monkeypatch.setenv("LIVINGRAG_GATES__VERIFIER", "none")
        yield server


def _invoke(dataset: Path, out: Path, *extra: str) -> Any:
    return runner.invoke(
        app,
        ["eval", "stream", "--dataset", "jsonl", "--data-dir", str(dataset), "--out", str(out), "--quiet", *extra],
    )


def _stream(dataset: Path, out: Path, *extra: str) -> str:
    res = _invoke(dataset, out, *extra)
    assert res.exit_code == 0, (res.output, res.exception)
    return res.output


def _stream_refused(dataset: Path, out: Path, *extra: str) -> str:
    """Run ``eval stream`` expecting a refusal; its message."""
    res = _invoke(dataset, out, *extra)
    assert res.exit_code != 0, res.output
    return str(res.exception)


def test_stream_writes_records_and_report(env: OpenAICompatServer, dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _stream(dataset, out, "--ablations", "gate")
    records = read_records_jsonl(out / RECORDS_JSONL)
    systems = {r.system for r in records}
    assert systems == {"linear", "living", "living-no-gate"}
    for s in systems:
        run = sorted((r for r in records if r.system == s), key=lambda r: r.position)
        assert [r.position for r in run] == list(range(N))
        assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 and r.error is None for r in run)
    linear = [r for r in records if r.system == "linear"]
    assert all(r.writeback is None and r.store_size_after is None and not r.fused_experience_ids for r in linear)
    living = sorted((r for r in records if r.system == "living"), key=lambda r: r.position)
    # a fresh store: the first question of a run cannot reuse anything; sizes grow with stored decisions
    assert living[0].fused_experience_ids == () and living[0].scaffold_experience_id is None
    stored = 0
    for r in living:
        assert r.writeback in ("stored", "rejected_ns", "rejected_gs", "error")
        stored += r.writeback == "stored"
        assert r.store_size_after == stored
    assert stored >= 1
    # only earlier questions of the same run contribute
    stored_at = {r.stored_experience_id: r.position for r in living if r.stored_experience_id}
    for r in living:
        for e in (*r.fused_experience_ids, r.scaffold_experience_id):
            if e is not None:
                assert stored_at[e] < r.position
    no_gate = [r for r in records if r.system == "living-no-gate"]
    assert all(r.writeback == "stored" for r in no_gate), "without the gate every candidate is stored"
    for name in ("results.json", "queries.csv", "report.md"):
        assert (out / name).stat().st_size > 0
    assert len(list(out.glob("*.png"))) == 4
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["judge"] is None
    acc = {row["system"]: row for row in results["tables"]["accuracy"]}
    assert acc["linear"]["llm_acc"] is None and "judge" in (acc["linear"]["llm_acc_reason"] or "")


def test_stream_resumes_without_duplicates(
    env: OpenAICompatServer, dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The torn question's experience survives the interruption (the store is the run's own); with answer
    # reuse on, its second asking would be answered from that experience without an LLM call.
    monkeypatch.setenv("LIVINGRAG_EXPERIENCE__ANSWER_REUSE", "false")
    out = tmp_path / "run"
    _stream(dataset, out, "--systems", "living", "--limit", "3")
    first = read_records_jsonl(out / RECORDS_JSONL)
    assert len(first) == 3
    # simulate an interruption: keep two records and a torn third line
    lines = (out / RECORDS_JSONL).read_text().splitlines(keepends=True)
    (out / RECORDS_JSONL).write_text("".join(lines[:2]) + lines[2][:20])
    calls = len(env.requests)
    _stream(dataset, out, "--systems", "living", "--limit", "3")
    again = read_records_jsonl(out / RECORDS_JSONL)
    assert sorted(r.position for r in again) == [0, 1, 2]
    assert [r.question_id for r in again[:2]] == [r.question_id for r in first[:2]]
    assert len(env.requests) == calls + 1, "only the missing question is answered again"
    # raising --limit extends the run: the first positions are the same computation
    calls = len(env.requests)
    _stream(dataset, out, "--systems", "living", "--limit", "4")
    extended = read_records_jsonl(out / RECORDS_JSONL)
    assert sorted(r.position for r in extended) == [0, 1, 2, 3]
    assert len(env.requests) == calls + 1
    # a different run in the same folder is refused, naming what differs
    refused = _stream_refused(dataset, out)
    assert "differs in" in refused and "systems" in refused


def test_skip_runs_a_later_window_of_the_questions(env: OpenAICompatServer, dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _stream(dataset, out, "--systems", "linear", "--skip", "4")
    records = read_records_jsonl(out / RECORDS_JSONL)
    assert sorted(r.question_id for r in records) == ["q4", "q5"]
    assert "- Skip: 4" in (out / "report.md").read_text()
    refused = _stream_refused(dataset, out, "--systems", "linear", "--skip", "3")
    assert "differs in" in refused and "skip" in refused
    assert f"skip {N} leaves no question" in _stream_refused(dataset, tmp_path / "o2", "--skip", str(N))


def test_bad_options_are_named() -> None:
    with pytest.raises(InvalidInput, match="unknown system 'lineer'"):
        parse_systems("lineer,living")
    with pytest.raises(InvalidInput, match="unknown ablation 'fuse'"):
        parse_systems("living", "fuse")
    assert parse_systems("linear,living", "fusion,gate") == ("linear", "living", "living-no-fusion", "living-no-gate")


def test_a_failed_answer_is_recorded_and_the_stream_goes_on(
    env: OpenAICompatServer, dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An LLM failure (HTTP 503 with no retry left, as a crashed local model reads) becomes that
    question's error; the stream answers every other question."""
    from livingrag.testing.openai_server import Step

    monkeypatch.setenv("LIVINGRAG_LLM__MAX_RETRIES", "0")
    env.script.append(Step(status=503, error_message="the model process ended with SIGSEGV"))
    out = tmp_path / "run"
    _stream(dataset, out, "--systems", "linear", "--concurrency", "1")
    records = sorted(read_records_jsonl(out / RECORDS_JSONL), key=lambda r: r.position)
    assert [r.position for r in records] == list(range(N))
    failed = [r for r in records if r.error is not None]
    assert len(failed) == 1 and "SIGSEGV" in (failed[0].error or "") and failed[0].position == 0
    assert all(r.completion_tokens > 0 for r in records if r.error is None)


def test_a_repeat_stream_serves_nothing_from_memory_without_feedback(
    env: OpenAICompatServer, dataset: Path, tmp_path: Path
) -> None:
    """--repeat-share asks a share of the questions again later. Answers are served from memory only
    from experiences a person verified (experience.reuse_answers_from=verified), so with no feedback
    (--feedback-rate 0, the default) LivingRAG asks the LLM for every repeat, as LinearRAG does."""
    out = tmp_path / "run"
    _stream(dataset, out, "--systems", "linear,living", "--repeat-share", "0.5", "--concurrency", "1")
    records = read_records_jsonl(out / RECORDS_JSONL)
    for system in ("linear", "living"):
        run = [r for r in records if r.system == system]
        assert len(run) == N + 3 and sum(r.question_id.endswith("#repeat") for r in run) == 3
        assert all(r.reused_experience_id is None and r.feedback is None and r.completion_tokens > 0 for r in run)
    report = (out / "report.md").read_text()
    assert "## Repeated questions (answer reuse)" in report and "## Paired against LinearRAG" in report
    assert "## Feedback and answers from memory" in report and "No feedback was given" in report
    results = json.loads((out / "results.json").read_text())
    rows = {r["system"]: r for r in results["tables"]["feedback"]}
    assert rows["living"]["served_from_memory"] == 0 and rows["living"]["llm_calls"] == N + 3
    assert json.loads((out / "run.json").read_text())["feedback_rate"] == 0.0


def test_a_repeat_stream_with_gated_reuse_answers_repeats_from_the_store(
    env: OpenAICompatServer, dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With experience.reuse_answers_from=gated, a repeat of an experience stored through the gates is
    answered from it without the LLM (LinearRAG asks the LLM every time); the report counts both."""
    monkeypatch.setenv("LIVINGRAG_EXPERIENCE__REUSE_ANSWERS_FROM", "gated")
    out = tmp_path / "run"
    _stream(dataset, out, "--systems", "linear,living", "--repeat-share", "0.5", "--concurrency", "1")
    records = read_records_jsonl(out / RECORDS_JSONL)
    linear = [r for r in records if r.system == "linear"]
    living = [r for r in records if r.system == "living"]
    assert all(r.reused_experience_id is None for r in linear)
    reused = [r for r in living if r.reused_experience_id is not None]
    assert reused and all(r.question_id.endswith("#repeat") and r.completion_tokens == 0 for r in reused)
    assert all(r.writeback is None and r.reused_wrong is not None for r in reused), "no write-back from memory"
    first = {r.question_id: r for r in living}
    assert all(r.prediction == first[r.question_id.removesuffix("#repeat")].prediction for r in reused)
    report = (out / "report.md").read_text()
    assert "## Repeated questions (answer reuse)" in report and "## Paired against LinearRAG" in report


GOLD = {  # question -> (gold answer, what the loopback model says)
    "Where was the director of Winter Harbour born?": ("Galway", "Galway"),  # right
    "Why is my Tern Payments payout on hold?": ("identity verification", "a bank holiday"),  # wrong
    "Which Tern plan do I need to export chat history?": ("Business", "Enterprise"),  # wrong
    "Where was the director of Amber Coast born?": ("Gdansk", "Gdansk"),  # right
}
ORDER = [  # (id, question): each first asking at least two places before its repeat (two in flight)
    ("q0", "Where was the director of Winter Harbour born?"),
    ("q1", "Why is my Tern Payments payout on hold?"),
    ("q2", "Which Tern plan do I need to export chat history?"),
    ("q3", "Where was the director of Amber Coast born?"),
    ("q0#repeat", "Where was the director of Winter Harbour born?"),
    ("q1#repeat", "why is my tern payments payout on hold"),
    ("q1#repeat#repeat", "Why is my Tern Payments payout on hold?"),
]


@pytest.fixture
def repeat_dataset(dataset: Path) -> Path:
    """The demo corpus with questions asked again (ids ending in #repeat), as --repeat-share makes them."""
    (dataset / "questions.jsonl").write_text(
        "".join(json.dumps({"id": i, "question": q, "answers": [GOLD[_canon(q)][0]]}) + "\n" for i, q in ORDER)
    )
    return dataset


def _canon(question: str) -> str:
    return next(k for k in GOLD if k.lower().rstrip("?") == question.lower().rstrip("?"))


def _scripted(messages: list[dict[str, Any]]) -> str:
    """The loopback model: right on q0 and q3, wrong on q1 and q2 (whatever the passages say)."""
    prompt = messages[-1]["content"]
    asked = prompt[prompt.rindex("Question:") + len("Question:") :].splitlines()[0].strip()
    return f"Thought: from the passages.\nAnswer: {GOLD[_canon(asked)][1]}"


def test_feedback_rate_one_gives_every_living_answer_a_verdict(
    env: OpenAICompatServer, repeat_dataset: Path, tmp_path: Path
) -> None:
    """--feedback-rate 1: every LivingRAG answer gets a verdict from the gold answers once its write-back
    is decided; a repeat of a right answer is served from memory, a repeat of a wrong one never is, and
    its correction is; LinearRAG gets no feedback and asks the LLM every time."""
    env.responder = _scripted
    out = tmp_path / "run"
    calls = len(env.requests)
    _stream(repeat_dataset, out, "--systems", "linear,living", "--feedback-rate", "1", "--concurrency", "1")
    records = read_records_jsonl(out / RECORDS_JSONL)
    linear = {r.question_id: r for r in records if r.system == "linear"}
    living = {r.question_id: r for r in records if r.system == "living"}
    assert all(r.feedback is None and r.reused_experience_id is None for r in linear.values())
    assert all(r.feedback in ("right", "wrong") for r in living.values()), "R = 1: every living answer"
    assert all((r.feedback == "right") == r.contain_correct for r in living.values())

    # right: verified, and its repeat is served from that experience without an LLM call
    assert living["q0"].feedback == "right" and living["q0"].feedback_correction is False
    again = living["q0#repeat"]
    assert again.reused_experience_id is not None and again.reused_wrong is False
    assert again.prediction == "Galway" and again.completion_tokens == 0 and again.feedback == "right"
    # wrong: corrected to the gold answer; the repeat is served the correction, never the wrong answer
    assert living["q1"].feedback == "wrong" and living["q1"].feedback_correction is True
    correction = living["q1"].correction_experience_id
    assert correction is not None
    for qid in ("q1#repeat", "q1#repeat#repeat"):
        assert living[qid].reused_experience_id == correction and living[qid].prediction == "identity verification"
        assert living[qid].contain_correct and living[qid].reused_wrong is False
    assert not any(r.reused_wrong for r in living.values())
    # the store grew by the corrections (two wrong answers corrected: q1, q2)
    assert living["q2"].feedback_correction is True
    assert living["q3"].store_size_after is not None and living["q3"].store_size_after >= 2

    assert len(env.requests) - calls == len(ORDER) + 4, "LinearRAG every question, LivingRAG the first askings"
    run = json.loads((out / "run.json").read_text())
    assert run["feedback_rate"] == 1.0 and run["feedback_seed"] == 0
    results = json.loads((out / "results.json").read_text())
    rows = {r["system"]: r for r in results["tables"]["feedback"]}
    assert (rows["living"]["llm_calls"], rows["living"]["served_from_memory"], rows["living"]["served_wrong"]) == (
        4,
        3,
        0,
    )
    assert (rows["living"]["right"], rows["living"]["wrong"], rows["living"]["corrections"]) == (5, 2, 2)
    assert rows["living"]["contain"]["n"] == len(ORDER)
    report = (out / "report.md").read_text()
    assert "simulated from the gold answers" in report and "R = 1" in report
    assert "| LivingRAG | 0 | 7 | 5 / 2 (2) | 4 (-42.9%) | 3 | 0 |" in report

    # the same run at R = 0 in another folder starts from an empty memory: no verdict of the run above
    # (the wrong answers it remembered) acts on it, and nothing is served from memory
    out0 = tmp_path / "run0"
    _stream(repeat_dataset, out0, "--systems", "living", "--concurrency", "1")
    zero = read_records_jsonl(out0 / RECORDS_JSONL)
    assert all(r.feedback is None and r.reused_experience_id is None for r in zero)
    assert [r.prediction for r in zero] == [living[i].prediction if not living[i].reused_experience_id else
                                            GOLD[_canon(q)][1] for i, q in ORDER]  # fmt: skip
    assert {r.question_id: r.writeback for r in zero}["q1"] == living["q1"].writeback
    # `eval report` re-renders the feedback table from records.jsonl and run.json
    (out / "report.md").unlink()
    res = runner.invoke(app, ["eval", "report", "--dataset", "jsonl", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "| LivingRAG | 0 | 7 | 5 / 2 (2) |" in (out / "report.md").read_text()
    assert "3 (0)" in res.output, "the summary's LLM calls and answers from memory (wrong)"


@pytest.mark.parametrize("rate", ["-0.1", "1.5", "abc", "nan"])
def test_a_bad_feedback_rate_is_refused(rate: str, dataset: Path, tmp_path: Path) -> None:
    message = _stream_refused(dataset, tmp_path / "run", "--feedback-rate", rate)
    assert "--feedback-rate must be a number from 0 to 1" in message and repr(rate) in message
    assert not (tmp_path / "run").exists(), "refused before anything is run"


def test_a_run_with_feedback_resumes_only_as_the_same_run(
    env: OpenAICompatServer, dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    _stream(dataset, out, "--systems", "living", "--limit", "2", "--feedback-rate", "0.5", "--seed", "3")
    assert json.loads((out / "run.json").read_text())["feedback_seed"] == 3
    refused = _stream_refused(dataset, out, "--systems", "living", "--limit", "2", "--seed", "3")
    assert "differs in" in refused and "feedback_rate" in refused
    refused = _stream_refused(
        dataset, out, "--systems", "living", "--limit", "2", "--feedback-rate", "0.5", "--seed", "3",
        "--feedback-seed", "4",
    )  # fmt: skip
    assert "feedback_seed" in refused


def test_linear_answers_each_question_once_over_all_orders(
    env: OpenAICompatServer, dataset: Path, tmp_path: Path
) -> None:
    """LinearRAG keeps no state: orders 1.. get order 0's records of the same questions, with no LLM call."""
    out = tmp_path / "run"
    calls = len(env.requests)
    _stream(dataset, out, "--systems", "linear", "--orders", "3", "--seed", "7")
    assert len(env.requests) == calls + N, "one LLM call per question, not per question and order"
    records = read_records_jsonl(out / RECORDS_JSONL)
    assert len(records) == 3 * N
    first = {r.question_id: r for r in records if r.order == 0}
    for r in records:
        assert r.prediction == first[r.question_id].prediction
        assert r.retrieved_keys == first[r.question_id].retrieved_keys
        assert (r.order == 0) == ("shared_from_order" not in r.extra)
        assert r.extra.get("shared_from_order", 0) == 0
    later = sorted((r for r in records if r.order == 1), key=lambda r: r.position)
    assert [r.position for r in later] == list(range(N))
    assert [r.question_id for r in later] != [f"q{i}" for i in range(N)], "order 1 is a shuffle"


def test_only_orders_runs_those_orders_and_the_rest_later(
    env: OpenAICompatServer, dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    calls = len(env.requests)
    _stream(dataset, out, "--systems", "linear,living", "--orders", "3", "--seed", "7", "--only-orders", "1,2")
    records = read_records_jsonl(out / RECORDS_JSONL)
    assert {(r.system, r.order) for r in records} == {(s, o) for s in ("linear", "living") for o in (1, 2)}
    # LinearRAG answered each question once (order 1), order 2 got copies; LivingRAG answered both orders
    assert len(env.requests) - calls == N + 2 * N
    assert all(r.extra.get("shared_from_order") == 1 for r in records if r.system == "linear" and r.order == 2)
    # the dataset order later, into the same folder: LinearRAG answers nothing again
    calls = len(env.requests)
    _stream(dataset, out, "--systems", "linear,living", "--orders", "3", "--seed", "7", "--only-orders", "0")
    records = read_records_jsonl(out / RECORDS_JSONL)
    assert len(records) == 2 * 3 * N and len(env.requests) - calls == N
    refused = _stream_refused(dataset, out, "--orders", "3", "--only-orders", "3")
    assert "--only-orders" in refused and "0..2" in refused
