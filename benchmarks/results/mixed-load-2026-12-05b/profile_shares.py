"""Shares of a py-spy raw profile (``py-spy record --format raw``) of `livingrag serve` under load.

usage: python profile_shares.py PROFILE.txt [FRAME_PREFIX ...]

Prints the share of samples per kind of work (a question, a passage add, the write-back thread,
the question encoder's thread, the HTTP stack, the rest) and, for each FRAME_PREFIX given (e.g.
``LivingRAG.answer (``), what the frames directly under it spent.
"""

import collections
import re
import sys

Stack = list[str]


def read(path: str) -> list[tuple[Stack, int]]:
    rows = []
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            rows.append((stack.split(";"), int(n)))
    return rows


def short(frame: str) -> str:
    """``func (file:line)`` -> ``func (file)``."""
    return re.sub(r" \(([^:]*):\d+\)$", r" (\1)", frame)


def kind(stack: Stack) -> str:
    if any(f.startswith("ask (livingrag/api/routes/ask") for f in stack):
        return "question (POST /v1/ask)"
    if any("routes/passages" in f or "add_queue" in f for f in stack):
        return "passage add"
    if any(f.startswith("LivingRAG._run_writeback") for f in stack):
        return "write-back thread"
    if any(f.startswith(("Retriever._timed_encode", "Retriever._timed_dense")) for f in stack):
        return "question encoder thread"
    if any(k in f for f in stack for k in ("uvicorn", "starlette", "fastapi", "anyio", "h11")):
        return "HTTP stack"
    return "other"


def shares(rows: list[tuple[Stack, int]]) -> None:
    total = sum(n for _, n in rows)
    c: collections.Counter[str] = collections.Counter()
    for s, n in rows:
        c[kind(s)] += n
    print(f"{total} samples")
    for k, n in c.most_common():
        print(f"{100 * n / total:5.1f} %  {k}")


def under(rows: list[tuple[Stack, int]], prefix: str, top: int = 15) -> None:
    c: collections.Counter[str] = collections.Counter()
    t = 0
    for s, n in rows:
        for i, f in enumerate(s):
            if f.startswith(prefix):
                c[short(s[i + 1]) if i + 1 < len(s) else "(itself)"] += n
                t += n
                break
    print(f"== under {prefix!r}: {t} samples")
    for x, n in c.most_common(top):
        print(f"{100 * n / max(t, 1):5.1f} %  {x}")


if __name__ == "__main__":
    profile = read(sys.argv[1])
    shares(profile)
    for p in sys.argv[2:]:
        under(profile, p)
