"""``livingrag bench ab``: one benchmark command on two revisions (or two settings) in interleaved
pairs, and each figure's paired difference with its 95 % interval.

The two arms, A and B, are each a git revision of the repository (``WORKING_TREE``: the working
tree itself, uncommitted changes included), the command (B's may differ), environment variables and
a shell command run before each of the arm's runs. Other revisions are checked out with ``git
worktree add --detach`` into a temporary folder, removed afterwards. The runs are interleaved in
pairs, A B, B A, A B, ...: pair i runs A first when i is even, so that a drift of the machine over
the session (warming caches, other work) falls on both arms alike.

Every run is ``sh -c COMMAND`` in the current directory (relative paths such as
``../shared/datasets/...`` or ``runs/...`` mean the same for both arms), with the same Python
environment (its scripts' folder first on ``PATH``, so ``livingrag`` and ``python`` are its), and
with the arm's tree first on ``PYTHONPATH`` and ``PYTHONSAFEPATH=1`` (so neither ``livingrag`` nor
``python -m livingrag...`` imports the package of the current directory): the command runs that
revision's package. A run also sees ``AB_ARM`` (A or B), ``AB_PAIR`` (0, 1, ...),
``AB_REVISION``, ``AB_COMMIT`` and ``AB_TREE`` (the arm's source tree); with ``pythonpath`` off the
tree is not put on ``PYTHONPATH``, and the command decides what to do with ``AB_TREE`` (e.g. ``bench
mixed-load --source "$AB_TREE"``, to serve an old revision that predates the harness).

**The figures' contract.** A benchmark command prints its figures as JSON (its ``--json``): the last
JSON object on standard output is read, and its numbers, flattened to dotted keys (``ask.p95_ms``,
``stages_ms.ask.encode.p50``; list items by index), are the figures. Booleans, strings and nulls are
not figures. A figure is compared when every run printed it.

For each figure, with a_i and b_i the values of pair i and d_i = b_i - a_i: A's mean, B's mean, the
mean difference and its t interval (:func:`livingrag.bench.stats.paired_t_interval`), the
difference relative to A's mean, and in how many pairs B was higher.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from livingrag.bench.stats import paired_t_interval
from livingrag.errors import LivingRAGError

WORKING_TREE = "WORKTREE"
"""The revision name that means the repository's working tree (uncommitted changes included)."""

_SECRET = re.compile(r"KEY|SECRET|PASSWORD|TOKEN|URL", re.IGNORECASE)


class ABError(LivingRAGError):
    """A run failed, printed no JSON object, or a revision could not be checked out."""


@dataclass(frozen=True)
class ArmSpec:
    """One side of the comparison."""

    revision: str = WORKING_TREE
    command: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    before: str | None = None
    """A shell command run before each of this arm's runs (after ``ABConfig.before_each``)."""


@dataclass(frozen=True)
class ABConfig:
    a: ArmSpec
    b: ArmSpec
    pairs: int = 3
    repo: Path = Path(".")
    """Any folder inside the git repository whose revisions are compared."""
    cwd: Path = Path(".")
    """Where the commands run."""
    before_each: str | None = None
    """A shell command run before every run (e.g. dropping the OS page cache)."""
    after_each: str | None = None
    """A shell command run after every run, also a failed one (e.g. continuing a process group
    that ``before_each`` stopped)."""
    pause_s: float = 0.0
    """Seconds of rest after every run but the last."""
    timeout_s: float | None = None
    """A run's wall-clock limit."""
    pythonpath: bool = True
    confidence: float = 0.95
    figures: tuple[str, ...] = ()
    """Glob patterns (``ask.*``, ``*_p50``) of the figures to compare; empty: every figure."""

    def __post_init__(self) -> None:
        if self.pairs < 1:
            raise ValueError(f"pairs must be at least 1, got {self.pairs}")
        if not self.a.command or not self.b.command:
            raise ValueError("each arm needs a command")


@dataclass(frozen=True)
class Tree:
    """A revision checked out: its source ``path`` and the commit (with ``dirty``: the working
    tree with uncommitted changes)."""

    revision: str
    commit: str
    path: Path
    dirty: bool = False


def run_order(pairs: int) -> list[tuple[int, str]]:
    """(pair, arm) in running order: A B, B A, A B, ..."""
    return [(i, arm) for i in range(pairs) for arm in (("A", "B") if i % 2 == 0 else ("B", "A"))]


