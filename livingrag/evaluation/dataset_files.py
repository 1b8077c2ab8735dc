"""Reading the files of an evaluation dataset: records whose errors name the file, the record and
the field; corpora (a list of records, LinearRAG's numbered chunks); and finding a format's files in
a folder or its subfolders. :mod:`livingrag.evaluation.datasets` builds the questions from them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from livingrag.errors import InvalidInput
from livingrag.io.documents import Document
from livingrag.io.records import read_structured

# --------------------------------------------------------------------------------------------------
# File reading with errors that name the file and the record


def norm_ws(s: str) -> str:
    return " ".join(s.split())


class Record:
    """Field access on one record with errors that say which file, which record, which field."""

    def __init__(self, path: Path, index: int, rec: Any, label: str = "record") -> None:
        if not isinstance(rec, dict):
            raise InvalidInput(f"{path}: {label} {index}: expected an object, got {type(rec).__name__}")
        self.path, self.index, self.rec = path, index, rec
        rid = rec.get("id", rec.get("_id"))
        self.where = f"{path}: {label} {index}" + (f" (id {rid})" if isinstance(rid, str | int) else "")

    def error(self, msg: str) -> InvalidInput:
        return InvalidInput(f"{self.where}: {msg}")

    def has(self, name: str) -> bool:
        return self.rec.get(name) is not None

    def get_str(self, *names: str, required: bool = True, allow_empty: bool = False) -> str:
        for name in names:
            v = self.rec.get(name)
            if v is None:
                continue
            if isinstance(v, int | float) and not isinstance(v, bool):
                v = str(v)
            if not isinstance(v, str):
                raise self.error(f"field {name!r} must be a string, got {type(v).__name__}")
            if not v.strip() and not allow_empty:
                if required:
                    raise self.error(f"field {name!r} is empty")
                return ""
            return v
        if required:
            raise self.error(f"missing field {' or '.join(repr(n) for n in names)}")
        return ""

    def get_list(self, name: str, *, required: bool = True) -> list[Any]:
        v = self.rec.get(name)
        if v is None:
            if required:
                raise self.error(f"missing field {name!r}")
            return []
        if not isinstance(v, list):
            raise self.error(f"field {name!r} must be a list, got {type(v).__name__}")
        return v

    def get_str_list(self, name: str, *, required: bool = False) -> list[str]:
        out = []
        for i, v in enumerate(self.get_list(name, required=required)):
            if isinstance(v, int) and not isinstance(v, bool):
                v = str(v)
            if not isinstance(v, str):
                raise self.error(f"field {name!r} item {i} must be a string, got {type(v).__name__}")
            out.append(v)
        return out

    def qid(self) -> str:
        return self.get_str("id", "_id", required=False) or str(self.index)


def type_of(r: Record) -> str | None:
    t = r.rec.get("type", r.rec.get("question_type"))
    return t if isinstance(t, str) and t else None


# --------------------------------------------------------------------------------------------------
# Corpora


def read_corpus(path: Path) -> tuple[Document, ...]:
    """A corpus file: a JSON list of ``{title, text}``, an object ``title -> [sentences]`` (HippoRAG's
    HotpotQA), a JSON list of strings (LinearRAG chunks ``"<n>:<text>"``), or JSON lines ``{id?, title?,
    text}`` (in a ``.jsonl`` file, or a ``.json`` one that holds JSON lines). Keys: explicit ids when
    given, else positions. Titles and texts are stripped, as ``corpus add`` strips them."""
    data = read_structured(path).value
    if isinstance(data, dict):
        docs = []
        for i, (title, sents) in enumerate(data.items()):
            if isinstance(sents, str):
                text = sents
            elif isinstance(sents, list) and all(isinstance(s, str) for s in sents):
                text = "".join(sents)
            else:
                raise InvalidInput(f"{path}: entry {i} (title {title!r}): expected a list of sentence strings")
            docs.append(corpus_document(str(i), title, text))
        if not docs:
            raise InvalidInput(f"{path}: the corpus is empty")
        return tuple(docs)
    if not isinstance(data, list):
        raise InvalidInput(f"{path}: expected a JSON list of passages, got {type(data).__name__}")
    if not data:
        raise InvalidInput(f"{path}: the corpus is empty")
    if all(isinstance(x, str) for x in data):
        return linearrag_chunks(path, data)
    return corpus_from_records(path, data)


def corpus_document(key: str, title: str, text: str) -> Document:
    """A corpus passage with its dataset key (the document's external id), title and text stripped."""
    return Document(title=title.strip(), text=text.strip(), external_id=key)


def corpus_from_records(path: Path, data: list[Any]) -> tuple[Document, ...]:
    docs = []
    seen: set[str] = set()
    for i, rec in enumerate(data):
        r = Record(path, i, rec, "passage")
        text = r.get_str("text", "contents", "paragraph_text")
        key = r.get_str("key", "id", "_id", required=False) or str(i)
        if key in seen:
            raise r.error(f"duplicate key {key!r}")
        seen.add(key)
        docs.append(corpus_document(key, r.get_str("title", required=False, allow_empty=True), text))
    return tuple(docs)


_CHUNK = re.compile(r"^(\d+):(.*)$", re.S)


def linearrag_chunks(path: Path, data: list[str]) -> tuple[Document, ...]:
    docs = []
    seen: set[str] = set()
    for i, s in enumerate(data):
        m = _CHUNK.match(s)
        key, text = (m[1], m[2]) if m else (str(i), s)
        if not text.strip():
            raise InvalidInput(f"{path}: chunk {i}: empty text")
        if key in seen:
            raise InvalidInput(f"{path}: chunk {i}: duplicate chunk number {key}")
        seen.add(key)
        docs.append(corpus_document(key, "", text))
    return tuple(docs)


class CorpusIndex:
    """Lookups from (title, text) and title to corpus keys; ``add`` grows a corpus built from the
    paragraphs inside question records (de-duplicated on title + whitespace-normalised text)."""

    def __init__(self, docs: Sequence[Document] = ()) -> None:
        self.docs: list[Document] = []
        self.by_title_text: dict[tuple[str, str], str] = {}
        self.by_title: dict[str, list[str]] = {}
        for d in docs:
            self._put(d)

    def _put(self, d: Document) -> None:
        self.docs.append(d)
        k = (d.title, norm_ws(d.text))
        if k not in self.by_title_text:
            self.by_title_text[k] = d.key
            self.by_title.setdefault(d.title, []).append(d.key)

    def add(self, title: str, text: str) -> str:
        title = title.strip()
        key = self.by_title_text.get((title, norm_ws(text)))
        if key is None:
            key = str(len(self.docs))
            self._put(corpus_document(key, title, text))
        return key

    def find(self, title: str, texts: Iterable[str] = (), *, by_title: bool = True) -> str | None:
        """The key for a paragraph: exact title + text first (each text variant), then a unique title
        (titles compared stripped, texts whitespace-normalised)."""
        title = title.strip()
        for t in texts:
            key = self.by_title_text.get((title, norm_ws(t)))
            if key is not None:
                return key
        if not by_title:
            return None
        keys = self.by_title.get(title, [])
        return keys[0] if len(keys) == 1 else None


# --------------------------------------------------------------------------------------------------
# Finding the files


def candidate_dirs(base: Path) -> list[Path]:
    return [base, *sorted(p for p in base.iterdir() if p.is_dir())]


def find_pair(base: Path, prefix: str) -> tuple[Path, Path | None] | None:
    """HippoRAG's layout: ``<stem>.json`` + ``<stem>_corpus.json`` (stem starts with ``prefix``), in
    ``base`` or one of its subfolders; the first folder that has one wins, and two in one folder are
    ambiguous."""
    for d in candidate_dirs(base):
        pairs = []
        for c in sorted(d.glob(f"{prefix}*_corpus.json")):
            q = c.with_name(c.name[: -len("_corpus.json")] + ".json")
            if q.is_file():
                pairs.append((q, c))
        if len(pairs) > 1:
            names = ", ".join(p[0].name for p in pairs)
            raise InvalidInput(f"{d}: several {prefix} question files ({names}); point --data-dir at one")
        if pairs:
            return pairs[0]
    return None


def find_raw(base: Path, globs: Sequence[str]) -> Path | None:
    for d in candidate_dirs(base):
        hits = sorted({p for g in globs for p in d.glob(g) if not p.name.endswith("_corpus.json")})
        if len(hits) > 1:
            raise InvalidInput(f"{d}: several question files ({', '.join(p.name for p in hits)}); point at one")
        if hits:
            return hits[0]
    return None
