"""The document type every reader produces: a corpus file's record, a text file, a dataset's passage."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Document:
    """One source document before chunking.

    ``external_id`` is the id its source gives it (a record's ``id``, a text file's path, a
    dataset corpus's key); ``source`` says where it was read, for errors and provenance.
    """

    title: str
    text: str
    external_id: str | None = None
    source: str = ""

    @property
    def key(self) -> str:
        """The document's key in a dataset's corpus: its external id (``""`` when it has none)."""
        return self.external_id or ""


__all__ = ["Document"]
