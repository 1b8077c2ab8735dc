"""Reading corpus files into documents, validating everything before anything is written.

Accepted inputs (by path):

* ``*.json``: a list of objects ``{"title": ..., "text": ...}`` (HippoRAG's corpus format; an
  optional ``id``/``_id``/``idx`` becomes the external id); a list of strings (LinearRAG's chunk
  files; their ``"<n>:"`` prefixes are removed when every string has one); or an object mapping
  titles to a text or a list of sentences (HotpotQA's corpus format).
* ``*.jsonl``: one object or string per line, as above; so is a ``*.json`` file that holds JSON
  lines (read by content, :func:`livingrag.io.records.read_structured`).
* ``*.pdf``, ``*.docx``, ``*.html``/``*.htm``, ``*.md``/``*.markdown``: one document each, read
  with its structure (:mod:`livingrag.io.readers`: the title from the first heading or the
  metadata, sections from the headings, markup stripped, tables as rows of text).
* ``*.txt``: one document; its title is the file name without the suffix (no entity).
* a folder: every document file under it (recursively, in path order; hidden files and folders
  left out). Its other files are listed as skipped with the reason (:func:`read_inputs`), never
  left out silently; ``.json``/``.jsonl`` corpora are indexed one file at a time.

Any problem (not UTF-8, not JSON, an empty file, a record without text, a wrong type, a damaged or
empty document) raises :class:`~livingrag.errors.InvalidInput` naming the file and the record,
before the indexer writes anything; in a folder every unreadable file is listed in one error.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from livingrag.errors import InvalidInput
from livingrag.io.documents import Document
from livingrag.io.readers import DOCUMENT_SUFFIXES, read_document
from livingrag.io.records import Structured, decode, parse_structured, read_structured

log = logging.getLogger(__name__)

TEXT_SUFFIXES = tuple(DOCUMENT_SUFFIXES)
"""The suffixes of the files read as one document each (plain text and the structured formats)."""
ID_FIELDS = ("id", "_id", "idx")
_LINEARRAG_PREFIX = re.compile(r"^\d+:")


def _record(path: Path, where: str, rec: Any) -> Document:
    """A document from one JSON record (object or string); ``where`` names it in errors."""
    if isinstance(rec, str):
        if not rec.strip():
            raise InvalidInput(f"{path}: {where}: the text is empty")
        return Document(title="", text=rec.strip(), source=f"{path.name} {where}")
    if not isinstance(rec, dict):
        raise InvalidInput(f"{path}: {where}: expected an object with 'text' or a string, got {_kind(rec)}")
    if "text" not in rec:
        keys = ", ".join(sorted(map(str, rec))) or "none"
        raise InvalidInput(f"{path}: {where}: the record has no 'text' field (its fields: {keys})")
    text, title = rec["text"], rec.get("title", "")
    if not isinstance(text, str):
        raise InvalidInput(f"{path}: {where}: 'text' must be a string, got {_kind(text)}")
    if not text.strip():
        raise InvalidInput(f"{path}: {where}: 'text' is empty")
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise InvalidInput(f"{path}: {where}: 'title' must be a string, got {_kind(title)}")
    ext = next((rec[f] for f in ID_FIELDS if f in rec and rec[f] is not None), None)
    if ext is not None and not isinstance(ext, str | int):
        raise InvalidInput(f"{path}: {where}: '{next(f for f in ID_FIELDS if f in rec)}' must be a string or integer")
    return Document(
        title=title.strip(),
        text=text.strip(),
        external_id=None if ext is None else str(ext),
        source=f"{path.name} {where}",
    )


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number" if isinstance(v, int | float) else type(v).__name__
    )


def _strip_linearrag_prefixes(docs: list[Document], raw: list[Any]) -> list[Document]:
    if raw and all(isinstance(r, str) and _LINEARRAG_PREFIX.match(r.strip()) for r in raw):
        out = []
        for d in docs:
            stripped = _LINEARRAG_PREFIX.sub("", d.text, count=1).strip()
            out.append(Document(d.title, stripped or d.text, d.external_id, d.source))
        return out
    return docs


def read_json(path: Path) -> list[Document]:
    """The documents of a ``.json`` file: a list of records, an object title -> text, or JSON lines."""
    return _documents(path, read_structured(path))


def read_jsonl(path: Path) -> list[Document]:
    """The documents of a JSON-lines file: one record (object or string) a line."""
    return _documents(path, read_structured(path))


def records_from_bytes(name: str, data: bytes) -> list[Document]:
    """The documents of a ``.json`` or ``.jsonl`` file called ``name`` given as its bytes (an
    upload), read exactly as :func:`read_json` / :func:`read_jsonl` read the file; errors name it."""
    where = Path(PurePosixPath(name).name)
    return _documents(where, parse_structured(where, decode(where, data)))


def _documents(path: Path, parsed: Structured) -> list[Document]:
    data = parsed.value
    if isinstance(data, list):
        if not data:
            raise InvalidInput(f"{path}: the JSON list is empty")
        docs = [_record(path, parsed.where(i), r) for i, r in enumerate(data)]
        return _strip_linearrag_prefixes(docs, data)
    if isinstance(data, dict):
        if not data:
            raise InvalidInput(f"{path}: the JSON object is empty")
        docs = []
        for title, body in data.items():
            where = f"record {title!r}"
            if isinstance(body, list):
                if not all(isinstance(s, str) for s in body):
                    raise InvalidInput(f"{path}: {where}: expected a text or a list of sentences (strings)")
                body = "".join(body)
            if not isinstance(body, str):
                raise InvalidInput(f"{path}: {where}: expected a text or a list of sentences, got {_kind(body)}")
            if not body.strip():
                raise InvalidInput(f"{path}: {where}: the text is empty")
            docs.append(Document(title=str(title).strip(), text=body.strip(), source=f"{path.name} {where}"))
        return docs
    raise InvalidInput(f"{path}: expected a JSON list of records or an object of title -> text, got {_kind(data)}")


def read_text_file(path: Path, root: Path | None = None) -> Document:
    """The document in one file of :data:`TEXT_SUFFIXES` (:func:`livingrag.io.readers.read_document`)."""
    return read_document(path, root)


@dataclass(frozen=True)
class Skipped:
    """A file of a folder that was not read, and why."""

    path: str
    reason: str


@dataclass
class ReadResult:
    """The documents read from a file or folder, and the folder's files that were not read."""

    documents: list[Document]
    skipped: list[Skipped] = field(default_factory=list)


