"""Readers for the documents people keep: PDF, Word (.docx), HTML, Markdown and plain text.

:func:`read_document` reads one file by its suffix, :func:`read_document_bytes` the bytes of an
upload by its name; both return one :class:`~livingrag.io.documents.Document` or raise
:class:`~livingrag.errors.InvalidInput` naming the file and what is wrong with it (not that format,
damaged, encrypted, empty, binary data in a text file). The structured formats keep their
structure (:mod:`livingrag.io.readers.structure`): the title from the first heading or the
metadata, sections from the headings, markup stripped, tables as rows of text. A plain text file
is one section titled by its file name, which is then not an entity of its passages.

=========  =======================================  ================================================
suffix     library                                  reader
=========  =======================================  ================================================
.pdf       pdfminer.six (MIT)                       :mod:`livingrag.io.readers.pdf`
.docx      python-docx (MIT)                        :mod:`livingrag.io.readers.docx`
.html/.htm beautifulsoup4 (MIT) with lxml (BSD)     :mod:`livingrag.io.readers.html`
.md        markdown-it-py (MIT)                     :mod:`livingrag.io.readers.markdown`
.txt       (none)                                   the text as it is
=========  =======================================  ================================================

Each library is imported when its first file is read.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from livingrag.errors import InvalidInput
from livingrag.io.documents import Document
from livingrag.io.readers.structure import Parsed, build_document
from livingrag.io.records import decode

DOCUMENT_SUFFIXES: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
}
"""The file suffixes read as documents, and their format."""

_BINARY_CONTROL = frozenset(range(0, 32)) - {9, 10, 12, 13}
_MAGIC = (
    (b"%PDF-", "a PDF file"),
    (b"PK\x03\x04", "a ZIP package (a .docx, .xlsx or .zip file?)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\xd0\xcf\x11\xe0", "an old Office document (.doc, .xls)"),
)


def _text(where: str, data: bytes) -> str:
    """``data`` as UTF-8 text; binary data (a NUL byte, many control characters) is refused, naming
    the kind of file when its first bytes tell."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            raise InvalidInput(f"{where}: binary data, not text: this is {kind}; give it the suffix of its kind")
    nul = data.find(b"\0")
    if nul >= 0:
        raise InvalidInput(
            f"{where}: binary data, not text (a NUL byte at offset {nul}); is it another kind of file renamed?"
        )
    text = decode(Path(where), data)
    control = sum(1 for ch in text[:65536] if ord(ch) in _BINARY_CONTROL)
    if control > max(8, len(text[:65536]) // 100):
        raise InvalidInput(
            f"{where}: binary data, not text ({control} control characters); is it another kind of file renamed?"
        )
    return text


def parse(fmt: str, data: bytes, where: str) -> Parsed | str:
    """The blocks of ``data`` in format ``fmt`` (a value of :data:`DOCUMENT_SUFFIXES`), or for plain
    text the text itself."""
    if fmt == "pdf":
        from livingrag.io.readers.pdf import parse_pdf

        return parse_pdf(data, where)
    if fmt == "docx":
        from livingrag.io.readers.docx import parse_docx

        return parse_docx(data, where)
    if fmt == "html":
        from livingrag.io.readers.html import parse_html

        return parse_html(data, where)
    text = _text(where, data)
    if fmt == "markdown":
        from livingrag.io.readers.markdown import parse_markdown

        return parse_markdown(text)
    return text


def read_document_bytes(
    name: str, data: bytes, *, external_id: str | None = None, where: str | None = None
) -> Document:
    """The document in the bytes of a file called ``name`` (its suffix picks the format; an
    upload's name, say). ``external_id`` defaults to ``name``; ``where`` (default ``name``)
    names it in errors."""
    where = where or name
    suffix = PurePosixPath(name).suffix.lower()
    fmt = DOCUMENT_SUFFIXES.get(suffix)
    if fmt is None:
        known = ", ".join(DOCUMENT_SUFFIXES)
        raise InvalidInput(f"{where}: unsupported file type {suffix or '(none)'}; documents are {known}")
    ext = name if external_id is None else external_id
    stem = PurePosixPath(name).stem
    parsed = parse(fmt, data, where)
    if isinstance(parsed, str):
        return Document(title=stem, text=parsed.strip(), external_id=ext, source=ext, title_is_entity=False)
    return build_document(parsed, where=where, stem=stem, external_id=ext, source=ext)


def read_document(path: Path, root: Path | None = None) -> Document:
    """The document in the file ``path``; its external id is its path relative to ``root`` (a
    folder being read), else its name."""
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    if not data.strip():
        raise InvalidInput(f"{path}: the file is empty (an empty file has nothing to read)")
    rel = path.relative_to(root).as_posix() if root is not None else path.name
    return read_document_bytes(path.name, data, external_id=rel, where=str(path))


__all__ = ["DOCUMENT_SUFFIXES", "parse", "read_document", "read_document_bytes"]
