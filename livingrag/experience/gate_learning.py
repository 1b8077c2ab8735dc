"""The gate that learns from each tenant's feedback (beyond the paper; the math is
:mod:`livingrag.experience.calibration`, the features :mod:`livingrag.experience.gate_features`).

* **Labels.** A person's verdict on an answer (``right`` = 1; ``wrong``, corrected or not, = 0)
  labels the write-back candidate of that question with the features the gate saw
  (``writeback_log.details.features``), in the verdict's transaction. A later different verdict
  replaces the label; an answer served from memory (no write-back) or a candidate the novelty gate
  stopped (no features) gives none.
* **Fits.** Per tenant (all its labels) and per corpus (that corpus's labels), once a scope has
  ``gates.learn_min_labels`` labels and again whenever ``gates.learn_refit_every`` more arrived:
  held-out probabilities in time order, the assessment (AUC, store and serve thresholds, earned),
  and the model fitted on every label, stored as the scope's next version in ``gate_models``.
* **Use.** A write-back asks :meth:`GateLearner.active_in` for the calibrator that applies: the
  corpus's when earned, else the tenant's when earned (it decides: store iff P(right) >= the store
  threshold; ``auto_verified`` iff also >= the serve threshold); otherwise the fixed gate decides
  and the newest calibrator, if any, only watches (its probability is logged).
* **Trust follows the model.** A refit whose serve threshold rises (or disappears) demotes the
  auto-verified experiences of that scope below it back to ``unverified``; a reset demotes all.

One tenant's labels never reach another tenant's model: every query runs in the tenant's session
under row-level security.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from livingrag.config import Settings
from livingrag.db.engine import Database
from livingrag.db.repositories import gate as gate_repo
from livingrag.db.repositories import trust as trust_repo
from livingrag.experience.calibration import GateAssessment, LogisticModel, assess, fit_logistic, forward_predictions
from livingrag.experience.gate_features import FEATURES

log = logging.getLogger(__name__)

VALIDATION_BLOCKS = 5
"""Consecutive held-out blocks of the time-ordered validation."""


@dataclass(frozen=True)
class ActiveGate:
    """The calibrator that applies to a write-back: ``decides`` when it earned it."""

    model_id: int
    scope: str  # "tenant" or "corpus <id>"
    version: int
    model: LogisticModel
    decides: bool
    store_threshold: float | None
    serve_threshold: float | None

    @property
    def label(self) -> str:
        return f"learned gate ({self.scope}, v{self.version})"


@dataclass(frozen=True)
class Fit:
    """One scope's fit: the model on every label (None without both kinds) and its assessment."""

    model: LogisticModel | None
    assessment: GateAssessment


