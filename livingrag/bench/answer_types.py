"""What the answer-type rule of the answer-form check would have done to kept ``eval stream`` runs.

For each run folder (its ``records.jsonl``), the records whose write-back candidate was stored
(``writeback == "stored"``), and separately those that reached the grounding gate (stored or
``rejected_gs``), are checked again with
:func:`~livingrag.experience.answer_form.check_answer_form`, twice: without answer labels (the word
rules alone, what the gate ran) and with the spaCy NER labels of the answer (the answer-type rule
added). A record the second check rejects and the first accepts is one the new rule would remove;
it is *wrong* when its answer fails Contain against the gold answers (the record's
``contain_correct``: some gold answer, normalised, is contained in the normalised prediction) and
*right* otherwise. Counts are given per run, in total, and per answer kind the question asks for
(:func:`~livingrag.experience.answer_form.answer_type`; "none" where no kind is read). No database
and no LLM: only the records and the NER model.
"""

from __future__ import annotations

import platform
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livingrag.evaluation.records import DECISION_REJECTED_GS, DECISION_STORED, QueryRecord, read_records_jsonl
from livingrag.experience.answer_form import answer_type, check_answer_form

Labeler = Callable[[str], list[str]]
"""The answer's NER labels (:func:`livingrag.corpus.ner.answer_entity_labels` bound to a model)."""

REACHED_GROUNDING = (DECISION_STORED, DECISION_REJECTED_GS)


@dataclass(frozen=True)
class Flagged:
    """One answer the answer-type rule rejects and the word rules accept."""

    run: str
    question_id: str
    position: int
    writeback: str
    question: str
    answer: str
    gold: tuple[str, ...]
    labels: tuple[str, ...]
    correct: bool
    expected: str | None
    reason: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "question_id": self.question_id,
            "position": self.position,
            "writeback": self.writeback,
            "question": self.question,
            "answer": self.answer,
            "gold": list(self.gold),
            "labels": list(self.labels),
            "contain_correct": self.correct,
            "expected": self.expected,
            "reason": self.reason,
        }


def _kind(question: str) -> str:
    kind = answer_type(question)
    return "none" if kind is None else kind.name


def _counts(rows: Sequence[tuple[QueryRecord, bool, bool]]) -> dict[str, int]:
    """``rows``: (record, word rules fit, type rule removes). Totals, wrong/right, and the removals."""
    return {
        "n": len(rows),
        "wrong": sum(not r.contain_correct for r, _, _ in rows),
        "right": sum(r.contain_correct for r, _, _ in rows),
        "word_rules_reject": sum(not fits for _, fits, _ in rows),
        "wrong_removed": sum(removed and not r.contain_correct for r, _, removed in rows),
        "right_lost": sum(removed and r.contain_correct for r, _, removed in rows),
    }


def measure_run(run_dir: Path, labeler: Labeler) -> dict[str, Any]:
    """The figures of one run folder (module doc): ``stored`` and ``reached_grounding`` counts
    (``n``, ``wrong``, ``right``, ``word_rules_reject``: already rejected by the word rules,
    ``wrong_removed`` and ``right_lost``: removed by the answer-type rule alone), ``stored_by_kind``
    (the same counts of the stored records per answer kind), and every ``flagged`` record."""
    path = run_dir / "records.jsonl" if run_dir.is_dir() else run_dir
    every = read_records_jsonl(path)
    records = [r for r in every if r.writeback in REACHED_GROUNDING]
    name = path.parent.name
    rows: list[tuple[QueryRecord, bool, bool]] = []
    flagged: list[Flagged] = []
    for r in records:
        old = check_answer_form(r.question, r.prediction)
        labels = labeler(r.prediction)
        new = check_answer_form(r.question, r.prediction, labels)
        removed = old.fits and not new.fits
        rows.append((r, old.fits, removed))
        if removed:
            flagged.append(
                Flagged(
                    name,
                    r.question_id,
                    r.position,
                    r.writeback or "",
                    r.question,
                    r.prediction,
                    r.gold_answers,
                    tuple(labels),
                    r.contain_correct,
                    new.expected,
                    new.reason,
                )
            )
    stored = [row for row in rows if row[0].writeback == DECISION_STORED]
    kinds = sorted({_kind(r.question) for r, _, _ in stored})
    return {
        "run": name,
        "path": str(path),
        "records": len(every),
        "stored": _counts(stored),
        "reached_grounding": _counts(rows),
        "stored_by_kind": {k: _counts([row for row in stored if _kind(row[0].question) == k]) for k in kinds},
        "flagged": [f.as_dict() for f in flagged],
    }


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def spacy_labeler(model: str, *, batch_size: int = 64) -> Labeler:
    """:func:`livingrag.corpus.ner.answer_entity_labels` bound to ``model`` (loaded on first use)."""
    from livingrag.corpus.ner import answer_entity_labels

    def labels(answer: str) -> list[str]:
        return answer_entity_labels(answer, model, batch_size=batch_size)

    return labels


