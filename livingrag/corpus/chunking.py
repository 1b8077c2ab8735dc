"""Token-based chunking of documents into passages.

A token is a run of non-space characters. A document of at most ``chunk_tokens`` tokens is one
passage, its text unchanged. A longer one is cut into windows of ``chunk_tokens`` tokens that
start every ``chunk_tokens - overlap`` tokens (the last window ends at the document's end); each
chunk's text is the exact slice of the document from its first to its last token. Consecutive
chunks of one document share a ``doc_key`` and carry ``chunk_index`` 0, 1, ...; the graph links
them (and nothing else: passages of different documents are never linked).

A document with sections (a PDF, DOCX, HTML or Markdown file, :mod:`livingrag.io.readers`) is cut
along them: consecutive sections share a passage while it holds at most ``chunk_tokens`` tokens,
a longer section is cut into windows as above, and every section's text in a passage, each window
included, starts with its heading path (``"Depots › Cold storage"``) on a line of its own, so a
passage keeps the context its text came from.
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
    title_entity: bool = True  # False: the title is only a file name, never an entity

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
    texts = _section_texts(doc, chunk_tokens, overlap) if doc.sections else _windows(doc.text, chunk_tokens, overlap)
    key = document_key(doc)
    ext = doc.external_id
    out: list[PassageDraft] = []
    for i, text in enumerate(texts):
        chunk_ext = f"{ext}#{i}" if ext is not None and len(texts) > 1 else ext
        n = len(_TOKEN.findall(text))
        h = content_hash(doc.title, text)
        out.append(PassageDraft(doc.title, text, key, i, chunk_ext, n, h, doc.source, doc.title_is_entity))
    return out


def _windows(text: str, chunk_tokens: int, overlap: int) -> list[str]:
    """``text`` whole when it holds at most ``chunk_tokens`` tokens, else its overlapping windows."""
    spans = [m.span() for m in _TOKEN.finditer(text)]
    if len(spans) <= chunk_tokens:
        return [text.strip()]
    out: list[str] = []
    start = 0
    while True:
        end = min(start + chunk_tokens, len(spans))
        out.append(text[spans[start][0] : spans[end - 1][1]])
        if end == len(spans):
            return out
        start += chunk_tokens - overlap


def _section_texts(doc: Document, chunk_tokens: int, overlap: int) -> list[str]:
    """The passage texts of a document with sections (see the module docstring)."""
    out: list[str] = []
    pack: list[str] = []
    packed = 0

    def flush() -> None:
        nonlocal packed
        if pack:
            out.append("\n\n".join(pack))
            pack.clear()
            packed = 0

    for section in doc.sections:
        head = section.context
        head_tokens = len(_TOKEN.findall(head))
        body_tokens = len(_TOKEN.findall(section.text))
        if head_tokens + body_tokens > chunk_tokens:
            flush()
            room = max(chunk_tokens - head_tokens, overlap + 1, 1)
            for window in _windows(section.text, room, min(overlap, room - 1)):
                out.append(f"{head}\n{window}" if head else window)
            continue
        if packed + head_tokens + body_tokens > chunk_tokens:
            flush()
        pack.append(f"{head}\n{section.text.strip()}" if head else section.text.strip())
        packed += head_tokens + body_tokens
    flush()
    return out


__all__ = ["PassageDraft", "chunk_document", "content_hash", "document_key"]
