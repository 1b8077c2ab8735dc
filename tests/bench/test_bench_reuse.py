"""``livingrag bench reuse``: the pure helpers on hand-built inputs with exact values, and the command end
to end on a tiny hand-made MuSiQue-style stream (real database, real packaged models: slow)."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livingrag.bench.reuse_metrics import (
    add_prior,
    answer_contained,
    mean,
    mean_std,
    memory_order,
    memory_prior,
    model_reuse_room,
    per_passage_recall,
    related,
    select_experiences,
    slot_merge,
    union_recall,
)

# ---------------------------------------------------------------- pure helpers


def test_per_passage_recall_is_the_share_of_gold_in_the_top_k() -> None:
    ranked = ["a", "x", "b", "y", "c"]
    assert per_passage_recall(ranked, {"a", "b", "c"}, 2) == pytest.approx(1 / 3)
    assert per_passage_recall(ranked, {"a", "b", "c"}, 3) == pytest.approx(2 / 3)
    assert per_passage_recall(ranked, {"a", "b", "c"}, 5) == 1.0
    assert per_passage_recall(ranked, ["a", "a", "z"], 5) == 0.5  # gold de-duplicated
    assert per_passage_recall(ranked, set(), 5) is None
    assert per_passage_recall([None, "b"], {"b"}, 1) == 0.0  # unmapped passages count as misses


def test_union_recall_counts_gold_found_in_either_set() -> None:
    assert union_recall(["a", "x"], {"a", "b", "c", "d"}, 2, {"b", "q"}) == 0.5
    assert union_recall(["a", "x"], {"a", "b"}, 1, set()) == 0.5
    assert union_recall(["a"], set(), 1, {"a"}) is None


def test_mean_and_mean_std_skip_none() -> None:
    assert mean([1.0, None, 0.0]) == 0.5
    assert mean([None]) is None
    assert mean_std([0.5]) == (0.5, None)
    m, s = mean_std([0.2, 0.4, None, 0.6])
    assert m == pytest.approx(0.4) and s == pytest.approx(0.2)
    assert mean_std([]) == (None, None)


def test_related_finds_earlier_questions_sharing_a_sub_question_id() -> None:
    subs = [{"s1", "s2"}, {"s3"}, {"s2", "s4"}, set(), {"s3", "s1"}]
    assert related(subs, 2, [0, 1]) == [0]
    assert related(subs, 4, [0, 1, 2]) == [0, 1]
    assert related(subs, 1, [0]) == []
    assert related(subs, 3, [0, 1, 2]) == []  # no decomposition: never related


def test_answer_containment_compares_normalised_answers() -> None:
    assert answer_contained(["The Beatles", "1963"], "the Beatles.")
    assert not answer_contained(["The Beatles", "1963"], "1964")
    assert answer_contained(["Paris"], "France", ["paris"])  # an earlier sub-answer
    assert not answer_contained(["Paris"], "France")
    assert not answer_contained(["", "the"], "")  # empty after normalisation never matches


def test_select_experiences_is_eq7_top_k_with_eq9_10_weights_and_a_floor() -> None:
    s = [0.2, 0.9, 0.6, 0.9]
    order, w = select_experiences(s, 3, 0.1, None)
    assert list(order) == [1, 3, 2]  # ties go to the earlier experience
    z = np.exp(np.array([0.9, 0.9, 0.6]) / 0.1)
    assert np.allclose(w, z / z.sum())
    order, w = select_experiences(s, 3, 0.1, 0.7)
    assert list(order) == [1, 3, 2] and w[2] == 0.0 and np.allclose(w[:2], (z / z.sum())[:2])
    order, w = select_experiences(s, 2, 1.0, None, confidences=[1.0, 0.5, 1.0, 1.0])
    assert list(order) == [1, 3] and np.allclose(w, [0.25, 0.5])  # eq. 10: times conf, not renormalised
    order, w = select_experiences([], 3, 0.1, None)
    assert order.size == 0 and w.size == 0


def test_memory_prior_and_order() -> None:
    passages = [[1, 2], [2, 3, 3], [9]]
    assert memory_prior(passages, [0.5, 0.25, 0.0]) == {1: 0.5, 2: 0.75, 3: 0.25}
    assert memory_order(passages, [0.25, 0.5, 0.0]) == [2, 3, 1]
    assert memory_order(passages, [0.0, 0.0, 0.0]) == []


def test_slot_merge_reserves_the_last_slots_for_memory() -> None:
    base = ["a", "b", "c", "d", "e"]
    assert slot_merge(base, ["m", "n"], 2) == ["a", "m"]
    assert slot_merge(base, ["m", "n"], 5) == ["a", "b", "c", "d", "m"]
    assert slot_merge(base, ["a", "m"], 2) == ["a", "m"]  # memory already listed is skipped
    assert slot_merge(base, ["b"], 2) == ["a", "b"]
    assert slot_merge(base, [], 2) == ["a", "b"]  # no memory: the base ranking
    assert slot_merge(base, ["c"], 5, slots=2) == ["a", "b", "c", "d", "e"]
    assert slot_merge(base, ["x", "y", "z"], 4, slots=2) == ["a", "b", "x", "y"]


def test_add_prior_scales_by_the_largest_reset() -> None:
    reset = np.array([0.0, 2.0, 1.0])
    assert np.allclose(add_prior(reset, {0: 1.0, 2: 0.5, 7: 1.0}, 0.5), [1.0, 2.0, 1.5])
    assert np.allclose(add_prior(reset, {}, 0.5), reset)
    assert np.allclose(add_prior(np.zeros(2), {1: 1.0}, 0.5), [0.0, 0.5])
    assert reset[0] == 0.0  # not modified in place


def test_model_reuse_room_counts_what_earlier_right_answers_could_fix_in_stream_order() -> None:
    answers = [["Brevik"], ["Kiruna"], ["brevik.", "Brevik town"], ["Olaf"], ["Kiruna"], ["Oslo"]]
    subs = [["Marta", "Brevik"], ["Henrik", "Kiruna"], ["Marta", "Brevik"], ["Brevik", "Olaf"], ["x", "Kiruna"], []]
    ids = [{"1", "2"}, {"3", "4"}, {"1", "5"}, {"2", "6"}, {"3", "7"}, {"8"}]
    right = [True, False, False, False, True, None]  # the last question was not answered
    # file order: q2 has q0's answer (after normalisation), q3 has it as a sub-answer, q4 is right
    # while q1, which shares sub-question 3 with it, was answered wrong
    assert model_reuse_room([0, 1, 2, 3, 4, 5], right, answers, subs, ids) == {
        "answered": 5,
        "right": 2,
        "fix_answer": 1,
        "fix_subanswer": 1,
        "at_risk": 1,
    }
    # the same answers in another order: no right answer comes before a wrong one it could fix, and
    # q0 now follows its related wrong q2 and q3
    assert model_reuse_room([3, 2, 1, 0, 4, 5], right, answers, subs, ids) == {
        "answered": 5,
        "right": 2,
        "fix_answer": 0,
        "fix_subanswer": 0,
        "at_risk": 2,
    }
    assert model_reuse_room([], right, answers, subs, ids)["answered"] == 0
    # what earlier related questions said: q0 names Marta, q2's intermediate answer, and Brevik,
    # q3's (related to q0 through sub-question 2), both answered wrong; q1 names q4's intermediate
    # answer "x", but q4 was answered right; "Henrikson" is not q1's intermediate answer Henrik, and
    # q1 has no earlier related question anyway
    outputs = ["Marta. The director Marta was born in Brevik.", "x is here", "Henrikson", "?", None, None]
    room = model_reuse_room([0, 1, 2, 3, 4, 5], right, answers, subs, ids, outputs)
    assert room == {"answered": 5, "right": 2, "fix_answer": 1, "fix_subanswer": 1, "at_risk": 1, "bridged": 2}
    # whole words only: "Brevikson" does not name Brevik
    outputs[0] = "Brevikson and Martaville"
    assert model_reuse_room([0, 1, 2, 3, 4, 5], right, answers, subs, ids, outputs)["bridged"] == 0


def test_linear_correctness_reads_linearrag_answers_and_names_a_bad_file(tmp_path: Path) -> None:
    from livingrag.bench.run_answers import linear_correctness
    from livingrag.errors import InvalidInput

    rows = [
        {
            "system": "linear",
            "order": 0,
            "position": 0,
            "question_id": "a",
            "prediction": "Oslo",
            "contain_correct": True,
        },
        {
            "system": "linear",
            "order": 1,
            "position": 3,
            "question_id": "a",
            "prediction": "Oslo",
            "contain_correct": True,
        },
        {
            "system": "linear",
            "order": 0,
            "position": 1,
            "question_id": "b",
            "prediction": "x",
            "contain_correct": False,
        },
        {"system": "linear", "order": 0, "position": 2, "question_id": "c", "prediction": "", "contain_correct": False},
        {"system": "living", "order": 0, "position": 2, "question_id": "d", "prediction": "y", "contain_correct": True},
    ]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # a failed answer (no prediction) is unknown
    assert linear_correctness(path) == {"a": (True, "Oslo"), "b": (False, "x")}
    with pytest.raises(InvalidInput, match="no such file"):
        linear_correctness(tmp_path / "missing.jsonl")
    only_living = tmp_path / "living.jsonl"
    only_living.write_text(json.dumps(rows[-1]) + "\n")
    with pytest.raises(InvalidInput, match="no LinearRAG answer"):
        linear_correctness(only_living)


# ---------------------------------------------------------------- end to end


def _record(qid: str, question: str, answer: str, steps: list[tuple[str, str, str, int]], paras: list[dict]) -> dict:
    """A raw MuSiQue record over ``paras``; ``steps`` = (sub-question id, question, answer, supporting idx)."""
    support = {s[3] for s in steps}
    return {
        "id": qid,
        "question": question,
        "answer": answer,
        "answer_aliases": [],
        "answerable": True,
        "paragraphs": [
            {"idx": i, "title": p["title"], "paragraph_text": p["text"], "is_supporting": i in support}
            for i, p in enumerate(paras)
        ],
        "question_decomposition": [
            {"id": sid, "question": q, "answer": a, "paragraph_support_idx": idx} for sid, q, a, idx in steps
        ],
    }


def _tiny_stream(tmp: Path) -> Path:
    from tests.corpus_support import CORPUS

    d = tmp / "musique_tiny"
    d.mkdir()
    recs = [
        _record(
            "2hop__1_2",
            "Where was the director of Silver Harbor born?",
            "Brevik",
            [("1", "Who directed Silver Harbor?", "Marta Quell", 0), ("2", "Where was #1 born?", "Brevik", 1)],
            CORPUS,
        ),
        _record(
            "2hop__3_4",
            "In which town was the author of The Glass Orchard born?",
            "Kiruna",
            [("3", "Who wrote The Glass Orchard?", "Henrik Tallberg", 4), ("4", "Where was #1 born?", "Kiruna", 5)],
            CORPUS,
        ),
        _record(
            "2hop__1_5",
            "Who built the harbour of the birthplace of the director of Silver Harbor?",
            "Olaf Renning",
            [
                ("1", "Who directed Silver Harbor?", "Marta Quell", 0),
                ("2", "Where was #1 born?", "Brevik", 1),
                ("5", "Who built the harbour of #2?", "Olaf Renning", 2),
            ],
            CORPUS,
        ),
        _record(
            "2hop__6_7",
            "Where was the Aurora Quartet founder's school?",
            "Sibelius Academy",
            [
                ("6", "Who founded the Aurora Quartet?", "Elina Saari", 8),
                ("7", "Where did #1 teach?", "Sibelius Academy", 9),
            ],
            CORPUS,
        ),
    ]
    (d / "musique_tiny.json").write_text(json.dumps(recs))
    (d / "musique_tiny_corpus.json").write_text(json.dumps(CORPUS))
    return d


@pytest.mark.db
@pytest.mark.slow
def test_bench_reuse_end_to_end_on_a_tiny_stream(db: Any, tmp_path: Path) -> None:
    from livingrag.bench.reuse_replay import _Prepared, format_report, rank_with_prior, run_reuse_bench
    from livingrag.config import get_settings
    from livingrag.corpus import service
    from livingrag.evaluation.datasets import load_dataset

    data = load_dataset("musique", _tiny_stream(tmp_path))
    assert [len(q.decomposition) for q in data.questions] == [2, 2, 3, 2]
    settings = get_settings(db={"data_dir": tmp_path})
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    out = run_reuse_bench(db, settings, data, dataset_name="musique", orders=2, seed=1, tenant=tenant)
    assert out["preset"] == "musique" and out["retrieval"]["max_iterations"] == 5
    assert out["questions"] == 4 and out["orders"] == 2 and out["questions_with_decomposition"] == 4
    assert "per-passage recall" in out["metric"]
    rows = {r["name"]: r for r in out["rows"]}
    assert {"base", "eq8", "eq8 floor 0.5", "passages→slot", "oracle eq8 (related only)"} <= rows.keys()
    assert "bound: base ∪ related gold" in rows
    for r in rows.values():
        for k in (2, 5):
            assert 0.0 <= r[f"passage_recall_at_{k}"] <= 1.0 and len(r[f"passage_recall_at_{k}_by_order"]) == 2
    # the base retriever does not depend on the order, and bounds are never below it
    b = rows["base"]
    assert b["passage_recall_at_5_by_order"][0] == b["passage_recall_at_5_by_order"][1]
    assert rows["bound: base ∪ related gold"]["passage_recall_at_5"] >= b["passage_recall_at_5"]
    assert rows["bound: base ∪ related retrieved"]["passage_recall_at_5"] >= b["passage_recall_at_5"]
    # exactly one question (the third of the file) shares sub-questions with an earlier one, in every
    # order where it comes after the first; order 0 is the file order
    assert out["per_order"][0]["counts"]["related_exists"] == 1
    assert out["reuse"]["related_exists"] == 0.25  # whichever of the two comes second
    assert out["per_order"][0]["counts"]["oracle_subanswer_contained"] == 1
    # without a floor every question but the first draws on the store (map fusion needs a seed entity)
    assert rows["passages→slot"]["used_share"] == 0.75 and 0.0 < rows["eq8"]["used_share"] <= 0.75
    text = format_report(out)
    assert "per-passage recall" in text and "K 3" in text and "preset musique" in text and "eq8" in text
    assert out["model_room"] == {} and "room the answer model" not in text

    # an answer model's LinearRAG answers: the first question right, the third (which shares its
    # sub-question 1 and has its answer Brevik as a sub-answer) wrong, the last unknown
    right = {"2hop__1_2": (True, "Marta Quell was born in Brevik"), "2hop__3_4": (False, "?"), "2hop__1_5": (False, "")}
    with_model = run_reuse_bench(
        db, settings, data, dataset_name="musique", orders=2, seed=1, tenant=tenant, answer_model=right,
        answer_source="run-x",
    )  # fmt: skip
    po = with_model["per_order"][0]["model_room"]  # order 0 is the file order
    # the first question's output names Marta Quell and Brevik, the third's intermediate answers
    assert po == {"answered": 3, "right": 1, "fix_answer": 0, "fix_subanswer": 1, "at_risk": 0, "bridged": 1}
    assert with_model["model_room"]["answered"] == 3 and with_model["answer_source"] == "run-x"
    assert with_model["model_room"]["right"] == pytest.approx(1 / 3, abs=1e-4)
    text = format_report(with_model)
    assert "room the answer model leaves for reuse (run-x" in text and "ceiling" in text
    from livingrag.errors import InvalidInput

    with pytest.raises(InvalidInput, match="answers none of this stream's questions"):
        run_reuse_bench(
            db, settings, data, dataset_name="musique", orders=1, tenant=tenant, answer_model={"other": (True, "")}
        )

    # the reset-prior ranking with no prior is the retriever's own ranking
    tid, _ = service.ensure_tenant(db, tenant, create=False)
    corpus = service.get_corpus(db, tid, out["corpus"])
    s = settings.model_copy(deep=True)
    s.retrieval.preset = "musique"
    r = service.retriever(db, tid, corpus, s)
    for q in data.questions:
        enc = r.encode(q.question)
        res = r.retrieve(enc, top_k=5)
        prep = _Prepared(enc, np.zeros(1), [], [], {})
        assert rank_with_prior(r, prep, dict(enc.base_activation), {}, 0.5, 5) == [p.id for p in res.passages]
        boosted = rank_with_prior(r, prep, dict(enc.base_activation), {res.passages[-1].id: 1.0}, 1000.0, 5)
        assert boosted[0] == res.passages[-1].id
    r.close()
    assert math.isfinite(out["seconds"])


def test_bench_reuse_help_has_an_example() -> None:
    from typer.testing import CliRunner

    from livingrag.cli.main import app

    res = CliRunner().invoke(app, ["bench", "reuse", "--help"])
    assert res.exit_code == 0 and "Example" in res.output and "bench reuse" in res.output


def test_default_variants_follow_the_floor_and_the_gammas() -> None:
    from livingrag.bench.reuse_replay import default_variants, resolve_preset
    from livingrag.errors import InvalidInput

    names = [v.name for v in default_variants(0.5)]
    assert names[:4] == ["eq8", "eq8 floor 0.5", "eq8, maps before fusion", "eq8 floor 0.5, maps before fusion"]
    assert not any("floor" in v.name for v in default_variants(-1))  # -1: the floor is off
    extra = default_variants(0.5, [2.0])[-3:]
    assert [(v.name, v.passages, v.oracle, v.gamma, v.passages_stored) for v in extra] == [
        ("passages→reset gamma 2", "reset", False, 2.0, "after"),
        ("passages→reset gamma 2, before memory", "reset", False, 2.0, "before"),
        ("oracle passages→reset gamma 2 (related only)", "reset", True, 2.0, "after"),
    ]
    assert resolve_preset("musique", None) == "musique" and resolve_preset("jsonl", None) == "custom"
    assert resolve_preset("musique", "2wikimultihopqa") == "2wikimultihopqa"
    with pytest.raises(InvalidInput):
        resolve_preset("musique", "nope")
