"""HTML pages with Beautiful Soup (lxml's parser): the article, not the page around it.

The text comes from the page's one ``<article>``, else its ``<main>`` (or ``role="main"``), else
its ``<body>`` without ``<header>`` and ``<footer>``; navigation (``<nav>``, ``role="navigation"``),
``<aside>``, scripts, styles, forms' controls and hidden elements are dropped wherever they are.
Headings ``<h1>``-``<h6>`` become headings; every block element (paragraph, list item, ``div``, ...)
a paragraph with its inline markup stripped (``<br>`` breaks the line); ``<pre>`` keeps its lines;
a table becomes one line per row (``<th>``/``<td>`` joined by ``" | "``). The metadata title is the
``<title>`` (or ``og:title``).
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

from livingrag.errors import InvalidInput
from livingrag.io.readers.structure import Block, Heading, Parsed

_DROP = (
    *("script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed"),
    *("button", "select", "input", "textarea", "nav", "aside", "dialog"),
)
_DROP_ROLES = ("navigation", "complementary", "search", "dialog")
_BLOCKS = frozenset(
    (
        *("p", "div", "section", "article", "main", "header", "footer", "li", "ul", "ol", "dl", "dt", "dd"),
        *("blockquote", "figure", "figcaption", "address", "hr", "details", "summary", "form", "fieldset"),
        *("legend", "caption", "center"),
    )
)
_HEADING = re.compile(r"^h([1-6])$")
_SKIPPED_STRINGS = (Comment, Declaration, Doctype, ProcessingInstruction)


def _hidden(tag: Tag) -> bool:
    style = str(tag.get("style") or "").replace(" ", "").lower()
    return (
        tag.has_attr("hidden")
        or str(tag.get("aria-hidden") or "").lower() == "true"
        or "display:none" in style
        or "visibility:hidden" in style
    )


def _root(soup: BeautifulSoup) -> Tag:
    articles = soup.find_all("article")
    if len(articles) == 1:
        return articles[0]
    main = soup.find("main") or soup.find(role="main")
    if isinstance(main, Tag):
        return main
    body = soup.body or soup
    for tag in body.find_all(["header", "footer"]):
        if not tag.find_parent("article"):
            tag.decompose()
    return body


class _Walker:
    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.inline: list[str] = []

    def flush(self) -> None:
        text = "".join(self.inline)
        self.inline.clear()
        lines = (" ".join(line.split()) for line in text.split("\n"))
        joined = "\n".join(line for line in lines if line)
        if joined:
            self.blocks.append(joined)

    def table(self, table: Tag) -> None:
        self.flush()
        for tr in table.find_all("tr"):
            if tr.find_parent("table") is not table:
                continue  # a nested table's row: its cell's text is in the outer row
            cells = [" ".join(c.get_text(" ").split()) for c in tr.find_all(["th", "td"], recursive=False)]
            if any(cells):
                self.blocks.append(" | ".join(cells))

    def walk(self, node: Tag) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                if not isinstance(child, _SKIPPED_STRINGS):
                    self.inline.append(str(child).replace("\n", " "))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name.lower()
            heading = _HEADING.match(name)
            if heading:
                self.flush()
                self.blocks.append(Heading(int(heading.group(1)), child.get_text(" ")))
            elif name == "table":
                self.table(child)
            elif name == "pre":
                self.flush()
                self.blocks.append(child.get_text())
            elif name == "br":
                self.inline.append("\n")
            elif name in _BLOCKS:
                self.flush()
                self.walk(child)
                self.flush()
            else:
                self.walk(child)


def parse_html(data: bytes, where: str) -> Parsed:
    """The blocks of the HTML page ``data`` (see the module docstring)."""
    head = data[:4096].lower()
    if b"<" not in head:
        raise InvalidInput(f"{where}: not an HTML page (no markup in its first 4 KiB)")
    try:
        soup = BeautifulSoup(data, "lxml")
    except Exception as exc:  # lxml or the encoding detection failing on bytes that are no page
        raise InvalidInput(f"{where}: not a readable HTML page ({type(exc).__name__}: {exc})") from None
    meta: str | None = None
    if soup.title is not None and soup.title.get_text(strip=True):
        meta = soup.title.get_text(" ", strip=True)
    else:
        og = soup.find("meta", attrs={"property": "og:title"})
        if isinstance(og, Tag) and og.get("content"):
            meta = str(og.get("content"))
    for tag in soup.find_all(_DROP):
        tag.decompose()
    for tag in soup.find_all(role=list(_DROP_ROLES)):
        tag.decompose()
    for tag in soup.find_all(_hidden):
        if not tag.decomposed:
            tag.decompose()
    walker = _Walker()
    walker.walk(_root(soup))
    walker.flush()
    return Parsed(tuple(walker.blocks), meta)


__all__ = ["parse_html"]
