"""PDF files with pdfminer.six: text with its layout, headings from the outline or the type size.

pdfminer groups each page's characters into lines and text boxes in reading order (columns
included). Headings are the entries of the document's outline (bookmarks: Chromium's print with
``--generate-pdf-document-outline``, Word's and LaTeX's exports) found among the lines, with the
outline's depth as their level; a PDF without an outline (or whose outline entries are mostly not
lines of its text) gets them from the type: a short line set
at least 15 % larger than the body text (the size most characters have) is a heading, the larger
the outer. Each other text box is a paragraph (a word hyphenated across lines is joined); text
boxes of one line side by side on one baseline are a table row, joined by ``" | "``. A line at
the top or bottom of most pages (a running header or footer, page numbers aside) is dropped. Ligatures
(``ﬁ``) become their letters. The metadata title is the document information's ``Title``.

A file that is not a PDF, is damaged, encrypted, forbids text extraction, or holds no text (a scan
without a text layer) raises :class:`~livingrag.errors.InvalidInput` saying which.
"""

from __future__ import annotations

import io
import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from livingrag.errors import InvalidInput
from livingrag.io.readers.structure import Block, Heading, Parsed

HEADING_RATIO = 1.15
"""A line set this much larger than the body text is a heading (PDFs without an outline)."""
MAX_HEADING_CHARS = 200
MAX_RUNNING_WORDS = 15
"""A running header or footer is at most this many words (a longer line is text)."""
_LIGATURES = re.compile("[\ufb00-\ufb06]")
_DIGITS = re.compile(r"\d+")
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.I)


@dataclass
class _Line:
    text: str
    size: float
    x0: float
    y0: float
    chars: int


@dataclass
class _Box:
    lines: list[_Line]
    page: int

    @property
    def text(self) -> str:
        return " ".join(line.text for line in self.lines)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _fix(text: str) -> str:
    return _LIGATURES.sub(lambda m: unicodedata.normalize("NFKC", m.group(0)), text)


def _decode(value: Any) -> str | None:
    from pdfminer.pdftypes import resolve1
    from pdfminer.utils import decode_text

    value = resolve1(value)
    if isinstance(value, bytes):
        return decode_text(value)
    return value if isinstance(value, str) else None


def _outline(doc: Any) -> list[tuple[int, str]]:
    from pdfminer.pdfdocument import PDFNoOutlines

    try:
        return [(int(level), title) for level, title, *_ in doc.get_outlines() if isinstance(title, str) and title]
    except PDFNoOutlines:
        return []


def _boxes(doc: Any) -> Iterator[_Box]:
    from pdfminer.converter import PDFPageAggregator
    from pdfminer.layout import LAParams, LTChar, LTTextBox, LTTextLine
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage

    manager = PDFResourceManager()
    device = PDFPageAggregator(manager, laparams=LAParams())
    interpreter = PDFPageInterpreter(manager, device)
    for page_no, page in enumerate(PDFPage.create_pages(doc)):
        interpreter.process_page(page)
        for box in device.get_result():
            if not isinstance(box, LTTextBox):
                continue
            lines = []
            for line in box:
                if not isinstance(line, LTTextLine):
                    continue
                text = _fix(line.get_text()).strip()
                sizes = [round(c.size * 2) / 2 for c in line if isinstance(c, LTChar) and c.get_text().strip()]
                if text and sizes:
                    lines.append(_Line(text, statistics.median(sizes), line.x0, line.y0, len(sizes)))
            if lines:
                yield _Box(lines, page_no)


def _edge_lines(boxes: list[_Box]) -> list[tuple[int, _Line]]:
    """Each page's two top and two bottom lines (where running headers and footers are), if short."""
    by_page: dict[int, list[_Line]] = {}
    for b in boxes:
        by_page.setdefault(b.page, []).extend(b.lines)
    out: list[tuple[int, _Line]] = []
    for page, lines in by_page.items():
        ordered = sorted(lines, key=lambda line: line.y0)
        picked = {id(line): line for line in ordered[:2] + ordered[-2:] if len(line.text.split()) <= MAX_RUNNING_WORDS}
        out.extend((page, line) for line in picked.values())
    return out


def _running_lines(boxes: list[_Box], pages: int) -> set[int]:
    """The ids of the lines at a page's top or bottom whose text (digits ignored) stands at the same
    height on at least half the pages, when there are 3 or more: running headers and footers."""
    if pages < 3:
        return set()
    edges = _edge_lines(boxes)

    def key(line: _Line) -> tuple[str, int]:  # the text, digits aside, at the same height
        return _DIGITS.sub("#", _norm(line.text)), round(line.y0 / 4)

    seen: dict[tuple[str, int], set[int]] = {}
    for page, line in edges:
        seen.setdefault(key(line), set()).add(page)
    running = {k for k, on in seen.items() if len(on) >= max(3, pages / 2)}
    return {id(line) for _, line in edges if key(line) in running}


