"""Small real implementations used by the experience-store tests (not mocks of the code under test)."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from livingrag.config import Settings, get_settings
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.db.repositories import experiences as repo
from livingrag.experience.grounding import Claim
from livingrag.experience.store import ExperienceStore
from livingrag.experience.types import ClaimVerdict, ExperienceCandidate, UsedPassage


class HashingEncoder:
    """A deterministic bag-of-words encoder: each lower-cased word adds +1 to a hashed coordinate.
    Texts with the same words get cosine 1; disjoint words give (nearly) 0."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+|\[\w+\]", t.lower()):
                h = int(hashlib.md5(w.encode()).hexdigest()[:8], 16)
                out[i, h % self.dim] += 1.0
            n = np.linalg.norm(out[i])
            if n > 0:
                out[i] /= n
        return out


class CountingVerifier:
    """Gives every claim the same support and counts how often it was asked."""

    def __init__(self, score: float = 1.0, name: str = "counting") -> None:
        self.score = score
        self.name = name
        self.calls = 0

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        self.calls += 1
        first = passages[0] if passages else None  # the evidence: the first passage's text
        return [
            ClaimVerdict(
                claim=c.text,
                source=c.source,
                score=self.score,
                passage_id=first.id if first else None,
                evidence=first.text if first else None,
            )
            for c in claims
        ]


def settings(**experience: Any) -> Settings:
    """Settings for store tests. They exercise eq. 12-13 whatever the answer model, so the scaffold
    is on unless a test says otherwise (``experience.scaffold`` ``auto`` leaves it out for the
    default local provider)."""
    gates = experience.pop("gates", {})
    experience.setdefault("scaffold", "on")
    return get_settings(experience=experience, gates=gates)


def make_corpus(db: Database, tenant_id: int, dim: int = 8) -> int:
    with db.tenant_session(tenant_id) as s:
        c = corpora.create_corpus(
            s, tenant_id, f"c-{uuid.uuid4().hex[:8]}", embedding_model="m", embedding_dim=dim, ner_model="n"
        )
    return c.id


def make_store(db: Database, verifier: Any = None, **experience: Any) -> ExperienceStore:
    return ExperienceStore(
        db, settings(**experience), encoder=HashingEncoder(), verifier=verifier or CountingVerifier()
    )


def unit(dim: int, *hot: tuple[int, float]) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float64)
    for i, x in hot:
        v[i] = x
    return v / np.linalg.norm(v)


def candidate(
    tenant_id: int,
    corpus_id: int,
    embedding: Any,
    base: dict[int, float],
    final: dict[int, float] | None = None,
    *,
    query: str = "Where was the director of Winter Harbour born?",
    answer: str = "Galway",
    explanation: str = "Winter Harbour was directed by Orla Brennick. Orla Brennick was born in Galway.",
    passages: tuple[UsedPassage, ...] = (UsedPassage(101, "Orla Brennick was born in Galway.", "Orla Brennick"),),
    **kw: Any,
) -> ExperienceCandidate:
    return ExperienceCandidate(
        tenant_id=tenant_id,
        corpus_id=corpus_id,
        query=query,
        query_embedding=embedding,
        base_activation=base,
        final_activation=final if final is not None else dict(base),
        explanation=explanation,
        answer=answer,
        passages=passages,
        **({"corpus_version": 0} | kw),  # the corpora of these tests are at version 0 unless a test says so
    )


def insert_plain(db: Database, tenant: int, corpus: int, emb: np.ndarray, activation: dict[int, float]) -> int:
    """An experience written straight through the repository (no gate), confidence 1."""
    with db.tenant_session(tenant) as s:
        return repo.insert_experience(
            s,
            repo.NewExperience(
                tenant_id=tenant, corpus_id=corpus, query="q?", query_template="q?", embedding=emb,
                activation=activation, summary="s", answer="a", confidence=1.0, grounding={},
                source_passage_ids=[], corpus_version=0, created_at=datetime.now(UTC), expires_at=None,
            ),
        )  # fmt: skip
