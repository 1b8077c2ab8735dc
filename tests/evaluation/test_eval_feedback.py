"""Simulated feedback in the stream evaluation, without a database: the draw, the verdicts, the
counts per run and the report's feedback table (with the paired intervals against LinearRAG)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from livingrag.errors import InvalidInput
from livingrag.evaluation.feedback import (
    chosen_for_feedback,
    feedback_stats,
    learned_gate_stats,
    parse_feedback_rate,
    simulated_verdict,
)
from livingrag.evaluation.records import QueryRecord, read_records_csv
from livingrag.evaluation.report import write_report
from livingrag.evaluation.report_markdown import render_markdown
from livingrag.evaluation.report_results import build_results


@pytest.mark.parametrize(("value", "rate"), [("0", 0.0), ("0.3", 0.3), ("1", 1.0), (" 1.0 ", 1.0), (0.5, 0.5)])
def test_feedback_rate_parses_a_share(value: object, rate: float) -> None:
    assert parse_feedback_rate(value) == rate


@pytest.mark.parametrize("value", ["-0.1", "1.5", "abc", "", "nan", "inf", None, True])
def test_a_bad_feedback_rate_is_named(value: object) -> None:
    with pytest.raises(InvalidInput, match=r"--feedback-rate must be a number from 0 to 1"):
        parse_feedback_rate(value)


def test_the_draw_is_seeded_per_question() -> None:
    ids = [f"q{i}" for i in range(2000)]
    drawn = [q for q in ids if chosen_for_feedback(q, 0.3, seed=7)]
    assert drawn == [q for q in ids if chosen_for_feedback(q, 0.3, seed=7)], "deterministic per seed"
    assert drawn != [q for q in ids if chosen_for_feedback(q, 0.3, seed=8)], "another seed, another draw"
    assert 0.27 < len(drawn) / len(ids) < 0.33
    assert all(chosen_for_feedback(q, 1.0, seed=7) for q in ids)
    assert not any(chosen_for_feedback(q, 0.0, seed=7) for q in ids)
    # a question is drawn on its own id: the same whatever else the stream holds, and a repeat apart
    assert chosen_for_feedback("q5", 0.3, seed=7) == ("q5" in drawn)


def test_the_verdict_follows_contain_and_corrects_to_the_first_gold_answer() -> None:
    assert simulated_verdict("He was born in Galway, Ireland.", ["Galway"]) == ("right", None)
    assert simulated_verdict("the salt road", ["The Salt Road"]) == ("right", None)
    assert simulated_verdict("Lisbon", ["Galway", "Galway, Ireland"]) == ("wrong", "Galway")
    assert simulated_verdict("Lisbon", []) == ("wrong", None)


def _rec(system: str, i: int, **kw: object) -> QueryRecord:
    base: dict[str, object] = {"order": 0, "position": i, "question_id": f"q{i}", "question": f"question {i}"}
    return QueryRecord(system=system, **(base | kw))  # type: ignore[arg-type]


def _run() -> list[QueryRecord]:
    """Six questions; LivingRAG serves two repeats from memory (one of them wrong, by construction)."""
    linear = [_rec("linear", i, contain_correct=i % 2 == 0, prompt_tokens=100, completion_tokens=10) for i in range(6)]
    living = [
        _rec("living", 0, contain_correct=True, prompt_tokens=100, completion_tokens=10, feedback="right",
             writeback="stored", stored_experience_id=1),
        _rec("living", 1, contain_correct=False, prompt_tokens=100, completion_tokens=12, feedback="wrong",
             feedback_correction=True, correction_experience_id=2, writeback="rejected_gs"),
        _rec("living", 2, contain_correct=True, prompt_tokens=100, completion_tokens=10, writeback="rejected_ns"),
        _rec("living", 3, contain_correct=True, reused_experience_id=2, reused_wrong=False, feedback="right"),
        _rec("living", 4, contain_correct=False, reused_experience_id=1, reused_wrong=True, feedback="wrong",
             feedback_correction=True, correction_experience_id=3),
        _rec("living", 5, error="LLMError: down"),
    ]  # fmt: skip
    return linear + living


def test_feedback_stats_count_calls_memory_and_verdicts() -> None:
    records = _run()
    living = feedback_stats([r for r in records if r.system == "living"])
    assert (living.questions, living.feedback, living.right, living.wrong, living.corrections) == (6, 4, 2, 2, 2)
    assert (living.llm_calls, living.served_from_memory, living.served_wrong) == (3, 2, 1)
    assert living.contain_acc == pytest.approx(3 / 6)
    assert living.prompt_mean == pytest.approx(300 / 6) and living.completion_mean == pytest.approx(32 / 6)
    linear = feedback_stats([r for r in records if r.system == "linear"])
    assert (linear.feedback, linear.llm_calls, linear.served_from_memory) == (0, 6, 0)
    with pytest.raises(ValueError, match="several runs"):
        feedback_stats(records)


def test_the_report_has_the_feedback_table_with_paired_intervals(tmp_path: Path) -> None:
    records = _run()
    config = {"feedback_rate": 0.3, "feedback_seed": 7, "reuse_answers_from": "verified"}
    results = build_results(records, dataset_name="jsonl", config=config)
    rows = {r["system"]: r for r in results["tables"]["feedback"]}
    assert rows["living"]["llm_calls"] == 3 and rows["living"]["linear_llm_calls"] == 6
    assert rows["living"]["served_from_memory"] == 2 and rows["living"]["served_wrong"] == 1
    # the paired intervals are the paired section's (question 5 failed in LivingRAG: left out)
    paired = next(p for p in results["tables"]["paired"] if p["system"] == "living")
    assert rows["living"]["contain"] == paired["contain"] and paired["n"] == 5
    assert rows["living"]["prompt_tokens"]["diff"] == pytest.approx((300 - 500) / 5)
    assert rows["linear"]["contain"] is None

    md = render_markdown(results)
    assert "## Feedback and answers from memory" in md
    assert "simulated from the gold answers" in md and "R = 0.3" in md and "feedback seed 7" in md
    header = next(line for line in md.splitlines() if line.startswith("| System | Order | Questions | Feedback"))
    for column in ("LLM calls", "Served from memory", "… of them wrong", "Contain-Acc", "Prompt tokens", "Completion"):
        assert column in header
    living_row = next(line for line in md.splitlines() if line.startswith("| LivingRAG | 0 | 6 | 2 / 2 (2)"))
    assert "| 3 (-50.0%) | 2 | 1 |" in living_row
    assert "No feedback was given" in render_markdown(build_results(records, dataset_name="jsonl",
                                                                     config={"feedback_rate": 0.0}))  # fmt: skip

    # the records keep the new fields through JSON lines and CSV, and `eval report` re-renders from them
    write_report(tmp_path, records, dataset_name="jsonl", config=config)
    assert read_records_csv(tmp_path / "queries.csv") == sorted(records, key=lambda r: (r.order, r.position, r.system))
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["config"]["feedback_rate"] == 0.3 and saved["tables"]["feedback"]


def test_a_record_without_the_feedback_fields_still_reads() -> None:
    old = {"system": "living", "order": 0, "position": 0, "question_id": "q", "question": "?"}
    r = QueryRecord.from_dict(old)
    assert r.feedback is None and r.feedback_correction is None and r.reused_wrong is None
    assert QueryRecord.from_dict(r.to_dict()) == r


def test_learned_gate_stats_count_online_auc_stored_precision_and_unverified_serving() -> None:
    def g(gate: str, p: float | None, trust: str = "unverified") -> dict[str, object]:
        return {"gate": {"gate": gate, "probability": p, "trust": trust}}

    run = [
        _rec("living", 0, contain_correct=False, writeback="stored", extra=g("fixed", None)),
        _rec("living", 1, contain_correct=True, writeback="stored", extra=g("fixed", 0.4)),
        _rec("living", 2, contain_correct=False, writeback="rejected_gs", extra=g("fixed", 0.6)),
        _rec("living", 3, contain_correct=True, writeback="stored", extra=g("learned", 0.9, "auto_verified")),
        _rec("living", 4, contain_correct=False, writeback="rejected_gs", extra=g("learned", 0.2)),
        _rec("living", 5, contain_correct=True, reused_experience_id=7, extra={"reused_trust": "auto_verified"}),
        _rec("living", 6, contain_correct=False, reused_experience_id=8, extra={"reused_trust": "verified"}),
        _rec("living", 7, contain_correct=False, reused_experience_id=9, extra={"reused_trust": "auto_verified"}),
    ]
    st = learned_gate_stats(run)
    assert (st.questions, st.watched, st.decided_learned, st.first_learned_position) == (8, 4, 2, 3)
    # right {0.4, 0.9} against wrong {0.6, 0.2}: 3 of 4 pairs ordered
    assert st.online_auc == 0.75
    assert st.online_auc_late is None  # the second half (positions >= 4) watched one wrong answer only
    assert (st.stored_fixed, st.stored_fixed_precision) == (2, 0.5)
    assert (st.stored_learned, st.stored_learned_precision, st.stored_auto_verified) == (1, 1.0, 1)
    assert (st.stored_late, st.stored_late_precision) == (0, None)
    assert (st.served_unverified, st.served_unverified_wrong) == (2, 1)


def test_the_report_shows_the_learned_gate_only_when_one_watched() -> None:
    linear = [_rec("linear", i, contain_correct=i % 2 == 0) for i in range(4)]
    living = [
        _rec("living", i, contain_correct=i % 2 == 0, writeback="stored",
             extra={"gate": {"gate": "learned" if i >= 2 else "fixed", "probability": 0.8 - 0.5 * (i % 2),
                             "trust": "unverified"}})
        for i in range(4)
    ]  # fmt: skip
    results = build_results(linear + living, dataset_name="jsonl", config={"feedback_rate": 1.0})
    (row,) = results["tables"]["learned_gate"]
    assert row["online_auc"] == 1.0 and row["decided_learned"] == 2 and row["first_learned_position"] == 2
    md = render_markdown(results)
    assert "## The learned gate" in md and "| LivingRAG | 0 | 4 | 2 (from #2) | 1.000 |" in md
    quiet = [_rec("living", i, contain_correct=True, writeback="stored") for i in range(2)]
    assert "## The learned gate" not in render_markdown(build_results(linear + quiet, dataset_name="jsonl", config={}))
