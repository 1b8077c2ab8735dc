"""Test support for corpus tests: a small corpus written for these tests, and light-weight
deterministic stand-ins for the two models (used where a test checks database behaviour, not model
quality; the round-trip tests use the real packaged models).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from livingrag.corpus.indexer import CorpusIndexer
from livingrag.corpus.ingest import Document
from livingrag.corpus.ner import Extraction, Mention, split_sentences
from livingrag.corpus.normalize import normalize_entity
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.db.repositories import passages as passage_repo
from livingrag.testing.corpus import CORPUS  # the fictional corpus (the load benchmark seeds it too)
from livingrag.types import CorpusInfo

DOCUMENTS = Path(__file__).resolve().parent / "data" / "documents"
"""The four document fixtures (tests/data/make_documents.py): a PDF, a DOCX, an HTML page, Markdown."""
DOCUMENT_TITLES = {
    "annual_review.pdf": "Nordline Freight Annual Review 2025",
    "handbook.docx": "Brindlewood Logistics Driver Handbook",
    "ferry_news.html": "Winter timetable for the Saltfjord ferry",
    "onboarding.md": "Welcome to the Varik Studio",
}
"""Each fixture's file name and the title the readers find in it."""

QUESTIONS: list[tuple[str, list[str]]] = [
    ("Where was the director of Silver Harbor born?", ["Silver Harbor", "Marta Quell"]),
    ("In which town was the author of The Glass Orchard born?", ["The Glass Orchard", "Henrik Tallberg"]),
    ("Who founded the Aurora Quartet?", ["Aurora Quartet"]),
]


_NAME = re.compile(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*")


class RuleExtractor:
    """Entities = runs of capitalised words (not sentence-initial stop words). Deterministic, instant."""

    name = "rules"

    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.seen = 0

    def _mentions(self, sentence: str) -> list[str]:
        return [m.group(0) for m in _NAME.finditer(sentence) if m.group(0) not in {"The", "It", "He", "Its", "She"}]

    def extract_passages(self, texts: Sequence[str]) -> Iterator[Extraction]:
        for text in texts:
            if self.fail_after is not None and self.seen >= self.fail_after:
                raise RuntimeError("simulated crash in the extractor")
            self.seen += 1
            sentences = split_sentences(text) or [text]
            mentions = [
                Mention(text=m, key=normalize_entity(m), label="X", sentence=i)
                for i, s in enumerate(sentences)
                for m in self._mentions(s)
                if normalize_entity(m)
            ]
            yield Extraction(tuple(sentences), tuple(mentions))

    def extract_question(self, question: str) -> list[str]:
        return [m for m in self._mentions(question) if m.split()[0] not in {"Where", "Who", "In", "What", "Which"}]


class HashEmbedder:
    """Bag-of-words hashing into 16 dimensions, unit norm. Deterministic, instant."""

    dim = 16
    name = "hash16"
    backend = "hash"

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                h = int(hashlib.md5(w.encode()).hexdigest(), 16)
                out[i, h % self.dim] += 1.0 if (h >> 8) % 2 else -1.0
            norm = np.linalg.norm(out[i])
            out[i] = out[i] / norm if norm else out[i]
            if not norm:
                out[i, 0] = 1.0
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_with_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]], *, batch_size: int | None = None
    ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        vecs = self.encode(texts)
        return vecs, [[self.encode([t[a:b]])[0] for a, b in sp] for t, sp in zip(texts, spans, strict=True)]


def tenant_with_small_corpus(db: Any, prefix: str) -> tuple[int, str]:
    """A new tenant (id, name ``<prefix>-<random>``) with :data:`CORPUS` indexed as ``small`` by the
    models the settings name (the real packaged ones by default)."""
    from livingrag.config import get_settings
    from livingrag.corpus import service
    from livingrag.corpus.ingest import Document

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    tenant_id, _ = service.ensure_tenant(db, name)
    settings = get_settings()
    corpus = service.create_corpus(db, tenant_id, "small", settings)
    docs = [Document(d["title"], d["text"], source=f"test {i}") for i, d in enumerate(CORPUS)]
    service.indexer(db, tenant_id, corpus, settings).index_documents(docs)
    return tenant_id, name


def graph_corpus(db: Database, tenant: int, name: str = "c") -> CorpusInfo:
    """A new corpus ``name`` of ``tenant`` for the stand-in models (16-d hash embeddings, rules)."""
    with db.tenant_session(tenant) as s:
        return corpora.create_corpus(s, tenant, name, embedding_model="hash16", embedding_dim=16, ner_model="rules")


def rule_indexer(db: Database, tenant: int, corpus: CorpusInfo, **kw: Any) -> CorpusIndexer:
    """An indexer of ``corpus`` with the stand-in models (``kw``: more of its options)."""
    kw.setdefault("extractor", RuleExtractor())
    return CorpusIndexer(db, tenant, corpus, embedder=HashEmbedder(), **kw)


def corpus_documents(records: list[dict[str, str]] = CORPUS) -> list[Document]:
    """``records`` (default: :data:`CORPUS`) as documents to index."""
    return [Document(r["title"], r["text"], source=f"test {i}") for i, r in enumerate(records)]


def graph_counts(db: Database, tenant: int, corpus_id: int) -> dict[str, int]:
    """The corpus's row counts per graph table."""
    with db.tenant_session(tenant) as s:
        return passage_repo.corpus_counts(s, corpus_id)
