"""Two benchmark runs over the same questions, compared question by question.

A run's per-question records (``bench retrieval --per-question FILE``: one JSON object a line, with
its question ``number``, ``question`` text and figures) are matched by number; the texts must agree.
For each figure f, with a_i and b_i its values in run A and run B on question i:

    diff = (1/n) sum_i (b_i - a_i)      (B - A: what the change did)

with the paired percentile bootstrap interval of :func:`livingrag.evaluation.paired.paired_bootstrap`,
and the questions where B is higher (better) and lower (worse).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livingrag.errors import InvalidInput
from livingrag.evaluation.paired import PairedDiff, paired_bootstrap

__all__ = ["FigureComparison", "compare_runs", "read_records", "write_records"]


def write_records(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """One JSON object a line (the folder is created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def read_records(path: Path) -> list[dict[str, Any]]:
    """The per-question records of a run; InvalidInput naming the file and line of a bad one."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise InvalidInput(f"{path}: cannot be read ({err.strerror or err})") from err
    out = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as err:
            raise InvalidInput(f"{path}, line {i}: not JSON ({err})") from err
        if not isinstance(rec, dict) or not isinstance(rec.get("number"), int):
            raise InvalidInput(f"{path}, line {i}: a record needs an integer 'number'")
        out.append(rec)
    if not out:
        raise InvalidInput(f"{path}: no records")
    return out


@dataclass(frozen=True)
class FigureComparison:
    """One figure of B against A over the questions both runs answered."""

    figure: str
    paired: PairedDiff
    better: int
    worse: int

    def as_dict(self) -> dict[str, Any]:
        p = self.paired
        return {
            "figure": self.figure,
            "questions": p.n,
            "a": round(p.mean_b, 4),  # paired_bootstrap(b, a): its "b" is run A
            "b": round(p.mean_a, 4),
            "diff": round(p.diff, 4),
            "lo": round(p.lo, 4),
            "hi": round(p.hi, 4),
            "better": self.better,
            "worse": self.worse,
        }


def compare_runs(
    a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]], figures: Sequence[str], *, seed: int = 0
) -> list[FigureComparison]:
    """Each figure of run ``b`` against run ``a`` on the questions both have (module docstring).
    InvalidInput when they share no question, a shared number holds different questions, or a
    figure is missing."""
    by_a = {int(r["number"]): r for r in a}
    by_b = {int(r["number"]): r for r in b}
    common = sorted(by_a.keys() & by_b.keys())
    if not common:
        raise InvalidInput("the two runs have no question number in common")
    for n in common:
        qa, qb = by_a[n].get("question"), by_b[n].get("question")
        if qa is not None and qb is not None and qa != qb:
            raise InvalidInput(f"question {n} differs between the runs ({qa!r} / {qb!r}): not the same questions")
    out = []
    for f in figures:
        missing = [n for n in common if f not in by_a[n] or f not in by_b[n]]
        if missing:
            raise InvalidInput(f"figure {f!r} is missing from question {missing[0]} of a run")
        va = [float(by_a[n][f]) for n in common]
        vb = [float(by_b[n][f]) for n in common]
        better = sum(1 for x, y in zip(va, vb, strict=True) if y > x)
        worse = sum(1 for x, y in zip(va, vb, strict=True) if y < x)
        out.append(FigureComparison(f, paired_bootstrap(vb, va, seed=seed), better, worse))
    return out
