"""JSON and JSON-lines files, read with errors that name the file and the line or record.

* :func:`decode`: UTF-8 text (a byte-order mark is dropped); other bytes stop the read with their
  offset and line.
* :func:`read_json`: one JSON value.
* :func:`read_json_lines`: one JSON value a line (blank lines skipped), each with its line number.
* :func:`read_structured`: by content: a ``.jsonl``/``.ndjson`` file is JSON lines; any other file
  is one JSON value, unless it holds JSON lines (its first line is a whole JSON value and more
  follows), as raw MuSiQue files renamed ``.json`` do.
* :func:`read_records`: :func:`read_structured` that must give a non-empty list.

Every problem raises :class:`~livingrag.errors.InvalidInput` naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from livingrag.errors import InvalidInput

JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
_EMPTY = "the file is empty (an empty file has nothing to read)"


class JsonLine(NamedTuple):
    """One value of a JSON-lines file and its 1-based line number."""

    line: int
    value: Any


@dataclass(frozen=True)
class Structured:
    """A parsed file: ``value`` is the JSON value, or the list of values of a JSON-lines file;
    ``lines`` then gives each value's line number (None for a JSON file)."""

    value: Any
    lines: tuple[int, ...] | None = None

    def where(self, index: int) -> str:
        """How errors name item ``index`` of a list: ``line N`` or ``record at index N``."""
        return f"line {self.lines[index]}" if self.lines is not None else f"record at index {index}"


def decode(path: Path, data: bytes) -> str:
    """``data`` (the bytes of ``path``) as UTF-8 text without a byte-order mark; empty or
    whitespace-only files and non-UTF-8 bytes raise :class:`InvalidInput` (offset and line)."""
    if not data.strip():
        raise InvalidInput(f"{path}: {_EMPTY}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        line = data.count(b"\n", 0, exc.start) + 1
        raise InvalidInput(
            f"{path}: not UTF-8 text (byte 0x{bad:02x} at offset {exc.start}, line {line}); convert the file to UTF-8"
        ) from None
    if not text.strip():
        raise InvalidInput(f"{path}: {_EMPTY}")
    return text


def read_text(path: Path) -> str:
    """The text of the file ``path`` (see :func:`decode`)."""
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    return decode(path, data)


def parse_json(path: Path, text: str) -> Any:
    """``text`` (of ``path``) as one JSON value; syntax errors give the line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None


def parse_json_lines(path: Path, text: str) -> list[JsonLine]:
    """``text`` (of ``path``) as JSON lines, blank lines skipped; errors name the line."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(JsonLine(n, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path}: line {n}: not valid JSON (column {exc.colno}: {exc.msg})") from None
    if not out:
        raise InvalidInput(f"{path}: {_EMPTY}")
    return out


def holds_json_lines(text: str) -> bool:
    """Whether ``text`` is JSON lines rather than one JSON value: its first non-blank line is a
    whole JSON value and another non-blank line follows."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        json.loads(lines[0])
    except json.JSONDecodeError:
        return False
    return True


def read_json(path: Path) -> Any:
    """The JSON value in the file ``path``."""
    return parse_json(path, read_text(path))


def read_json_lines(path: Path) -> list[JsonLine]:
    """The values of the JSON-lines file ``path`` with their line numbers."""
    return parse_json_lines(path, read_text(path))


def read_structured(path: Path) -> Structured:
    """The file ``path`` read by content (see the module docstring)."""
    return parse_structured(path, read_text(path))


def parse_structured(path: Path, text: str) -> Structured:
    """``text`` (of the file ``path``, which names it in errors) read by content: JSON lines when
    its suffix says so or its content is one value a line, else one JSON value."""
    if path.suffix.lower() in JSON_LINES_SUFFIXES or holds_json_lines(text):
        rows = parse_json_lines(path, text)
        return Structured([r.value for r in rows], tuple(r.line for r in rows))
    return Structured(parse_json(path, text))


def read_records(path: Path) -> list[Any]:
    """The records of ``path``: a JSON list, or JSON lines (by content, see :func:`read_structured`)."""
    value = read_structured(path).value
    if not isinstance(value, list):
        raise InvalidInput(f"{path}: expected a JSON list of records (or JSON lines), got {type(value).__name__}")
    if not value:
        raise InvalidInput(f"{path}: the list of records is empty")
    return value


__all__ = [
    "JSON_LINES_SUFFIXES",
    "JsonLine",
    "Structured",
    "decode",
    "holds_json_lines",
    "parse_json",
    "parse_json_lines",
    "parse_structured",
    "read_json",
    "read_json_lines",
    "read_records",
    "read_structured",
    "read_text",
]