def fit_labels(labels: Sequence[gate_repo.Label], settings: Settings) -> Fit:
    """Time-ordered validation and the final fit of ``labels`` (oldest first), as the module says:
    the first ``max(10, n // 3)`` labels only train; the rest are scored in
    :data:`VALIDATION_BLOCKS` blocks, each by a model of the labels before it."""
    g = settings.gates
    x = np.asarray([[lb.features.get(f, 0.0) for f in FEATURES] for lb in labels], dtype=np.float64).reshape(
        len(labels), len(FEATURES)
    )
    y = np.asarray([lb.label for lb in labels], dtype=bool)
    first = max(10, len(y) // 3)
    probs, held = forward_predictions(x, y, FEATURES, first=first, blocks=VALIDATION_BLOCKS, l2=g.learn_l2)
    assessment = assess(
        probs,
        held,
        total=len(y),
        right=int(y.sum()),
        min_auc=g.learn_min_auc,
        store_min_precision=g.store_min_precision,
        serve_min_precision=g.serve_min_precision,
        min_support=g.learn_min_support,
    )
    # earned needs a finite held-out AUC, so both kinds of labels: then the model exists
    model = fit_logistic(x, y, FEATURES, l2=g.learn_l2) if 0 < y.sum() < len(y) else None
    return Fit(model, assessment)


def learning_settings(settings: Settings) -> dict[str, Any]:
    """The ``gates.learn_*`` settings a fit ran with, as reports show them."""
    g = settings.gates
    return {
        "learn_min_labels": g.learn_min_labels,
        "learn_refit_every": g.learn_refit_every,
        "learn_min_auc": g.learn_min_auc,
        "store_min_precision": g.store_min_precision,
        "serve_min_precision": g.serve_min_precision,
        "learn_min_support": g.learn_min_support,
        "learn_l2": g.learn_l2,
    }


class GateLearner:
    """Labels, fits, the active calibrator, reports and resets of the tenants of one database."""

    def __init__(self, db: Database, settings: Settings, *, clock: Callable[[], datetime] | None = None) -> None:
        self.db = db
        self.settings = settings
        self._clock = clock or (lambda: datetime.now(UTC))
        self._executor: ThreadPoolExecutor | None = None
        self._queued: set[int] = set()
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- labels

    def label_in(
        self,
        s: Session,
        *,
        tenant_id: int,
        query_log_id: int,
        verdict: str,
        corrected: bool,
        actor: str,
        now: datetime,
    ) -> bool:
        """Inside the verdict's transaction: label question ``query_log_id``'s write-back candidate
        (module docstring). False when learning is off or the candidate has no features."""
        if not self.settings.gates.learn:
            return False
        seen = gate_repo.candidate_features(s, query_log_id)
        if seen is None:
            return False
        gate_repo.upsert_label(
            s,
            tenant_id=tenant_id,
            corpus_id=seen.corpus_id,
            query_log_id=query_log_id,
            writeback_log_id=seen.writeback_log_id,
            label=verdict == "right",
            verdict=verdict,
            corrected=corrected,
            features=seen.features,
            actor=actor,
            now=now,
        )
        return True

    # ---------------------------------------------------------------- the calibrator in use

    def active_in(self, s: Session, corpus_id: int) -> ActiveGate | None:
        """The calibrator for a write-back of ``corpus_id`` (module docstring), or None."""
        if not self.settings.gates.learn:
            return None
        rows = [r for r in gate_repo.current_models(s) if r.model is not None and r.corpus_id in (None, corpus_id)]
        if not rows:
            return None
        corpus = [r for r in rows if r.corpus_id == corpus_id]
        tenant = [r for r in rows if r.corpus_id is None]
        ordered = [r for r in corpus + tenant if r.earned] or corpus + tenant
        r = ordered[0]
        assert r.model is not None
        return ActiveGate(
            model_id=r.id,
            scope="tenant" if r.corpus_id is None else f"corpus {r.corpus_id}",
            version=r.version,
            model=LogisticModel.from_dict(r.model),
            decides=r.earned and r.store_threshold is not None,
            store_threshold=r.store_threshold,
            serve_threshold=r.serve_threshold if r.earned else None,
        )

    # ---------------------------------------------------------------- fitting

    def refit(self, tenant_id: int, *, force: bool = False) -> list[gate_repo.GateModelRow]:
        """Fit every scope of the tenant that is due (module docstring; ``force``: every scope with
        enough labels); returns the new models. One fit per tenant at a time (an advisory lock)."""
        g = self.settings.gates
        if not g.learn:
            return []
        now = self._clock()
        fitted: list[gate_repo.GateModelRow] = []
        with self.db.tenant_session(tenant_id) as s:
            gate_repo.lock_gate(s, tenant_id)
            counts = gate_repo.label_counts(s)
            current = {r.corpus_id: r for r in gate_repo.current_models(s)}
            scopes: list[tuple[int | None, int]] = [(None, sum(n for n, _ in counts.values()))]
            scopes += [(c, n) for c, (n, _) in sorted(counts.items())]
            for corpus_id, n in scopes:
                if n < g.learn_min_labels:
                    continue
                last = current.get(corpus_id)
                if not force and last is not None and n - last.labels < g.learn_refit_every:
                    continue
                fit = fit_labels(gate_repo.labels(s, corpus_id), self.settings)
                a = fit.assessment
                row = gate_repo.insert_model(
                    s,
                    tenant_id=tenant_id,
                    corpus_id=corpus_id,
                    model=None if fit.model is None else fit.model.to_dict(),
                    metrics=a.to_dict(),
                    earned=a.earned,
                    store_threshold=a.store_threshold,
                    serve_threshold=a.serve_threshold,
                    labels=n,
                    now=now,
                )
                self._demote(s, tenant_id, corpus_id, a.serve_threshold, f"refit v{row.version}: {a.why}", now)
                log.info(
                    "gate of tenant %s (%s) v%d: %d labels, held-out AUC %s, earned %s",
                    tenant_id,
                    "tenant" if corpus_id is None else f"corpus {corpus_id}",
                    row.version,
                    n,
                    a.auc,
                    a.earned,
                )
                fitted.append(row)
        return fitted

    def refit_quietly(self, tenant_id: int) -> None:
        """:meth:`refit`, logging instead of raising (a verdict never fails because a fit did)."""
        try:
            self.refit(tenant_id)
        except Exception as exc:
            log.warning("gate refit of tenant %s failed: %s", tenant_id, exc, exc_info=True)

    def schedule_refit(self, tenant_id: int) -> None:
        """:meth:`refit_quietly` on a background thread (one per learner; a tenant already queued is
        not queued twice)."""
        with self._lock:
            if tenant_id in self._queued:
                return
            self._queued.add(tenant_id)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="livingrag-gate")
            executor = self._executor

        def run() -> None:
            with self._lock:
                self._queued.discard(tenant_id)
            self.refit_quietly(tenant_id)

        executor.submit(run)

    def close(self) -> None:
        """Wait for scheduled fits and stop the background thread."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _demote(
        self, s: Session, tenant_id: int, corpus_id: int | None, threshold: float | None, why: str, now: datetime
    ) -> int:
        """Auto-verified experiences stored by a model of this scope whose probability is below the
        scope's serve ``threshold`` now (all of them when None) go back to ``unverified``."""
        demoted = [
            x
            for x in gate_repo.auto_verified(s, scope=corpus_id)
            if threshold is None or x.probability is None or x.probability < threshold
        ]
        for x in demoted:
            trust_repo.set_trust(s, x.id, "unverified", actor="system", reason=why, now=now)
        trust_repo.insert_events(
            s,
            tenant_id,
            [
                trust_repo.EventRow(
                    experience_id=x.id,
                    corpus_id=x.corpus_id,
                    event="demoted",
                    actor="system",
                    reason=why,
                    details={"gate_probability": x.probability, "serve_threshold": threshold},
                    at=now,
                )
                for x in demoted
            ],
        )
        return len(demoted)

    # ---------------------------------------------------------------- seen and controlled

    def reset(self, tenant_id: int, *, corpus_id: int | None = None, forget_labels: bool = False) -> dict[str, int]:
        """Drop the tenant's calibrators (of one corpus, or all: then the fixed gate decides again),
        demote what they auto-verified, and with ``forget_labels`` delete the labels too."""
        now = self._clock()
        with self.db.tenant_session(tenant_id) as s:
            gate_repo.lock_gate(s, tenant_id)
            every = corpus_id is None
            retired = gate_repo.retire_models(s, corpus_id, why="reset", now=now, every=every)
            demoted = 0
            for scope in [None, *gate_repo.label_counts(s)] if every else [corpus_id]:
                demoted += self._demote(s, tenant_id, scope, None, "the learned gate was reset", now)
            forgotten = gate_repo.delete_labels(s, corpus_id) if forget_labels else 0
        return {"models_retired": retired, "experiences_demoted": demoted, "labels_deleted": forgotten}

    def report(self, tenant_id: int, *, history: int = 10) -> dict[str, Any]:
        """What the tenant's gate knows: labels per corpus, the current calibrators with their held-out
        figures, thresholds and weights, the last fits, and how write-backs were decided."""
        g = self.settings.gates
        with self.db.tenant_session(tenant_id) as s:
            counts = gate_repo.label_counts(s)
            current = gate_repo.current_models(s)
            past = gate_repo.model_history(s, limit=history)
            decisions = gate_repo.decision_counts(s)
            auto = gate_repo.auto_verified(s)
        return {
            "tenant_id": tenant_id,
            "learning": g.learn,
            "settings": learning_settings(self.settings)
            | {"fixed_gate": {"tau_gs": g.tau_gs, "tau_novel": g.tau_novel, "verifier": g.verifier}},
            "labels": {
                "total": sum(n for n, _ in counts.values()),
                "right": sum(r for _, r in counts.values()),
                "per_corpus": {str(c): {"labels": n, "right": r} for c, (n, r) in sorted(counts.items())},
            },
            "models": [_model_out(r) for r in current],
            "history": [_model_out(r, weights=False) for r in past],
            "decisions": [{"gate": k[0], "decision": k[1], "count": v} for k, v in sorted(decisions.items())],
            "auto_verified_experiences": len(auto),
        }


def _model_out(r: gate_repo.GateModelRow, *, weights: bool = True) -> dict[str, Any]:
    """One calibrator as the report shows it (weights per feature, on standardised features)."""
    out: dict[str, Any] = {
        "id": r.id,
        "scope": "tenant" if r.corpus_id is None else "corpus",
        "corpus_id": r.corpus_id,
        "version": r.version,
        "labels": r.labels,
        "earned": r.earned,
        "deciding": r.earned and r.store_threshold is not None and r.retired_at is None,
        "store_threshold": r.store_threshold,
        "serve_threshold": r.serve_threshold,
        "held_out": r.metrics,
        "fitted_at": r.fitted_at.isoformat(),
        "retired_at": r.retired_at.isoformat() if r.retired_at else None,
        "retired_why": r.retired_why,
    }
    if weights and r.model is not None:
        m = LogisticModel.from_dict(r.model)
        out["bias"] = round(m.bias, 6)
        out["weights"] = {f: round(w, 6) for f, w in zip(m.features, m.weights, strict=True)}
    return out
