"""Rewrite the configuration table of docs/configuration.md from the settings models (run after changing config.py).

The file keeps its old name; the table moved from README.md to the docs site."""

from __future__ import annotations

import re
from pathlib import Path

from livingrag.config_view import settings_table

TABLE_PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
START, END = "<!-- settings-table:start -->", "<!-- settings-table:end -->"


def _escape_html(table: str) -> str:
    """``<`` outside code spans as ``&lt;``, so that ``<db.data_dir>`` is not read as an HTML tag."""
    parts = table.split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;") for i, part in enumerate(parts))


def render(text: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _m: f"{START}\n{_escape_html(settings_table())}\n{END}", text)


if __name__ == "__main__":
    TABLE_PAGE.write_text(render(TABLE_PAGE.read_text()))
