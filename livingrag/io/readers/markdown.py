"""Markdown (CommonMark with GitHub tables) with markdown-it-py.

Headings (ATX ``#`` and setext) become headings; paragraphs, list items, block quotes and code
blocks become paragraphs with their markup stripped (emphasis, links: their text; images: their
alt text; inline HTML: dropped; an HTML block: its text); a table becomes one line per row, cells
joined by ``" | "``. A YAML front matter block (``---`` lines at the top) is not text: its
``title:`` is the metadata title.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token

from livingrag.io.readers.structure import Block, Heading, Parsed

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_TITLE_LINE = re.compile(r"^title\s*:\s*(.+?)\s*$", re.M | re.I)
_TAG = re.compile(r"<[^>]*>")


def _front_matter(text: str) -> tuple[str, str | None]:
    m = _FRONT_MATTER.match(text)
    if not m:
        return text, None
    t = _TITLE_LINE.search(m.group(1))
    title = t.group(1).strip().strip("\"'") if t else None
    return text[m.end() :], title or None


def _inline(tokens: Sequence[Token] | None) -> str:
    out: list[str] = []
    for t in tokens or ():
        if t.type in ("text", "code_inline"):
            out.append(t.content)
        elif t.type == "softbreak":
            out.append(" ")
        elif t.type == "hardbreak":
            out.append("\n")
        elif t.type == "image":
            out.append(_inline(t.children) or t.content)
    return "".join(out)


def parse_markdown(text: str) -> Parsed:
    """The blocks of the Markdown ``text`` (see the module docstring)."""
    body, title = _front_matter(text)
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    tokens = md.parse(body)
    blocks: list[Block] = []
    row: list[str] | None = None
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.type == "heading_open":
            blocks.append(Heading(int(t.tag[1:]), _inline(tokens[i + 1].children)))
            i += 2
        elif t.type == "tr_open":
            row = []
        elif t.type in ("th_open", "td_open") and row is not None:
            row.append(_inline(tokens[i + 1].children).strip())
            i += 1
        elif t.type == "tr_close" and row is not None:
            if any(row):
                blocks.append(" | ".join(row))
            row = None
        elif t.type == "inline":
            blocks.append(_inline(t.children))
        elif t.type in ("fence", "code_block"):
            blocks.append(t.content)
        elif t.type == "html_block":
            blocks.append(_TAG.sub(" ", t.content))
        i += 1
    return Parsed(tuple(blocks), title)


__all__ = ["parse_markdown"]
