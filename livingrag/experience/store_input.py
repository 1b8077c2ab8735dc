"""Checking what callers give the experience store: ids, query embeddings and write-back candidates.

Each check raises :class:`~livingrag.errors.InvalidInput` naming what is wrong, before anything is
read or written. Pure: numpy and the pure experience modules only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from livingrag.errors import InvalidInput
from livingrag.experience.sparsify import validate_activation
from livingrag.experience.types import ExperienceCandidate, UsedPassage


def validate_embedding(value: Any, what: str = "query embedding") -> np.ndarray:
    """A finite, non-zero 1-D vector, returned unit-normalised as float32."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(f"{what} is not a vector of numbers") from None
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidInput(f"{what} must be a non-empty 1-D vector, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInput(f"{what} contains NaN or infinite values")
    norm = float(np.linalg.norm(arr))
    if norm == 0.0:
        raise InvalidInput(f"{what} is the zero vector")
    return (arr / norm).astype(np.float32)


def positive_id(value: Any, what: str) -> int:
    """``value`` as an int; :class:`InvalidInput` naming ``what`` unless it is a positive integer
    (a Python or NumPy integer, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) <= 0:
        raise InvalidInput(f"{what} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class CheckedCandidate:
    """A validated write-back candidate (:func:`validate_candidate`)."""

    tenant_id: int
    corpus_id: int
    query: str
    answer: str
    explanation: str
    emb: np.ndarray
    base: dict[int, float]
    final: dict[int, float]
    passages: tuple[UsedPassage, ...]
    mentions: tuple[str, ...]
    entity_names: dict[int, tuple[str, ...]]
    corpus_version: int | None
    query_log_id: int | None
    template_text: str | None = None
    template_embedding: Any = None


def validate_candidate(candidate: ExperienceCandidate) -> CheckedCandidate:
    """A write-back candidate checked and normalised (whitespace collapsed, ids positive, the
    embedding unit-normalised, the activations validated); :class:`InvalidInput` naming what is
    wrong."""
    if not isinstance(candidate, ExperienceCandidate):
        raise InvalidInput(f"write_back needs an ExperienceCandidate, got {type(candidate).__name__}")
    query = " ".join(str(candidate.query or "").split())
    answer = " ".join(str(candidate.answer or "").split())
    if not query:
        raise InvalidInput("candidate query is empty")
    if not answer:
        raise InvalidInput("candidate answer is empty")
    if candidate.explanation is not None and not isinstance(candidate.explanation, str):
        raise InvalidInput("candidate explanation must be text")
    passages = []
    for i, p in enumerate(candidate.passages or ()):
        if not isinstance(p, UsedPassage):
            raise InvalidInput(f"used passage #{i} must be a UsedPassage, got {type(p).__name__}")
        passages.append(
            UsedPassage(id=positive_id(p.id, f"used passage #{i} id"), text=str(p.text or ""), title=p.title or "")
        )
    names: dict[int, tuple[str, ...]] = {}
    for e, forms in (candidate.entity_names or {}).items():
        names[int(e)] = (forms,) if isinstance(forms, str) else tuple(str(f) for f in forms)
    version = candidate.corpus_version
    if version is None:
        raise InvalidInput(
            "the candidate does not say which corpus version its retrieval read (corpus_version), so its "
            "evidence cannot be checked: build it with ExperienceCandidate.from_retrieval, or pass the "
            "retrieval's encoding.graph_version"
        )
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InvalidInput(f"corpus_version must be a non-negative integer, got {version!r}")
    return CheckedCandidate(
        tenant_id=positive_id(candidate.tenant_id, "tenant_id"),
        corpus_id=positive_id(candidate.corpus_id, "corpus_id"),
        query=query,
        answer=answer,
        explanation=candidate.explanation or "",
        emb=validate_embedding(candidate.query_embedding),
        base=validate_activation(candidate.base_activation, "base activation"),
        final=validate_activation(candidate.final_activation, "final activation"),
        passages=tuple(passages),
        mentions=tuple(str(m) for m in candidate.mentions or ()),
        entity_names=names,
        corpus_version=version,
        query_log_id=candidate.query_log_id,
        template_text=candidate.template_text,
        template_embedding=candidate.template_embedding,
    )
