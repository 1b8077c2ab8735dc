"""Reading corpus files into documents, validating everything before anything is written.

Accepted inputs (by path):

* ``*.json``: a list of objects ``{"title": ..., "text": ...}`` (HippoRAG's corpus format; an
  optional ``id``/``_id``/``idx`` becomes the external id); a list of strings (LinearRAG's chunk
  files; their ``"<n>:"`` prefixes are removed when every string has one); or an object mapping
  titles to a text or a list of sentences (HotpotQA's corpus format).
* ``*.jsonl``: one object or string per line, as above; so is a ``*.json`` file that holds JSON
  lines (read by content, :func:`livingrag.io.records.read_structured`).
* ``*.txt`` / ``*.md``: one document; its title is the file name without the suffix.
* a folder: every ``.txt`` and ``.md`` file under it (recursively, in path order).

Any problem (not UTF-8, not JSON, an empty file, a record without text, a wrong type) raises
:class:`~livingrag.errors.InvalidInput` naming the file and the record, before the indexer
writes anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from livingrag.errors import InvalidInput
from livingrag.io.documents import Document
from livingrag.io.records import Structured, read_structured, read_text

TEXT_SUFFIXES = (".txt", ".md")
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
    text = read_text(path)
    rel = path.relative_to(root).as_posix() if root is not None else path.name
    return Document(title=path.stem, text=text.strip(), external_id=rel, source=rel)


def read_folder(path: Path) -> list[Document]:
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    if not files:
        raise InvalidInput(f"{path}: the folder has no .txt or .md files")
    return [read_text_file(f, path) for f in files]


def read_corpus(path: str | Path) -> list[Document]:
    """Every document under ``path`` (file or folder), fully validated (see the module docstring)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise InvalidInput(f"{p}: no such file or folder")
    if p.is_dir():
        return read_folder(p)
    suffix = p.suffix.lower()
    if suffix == ".json":
        return read_json(p)
    if suffix == ".jsonl":
        return read_jsonl(p)
    if suffix in TEXT_SUFFIXES:
        return [read_text_file(p)]
    raise InvalidInput(f"{p}: unsupported file type {suffix or '(none)'}; give .json, .jsonl, .txt, .md or a folder")


def documents_from_records(records: Iterable[dict[str, Any] | str], *, source: str = "input") -> list[Document]:
    """Validate in-memory records (same rules as the files); for the Python API."""
    path = Path(source)
    return [_record(path, f"record at index {i}", r) for i, r in enumerate(records)]


__all__ = ["Document", "documents_from_records", "read_corpus", "read_folder", "read_json", "read_jsonl"]
