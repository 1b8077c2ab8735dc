"""The admin key's minimum strength: ``livingrag serve`` refuses a weak ``api.admin_key``.

The admin key creates and deletes tenants and their keys, so a guessable one is every tenant's
data. A key passes when it has at least :data:`MIN_LENGTH` characters, at least
:data:`MIN_DISTINCT` different ones, does not repeat one block (``abcabc...``), and its estimated
entropy reaches :data:`MIN_BITS`: each character adds log2 of the alphabet its character classes
span (lower case 26, upper case 26, digits 10, others 32), except a character that repeats the
previous one or continues a run (``aaaa``, ``abcd``, ``4321``), which adds nothing. This is an
estimate against placeholders, short keys and patterns, not a dictionary check: generate the key
(``python -c "import secrets; print(secrets.token_urlsafe(32))"``, about 256 bits).
"""

from __future__ import annotations

import math

from livingrag.errors import ConfigError

MIN_LENGTH = 32
MIN_DISTINCT = 8
MIN_BITS = 128.0
GENERATE = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'


def _alphabet(key: str) -> int:
    size = 0
    size += 26 if any(c.islower() for c in key) else 0
    size += 26 if any(c.isupper() for c in key) else 0
    size += 10 if any(c.isdigit() for c in key) else 0
    size += 32 if any(not c.isalnum() for c in key) else 0
    return max(size, 1)


def estimated_bits(key: str) -> float:
    """Entropy estimate of ``key`` in bits (see the module docstring)."""
    per_char = math.log2(_alphabet(key))
    counted = 0
    for i, c in enumerate(key):
        if i >= 1 and c == key[i - 1]:
            continue  # aaaa
        if (
            i >= 2
            and ord(c) - ord(key[i - 1]) == ord(key[i - 1]) - ord(key[i - 2])
            and abs(ord(c) - ord(key[i - 1])) == 1
        ):
            continue  # abcd, 4321
        counted += 1
    return counted * per_char


def _repeats_a_block(key: str) -> bool:
    """Whether ``key`` is one block written again and again (``abcabcab``: period 3)."""
    return any(key[p:] == key[:-p] for p in range(1, len(key) // 2 + 1))


def admin_key_problems(key: str) -> list[str]:
    """Why ``key`` is too weak to be the admin key; empty when it is strong enough."""
    problems = []
    if len(key) < MIN_LENGTH:
        problems.append(f"it has {len(key)} characters; at least {MIN_LENGTH} are required")
    if len(set(key)) < MIN_DISTINCT:
        problems.append(f"it uses {len(set(key))} different characters; at least {MIN_DISTINCT} are required")
    if _repeats_a_block(key):
        problems.append("it repeats one block of characters")
    bits = estimated_bits(key)
    if bits < MIN_BITS:
        problems.append(f"its estimated entropy is {bits:.0f} bits; at least {MIN_BITS:.0f} are required")
    return problems


def check_admin_key(key: str | None) -> None:
    """:class:`ConfigError` naming each reason when ``key`` (``api.admin_key``) is set and weak."""
    if key is None:
        return
    problems = admin_key_problems(key)
    if problems:
        raise ConfigError(
            "refusing to serve with a weak admin key (api.admin_key, LIVINGRAG_API__ADMIN_KEY): "
            + "; ".join(problems)
            + f". Generate one with: {GENERATE}"
        )
