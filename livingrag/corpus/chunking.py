"""Token-based chunking of documents into passages.

A token is a run of non-space characters. A document of at most ``chunk_tokens`` tokens is one
passage, its text unchanged. A longer one is cut into windows of ``chunk_tokens`` tokens that
start every ``chunk_tokens - overlap`` tokens (the last window ends at the document's end); each
chunk's text is the exact slice of the document from its first to its last token. Consecutive
chunks of one document share a ``doc_key`` and carry ``chunk_index`` 0, 1, ...; the graph links
them (and nothing else: passages of different documents are never linked).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from livingrag.corpus.ingest import Document

_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class PassageDraft:
    """A passage ready for indexing (nothing computed from models yet)."""

    title: str
    text: str
    doc_key: str
    chunk_index: int
    external_id: str | None
    token_count: int
    content_hash: str
    source: str

    @property
    def length(self) -> int:
        return len(self.text)


def content_hash(title: str, text: str) -> str:
    """sha256 of the title and text: the identity of a passage within a corpus."""
    return hashlib.sha256(f"{title}\x1f{text}".encode()).hexdigest()


def document_key(doc: Document) -> str:
    """A document's identity (hash of its title and full text), shared by its chunks."""
    return hashlib.sha256(f"{doc.title}\x1f{doc.text}".encode()).hexdigest()[:32]


def chunk_document(doc: Document, *, chunk_tokens: int = 600, overlap: int = 60) -> list[PassageDraft]:
    """Split ``doc`` into passages (see the module docstring)."""
    if chunk_tokens < 1 or not 0 <= overlap < chunk_tokens:
        raise ValueError(f"need chunk_tokens >= 1 and 0 <= overlap < chunk_tokens, got {chunk_tokens}, {overlap}")
    spans = [m.span() for m in _TOKEN.finditer(doc.text)]
    key = document_key(doc)
    ext = doc.external_id
    if len(spans) <= chunk_tokens:
        text = doc.text.strip()
        return [PassageDraft(doc.title, text, key, 0, ext, len(spans), content_hash(doc.title, text), doc.source)]
    step = chunk_tokens - overlap
    out: list[PassageDraft] = []
    start = 0
    while True:
        end = min(start + chunk_tokens, len(spans))
        text = doc.text[spans[start][0] : spans[end - 1][1]]
        chunk_ext = f"{ext}#{len(out)}" if ext is not None else None
        out.append(
            PassageDraft(
                doc.title, text, key, len(out), chunk_ext, end - start, content_hash(doc.title, text), doc.source
            )
        )
        if end == len(spans):
            return out
        start += step


__all__ = ["PassageDraft", "chunk_document", "content_hash", "document_key"]