def last_json_object(text: str) -> dict[str, Any]:
    """The last JSON object in ``text`` that is not inside another one (pretty-printed or on one
    line, among other output). Raises ValueError when there is none."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    at = text.find("{")
    while at >= 0:
        try:
            obj, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        if isinstance(obj, dict):
            found = obj
        at = text.find("{", end)
    if found is None:
        raise ValueError("no JSON object in the output")
    return found


def flatten_figures(obj: Any, prefix: str = "") -> dict[str, float]:
    """The numbers of a JSON value under dotted keys (list items by index); booleans, strings
    and nulls are left out, and so are NaN and infinities."""
    out: dict[str, float] = {}
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return out
    if isinstance(obj, int | float):
        if math.isfinite(obj):
            out[prefix] = float(obj)
        return out
    items: Iterator[tuple[Any, Any]]
    if isinstance(obj, dict):
        items = iter(obj.items())
    elif isinstance(obj, list | tuple):
        items = enumerate(obj)
    else:
        return out
    for k, v in items:
        out |= flatten_figures(v, f"{prefix}.{k}" if prefix else str(k))
    return out


@dataclass(frozen=True)
class FigureDiff:
    figure: str
    a_mean: float
    b_mean: float
    diff: float
    """Mean of b_i - a_i over the pairs."""
    lo: float
    hi: float
    b_higher: int
    """Pairs in which B's value was higher than A's."""
    pairs: int
    constant: bool
    """Every run printed the same value."""

    @property
    def diff_pct(self) -> float:
        """The difference in percent of A's mean (NaN when A's mean is 0)."""
        return 100.0 * self.diff / self.a_mean if self.a_mean else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "a_mean": _num(self.a_mean),
            "b_mean": _num(self.b_mean),
            "diff": _num(self.diff),
            "lo": _num(self.lo),
            "hi": _num(self.hi),
            "diff_pct": _num(self.diff_pct),
            "b_higher": self.b_higher,
            "pairs": self.pairs,
            "constant": self.constant,
        }


def _num(x: float) -> float | None:
    """A float for JSON: NaN becomes null."""
    return None if math.isnan(x) else x


def compare(
    a_runs: Sequence[Mapping[str, float]],
    b_runs: Sequence[Mapping[str, float]],
    *,
    confidence: float = 0.95,
    patterns: Sequence[str] = (),
) -> tuple[list[FigureDiff], list[str]]:
    """Paired differences of the figures every run printed (pair i = ``a_runs[i]``, ``b_runs[i]``),
    in sorted order, and the figures some runs did not print. ``patterns``: only figures matching
    one of these globs."""
    if len(a_runs) != len(b_runs) or not a_runs:
        raise ValueError(f"need the same number of runs on both sides, got {len(a_runs)} and {len(b_runs)}")
    runs = [*a_runs, *b_runs]
    every = set.intersection(*(set(r) for r in runs))
    some = set.union(*(set(r) for r in runs))

    def wanted(name: str) -> bool:
        return not patterns or any(fnmatchcase(name, p) for p in patterns)

    out = []
    for name in sorted(n for n in every if wanted(n)):
        a = [r[name] for r in a_runs]
        b = [r[name] for r in b_runs]
        diff, lo, hi = paired_t_interval([y - x for x, y in zip(a, b, strict=True)], confidence)
        out.append(
            FigureDiff(
                figure=name,
                a_mean=sum(a) / len(a),
                b_mean=sum(b) / len(b),
                diff=diff,
                lo=lo,
                hi=hi,
                b_higher=sum(1 for x, y in zip(a, b, strict=True) if y > x),
                pairs=len(a),
                constant=len({*a, *b}) == 1,
            )
        )
    return out, sorted(n for n in some - every if wanted(n))


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ABError(f"git {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


@contextlib.contextmanager
def checked_out(repo: Path, revisions: Sequence[str]) -> Iterator[dict[str, Tree]]:
    """Each revision's source tree: the working tree for :data:`WORKING_TREE`, else a detached
    ``git worktree`` in a temporary folder; the worktrees are removed on the way out."""
    top = Path(_git(repo, "rev-parse", "--show-toplevel"))
    tmp = Path(tempfile.mkdtemp(prefix="lrg-ab-"))
    added: list[Path] = []
    trees: dict[str, Tree] = {}
    try:
        for rev in dict.fromkeys(revisions):
            if rev == WORKING_TREE:
                dirty = bool(_git(top, "status", "--porcelain", "--untracked-files=no"))
                trees[rev] = Tree(rev, _git(top, "rev-parse", "HEAD"), top, dirty)
                continue
            commit = _git(top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
            path = tmp / f"rev-{len(added)}-{commit[:12]}"
            _git(top, "worktree", "add", "--detach", "--quiet", str(path), commit)
            added.append(path)
            trees[rev] = Tree(rev, commit, path)
        yield trees
    finally:
        for path in added:
            with contextlib.suppress(ABError):
                _git(top, "worktree", "remove", "--force", str(path))
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(ABError):
            _git(top, "worktree", "prune")


def _shell(
    command: str, *, cwd: Path, env: Mapping[str, str], timeout_s: float | None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["sh", "-c", command],
            cwd=cwd,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ABError(f"{command!r} ran past {timeout_s} s") from exc


def _tail(text: str, n: int = 1500) -> str:
    return text if len(text) <= n else "..." + text[-n:]


def run_env(
    base: Mapping[str, str], arm: str, spec: ArmSpec, tree: Tree, pair: int, *, pythonpath: bool
) -> dict[str, str]:
    """The environment of one run (module docstring)."""
    env = dict(base) | dict(spec.env)
    env |= {
        "AB_ARM": arm,
        "AB_PAIR": str(pair),
        "AB_REVISION": tree.revision,
        "AB_COMMIT": tree.commit,
        "AB_TREE": str(tree.path),
    }
    # this Python environment's scripts first: `livingrag` and `python` are this environment's
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), *filter(None, [env.get("PATH")])])
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([str(tree.path), *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONSAFEPATH"] = "1"
    return env


def run_ab(
    cfg: ABConfig,
    *,
    environ: Mapping[str, str] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the pairs (module docstring) and compare; returns the settings, every run and the figures."""
    environ = dict(os.environ if environ is None else environ)
    specs = {"A": cfg.a, "B": cfg.b}
    runs: list[dict[str, Any]] = []
    started = datetime.now(UTC)
    with checked_out(cfg.repo, [cfg.a.revision, cfg.b.revision]) as trees:
        order = run_order(cfg.pairs)
        for k, (pair, arm) in enumerate(order):
            spec, tree = specs[arm], trees[specs[arm].revision]
            env = run_env(environ, arm, spec, tree, pair, pythonpath=cfg.pythonpath)
            for hook in filter(None, [cfg.before_each, spec.before]):
                done = _shell(hook, cwd=cfg.cwd, env=env, timeout_s=cfg.timeout_s)
                if done.returncode != 0:
                    raise ABError(f"{arm} pair {pair}: {hook!r} exited {done.returncode}\n{_tail(done.stderr)}")
            progress(f"pair {pair + 1}/{cfg.pairs}, {arm} ({tree.revision} {tree.commit[:9]}): {spec.command}")
            t0 = time.monotonic()
            try:
                done = _shell(spec.command, cwd=cfg.cwd, env=env, timeout_s=cfg.timeout_s)
            finally:
                if cfg.after_each:
                    _shell(cfg.after_each, cwd=cfg.cwd, env=env, timeout_s=cfg.timeout_s)
            wall = time.monotonic() - t0
            if done.returncode != 0:
                raise ABError(f"{arm} pair {pair} exited {done.returncode}\n{_tail(done.stderr or done.stdout)}")
            try:
                output = last_json_object(done.stdout)
            except ValueError as exc:
                raise ABError(f"{arm} pair {pair} printed no JSON object (give the benchmark --json)\n"
                              f"{_tail(done.stdout)}") from exc  # fmt: skip
            runs.append({"pair": pair, "arm": arm, "wall_s": round(wall, 3), "output": output})
            if cfg.pause_s and k < len(order) - 1:
                time.sleep(cfg.pause_s)
        arms = {arm: _arm_settings(specs[arm], trees[specs[arm].revision]) for arm in ("A", "B")}
    by_arm = {arm: sorted((r for r in runs if r["arm"] == arm), key=lambda r: r["pair"]) for arm in ("A", "B")}
    diffs, partial = compare(
        [flatten_figures(r["output"]) for r in by_arm["A"]],
        [flatten_figures(r["output"]) for r in by_arm["B"]],
        confidence=cfg.confidence,
        patterns=cfg.figures,
    )
    return {
        "settings": {
            "pairs": cfg.pairs,
            "order": [f"{arm}{pair}" for pair, arm in run_order(cfg.pairs)],
            "a": arms["A"],
            "b": arms["B"],
            "before_each": cfg.before_each,
            "after_each": cfg.after_each,
            "pause_s": cfg.pause_s,
            "pythonpath": cfg.pythonpath,
            "confidence": cfg.confidence,
            "interval": "t",
            "figures": list(cfg.figures),
            "environment": livingrag_environment(environ),
            "started": started.isoformat(timespec="seconds"),
        },
        "figures": [d.as_dict() for d in diffs],
        "figures_not_in_every_run": partial,
        "runs": runs,
    }