def _skip_reason(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl"):
        return f"a {suffix} corpus is indexed on its own: livingrag index {path.name}"
    return f"not a document type ({suffix or 'no suffix'}; documents are {', '.join(TEXT_SUFFIXES)})"


def read_folder_inputs(path: Path) -> ReadResult:
    """Every document file under the folder ``path`` (hidden files and folders left out), each read
    and validated; the other files are listed as skipped. Every file that cannot be read is named,
    with its reason, in one :class:`InvalidInput`."""
    files = sorted(p for p in path.rglob("*") if p.is_file())
    visible = [p for p in files if not any(part.startswith(".") for part in p.relative_to(path).parts)]
    docs: list[Document] = []
    skipped: list[Skipped] = []
    errors: list[str] = []
    for f in visible:
        if f.suffix.lower() not in TEXT_SUFFIXES:
            skipped.append(Skipped(f.relative_to(path).as_posix(), _skip_reason(f)))
            continue
        try:
            docs.append(read_text_file(f, path))
        except InvalidInput as exc:
            errors.append(str(exc))
    if errors:
        head = "1 file" if len(errors) == 1 else f"{len(errors)} files"
        raise InvalidInput(f"{path}: {head} cannot be read (nothing was indexed):\n  " + "\n  ".join(errors))
    if not docs:
        raise InvalidInput(
            f"{path}: the folder has no document files ({', '.join(TEXT_SUFFIXES)})"
            + (f"; skipped: {', '.join(s.path for s in skipped[:10])}" if skipped else "")
        )
    hidden = len(files) - len(visible)
    if hidden:
        skipped.append(Skipped(f"{hidden} hidden file(s)", "names starting with '.' are left out"))
    return ReadResult(docs, skipped)


def read_folder(path: Path) -> list[Document]:
    result = read_folder_inputs(path)
    for s in result.skipped:
        log.warning("%s: skipped %s: %s", path, s.path, s.reason)
    return result.documents


def read_inputs(path: str | Path) -> ReadResult:
    """Every document under ``path`` (file or folder), fully validated (see the module docstring),
    with the folder's files that were skipped."""
    p = Path(path).expanduser()
    if not p.exists():
        raise InvalidInput(f"{p}: no such file or folder")
    if p.is_dir():
        return read_folder_inputs(p)
    suffix = p.suffix.lower()
    if suffix == ".json":
        return ReadResult(read_json(p))
    if suffix == ".jsonl":
        return ReadResult(read_jsonl(p))
    if suffix in TEXT_SUFFIXES:
        return ReadResult([read_text_file(p)])
    raise InvalidInput(
        f"{p}: unsupported file type {suffix or '(none)'}; give .json, .jsonl, {', '.join(TEXT_SUFFIXES)} or a folder"
    )


def read_corpus(path: str | Path) -> list[Document]:
    """Every document under ``path`` (file or folder), fully validated (see the module docstring);
    a folder's skipped files are logged as warnings."""
    result = read_inputs(path)
    for s in result.skipped:
        log.warning("%s: skipped %s: %s", path, s.path, s.reason)
    return result.documents


def documents_from_records(records: Iterable[dict[str, Any] | str], *, source: str = "input") -> list[Document]:
    """Validate in-memory records (same rules as the files); for the Python API."""
    path = Path(source)
    return [_record(path, f"record at index {i}", r) for i, r in enumerate(records)]


__all__ = [
    "Document",
    "ReadResult",
    "Skipped",
    "documents_from_records",
    "read_corpus",
    "read_folder",
    "read_inputs",
    "read_json",
    "read_jsonl",
]
