"""The answers of a kept ``livingrag eval stream`` run (its ``records.jsonl``), selected the way the
gate benchmarks replay them (``benchmarks/gate_replay.py``, ``answer_confidence.py``,
``answer_agreement.py``): one system's (or every system's) answers, a range of stream positions
(tuning and held-out questions kept apart), each question or each (question, answer) pair once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from livingrag.errors import InvalidInput

OnePer = Literal["question", "answer"]


def parse_positions(spec: str | None) -> tuple[int, int] | None:
    """``"A:B"`` as (A, B), the positions A <= p < B; None for None."""
    if spec is None:
        return None
    lo, sep, hi = spec.partition(":")
    if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
        raise InvalidInput(f"--positions must be A:B with whole numbers A and B, got {spec!r}")
    return int(lo), int(hi)


def load_run_answers(
    path: str | Path,
    *,
    system: str | None = None,
    positions: str | None = None,
    one_per: OnePer | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The records of ``path`` that hold an answer (a non-empty ``prediction``), of ``system``
    (None: every system), at stream ``positions`` ("A:B"), then once per question (``one_per``
    "question": the run's orders repeat each question) or once per (question, lower-cased answer)
    ("answer": LinearRAG and LivingRAG often answer alike; the last record of a key is kept), then
    the first ``limit`` of those."""
    span = parse_positions(positions)
    with open(path, encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    records = [r for r in records if (system is None or r["system"] == system) and r.get("prediction")]
    if span is not None:
        records = [r for r in records if span[0] <= int(r["position"]) < span[1]]
    if one_per == "question":
        records = list({r["question_id"]: r for r in records}.values())
    elif one_per == "answer":
        records = list({(r["question_id"], r["prediction"].strip().lower()): r for r in records}.values())
    return records if limit is None else records[:limit]


def linear_correctness(path: str | Path) -> dict[str, tuple[bool, str]]:
    """Question id -> (whether LinearRAG's answer in the kept run at ``path`` is Contain-correct,
    the answer and its explanation). LinearRAG keeps no state between questions, so its one answer
    to a question serves any stream order; a question without an answer (a failed LLM call) is left
    out. Raises ``InvalidInput`` naming the file when it is missing or holds no LinearRAG answer."""
    if not Path(path).is_file():
        raise InvalidInput(f"--answers: no such file: {path}")
    records = load_run_answers(path, system="linear", one_per="question")
    if not records:
        raise InvalidInput(f"--answers: {path} holds no LinearRAG answer (system 'linear')")
    return {
        str(r["question_id"]): (bool(r["contain_correct"]), f"{r['prediction']} {r.get('explanation') or ''}".strip())
        for r in records
    }


__all__ = ["OnePer", "linear_correctness", "load_run_answers", "parse_positions"]
