"""The report: a synthetic run of records produces every file, every table and readable figures."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from livingrag.evaluation.datasets import load_dataset
from livingrag.evaluation.metrics import Prices
from livingrag.evaluation.plots import StreamAxis, stream_segments
from livingrag.evaluation.records import QueryRecord, read_records_csv
from livingrag.evaluation.report import write_report
from livingrag.evaluation.report_results import FIGURES, REPORT_FILES, build_results, paper_row_for

FIX = Path(__file__).parents[1] / "fixtures" / "eval"


TEMPLATES = ["when did [ENT] die", "who was born first [ENT] or [ENT]", "where is [ENT]"]


def synthetic_run(qids: list[str], *, orders: int = 2, ablations: bool = True, seed: int = 0) -> list[QueryRecord]:
    """A plausible stream: LivingRAG stores often early and rarely later, reuses stored experiences,
    and spends fewer completion tokens when it has a scaffold."""
    rng = random.Random(seed)
    out: list[QueryRecord] = []
    n = len(qids)
    for order in range(orders):
        perm = list(range(n))
        if order:
            rng.shuffle(perm)
        stored: list[int] = []
        for pos, qi in enumerate(perm):
            seeds = tuple(sorted(rng.sample(range(60), 2)))
            base: dict[str, Any] = {
                "order": order, "position": pos, "question_id": qids[qi], "question": f"question {qi}",
                "gold_answers": ("x",), "gold_keys": (str(qi), str(qi + 1)),
                "retrieved_keys": tuple(str(rng.randrange(n + 2)) for _ in range(5)),
                "seed_entity_ids": seeds, "context_entity_ids": (*seeds, rng.randrange(60)),
                "masked_question": rng.choice(TEMPLATES),
                "retrieval_s": 0.02,
            }  # fmt: skip
            lin_tokens = 300 + rng.randrange(200)
            out.append(QueryRecord(system="linear", contain_correct=rng.random() < 0.5, llm_correct=rng.random() < 0.6,
                                   prompt_tokens=1500, completion_tokens=lin_tokens, llm_s=3.0, **base))  # fmt: skip
            scaffold = rng.choice(stored) if stored else None
            novel = pos == 0 or rng.random() < max(0.15, 0.9 - 2 * pos / n)
            grounded = rng.random() < 0.8
            decision = ("stored" if grounded else "rejected_gs") if novel else "rejected_ns"
            sid = 100 + len(stored) if decision == "stored" else None
            if sid is not None:
                stored.append(sid)
            out.append(QueryRecord(
                system="living", contain_correct=rng.random() < 0.6, llm_correct=rng.random() < 0.7,
                prompt_tokens=1500 + (120 if scaffold else 0),
                completion_tokens=lin_tokens - (150 if scaffold else -10),
                llm_s=2.5, validation_s=0.2, fused_experience_ids=tuple(stored[-3:]) if scaffold else (),
                scaffold_experience_id=scaffold, scaffold_similarity=rng.random() if scaffold else None,
                graph_transfer=scaffold is not None and rng.random() < 0.4, writeback=decision,
                novelty=0.9 if novel else 0.2, grounding=(0.9 if grounded else 0.3) if novel else None,
                stored_experience_id=sid, store_size_after=len(stored), **base,
            ))  # fmt: skip
            if ablations:
                out.append(QueryRecord(system="living-no-scaffold", contain_correct=rng.random() < 0.55,
                                       llm_correct=rng.random() < 0.65, prompt_tokens=1500,
                                       completion_tokens=lin_tokens - 20, writeback="rejected_ns", novelty=0.1,
                                       **base))  # fmt: skip
    return out


def png_size(p: Path) -> tuple[int, int]:
    data = p.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{p.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_segments_expand_the_first_tenth() -> None:
    assert stream_segments(100) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)] + [
        (10 + round(i * 90 / 18), 10 + round((i + 1) * 90 / 18)) for i in range(18)
    ]
    assert stream_segments(3) == [(0, 1), (1, 2), (2, 3)]
    assert stream_segments(0) == []
    ax = StreamAxis(100)
    assert (ax.x(0), ax.x(10), ax.x(100)) == (0.0, pytest.approx(0.3), pytest.approx(1.0))


def test_synthetic_run_writes_every_file_and_table(tmp_path: Path) -> None:
    ds = load_dataset("musique", FIX / "musique")
    qids = [q.id for q in ds.questions] + [f"extra{i}" for i in range(57)]
    records = synthetic_run(qids)
    paths = write_report(tmp_path, records, dataset_name="musique", dataset=ds, judge="scripted judge",
                         config={"model": "test-model", "seed": 3})  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(REPORT_FILES)
    assert set(paths) == set(REPORT_FILES)

    md = (tmp_path / "report.md").read_text()
    for table in (1, 2, 3, 4, 5, 6, 8, 15, 16, 17, 18):
        assert f"(paper Table {table})" in md, f"Table {table} missing"
    for name in FIGURES.values():
        assert f"]({name})" in md
    assert "**paper**" in md and "not results of this run" in md
    assert "| LivingRAG | " in md and "| w/o Scaffold | " in md
    assert "Needs" not in md  # every section had the data it needs

    results = json.loads((tmp_path / "results.json").read_text())
    assert results["acc_metric"] == "llm" and results["dataset"]["paper_row"] == "MuSiQue"
    assert results["config"]["model"] == "test-model" and results["orders"] == [0, 1]
    t = results["tables"]
    assert {"accuracy", "retrieval", "tokens", "timing", "opportunities", "realised", "gates", "coverage",
            "ablations", "paired_deltas", "orders", "clusters"} <= t.keys()  # fmt: skip
    assert t["clusters"]["clusters"] == 1 and t["clusters"]["max_size"] == 2
    assert t["orders"]["orders"] == 2 and t["orders"]["contain_acc"]["linear"]["std"] is not None
    assert len(results["runs"]) == 6

    assert read_records_csv(tmp_path / "queries.csv") == sorted(records, key=lambda r: (r.order, r.position, r.system))
    for name in FIGURES.values():
        w, h = png_size(tmp_path / name)
        assert (w, h) == (1020, 552) and (tmp_path / name).stat().st_size > 20_000


def test_without_judge_llm_acc_is_unavailable(tmp_path: Path) -> None:
    run = synthetic_run([f"q{i}" for i in range(30)], orders=1, ablations=False)
    records = [QueryRecord.from_dict({**r.to_dict(), "llm_correct": None}) for r in run]
    write_report(tmp_path, records, dataset_name="2wikimultihopqa", judge=None)
    md = (tmp_path / "report.md").read_text()
    assert "LLM-Acc unavailable: no judge LLM configured." in md
    assert "ΔContain-Acc (points)" in md  # Table 17 falls back to Contain-Acc, and says so
    results = json.loads((tmp_path / "results.json").read_text())
    assert all(a["llm_acc"] is None for a in results["tables"]["accuracy"])
    assert results["acc_metric"] == "contain"


def test_linear_only_run_still_writes_every_file(tmp_path: Path) -> None:
    records = [
        r for r in synthetic_run([f"q{i}" for i in range(20)], orders=1, ablations=False) if r.system == "linear"
    ]
    write_report(tmp_path, records, dataset_name="jsonl", prices=Prices(1.0, 2.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(REPORT_FILES)
    md = (tmp_path / "report.md").read_text()
    assert "Needs a LivingRAG run." in md and "No paper row corresponds" in md and "**paper**" not in md
    assert png_size(tmp_path / FIGURES["fig3"])[0] > 0


def test_build_results_is_deterministic_and_checks_paper_row() -> None:
    records = synthetic_run([f"q{i}" for i in range(15)], orders=1, ablations=False)
    a = build_results(records, dataset_name="hotpotqa")
    b = build_results(records, dataset_name="hotpotqa")
    a.pop("generated_at"), b.pop("generated_at")
    assert a == b
    assert paper_row_for("musique", "MuSiQue-full") == "MuSiQue-full" and paper_row_for("jsonl") is None
    with pytest.raises(ValueError, match="paper_row"):
        paper_row_for("musique", "NQ")
    with pytest.raises(ValueError, match="no records"):
        build_results([], dataset_name="musique")
