"""``livingrag bench paired`` and :mod:`livingrag.bench.paired_runs`: two runs' per-question files
compared question by question, with exact values on tiny runs and clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livingrag.bench.paired_runs import compare_runs, read_records, write_records
from livingrag.cli.main import app
from livingrag.errors import InvalidInput

A = [{"number": n, "question": f"q{n}", "passage_recall_at_5": v} for n, v in ((1, 0.5), (2, 1.0), (3, 0.0), (4, 1.0))]
B = [{"number": n, "question": f"q{n}", "passage_recall_at_5": v} for n, v in ((1, 1.0), (2, 1.0), (3, 0.5), (5, 1.0))]


def test_figures_compare_on_the_common_questions_b_minus_a() -> None:
    [c] = compare_runs(A, B, ["passage_recall_at_5"])
    d = c.as_dict()
    # common questions 1-3: A 0.5, 1.0, 0.0 (mean 0.5); B 1.0, 1.0, 0.5 (mean 0.8333); B - A = 1/3
    assert (d["questions"], d["a"], d["b"], d["diff"], d["better"], d["worse"]) == (3, 0.5, 0.8333, 0.3333, 2, 0)
    assert 0 <= d["lo"] <= d["diff"] <= d["hi"] <= 0.5  # every resampled mean lies in [0, 0.5]


def test_runs_over_other_questions_or_without_the_figure_are_refused() -> None:
    with pytest.raises(InvalidInput, match="no question number in common"):
        compare_runs(A, [{"number": 9, "passage_recall_at_5": 1.0}], ["passage_recall_at_5"])
    with pytest.raises(InvalidInput, match="question 1 differs"):
        compare_runs(A, [{"number": 1, "question": "other", "passage_recall_at_5": 1.0}], ["passage_recall_at_5"])
    with pytest.raises(InvalidInput, match="figure 'recall' is missing from question 1"):
        compare_runs(A, B, ["recall"])


def test_bad_files_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"number": 1}\nnot json\n')
    with pytest.raises(InvalidInput, match=r"bad.jsonl, line 2: not JSON"):
        read_records(bad)
    bad.write_text('{"question": "q"}\n')
    with pytest.raises(InvalidInput, match="integer 'number'"):
        read_records(bad)
    with pytest.raises(InvalidInput, match="cannot be read"):
        read_records(tmp_path / "missing.jsonl")


def test_the_command_prints_the_comparison(tmp_path: Path) -> None:
    write_records(tmp_path / "a.jsonl", A)
    write_records(tmp_path / "b.jsonl", B)
    res = CliRunner().invoke(app, ["bench", "paired", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--json"])
    assert res.exit_code == 0, res.output
    [row] = json.loads(res.stdout)["figures"]
    assert row["figure"] == "passage_recall_at_5" and row["diff"] == 0.3333
