"""Entity-name normalisation: surface variants of one name meet on one key.

The key is what the graph stores as ``entities.normalized_name`` and what question mentions are
matched against before any embedding is computed. The surface forms themselves are kept.

    normalize("Lothair II")            == normalize("Lothair Ii")        == "lothair ii"
    normalize("St. Maurice's Abbey")   == normalize("St Maurice’s Abbey") == "st maurice abbey"
    normalize("the Beatles")           == normalize("The Beatles")        == "beatles"
    normalize("Anhalt- Bernburg")      == normalize("Anhalt-Bernburg")    == "anhalt bernburg"
    normalize("Alû")                   == "alu"

Pure standard library, no model: the retriever imports it for query linking.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_POSSESSIVE = re.compile(r"(?<=\w)'s?\b")
_NON_WORD = re.compile(r"[^\w&+#]+|_+")
_ARTICLES = frozenset({"the", "a", "an"})


def _strip_latin_accents(s: str) -> str:
    """Drop combining marks that follow an ASCII letter (é -> e); other scripts are left intact."""
    out: list[str] = []
    for ch in unicodedata.normalize("NFKD", s):
        if unicodedata.combining(ch) and out and out[-1].isascii():
            continue
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


@lru_cache(maxsize=200_000)
def normalize_entity(name: str) -> str:
    """The matching key of an entity name ('' when nothing name-like is left).

    Steps: Unicode compatibility form with Latin accents removed; case folding; curly quotes
    straightened; a possessive ('s or trailing ') removed; every run of punctuation becomes one
    space; a leading article (the/a/an) is dropped when more words follow.
    """
    s = _strip_latin_accents(name).casefold().replace("\u2019", "'").replace("`", "'")
    s = _POSSESSIVE.sub("", s)
    tokens = _NON_WORD.sub(" ", s).split()
    if len(tokens) > 1 and tokens[0] in _ARTICLES:
        tokens = tokens[1:]
    return " ".join(tokens)


__all__ = ["normalize_entity"]
