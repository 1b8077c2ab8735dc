"""The answers the gate benchmarks replay from a kept run: system, positions, once per question or
per (question, answer), the limit; and a bad --positions named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from livingrag.bench.run_answers import load_run_answers, parse_positions
from livingrag.errors import InvalidInput


def _run(tmp_path: Path) -> Path:
    rows = [
        ("linear", 0, "q0", "Paris"), ("living", 0, "q0", " paris "), ("linear", 1, "q1", ""),
        ("linear", 2, "q2", "Oslo"), ("living", 2, "q2", "Bergen"), ("linear", 3, "q3", "Rome"),
        ("linear", 2, "q2", "Oslo again"),  # a later order repeats q2
    ]  # fmt: skip
    path = tmp_path / "records.jsonl"
    path.write_text(
        "".join(
            json.dumps({"system": s, "position": p, "question_id": q, "prediction": a}) + "\n\n"  # blank lines skipped
            for s, p, q, a in rows
        ),
        encoding="utf-8",
    )
    return path


def _keys(records: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [(r["system"], r["question_id"], r["prediction"]) for r in records]


def test_selection_by_system_positions_and_once_per(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert len(load_run_answers(run)) == 6  # the empty answer is left out
    assert _keys(load_run_answers(run, system="linear", positions="1:3")) == [
        ("linear", "q2", "Oslo"), ("linear", "q2", "Oslo again"),
    ]  # fmt: skip
    assert _keys(load_run_answers(run, system="linear", one_per="question")) == [
        ("linear", "q0", "Paris"), ("linear", "q2", "Oslo again"), ("linear", "q3", "Rome"),
    ]  # fmt: skip
    # (question, lower-cased stripped answer): the two systems' "Paris" are one pair, the last kept
    assert _keys(load_run_answers(run, one_per="answer", positions="0:3")) == [
        ("living", "q0", " paris "), ("linear", "q2", "Oslo"),
        ("living", "q2", "Bergen"), ("linear", "q2", "Oslo again"),
    ]  # fmt: skip
    assert _keys(load_run_answers(run, system="linear", one_per="question", limit=2)) == [
        ("linear", "q0", "Paris"), ("linear", "q2", "Oslo again"),
    ]  # fmt: skip


def test_positions_are_parsed_and_a_bad_one_is_named() -> None:
    assert parse_positions("150:300") == (150, 300) and parse_positions(None) is None
    for bad in ("150", "a:b", "1:", ":2", "-1:3"):
        with pytest.raises(InvalidInput, match="--positions must be A:B"):
            parse_positions(bad)