def _spacy_versions(model: str) -> dict[str, str | None]:
    from importlib import metadata

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {"spacy": version("spacy"), model: version(model)}


def measure_runs(
    run_dirs: Iterable[Path], *, model: str, batch_size: int = 64, labeler: Labeler | None = None
) -> dict[str, Any]:
    """:func:`measure_run` over ``run_dirs`` with the spaCy labels of ``model`` (or ``labeler``),
    plus the totals over all runs and the settings it ran with."""
    label = labeler or spacy_labeler(model, batch_size=batch_size)
    runs = [measure_run(Path(d), label) for d in run_dirs]
    total: dict[str, Any] = {"stored": {}, "reached_grounding": {}, "stored_by_kind": {}}
    for run in runs:
        _add(total["stored"], run["stored"])
        _add(total["reached_grounding"], run["reached_grounding"])
        for kind, counts in run["stored_by_kind"].items():
            _add(total["stored_by_kind"].setdefault(kind, {}), counts)
    total["stored_by_kind"] = dict(sorted(total["stored_by_kind"].items()))
    # the labels of every removed candidate (stored or not), e.g. "PERSON" or "PERSON+CARDINAL"
    flags = Counter("+".join(dict.fromkeys(f["labels"])) for run in runs for f in run["flagged"])
    return {
        "settings": {
            "ner_model": model,
            "labeler": "custom" if labeler is not None else "livingrag.corpus.ner.answer_entity_labels",
            "versions": _spacy_versions(model) if labeler is None else {},
            "python": platform.python_version(),
            "stored": f"writeback == {DECISION_STORED!r}",
            "reached_grounding": f"writeback in {REACHED_GROUNDING!r}",
            "correct": "the record's contain_correct (Contain against its gold answers)",
            "removed": "check_answer_form(question, answer) fits and check_answer_form(question, answer, labels) not",
        },
        "runs": runs,
        "total": total,
        "flagged_labels": dict(flags.most_common()),
    }


def format_report(report: dict[str, Any]) -> str:
    """The figures of :func:`measure_runs` as plain-text tables, the settings first."""
    s = report["settings"]
    versions = ", ".join(f"{k} {v}" for k, v in s["versions"].items()) or "-"
    lines = [
        f"answer-type rule on kept runs; NER {s['ner_model']} ({versions}); labels from {s['labeler']}",
        f"removed = {s['removed']}; right/wrong = {s['correct']}",
        "",
        f"{'run':<44} {'stored':>6} {'wrong':>6} {'wrong removed':>13} {'right lost':>10}   "
        f"{'reached GS':>10} {'wrong removed':>13} {'right lost':>10}",
    ]

    def row(name: str, st: dict[str, int], gs: dict[str, int]) -> str:
        return (
            f"{name:<44} {st['n']:>6} {st['wrong']:>6} {st['wrong_removed']:>13} {st['right_lost']:>10}   "
            f"{gs['n']:>10} {gs['wrong_removed']:>13} {gs['right_lost']:>10}"
        )

    for run in report["runs"]:
        lines.append(row(run["run"], run["stored"], run["reached_grounding"]))
    t = report["total"]
    lines.append(row("total", t["stored"], t["reached_grounding"]))
    lines += ["", f"{'stored, by answer kind':<44} {'stored':>6} {'wrong':>6} {'wrong removed':>13} {'right lost':>10}"]
    for kind, c in t["stored_by_kind"].items():
        lines.append(f"{kind:<44} {c['n']:>6} {c['wrong']:>6} {c['wrong_removed']:>13} {c['right_lost']:>10}")
    flagged = [f for run in report["runs"] for f in run["flagged"] if f["writeback"] == DECISION_STORED]
    if flagged:
        lines += ["", "stored answers the rule removes:"]
        for f in flagged:
            mark = "right" if f["contain_correct"] else "wrong"
            lines.append(
                f"  [{mark}] {f['run']} #{f['position']}: {f['question']!r} -> {f['answer']!r} "
                f"{'/'.join(f['labels'])} (gold {' | '.join(f['gold'][:2])!r})"
            )
    return "\n".join(lines)
