"""A small, dependency-free sentence splitter for explanations and passages."""

from __future__ import annotations

import re

# Abbreviations after which a period does not end a sentence.
_ABBREV = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "no", "vol", "vs", "etc", "e.g", "i.e",
    "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
    "nov", "dec", "gen", "col", "lt", "sgt", "capt", "rev", "u.s", "u.k", "a.m", "p.m", "approx", "ca",
}  # fmt: skip
_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (stripped, non-empty, inner whitespace collapsed).

    Line breaks always end a sentence (LLM explanations put steps on their own lines). A period
    after an abbreviation or an initial ("Dr. Smith", "J. R. R. Tolkien", "U.S. Army") or before a
    lower-case word does not end one.
    """
    out: list[str] = []
    for line in (text or "").splitlines():
        block = " ".join(line.split())
        start = 0
        for m in _END.finditer(block):
            nxt = block[m.end() + 1 : m.end() + 2]
            if nxt and nxt.islower():
                continue
            if block[m.start()] == "." and m.end() - m.start() == 1:
                prev = block[start : m.start()].rsplit(" ", 1)[-1].strip("(\"'“‘").lower()
                if prev in _ABBREV or (len(prev) == 1 and prev.isalpha()) or re.fullmatch(r"(?:[a-z]\.)+[a-z]", prev):
                    continue
            piece = block[start : m.end()].strip()
            if piece:
                out.append(piece)
            start = m.end()
        tail = block[start:].strip()
        if tail:
            out.append(tail)
    return out
