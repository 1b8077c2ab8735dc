"""From a reader's blocks (headings and paragraphs in reading order) to a :class:`Document`.

Every structured reader (PDF, DOCX, HTML, Markdown) turns its file into a flat list of blocks:
:class:`Heading` (a level, 1 the outermost; 0 for a DOCX "Title" paragraph) and paragraphs
(plain strings; a table row is one paragraph, its cells joined by ``" | "``). This module picks the
title and cuts the sections:

* **title**: the first heading when no other heading shares its level (a document's single top
  heading: Markdown's ``# Title``, HTML's ``<h1>``, the largest type in a PDF, a DOCX Title); else
  the metadata title (PDF Info, DOCX core properties, HTML ``<title>``, Markdown front matter)
  unless it is a placeholder ("Untitled", "Microsoft Word - x.docx", a file name); else the first
  heading; else the file's name, which is then no entity (``title_is_entity=False``);
* **sections**: the paragraphs under each heading, with the path of headings above them (the
  title heading left out); a heading with no paragraph of its own only lends its name to the
  paths below it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from livingrag.errors import InvalidInput
from livingrag.io.documents import FILE_SUFFIXES, Document, Section

_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_PLACEHOLDER = re.compile(r"^(untitled|document\d*|microsoft (word|powerpoint) - .*|title)$", re.I)


@dataclass(frozen=True)
class Heading:
    """A heading block: ``level`` 1 is the outermost (0: a title paragraph above them)."""

    level: int
    text: str


Block = Heading | str


@dataclass(frozen=True)
class Parsed:
    """What a format reader found: its blocks in reading order and the metadata title, if any."""

    blocks: tuple[Block, ...]
    metadata_title: str | None = None


def clean_line(text: str) -> str:
    """``text`` with runs of spaces (no-break spaces included) made one space, each line stripped and
    blank lines dropped."""
    lines = (_SPACES.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _usable_metadata(title: str | None, stem: str) -> str | None:
    if title is None:
        return None
    t = clean_line(title).replace("\n", " ")
    if not t or _PLACEHOLDER.match(t) or t == stem or t.lower().endswith(FILE_SUFFIXES):
        return None
    return t


def _title(blocks: Sequence[Block], metadata: str | None) -> tuple[str | None, int | None]:
    """The title and the index of the heading block it came from (None: not from a heading)."""
    headings = [(i, b) for i, b in enumerate(blocks) if isinstance(b, Heading)]
    if headings:
        first_i, first = headings[0]
        top = min(h.level for _, h in headings)
        if first.level == top and sum(h.level == top for _, h in headings) == 1:
            return first.text, first_i
    if metadata:
        return metadata, None
    if headings:
        return headings[0][1].text, None  # one of several top headings: it stays a section too
    return None, None


def _sections(blocks: Sequence[Block], skip: int | None) -> list[Section]:
    out: list[Section] = []
    stack: list[Heading] = []
    paragraphs: list[str] = []

    def flush() -> None:
        if paragraphs:
            out.append(Section(tuple(h.text for h in stack), "\n".join(paragraphs)))
            paragraphs.clear()

    for i, b in enumerate(blocks):
        if isinstance(b, Heading):
            flush()
            if i == skip:
                continue
            while stack and stack[-1].level >= b.level:
                stack.pop()
            stack.append(b)
        else:
            paragraphs.append(b)
    flush()
    return out


def render(sections: Iterable[Section]) -> str:
    """The document's plain text: each section's heading line (the last of its path) above its text."""
    parts = []
    for s in sections:
        parts.append(f"{s.path[-1]}\n{s.text}" if s.path else s.text)
    return "\n\n".join(parts)


def build_document(parsed: Parsed, *, where: str, stem: str, external_id: str | None, source: str) -> Document:
    """The document of ``parsed`` (see the module docstring); ``where`` names the file in errors and
    ``stem`` is the file's name without its suffix (the title of last resort)."""
    blocks: list[Block] = []
    for b in parsed.blocks:
        text = clean_line(b.text if isinstance(b, Heading) else b)
        if text:
            blocks.append(Heading(b.level, text.replace("\n", " ")) if isinstance(b, Heading) else text)
    if not blocks:
        raise InvalidInput(f"{where}: the document has no text")
    title, title_block = _title(blocks, _usable_metadata(parsed.metadata_title, stem))
    sections = _sections(blocks, title_block)
    if not sections:  # headings only: their names are the text
        names = [b.text for i, b in enumerate(blocks) if isinstance(b, Heading) and i != title_block]
        if not names:
            raise InvalidInput(f"{where}: the document has no text besides its title {title!r}")
        sections = [Section((), "\n".join(names))]
    return Document(
        title=title or stem,
        text=render(sections),
        external_id=external_id,
        source=source,
        title_is_entity=title is not None,
        sections=tuple(sections),
    )


__all__ = ["Block", "Heading", "Parsed", "build_document", "clean_line", "render"]