def _arm_settings(spec: ArmSpec, tree: Tree) -> dict[str, Any]:
    return {
        "revision": tree.revision,
        "commit": tree.commit,
        "uncommitted_changes": tree.dirty,
        "command": spec.command,
        "env": dict(spec.env),
        "before": spec.before,
    }


def livingrag_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings the runs inherit from ``LIVINGRAG_*`` variables (those that name a setting; not,
    e.g., the test suite's own ``LIVINGRAG_REQUIRE_BROWSER``), secrets masked."""
    from livingrag.config import setting_env_names

    settings = setting_env_names()
    return {k: ("***" if _SECRET.search(k) else v) for k, v in sorted(environ.items()) if k in settings}


def _fmt(x: float | None) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x:.4g}" if abs(x) < 1e6 else f"{x:.6g}"


def _arm_line(name: str, arm: Mapping[str, Any]) -> str:
    rev = "the working tree" if arm["revision"] == WORKING_TREE else arm["revision"]
    line = f"{name} = {rev} ({arm['commit'][:9]}{' + uncommitted changes' if arm['uncommitted_changes'] else ''})"
    line += f": {arm['command']}"
    if arm["env"]:
        line += "  [" + " ".join(f"{k}={v}" for k, v in arm["env"].items()) + "]"
    if arm["before"]:
        line += f"  (before each run: {arm['before']})"
    return line


