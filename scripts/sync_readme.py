"""Rewrite README.md's configuration table from the settings models (run after changing config.py)."""

from __future__ import annotations

import re
from pathlib import Path

from livingrag.config import settings_table

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- settings-table:start -->", "<!-- settings-table:end -->"


def render(text: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _m: f"{START}\n{settings_table()}\n{END}", text)


if __name__ == "__main__":
    README.write_text(render(README.read_text()))
