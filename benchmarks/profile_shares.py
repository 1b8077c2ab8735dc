"""Shares of a py-spy raw profile of ``livingrag serve`` under load (``py-spy record --format raw``).

Prints the share of samples per kind of work (a question, a passage add, the write-back thread, the
question encoder's thread, the HTTP stack, the rest) and, for each ``--under`` frame prefix (e.g.
``"LivingRAG.answer ("``), what the frames directly under it spent.

    py-spy record --pid $(pgrep -f "livingrag.cli.main serve" | head -1) --duration 30 --rate 50 \\
        --format raw --threads --output runs/prof.txt      # during `livingrag bench mixed-load`
    python benchmarks/profile_shares.py runs/prof.txt --under "ExperienceStore.write_back ("

(py-spy is no dependency of the project: install it where it is wanted.)
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

Stack = list[str]


def read(path: Path) -> list[tuple[Stack, int]]:
    """The profile's stacks (outermost frame first) with their sample counts."""
    rows = []
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack:
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


def shares(rows: Sequence[tuple[Stack, int]]) -> list[str]:
    total = sum(n for _, n in rows)
    c: Counter[str] = Counter()
    for s, n in rows:
        c[kind(s)] += n
    return [f"{total} samples"] + [f"{100 * n / max(total, 1):5.1f} %  {k}" for k, n in c.most_common()]


def under(rows: Sequence[tuple[Stack, int]], prefix: str, top: int = 15) -> list[str]:
    c: Counter[str] = Counter()
    t = 0
    for s, n in rows:
        for i, f in enumerate(s):
            if f.startswith(prefix):
                c[short(s[i + 1]) if i + 1 < len(s) else "(itself)"] += n
                t += n
                break
    return [f"== under {prefix!r}: {t} samples"] + [f"{100 * n / max(t, 1):5.1f} %  {x}" for x, n in c.most_common(top)]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile", type=Path, help="A py-spy raw profile.")
    ap.add_argument("--under", action="append", default=[], help="A frame prefix to break down (repeatable).")
    ap.add_argument("--top", type=int, default=15, help="Frames printed under each prefix.")
    args = ap.parse_args(argv)
    rows = read(args.profile)
    print("\n".join(shares(rows)))
    for prefix in args.under:
        print("\n".join(under(rows, prefix, args.top)))


if __name__ == "__main__":
    main()
