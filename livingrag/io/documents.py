"""The document type every reader produces: a corpus file's record, a text file, a dataset's passage.

A document read from a structured file (PDF, DOCX, HTML, Markdown: :mod:`livingrag.io.readers`)
also carries its :class:`Section` list: the text under each heading with the path of headings
above it, which chunking keeps as each passage's first line (its context).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

FILE_SUFFIXES = (".txt", ".md", ".markdown", ".pdf", ".docx", ".html", ".htm", ".xhtml")
"""The suffixes of the files whose name can be a document's title (see :func:`title_is_file_name`)."""


@dataclass(frozen=True)
class Section:
    """The text under one heading: ``path`` holds the headings above it, outermost first (the
    document's title heading left out), empty for text before the first heading."""

    path: tuple[str, ...]
    text: str

    @property
    def context(self) -> str:
        """The heading path as one line: ``"Depots › Cold storage"`` (``""`` for no heading)."""
        return " › ".join(self.path)


@dataclass(frozen=True)
class Document:
    """One source document before chunking.

    ``external_id`` is the id its source gives it (a record's ``id``, a text file's path, a
    dataset corpus's key); ``source`` says where it was read, for errors and provenance.
    ``title_is_entity`` is False when the title is only the file's name (no heading or metadata
    gave one): a file name is never indexed as an entity. ``sections``, when a reader found the
    document's headings, split ``text`` by them (chunking then keeps each heading path).
    """

    title: str
    text: str
    external_id: str | None = None
    source: str = ""
    title_is_entity: bool = True
    sections: tuple[Section, ...] = ()

    @property
    def key(self) -> str:
        """The document's key in a dataset's corpus: its external id (``""`` when it has none)."""
        return self.external_id or ""


def title_is_file_name(title: str, external_id: str | None) -> bool:
    """Whether ``title`` is only the name of the file the passage came from: its external id (a
    file's path, ``#n`` of a chunk left out) names a document file whose stem is the title."""
    if not title or not external_id:
        return False
    path = PurePosixPath(external_id.split("#", 1)[0])
    return path.suffix.lower() in FILE_SUFFIXES and path.stem == title


__all__ = ["FILE_SUFFIXES", "Document", "Section", "title_is_file_name"]
