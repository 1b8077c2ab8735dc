"""``/v1/gate``: the caller's learned gate (issue 47; see docs/learned-gate.md): its labels, the
calibrators fitted on them with their time-ordered held-out AUC and precision, thresholds and
feature weights, how write-backs were decided, and a reset (admin scope).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from livingrag.api.deps import Services, services, tenant_admin, tenant_id
from livingrag.api.errors import COMMON_RESPONSES
from livingrag.api.routes.common import corpus_of

router = APIRouter(prefix="/v1", tags=["experiences"], responses=COMMON_RESPONSES)


class GateModelOut(BaseModel):
    """One calibrator: its scope, version, labels, held-out figures, thresholds and weights."""

    id: int
    scope: str = Field(description="tenant (all the tenant's labels) or corpus (one corpus's labels).")
    corpus_id: int | None
    version: int
    labels: int = Field(description="Labels it was fitted on.")
    earned: bool = Field(description="Held-out AUC >= gates.learn_min_auc and a store threshold exists.")
    deciding: bool = Field(description="It decides the write gate now (earned and current).")
    store_threshold: float | None = Field(description="Stores a candidate at P(right) >= this.")
    serve_threshold: float | None = Field(
        description="Marks a stored one auto_verified (served without feedback) at P(right) >= this."
    )
    held_out: dict[str, Any] = Field(
        description="Time-ordered held-out figures: auc, store/serve precision and recall, labels, why."
    )
    fitted_at: str
    retired_at: str | None = None
    retired_why: str | None = None
    bias: float | None = None
    weights: dict[str, float] | None = Field(None, description="Per feature, on standardised features.")


class GateOut(BaseModel):
    """The caller's learned gate."""

    tenant_id: int
    learning: bool = Field(description="gates.learn: verdicts label candidates and calibrators are fitted.")
    settings: dict[str, Any]
    labels: dict[str, Any] = Field(description="total, right, and per corpus.")
    models: list[GateModelOut] = Field(description="The current calibrators (tenant-wide first).")
    history: list[GateModelOut] = Field(description="The last fits, newest first.")
    decisions: list[dict[str, Any]] = Field(description="Write-back decisions by gate (fixed, learned).")
    auto_verified_experiences: int


class GateResetOut(BaseModel):
    models_retired: int
    experiences_demoted: int
    labels_deleted: int


@router.get("/gate", response_model=GateOut, summary="The learned gate: labels, held-out AUC, thresholds, weights")
def gate_report(
    history: int = Query(10, ge=0, le=100, description="How many past fits to list."),
    tid: int = Depends(tenant_id),
    svc: Services = Depends(services),
) -> GateOut:
    return GateOut(**svc.rag.store.learner.report(tid, history=history))


@router.delete(
    "/gate",
    response_model=GateResetOut,
    summary="Drop the learned gate (admin scope): the fixed gate decides again; auto-verified experiences are demoted",
)
def gate_reset(
    corpus_id: int | None = Query(None, ge=1, description="Only this corpus's calibrator."),
    forget_labels: bool = Query(False, description="Also delete the labels (no refit from them)."),
    tid: int = Depends(tenant_admin),
    svc: Services = Depends(services),
) -> GateResetOut:
    if corpus_id is not None:
        corpus_of(svc, tid, corpus_id)
    return GateResetOut(**svc.rag.store.learner.reset(tid, corpus_id=corpus_id, forget_labels=forget_labels))
