"""Paired comparison against LinearRAG: the bootstrap interval, fixed/broke counts, and the report's rows."""

from __future__ import annotations

import pytest

from livingrag.evaluation.paired import fixed_and_broke, paired_bootstrap
from livingrag.evaluation.records import QueryRecord, by_system_and_order
from livingrag.evaluation.report_results import paired_rows
from livingrag.evaluation.report_text import paired_section


def rec(system: str, qid: str, order: int = 0, **kw: object) -> QueryRecord:
    return QueryRecord(system=system, order=order, position=int(qid[1:]), question_id=qid, question="?", **kw)  # type: ignore[arg-type]


def test_constant_differences_have_a_point_interval() -> None:
    d = paired_bootstrap([3.0, 5.0, 7.0], [2.0, 4.0, 6.0], resamples=200)
    assert (d.n, d.mean_a, d.mean_b, d.diff, d.lo, d.hi) == (3, 5.0, 4.0, 1.0, 1.0, 1.0)
    assert d.excludes_zero


def test_the_interval_brackets_the_mean_and_is_reproducible() -> None:
    a, b = [1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 1, 1]  # d = [1, 0, 0, 1, -1, 0]: mean 1/6
    d = paired_bootstrap(a, b, seed=3)
    assert d.diff == pytest.approx(1 / 6)
    assert -1 <= d.lo <= d.diff <= d.hi <= 1 and not d.excludes_zero
    assert paired_bootstrap(a, b, seed=3) == d
    assert d.confidence == 0.95 and d.resamples == 10_000


def test_fixed_and_broke() -> None:
    assert fixed_and_broke([True, True, False, False], [False, True, True, False]) == (1, 1)
    assert fixed_and_broke([], []) == (0, 0)


@pytest.mark.parametrize(
    ("a", "b", "kw", "message"),
    [
        ([1.0], [1.0, 2.0], {}, "differ in length: 1 and 2"),
        ([], [], {}, "empty"),
        ([1.0], [1.0], {"confidence": 1.0}, "confidence must be in"),
        ([1.0], [1.0], {"resamples": 0}, "resamples must be at least 1"),
    ],
)
def test_bad_input_is_refused_by_name(a: list[float], b: list[float], kw: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(a, b, **kw)  # type: ignore[arg-type]


def test_report_rows_pair_each_order_with_linearrag_and_leave_failures_out() -> None:
    gold = ("g1", "g2")
    records = [
        rec("linear", "q0", contain_correct=True, completion_tokens=10, gold_keys=gold, retrieved_keys=("g1", "x")),
        rec("linear", "q1", contain_correct=False, completion_tokens=20, gold_keys=gold, retrieved_keys=("x",)),
        rec("linear", "q2", contain_correct=False, completion_tokens=30),
        rec("living", "q0", contain_correct=False, completion_tokens=8, gold_keys=gold, retrieved_keys=("g1", "g2")),
        rec("living", "q1", contain_correct=True, completion_tokens=16, gold_keys=gold, retrieved_keys=("g2",)),
        rec("living", "q2", error="LLMUnavailable: ended with SIGSEGV"),
        rec("living", "q0", order=1, contain_correct=True, completion_tokens=10),
        rec("living", "q1", order=1, contain_correct=True, completion_tokens=20),
        rec("living", "q2", order=1, contain_correct=True, completion_tokens=30),
    ]
    rows = paired_rows(by_system_and_order(records))
    assert [(r["system"], r["order"], r["n"], r["excluded"]) for r in rows] == [
        ("living", 0, 2, 1),
        ("living", 1, 3, 0),
        ("living", "all", 2, None),
    ]
    first, second, pooled = rows
    assert (first["fixed"], first["broke"]) == (1, 1) and first["contain"]["diff"] == 0.0
    assert first["completion_tokens"]["diff"] == pytest.approx(-3.0)  # (8 - 10 + 16 - 20) / 2
    assert first["passage_recall_at_5"]["diff"] == pytest.approx(0.5)  # (1 - 0.5 + 0.5 - 0) / 2
    assert (second["fixed"], second["broke"]) == (2, 0) and second["passage_recall_at_5"] is None
    assert pooled["contain"]["diff"] == pytest.approx(0.25)  # q0: 0.5 - 1, q1: 1 - 0
    text = paired_section(rows)
    assert "## Paired against LinearRAG" in text and "| living | 0 | 2 | 50.00 vs 50.00 | +0.0 [" in text
    assert "1 / 1" in text and "2 / 0" in text


def test_report_rows_need_a_linearrag_run() -> None:
    assert paired_rows(by_system_and_order([rec("living", "q0")])) == []
    assert "Needs a LinearRAG run" in paired_section([])


def test_the_pooled_row_takes_linearrags_answer_from_any_order_that_has_it() -> None:
    """LinearRAG's order 0 holds only q0 (an interrupted start); orders 1 and 2 hold both questions:
    the pooled row pairs both questions, not only those of order 0."""
    records = [
        rec("linear", "q0", order=0, contain_correct=False),
        *(rec("linear", q, order=o, contain_correct=False) for o in (1, 2) for q in ("q0", "q1")),
        *(rec("living", q, order=o, contain_correct=True) for o in (1, 2) for q in ("q0", "q1")),
    ]
    rows = paired_rows(by_system_and_order(records))
    pooled = next(r for r in rows if r["order"] == "all")
    assert pooled["n"] == 2 and pooled["contain"]["diff"] == pytest.approx(1.0)


def test_the_main_order_is_the_first_one_every_system_ran_in_full() -> None:
    from livingrag.evaluation.report_results import main_order

    records = [
        rec("linear", "q0", order=0),
        *(rec(s, q, order=o) for s in ("linear", "living") for o in (1, 2) for q in ("q0", "q1")),
    ]
    runs = by_system_and_order(records)
    assert main_order(runs, ["linear", "living"], [0, 1, 2]) == 1
    full = by_system_and_order([rec(s, q, order=o) for s in ("linear", "living") for o in (0, 1) for q in ("q0",)])
    assert main_order(full, ["linear", "living"], [0, 1]) == 0
