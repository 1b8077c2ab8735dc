"""Per-query records: JSON-lines and CSV round trips, resume-friendly reading, and field validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from livingrag.errors import InvalidInput
from livingrag.evaluation.records import (
    CSV_COLUMNS,
    QueryRecord,
    append_record,
    by_system_and_order,
    read_records_csv,
    read_records_jsonl,
    write_records_csv,
    write_records_jsonl,
)


def full_record() -> QueryRecord:
    return QueryRecord(
        system="living",
        order=2,
        position=17,
        question_id="2hop__11_12",
        question='Where was the founder of "Mirela Harbour", born?\nTwo lines.',
        gold_answers=("Tarnholm", "Tarnholm village"),
        prediction="Tarnholm",
        explanation="Osk Velin founded it; he was born in Tarnholm.",
        contain_correct=True,
        em=True,
        f1=1.0,
        llm_correct=None,
        gold_keys=("0", "1"),
        retrieved_keys=("1", "7", "0", "3", "4"),
        all_gold_recall_at_2=0.0,
        all_gold_recall_at_5=1.0,
        prompt_tokens=6012,
        completion_tokens=88,
        cost_usd=0.003270,
        retrieval_s=0.031,
        llm_s=4.5,
        validation_s=0.25,
        seed_entity_ids=(12, 40),
        context_entity_ids=(12, 40, 41),
        masked_question="Where was the founder of [ENT] born?",
        fused_experience_ids=(3, 9),
        scaffold_experience_id=9,
        scaffold_similarity=0.71,
        graph_transfer=True,
        writeback="rejected_gs",
        novelty=0.8,
        grounding=0.4,
        stored_experience_id=None,
        store_size_after=5,
        error=None,
        extra={"model": "qwen"},
    )


def test_jsonl_round_trip(tmp_path: Path) -> None:
    a = full_record()
    b = QueryRecord(system="linear", order=0, position=0, question_id="x", question="q")
    p = tmp_path / "r.jsonl"
    write_records_jsonl(p, [a, b])
    back = read_records_jsonl(p)
    assert back == [a, b] and back[0].extra == {"model": "qwen"}
    assert json.loads(p.read_text().splitlines()[0])["seed_entity_ids"] == [12, 40]


def test_csv_round_trip(tmp_path: Path) -> None:
    a = full_record()
    b = QueryRecord(system="linear", order=0, position=0, question_id="x", question="q", explanation="")
    p = tmp_path / "r.csv"
    write_records_csv(p, [a, b])
    header = p.read_text().splitlines()[0].split(",")
    assert tuple(header) == CSV_COLUMNS
    assert read_records_csv(p) == [a, b]


def test_append_and_truncated_tail(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    recs = [QueryRecord(system="linear", order=0, position=i, question_id=str(i), question="q") for i in range(3)]
    for r in recs:
        append_record(p, r)
    with p.open("a") as fh:
        fh.write('{"system": "linear", "order": 0, "posi')  # a run killed mid-write
    with pytest.raises(InvalidInput, match="line 4: not valid JSON"):
        read_records_jsonl(p)
    assert read_records_jsonl(p, allow_truncated_tail=True) == recs


def test_bad_fields_are_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown field"):
        QueryRecord.from_dict({"system": "s", "order": 0, "position": 0, "question_id": "x", "question": "q", "zz": 1})
    with pytest.raises(InvalidInput, match="missing field"):
        QueryRecord.from_dict({"system": "s", "order": 0})
    with pytest.raises(InvalidInput, match=r"field 'prompt_tokens': expected an integer"):
        QueryRecord.from_dict({"system": "s", "order": 0, "position": 0, "question_id": "x", "question": "q",
                               "prompt_tokens": 1.5})  # fmt: skip
    with pytest.raises(InvalidInput, match="writeback must be one of"):
        QueryRecord(system="s", order=0, position=0, question_id="x", question="q", writeback="maybe")
    p = tmp_path / "r.jsonl"
    p.write_text(
        '{"system": "s", "order": 0, "position": 0, "question_id": "x", "question": "q", "llm_correct": "yes"}\n'
    )
    with pytest.raises(InvalidInput, match=r"r.jsonl: line 1: field 'llm_correct'"):
        read_records_jsonl(p)


def test_grouping_by_run() -> None:
    recs = [
        QueryRecord(system=s, order=o, position=p, question_id=f"{p}", question="q")
        for s in ("living-no-gate", "living", "linear")
        for o in (1, 0)
        for p in (2, 0, 1)
    ]
    runs = by_system_and_order(recs)
    assert list(runs) == [
        ("linear", 0),
        ("linear", 1),
        ("living", 0),
        ("living", 1),
        ("living-no-gate", 0),
        ("living-no-gate", 1),
    ]
    assert [r.position for r in runs[("living", 1)]] == [0, 1, 2]
