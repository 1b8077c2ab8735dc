"""Word documents (.docx) with python-docx.

The body is read in order, paragraphs and tables interleaved. A paragraph whose style is (or is
based on) ``Title`` is a level-0 heading, ``Heading N`` a level-N heading, and so is a paragraph
with an outline level of its own (``w:outlineLvl``); every other paragraph is a paragraph. A table
becomes one line per row, its cells joined by ``" | "`` (a merged cell once). The metadata title
is the core properties' title.
"""

from __future__ import annotations

import io
import re
import zipfile

from docx import Document as open_docx
from docx.opc.exceptions import PackageNotFoundError
from docx.styles.style import BaseStyle
from docx.table import Table
from docx.text.paragraph import Paragraph

from livingrag.errors import InvalidInput
from livingrag.io.readers.structure import Block, Heading, Parsed

_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.I)


def _style_level(style: BaseStyle | None) -> int | None:
    seen = 0
    while style is not None and seen < 10:
        name = (style.name or "").strip()
        if name.lower() == "title":
            return 0
        m = _HEADING_STYLE.match(name)
        if m:
            return int(m.group(1))
        style = getattr(style, "base_style", None)
        seen += 1
    return None


def _level(p: Paragraph) -> int | None:
    level = _style_level(p.style)
    if level is not None:
        return level
    values = p._p.xpath("./w:pPr/w:outlineLvl/@w:val")
    if values and str(values[0]).isdigit() and int(str(values[0])) < 9:
        return int(str(values[0])) + 1
    return None


def _rows(table: Table) -> list[str]:
    out = []
    for row in table.rows:
        cells: list[str] = []
        last = None
        for cell in row.cells:
            if cell._tc is last:
                continue  # a horizontally merged cell is listed once per grid column
            last = cell._tc
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            out.append(" | ".join(cells))
    return out


def parse_docx(data: bytes, where: str) -> Parsed:
    """The blocks of the .docx document ``data`` (see the module docstring)."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise InvalidInput(f"{where}: not a Word .docx document (a .docx file is a ZIP package; this one is not)")
    try:
        doc = open_docx(io.BytesIO(data))
        blocks: list[Block] = []
        for item in doc.iter_inner_content():
            if isinstance(item, Paragraph):
                level = _level(item)
                blocks.append(Heading(level, item.text) if level is not None else item.text)
            else:
                blocks.extend(_rows(item))
        title = doc.core_properties.title
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise InvalidInput(f"{where}: not a readable Word .docx document ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # lxml's XML errors and the like from a damaged package
        raise InvalidInput(f"{where}: not a readable Word .docx document ({type(exc).__name__}: {exc})") from None
    return Parsed(tuple(blocks), title or None)


__all__ = ["parse_docx"]
