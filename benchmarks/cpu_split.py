"""CPU seconds per group of processes over a window, read from ``/proc`` (Linux): where a machine's
CPU went while a benchmark ran, e.g. ``livingrag bench mixed-load`` (its ``serve`` workers,
PostgreSQL, the load clients with the loopback LLM).

Each process's user + system CPU time is read at the start and at the end of the window; a process
counts in the first group whose pattern occurs in its command line or name (``--group
NAME=PATTERN``, in order; the defaults fit ``bench mixed-load``), else as ``other: <name>``.

    python benchmarks/cpu_split.py --wait-for "livingrag.cli.main serve" --delay 40 --seconds 20

run beside ``livingrag bench mixed-load --seconds 60`` started in another shell: it waits for the
server, lets the load settle for 40 s, then measures 20 s. ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
DEFAULT_GROUPS = (
    ("postgres", "postgres"),
    ("serve workers (uvicorn)", "spawn_main"),
    ("serve (one process, or the supervisor)", "serve"),
    ("bench client + loopback LLM", "bench mixed-load"),
)


@dataclass(frozen=True)
class Proc:
    ticks: int
    cmdline: str
    name: str


def snapshot() -> dict[int, Proc]:
    """Every readable process: CPU ticks (user + system), command line, name."""
    out: dict[int, Proc] = {}
    for p in PROC.iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(p.name)] = Proc(int(fields[11]) + int(fields[12]), cmd, name)
    return out


def group_of(proc: Proc, groups: Sequence[tuple[str, str]]) -> str:
    for name, pattern in groups:
        if pattern in proc.cmdline or pattern in proc.name:
            return name
    return f"other: {proc.name}"


def split(before: dict[int, Proc], after: dict[int, Proc], groups: Sequence[tuple[str, str]]) -> dict[str, float]:
    """CPU seconds per group between two snapshots (a process new in ``after`` counts from 0)."""
    hz = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = defaultdict(float)
    for pid, proc in after.items():
        base = before[pid].ticks if pid in before and before[pid].cmdline == proc.cmdline else 0
        if proc.ticks > base:
            out[group_of(proc, groups)] += (proc.ticks - base) / hz
    return out


def wait_for(pattern: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not any(pattern in p.cmdline for p in snapshot().values()):
        if time.monotonic() > deadline:
            raise SystemExit(f"no process with {pattern!r} in its command line within {timeout_s:g} s")
        time.sleep(1.0)


def parse_groups(values: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for v in values:
        name, eq, pattern = v.partition("=")
        if not eq or not name or not pattern:
            raise SystemExit(f"--group takes NAME=PATTERN, got {v!r}")
        out.append((name, pattern))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="Length of the measured window.")
    ap.add_argument("--wait-for", default=None, help="First wait until a process's command line contains this.")
    ap.add_argument("--wait-timeout", type=float, default=600.0, help="Give up waiting after this many seconds.")
    ap.add_argument("--delay", type=float, default=0.0, help="Seconds between the wait and the window.")
    ap.add_argument("--group", action="append", default=[], help="NAME=PATTERN (repeatable; default: see above).")
    ap.add_argument("--top", type=int, default=12, help="Groups printed.")
    ap.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = ap.parse_args(argv)
    groups = parse_groups(args.group) if args.group else list(DEFAULT_GROUPS)
    if args.wait_for:
        wait_for(args.wait_for, args.wait_timeout)
    time.sleep(args.delay)
    before, t0 = snapshot(), time.monotonic()
    time.sleep(args.seconds)
    after, window = snapshot(), time.monotonic() - t0
    cpus = os.cpu_count() or 1
    shares = sorted(split(before, after, groups).items(), key=lambda kv: -kv[1])[: args.top]
    if args.json:
        print(json.dumps({"window_s": round(window, 2), "cpus": cpus, "cpu_s": {k: round(v, 2) for k, v in shares}}))
        return
    for name, s in shares:
        print(f"{name:45s} {s:7.1f} cpu-s  {100 * s / window / cpus:5.1f} % of the machine")
    print(f"window {window:.1f} s, {cpus} cpus, total {sum(s for _, s in shares):.1f} cpu-s")


if __name__ == "__main__":
    main()