def _join(lines: list[_Line]) -> str:
    out = ""
    for line in lines:
        if not out:
            out = line.text
        elif out.endswith("-") and line.text[:1].islower() and not out.endswith(" -"):
            out = out[:-1] + line.text  # a word hyphenated at the line's end
        else:
            out += " " + line.text
    return out


def _blocks(boxes: list[_Box], outline: list[tuple[int, str]]) -> list[Block]:
    sizes: Counter[float] = Counter()
    for b in boxes:
        for line in b.lines:
            sizes[line.size] += line.chars
    body = sizes.most_common(1)[0][0]
    pending = [(level, _norm(title)) for level, title in outline]
    heading_sizes = sorted(
        {line.size for b in boxes for line in b.lines if line.size >= body * HEADING_RATIO}, reverse=True
    )

    def heading_level(text: str, size: float) -> int | None:
        if outline:
            key = _norm(text)
            for k, (level, title) in enumerate(pending):
                if title == key:
                    del pending[k]
                    return level
            return None
        if size >= body * HEADING_RATIO and len(text) <= MAX_HEADING_CHARS:
            return min(heading_sizes.index(size) + 1, 6)
        return None

    out: list[Block] = []
    used: set[int] = set()
    for i, b in enumerate(boxes):
        if i in used:
            continue
        level = heading_level(b.text, max(line.size for line in b.lines))
        if level is not None:
            out.append(Heading(level, b.text))
            continue
        if len(b.lines) == 1:
            row = [b] + [
                o
                for j, o in enumerate(boxes)
                if j != i
                and j not in used
                and o.page == b.page
                and len(o.lines) == 1
                and abs(o.lines[0].y0 - b.lines[0].y0) < 0.5 * b.lines[0].size
            ]
            if len(row) > 1:
                used.update(boxes.index(o) for o in row)
                out.append(" | ".join(o.text for o in sorted(row, key=lambda o: o.lines[0].x0)))
                continue
        paragraph: list[_Line] = []
        for line in b.lines:  # a heading line inside a box (pdfminer grouped it with its text)
            line_level = heading_level(line.text, line.size)
            if line_level is None:
                paragraph.append(line)
                continue
            if paragraph:
                out.append(_join(paragraph))
                paragraph = []
            out.append(Heading(line_level, line.text))
        if paragraph:
            out.append(_join(paragraph))
    return out


def parse_pdf(data: bytes, where: str) -> Parsed:
    """The blocks of the PDF ``data`` (see the module docstring)."""
    if b"%PDF-" not in data[:1024]:
        raise InvalidInput(f"{where}: not a PDF file (no %PDF- header at its start)")
    from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfparser import PDFParser

    try:
        doc = PDFDocument(PDFParser(io.BytesIO(data)))
        if not doc.is_extractable:
            raise InvalidInput(f"{where}: the PDF forbids extracting its text")
        info = doc.info[0] if doc.info else {}
        title = _decode(info.get("Title")) if isinstance(info, dict) else None
        outline = _outline(doc)
        boxes = list(_boxes(doc))
        pages = 1 + max((b.page for b in boxes), default=0)
    except InvalidInput:
        raise
    except (PDFEncryptionError, PDFPasswordIncorrect):
        raise InvalidInput(f"{where}: the PDF is encrypted (save an unencrypted copy)") from None
    except Exception as exc:  # pdfminer's syntax and type errors on damaged files
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise InvalidInput(
            f"{where}: not a readable PDF, damaged or cut short ({type(exc).__name__}: {first})"
        ) from None
    running = _running_lines(boxes, pages)
    if running:
        for b in boxes:
            b.lines = [line for line in b.lines if id(line) not in running]
        boxes = [b for b in boxes if b.lines]
    if not boxes:
        raise InvalidInput(f"{where}: the PDF has no text (a scan without a text layer? run OCR on it first)")
    blocks = _blocks(boxes, outline)
    if outline and 2 * sum(isinstance(b, Heading) for b in blocks) < len(outline):
        blocks = _blocks(boxes, [])  # an outline whose entries are mostly not lines of the text: use the type
    return Parsed(tuple(blocks), title)


__all__ = ["HEADING_RATIO", "parse_pdf"]
