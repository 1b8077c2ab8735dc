"""Answer, recall, cost and timing metrics with exact expected values; the LLM judge against a scripted
LLM (a test double of the LLM protocol, standing in for a real model only in this test)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from livingrag.errors import LLMTimeout
from livingrag.evaluation.metrics import (
    JUDGE_PROMPTS,
    Judge,
    Prices,
    all_gold_recall_at_k,
    contain_match,
    exact_match,
    format_gold,
    judge_kind_for,
    llm_accuracy,
    normalize_answer,
    parse_verdict,
    passage_recall_at_k,
    relative_delta,
    score_answer,
    summarize_run,
    timing_summary,
    token_f1,
    token_summary,
)
from livingrag.evaluation.records import QueryRecord
from livingrag.generation.llm import LLM, Completion, Message
from livingrag.generation.prompts import PromptTemplate


def test_normalize_answer_squad() -> None:
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("  20 March 851. ") == "20 march 851"


def test_contain_em_f1() -> None:
    assert contain_match("He died on 20 March 851 in Rome.", ["20 March 851"])
    assert not contain_match("He died in 851.", ["20 March 851"])
    assert contain_match("Answer: Stanley Hall", ["G. Stanley Hall", "Stanley Hall"])  # alias
    assert not contain_match("anything", ["", "the"])  # an empty normalised gold never matches
    assert exact_match("the Grey Coast", ["Grey Coast"]) and not exact_match("Grey Coast town", ["Grey Coast"])
    # pred "grey coast town" vs gold "grey coast": P = 2/3, R = 1, F1 = 0.8
    assert token_f1("Grey Coast town", ["Grey Coast"]) == pytest.approx(0.8)
    assert token_f1("nothing", ["Grey Coast"]) == 0.0
    s = score_answer("Grey Coast town", ["Grey Coast"])
    assert (s.contain, s.em, s.f1) == (True, False, pytest.approx(0.8))


def test_recall() -> None:
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert all_gold_recall_at_k(ranked, {"a", "c"}, 2) == 0.0
    assert all_gold_recall_at_k(ranked, {"a", "c"}, 5) == 1.0
    assert passage_recall_at_k(ranked, {"a", "c"}, 2) == 0.5
    assert passage_recall_at_k(ranked, {"a", "f", "x", "y"}, 5) == 0.25
    assert all_gold_recall_at_k(ranked, set(), 5) is None and passage_recall_at_k(ranked, (), 5) is None


def test_tokens_cost_timing() -> None:
    # 3 queries: prompt 6000 + 6000 + 6000, completion 1000 + 2000 + 0
    t = token_summary([6000, 6000, 6000], [1000, 2000, 0], Prices())
    assert (t.prompt_mean, t.completion_mean) == (6000.0, 1000.0)
    assert t.cost_usd == pytest.approx(18000 * 0.5 / 1e6 + 3000 * 3.0 / 1e6)  # 0.009 + 0.009
    assert token_summary([10], [10], Prices(1.0, 2.0)).cost_usd == pytest.approx(30 / 1e6)
    assert relative_delta(906.4, 1067.6) == pytest.approx(-0.151, abs=5e-4)
    assert relative_delta(1.0, 0.0) is None
    tm = timing_summary([0.5, 0.5], [30.0, 20.0], [None, None])
    assert (tm.retrieval_s, tm.llm_s, tm.validation_s) == (0.5, 25.0, None)
    assert tm.retrieval_over_llm == pytest.approx(0.02)


def test_summarize_run() -> None:
    common: dict[str, Any] = {"system": "linear", "order": 0, "question": "q", "gold_answers": ("a",)}
    recs = [
        QueryRecord(position=0, question_id="1", contain_correct=True, em=True, f1=1.0, llm_correct=True,
                    gold_keys=("x", "y"), retrieved_keys=("x", "z", "y"), prompt_tokens=100, completion_tokens=10,
                    retrieval_s=0.1, llm_s=1.0, **common),
        QueryRecord(position=1, question_id="2", contain_correct=False, llm_correct=None,
                    gold_keys=("x",), retrieved_keys=("z", "x"), prompt_tokens=300, completion_tokens=30,
                    retrieval_s=0.3, llm_s=3.0, **common),
    ]  # fmt: skip
    s = summarize_run(recs, prices=Prices(), judge="judge-model")
    assert (s.queries, s.contain_acc, s.em, s.f1) == (2, 0.5, 0.5, 0.5)
    assert (s.llm_acc.value, s.llm_acc.judged, s.llm_acc.total) == (1.0, 1, 2)
    assert (s.all_gold_recall_at_2, s.all_gold_recall_at_5) == (0.5, 1.0)  # q1: y is 3rd; q2: x is 2nd
    assert (s.passage_recall_at_2, s.passage_recall_at_5) == (0.75, 1.0)
    assert (s.tokens.prompt_mean, s.tokens.completion_mean) == (200.0, 20.0)
    assert s.timing.retrieval_s == pytest.approx(0.2) and s.timing.llm_s == 2.0
    assert summarize_run(recs, prices=Prices(), judge=None).llm_acc.reason == "no judge LLM configured"
    with pytest.raises(ValueError, match="several runs"):
        summarize_run([*recs, QueryRecord(system="living", order=0, position=0, question_id="1", question="q")],
                      prices=Prices(), judge=None)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Judge


def test_parse_verdict() -> None:
    assert parse_verdict("correct") is True
    assert parse_verdict("Incorrect.") is False
    assert parse_verdict("'CORRECT'") is True
    assert parse_verdict("**incorrect**") is False
    assert parse_verdict("<think>is it correct? maybe incorrect</think>\ncorrect") is True
    assert parse_verdict("The answer is not correct") is False
    assert parse_verdict("I cannot tell") is None
    assert parse_verdict("") is None


def test_llm_accuracy_is_unavailable_without_a_judge() -> None:
    a = llm_accuracy([True, False, True], judge=None)
    assert a.value is None and a.reason == "no judge LLM configured"
    b = llm_accuracy([True, False, None, True], judge="m")
    assert (b.value, b.judged, b.total) == (pytest.approx(2 / 3), 3, 4)
    assert llm_accuracy([None], judge="m").value is None


FIG6 = PromptTemplate(
    "judge_qa", 1, "You are an expert evaluator.",
    "Generated answer: {pred}\n\nGold answer: {gold}\n\nRespond with ONLY 'correct' or 'incorrect'.",
)  # fmt: skip


class ScriptedLLM:
    """Answers 'correct' when the gold text occurs in the generated answer, else 'incorrect'."""

    name = "scripted"

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[Sequence[Message]] = []
        self.kwargs: list[dict[str, object]] = []
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def complete(self, messages: Sequence[Message], *, max_tokens: int | None = None,
                 temperature: float | None = None, stop: Sequence[str] | None = None) -> Completion:  # fmt: skip
        with self.lock:
            self.calls.append(messages)
            self.kwargs.append({"max_tokens": max_tokens, "temperature": temperature})
        user = messages[-1]["content"]
        pred = user.split("Generated answer: ")[1].split("\n\nGold answer: ")[0]
        gold = user.split("Gold answer: ")[1].split("\n\n")[0].split(" (also accepted")[0]
        if self.fail_on and self.fail_on in pred:
            raise LLMTimeout("took too long")
        text = "correct" if gold.lower() in pred.lower() else "Incorrect"
        return Completion(text, prompt_tokens=40, completion_tokens=1, model="scripted", latency_s=0.0)


def test_judge_renders_the_prompt_and_parses() -> None:
    llm = ScriptedLLM()
    assert isinstance(llm, LLM)
    judge = Judge(llm, "qa", template=FIG6)
    v = judge.judge("It was Tarnholm.", ["Tarnholm", "Tarnholm village"])
    assert v.correct is True and (v.prompt_tokens, v.completion_tokens) == (40, 1)
    msgs = llm.calls[0]
    assert msgs[0] == {"role": "system", "content": "You are an expert evaluator."}
    assert "Gold answer: Tarnholm (also accepted: Tarnholm village)" in msgs[1]["content"]
    assert llm.kwargs[0] == {"max_tokens": 16, "temperature": 0.0}
    assert judge.judge("Oslo", ["Tarnholm"]).correct is False
    assert judge.name == "scripted (judge_qa.v1)"


def test_judge_many_keeps_order_and_reports_failures() -> None:
    judge = Judge(ScriptedLLM(fail_on="boom"), "qa", template=FIG6)
    items = [("x Tarnholm", ["Tarnholm"]), ("boom", ["Tarnholm"]), ("Oslo", ["Tarnholm"]), ("1680", ["1680"])]
    out = judge.judge_many(items, concurrency=3)
    assert [v.correct for v in out] == [True, None, False, True]
    assert out[1].error == "LLMTimeout: took too long"


def test_judge_prompt_names() -> None:
    assert JUDGE_PROMPTS == {"qa": "judge_qa", "support": "judge_support"}
    assert judge_kind_for("wixqa") == "support" and judge_kind_for("musique") == "qa"
    assert format_gold(["a"]) == "a" and format_gold([]) == ""
    with pytest.raises(ValueError, match="judge kind"):
        Judge(ScriptedLLM(), "nli", template=FIG6)
