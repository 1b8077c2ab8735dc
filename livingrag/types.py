"""Frozen dataclasses that cross module borders."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class CorpusInfo:
    id: int
    tenant_id: int
    name: str
    embedding_model: str
    embedding_dim: int
    ner_model: str
    extractor: str
    version: int
    settings: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
