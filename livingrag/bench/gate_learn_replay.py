"""Replay of the learned gate (issue 47) over the answers of kept ``eval stream`` runs, without a
database or an LLM: what a tenant's gate would have learned from simulated feedback, and what it
would have stored.

The runs given (``--run RECORDS:DATASET:DATA_DIR``, in order) are one tenant's stream: their
LivingRAG records, position after position. For each answer whose candidate passed the novelty gate
(``writeback`` other than ``rejected_ns``; the others have no features in the live store either):

1. its features (:func:`livingrag.experience.gate_features.candidate_features`) are computed as the
   write-back computes them: the claims of the answer and explanation checked by the configured
   verifier (``auto``: offline unless an NLI model loads) against the passages in its prompt (the
   record's retrieved corpus keys), the answer-form check with and without the answer's NER labels,
   and NS from the record;
2. the current calibrator, if any, gives P(right) (it was fitted on earlier labels only), and decides
   when it has earned it (held-out AUC >= ``gates.learn_min_auc`` and a store threshold): stored iff
   P >= the store threshold, ``auto_verified`` iff also >= the serve threshold. Otherwise the fixed
   gate's decision is the one the live run took (``writeback == "stored"``);
3. the answer is drawn for feedback exactly as ``eval stream --feedback-rate R`` draws it
   (:func:`livingrag.evaluation.feedback.chosen_for_feedback`), and a drawn answer's label (its
   Contain-correctness, which is what the simulated verdict says) is added after the decision;
4. the scopes refit as the live learner does (``gates.learn_min_labels``, ``gates.learn_refit_every``,
   :func:`livingrag.experience.gate_learning.fit_labels`).

Figures over the positions from ``--from`` on: the online AUC of P(right) against
Contain-correctness, the precision (Contain-correct share) of what is stored with the learned gate
against what the live fixed gate stored on the same questions (paired bootstrap interval of the
difference), how many stored answers would be auto-verified and how many of those are wrong. What a
replay cannot show: the feedback loop of the live system (experiences stored by the learned gate
change later retrievals and answers) and answers served from memory (these streams repeat no
question). It reads the answers the live run gave; ``eval stream`` is the live measurement.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from livingrag.config import Settings
from livingrag.db.repositories.gate import Label
from livingrag.errors import InvalidInput
from livingrag.evaluation.datasets import load_dataset
from livingrag.evaluation.feedback import chosen_for_feedback
from livingrag.evaluation.records import QueryRecord, read_records_jsonl
from livingrag.experience.answer_form import check_answer_form
from livingrag.experience.calibration import LogisticModel, roc_auc
from livingrag.experience.gate_features import candidate_features
from livingrag.experience.gate_learning import Fit, fit_labels
from livingrag.experience.grounding import extract_claims, grounding_score
from livingrag.experience.types import UsedPassage
from livingrag.experience.verifiers import ResolvedVerifier

Labeler = Callable[[str], "list[str] | None"]


@dataclass(frozen=True)
class RunSpec:
    """One kept run: its records and the dataset that resolves its passage keys."""

    records: Path
    dataset: str
    data_dir: Path

    @classmethod
    def parse(cls, spec: str) -> RunSpec:
        parts = spec.split(":")
        if len(parts) != 3 or not all(parts):
            raise InvalidInput(f"--run takes RECORDS.jsonl:DATASET:DATA_DIR, got {spec!r}")
        records = Path(parts[0])
        if not records.is_file():
            raise InvalidInput(f"--run: no such records file: {records}")
        return cls(records, parts[1], Path(parts[2]))


@dataclass
class Step:
    """One replayed answer."""

    position: int
    question_id: str
    correct: bool
    probability: float | None
    gate: str  # fixed or learned
    stored: bool
    live_stored: bool
    auto_verified: bool
    labelled: bool


def _features(
    record: QueryRecord, docs: dict[str, Any], settings: Settings, verifier: ResolvedVerifier, labeler: Labeler
) -> dict[str, float]:
    g = settings.gates
    passages = [
        UsedPassage(id=i + 1, text=docs[k].text, title=docs[k].title)
        for i, k in enumerate(dict.fromkeys(record.retrieved_keys or ()))
        if k in docs
    ]
    q, a, e = record.question, record.prediction or "", record.explanation or ""
    claims = extract_claims(e, a, q, g.max_claims)
    verdicts = tuple(verifier.verifier.verify(claims, passages)) if verifier.verifier and claims and passages else ()
    gs = grounding_score([v.score for v in verdicts], g.tau_nli) if verdicts else 0.0
    words = check_answer_form(q, a)
    typed = check_answer_form(q, a, labeler(a)) if g.answer_types else words
    return candidate_features(
        query=q,
        answer=a,
        explanation=e,
        passages=passages,
        verdicts=verdicts,
        ns=float(record.novelty if record.novelty is not None else 1.0),
        gs=gs,
        form_fits=words.fits,
        type_fits=typed.fits,
    )


def replay(
    runs: Sequence[RunSpec],
    settings: Settings,
    verifier: ResolvedVerifier,
    labeler: Labeler,
    *,
    rate: float,
    seed: int,
    system: str = "living",
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Step], Fit | None]:
    """The replayed stream (module docstring) and the last fit."""
    g = settings.gates
    steps: list[Step] = []
    labels: list[Label] = []
    fit: Fit | None = None
    fitted_at = 0
    offset = 0
    t0 = time.perf_counter()
    for spec in runs:
        ds = load_dataset(spec.dataset, spec.data_dir)
        docs = {d.key: d for d in ds.corpus}
        records = first_order(read_records_jsonl(spec.records), spec, system)
        for r in records:
            position = offset + r.position
            if not r.prediction or r.writeback in (None, "rejected_ns", "error"):
                continue
            features = _features(r, docs, settings, verifier, labeler)
            model: LogisticModel | None = fit.model if fit is not None else None
            p = model.probability(features) if model is not None else None
            a = fit.assessment if fit is not None else None
            decides = a is not None and a.earned and a.store_threshold is not None and p is not None
            live = r.writeback == "stored"
            if decides:
                assert a is not None and a.store_threshold is not None and p is not None
                stored = p >= a.store_threshold
                auto = stored and a.serve_threshold is not None and p >= a.serve_threshold
            else:
                stored, auto = live, False
            drawn = chosen_for_feedback(r.question_id, rate, seed)
            steps.append(
                Step(
                    position,
                    r.question_id,
                    bool(r.contain_correct),
                    p,
                    "learned" if decides else "fixed",
                    stored,
                    live,
                    auto,
                    drawn,
                )
            )
            if drawn:
                labels.append(Label(features, bool(r.contain_correct)))
                n = len(labels)
                if n >= g.learn_min_labels and (fit is None or n - fitted_at >= g.learn_refit_every):
                    fit, fitted_at = fit_labels(labels, settings), n
                    if progress:
                        auc = fit.assessment.auc
                        progress(
                            f"position {position}: refit on {n} labels, held-out AUC "
                            f"{'-' if auc is None else f'{auc:.3f}'}, earned {fit.assessment.earned} "
                            f"({time.perf_counter() - t0:.0f} s)"
                        )
        offset += (max((r.position for r in records), default=-1)) + 1
    return steps, fit


def first_order(records: Sequence[QueryRecord], spec: RunSpec, system: str) -> list[QueryRecord]:
    """The records of ``system`` in its first order in the run, by position (a replay follows one order)."""
    mine = [r for r in records if r.system == system]
    if not mine:
        raise InvalidInput(f"--run {spec.records} holds no {system!r} records")
    order = min(r.order for r in mine)
    return sorted((r for r in mine if r.order == order), key=lambda r: r.position)


def _bootstrap(values: Callable[[np.ndarray], float], n: int, *, resamples: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = [values(rng.integers(0, n, n)) for _ in range(resamples)]
    finite = [d for d in draws if np.isfinite(d)]
    return (float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))) if finite else (np.nan, np.nan)


def summarize(steps: Sequence[Step], fit: Fit | None, *, start: int, resamples: int = 10_000) -> dict[str, Any]:
    """The figures of the module docstring over the steps at positions >= ``start``."""
    w = [s for s in steps if s.position >= start]
    correct = np.array([s.correct for s in w], dtype=bool)
    stored = np.array([s.stored for s in w], dtype=bool)
    live = np.array([s.live_stored for s in w], dtype=bool)
    watched = np.array([s.probability is not None for s in w], dtype=bool)
    probs = np.array([s.probability if s.probability is not None else np.nan for s in w])
    auto = np.array([s.auto_verified for s in w], dtype=bool)

    def precision(mask: np.ndarray, idx: np.ndarray) -> float:
        m = mask[idx]
        return float(correct[idx][m].mean()) if m.any() else float("nan")

    def auc(idx: np.ndarray) -> float:
        k = idx[watched[idx]]
        return roc_auc(probs[k][correct[k]], probs[k][~correct[k]])

    all_idx = np.arange(len(w))
    diff = precision(stored, all_idx) - precision(live, all_idx)

    def fmt(x: float) -> float | None:
        return None if not np.isfinite(x) else round(float(x), 4)

    last = fit.assessment.to_dict() if fit is not None else None
    return {
        "from_position": start,
        "answers": len(w),
        "right": int(correct.sum()),
        "labels_by_then": sum(1 for s in steps if s.labelled and s.position < start),
        "labels_total": sum(1 for s in steps if s.labelled),
        "first_learned_position": min((s.position for s in steps if s.gate == "learned"), default=None),
        "decided_by_learned": sum(1 for s in w if s.gate == "learned"),
        "watched": int(watched.sum()),
        "online_auc": fmt(auc(all_idx)),
        "online_auc_ci": [fmt(x) for x in _bootstrap(auc, len(w), resamples=resamples // 10, seed=1)]
        if len(w)
        else None,
        "stored": int(stored.sum()),
        "stored_precision": fmt(precision(stored, all_idx)),
        "stored_precision_ci": [
            fmt(x) for x in _bootstrap(lambda i: precision(stored, i), len(w), resamples=resamples, seed=2)
        ]
        if len(w)
        else None,
        "live_stored": int(live.sum()),
        "live_stored_precision": fmt(precision(live, all_idx)),
        "precision_difference": fmt(diff),
        "precision_difference_ci": [
            fmt(x)
            for x in _bootstrap(
                lambda i: precision(stored, i) - precision(live, i), len(w), resamples=resamples, seed=3
            )
        ]
        if len(w)
        else None,
        "auto_verified": int(auto.sum()),
        "auto_verified_wrong": int((auto & ~correct).sum()),
        "last_fit": last,
        "last_weights": None
        if fit is None or fit.model is None
        else {f: round(v, 4) for f, v in zip(fit.model.features, fit.model.weights, strict=True)},
    }


def format_report(summary: dict[str, Any], settings_used: dict[str, Any]) -> str:
    """The replay's figures as text."""
    s = summary

    def ci(v: list[float | None] | None) -> str:
        return "" if not v or v[0] is None else f" [{v[0]:.3f}, {v[1]:.3f}]"

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    lines = [
        "settings: " + ", ".join(f"{k}={v}" for k, v in settings_used.items()),
        f"positions >= {s['from_position']}: {s['answers']} answers past the novelty gate ({s['right']} right); "
        f"labels {s['labels_by_then']} before, {s['labels_total']} in all; the learned gate decides from position "
        f"{s['first_learned_position']} ({s['decided_by_learned']} decisions here, {s['watched']} watched)",
        f"online AUC of P(right) (each from a model of earlier labels): {num(s['online_auc'])}{ci(s['online_auc_ci'])}",
        f"stored: {s['stored']}, precision {num(s['stored_precision'])}{ci(s['stored_precision_ci'])}; "
        f"the live fixed gate stored {s['live_stored']}, precision {num(s['live_stored_precision'])}; "
        f"difference {num(s['precision_difference'])}{ci(s['precision_difference_ci'])} (paired bootstrap)",
        f"auto-verified (would be served without feedback): {s['auto_verified']}, "
        f"of them wrong: {s['auto_verified_wrong']}",
    ]
    if s["last_fit"]:
        f = s["last_fit"]
        lines.append(
            f"last fit: {f['labels']} labels, held-out {f['held_out']}: AUC {num(f['auc'])}, store at p >= "
            f"{num(f['store_threshold'])} (precision {num(f['store_precision'])}), serve at p >= "
            f"{num(f['serve_threshold'])} (precision {num(f['serve_precision'])}); {f['why']}"
        )
    if s["last_weights"]:
        lines.append(
            "weights: "
            + ", ".join(f"{k} {v:+.2f}" for k, v in sorted(s["last_weights"].items(), key=lambda kv: -abs(kv[1])))
        )
    return "\n".join(lines)