def format_report(result: Mapping[str, Any], *, show_constant: bool = False) -> str:
    """The settings and a table of the figures (those identical in every run left out unless
    ``show_constant``)."""
    s = result["settings"]
    pct = round(100 * s["confidence"])
    lines = [
        _arm_line("A", s["a"]),
        _arm_line("B", s["b"]),
        f"{s['pairs']} pairs, order {' '.join(s['order'])}"
        + (f"; before each run: {s['before_each']}" if s["before_each"] else "")
        + (f"; after each run: {s['after_each']}" if s.get("after_each") else "")
        + (f"; {s['pause_s']:g} s rest between runs" if s["pause_s"] else ""),
        "",
    ]
    rows = [f for f in result["figures"] if show_constant or not f["constant"]]
    header = ("figure", "A mean", "B mean", "B - A", f"{pct} % interval", "B - A %", "B higher")
    table = [header] + [
        (
            f["figure"],
            _fmt(f["a_mean"]),
            _fmt(f["b_mean"]),
            _fmt(f["diff"]),
            f"{_fmt(f['lo'])} .. {_fmt(f['hi'])}",
            _fmt(f["diff_pct"]),
            f"{f['b_higher']}/{f['pairs']}",
        )
        for f in rows
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        lines.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        )
    hidden = len(result["figures"]) - len(rows)
    if hidden:
        lines.append(f"({hidden} figures identical in every run not shown)")
    if result["figures_not_in_every_run"]:
        lines.append("not printed by every run: " + ", ".join(result["figures_not_in_every_run"]))
    return "\n".join(lines)


def write_out(result: Mapping[str, Any], out: Path, command_line: Sequence[str]) -> None:
    """``results.json`` (settings, figures, every run's JSON) and ``README.md`` (the exact
    command and the table) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    command = shlex.join(command_line)
    environment = result["settings"]["environment"]
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items() if not _SECRET.search(k))
    secret = [k for k in environment if _SECRET.search(k)]
    (out / "results.json").write_text(json.dumps({"command": command, **result}, indent=2) + "\n", encoding="utf-8")
    readme = [
        "# A/B comparison",
        "",
        "Produced by (from the repository's root):",
        "",
        "```bash",
        (env + " " if env else "") + command,
        "```",
        "",
        *([f"Also set, not written here: {', '.join(secret)}.", ""] if secret else []),
        f"Started {result['settings']['started']}. Every run's JSON is in `results.json`. The difference is",
        f"B - A per pair, with its {round(100 * result['settings']['confidence'])} % t interval over the pairs.",
        "",
        "```",
        format_report(result),
        "```",
        "",
    ]
    (out / "README.md").write_text("\n".join(readme), encoding="utf-8")


__all__ = [
    "WORKING_TREE",
    "ABConfig",
    "ABError",
    "ArmSpec",
    "FigureDiff",
    "Tree",
    "checked_out",
    "compare",
    "flatten_figures",
    "format_report",
    "last_json_object",
    "livingrag_environment",
    "run_ab",
    "run_env",
    "run_order",
    "write_out",
]
