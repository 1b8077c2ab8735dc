"""``livingrag bench gate-learn``'s replay (livingrag.bench.gate_learn_replay) over a small hand-made
kept run: the answers found in their passages are the right ones, so a gate that learns learns that,
decides once it has earned it, and stores only right answers from then on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from livingrag.bench.gate_learn_replay import RunSpec, format_report, replay, summarize
from livingrag.config import get_settings
from livingrag.errors import InvalidInput
from livingrag.evaluation.records import QueryRecord, write_records_jsonl
from livingrag.experience.verifiers import ResolvedVerifier
from tests.experience_helpers import CountingVerifier

N = 120


def kept_run(tmp_path: Path) -> RunSpec:
    corpus = [{"id": f"p{i}", "title": f"Town {i}", "text": f"Town {i} lies by the river Aar{i}."} for i in range(N)]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(c) for c in corpus))
    questions: list[dict[str, Any]] = [
        {"id": f"q{i}", "question": f"Which river flows by Town {i}?", "answers": [f"Aar{i}"]} for i in range(N)
    ]
    (tmp_path / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions))
    records = []
    for i in range(N):
        right = i % 3 != 0
        records.append(
            QueryRecord(
                system="living", order=0, position=i, question_id=f"q{i}", question=questions[i]["question"],
                gold_answers=(f"Aar{i}",), prediction=f"Aar{i}" if right else "Rhine", explanation="",
                contain_correct=right, retrieved_keys=(f"p{i}",),
                writeback="rejected_ns" if i == 5 else "stored", novelty=1.0,
            )
        )  # fmt: skip
    write_records_jsonl(tmp_path / "records.jsonl", records)
    return RunSpec.parse(f"{tmp_path / 'records.jsonl'}:jsonl:{tmp_path / 'questions.jsonl'}")


def test_the_replay_learns_decides_and_stores_only_right_answers(tmp_path: Path) -> None:
    spec = kept_run(tmp_path)
    settings = get_settings(gates={"learn_min_labels": 30, "learn_refit_every": 10, "learn_min_support": 5})
    verifier = ResolvedVerifier(CountingVerifier(1.0), "counting", "given")
    steps, fit = replay([spec], settings, verifier, lambda a: [], rate=1.0, seed=0)
    assert len(steps) == N - 1  # the candidate the novelty gate stopped has no features
    assert [s.gate for s in steps[:30]] == ["fixed"] * 30 and all(s.probability is None for s in steps[:30])
    first = next(s.position for s in steps if s.gate == "learned")
    assert 30 <= first <= 31  # fitted on the first 30 labels, deciding from the next answer
    assert fit is not None and fit.assessment.earned and fit.assessment.auc == 1.0
    s = summarize(steps, fit, start=60, resamples=200)
    assert s["answers"] == 60 and s["decided_by_learned"] == 60 and s["online_auc"] == 1.0
    assert s["stored_precision"] == 1.0 and s["stored"] == 40
    assert s["live_stored"] == 60 and s["live_stored_precision"] == pytest.approx(40 / 60, abs=1e-4)
    assert s["precision_difference"] == pytest.approx(1 - 40 / 60, abs=1e-4)
    assert s["auto_verified"] == 40 and s["auto_verified_wrong"] == 0
    text = format_report(s, {"feedback_rate": 1.0})
    assert "online AUC of P(right)" in text and "auto-verified (would be served without feedback): 40" in text


def test_no_labels_means_the_fixed_gate_all_along(tmp_path: Path) -> None:
    spec = kept_run(tmp_path)
    verifier = ResolvedVerifier(CountingVerifier(1.0), "counting", "given")
    steps, fit = replay([spec], get_settings(), verifier, lambda a: [], rate=0.0, seed=0)
    assert fit is None and {s.gate for s in steps} == {"fixed"}
    assert [s.stored for s in steps] == [s.live_stored for s in steps]


def test_a_bad_run_spec_names_the_problem(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"RECORDS\.jsonl:DATASET:DATA_DIR"):
        RunSpec.parse("only-a-path")
    with pytest.raises(InvalidInput, match="no such records file"):
        RunSpec.parse(f"{tmp_path / 'missing.jsonl'}:jsonl:{tmp_path}")
