"""``livingrag bench ab`` (:mod:`livingrag.bench.ab`): the figures' contract, the interleaved order,
the paired differences with their t intervals, and a real run over two revisions of a small git
repository made here (its "benchmark" prints JSON that depends on the revision's package and on a
counter of the runs, so that every figure and interval is known exactly)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats

from livingrag.bench.ab import (
    WORKING_TREE,
    ABConfig,
    ABError,
    ArmSpec,
    compare,
    flatten_figures,
    format_report,
    last_json_object,
    run_ab,
    run_order,
)
from livingrag.bench.stats import paired_t_interval


def test_the_runs_are_interleaved_in_pairs_that_alternate_which_arm_goes_first() -> None:
    assert run_order(1) == [(0, "A"), (0, "B")]
    assert run_order(3) == [(0, "A"), (0, "B"), (1, "B"), (1, "A"), (2, "A"), (2, "B")]


def test_the_last_json_object_is_read_pretty_printed_or_one_a_line() -> None:
    pretty = "progress 1/2\n" + json.dumps({"a": 1, "b": {"c": [1, 2]}}, indent=2) + "\ndone\n"
    assert last_json_object(pretty) == {"a": 1, "b": {"c": [1, 2]}}
    assert last_json_object('{"x": 1}\n{"x": 2}\n') == {"x": 2}
    assert last_json_object('log: {"x": 3} inline\n') == {"x": 3}  # not at a line's start: found anyway
    with pytest.raises(ValueError):
        last_json_object("no json here\n[1, 2]\n")


def test_figures_are_the_numbers_under_dotted_keys() -> None:
    out = {
        "recall": 0.5,
        "n": 3,
        "ok": True,
        "name": "x",
        "none": None,
        "nan": float("nan"),
        "ask": {"p50_ms": 10, "stages": {"encode": {"p95": 2.5}}},
        "targets": [["rps", 51.0, True]],
    }
    assert flatten_figures(out) == {
        "recall": 0.5,
        "n": 3.0,
        "ask.p50_ms": 10.0,
        "ask.stages.encode.p95": 2.5,
        "targets.0.1": 51.0,
    }


def test_the_t_interval_of_paired_differences() -> None:
    mean, lo, hi = paired_t_interval([3.0, 1.0, 3.0, 1.0])
    half = stats.t.ppf(0.975, 3) * math.sqrt(4 / 3) / 2
    assert (mean, lo, hi) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    assert paired_t_interval([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)  # no spread: the interval is the point
    one = paired_t_interval([1.5])
    assert one[0] == 1.5 and math.isnan(one[1]) and math.isnan(one[2])
    with pytest.raises(ValueError):
        paired_t_interval([])


def test_compare_pairs_the_runs_and_names_figures_some_runs_lacked() -> None:
    a = [{"x": 1.0, "c": 7.0, "only_a": 1.0}, {"x": 2.0, "c": 7.0}]
    b = [{"x": 2.0, "c": 7.0}, {"x": 4.0, "c": 7.0}]
    diffs, partial = compare(a, b)
    by = {d.figure: d for d in diffs}
    assert partial == ["only_a"]
    assert by["c"].constant and by["c"].diff == 0.0 and by["c"].b_higher == 0
    x = by["x"]
    assert (x.a_mean, x.b_mean, x.diff, x.b_higher, x.pairs, x.constant) == (1.5, 3.0, 1.5, 2, 2, False)
    half = stats.t.ppf(0.975, 1) * math.sqrt(0.5) / math.sqrt(2)
    assert (x.lo, x.hi) == pytest.approx((1.5 - half, 1.5 + half))
    assert x.diff_pct == pytest.approx(100.0)
    only_x, _ = compare(a, b, patterns=["x*"])
    assert [d.figure for d in only_x] == ["x"]


# ------------------------------------------------------------------ a real run over git revisions

BENCH = """\
import json, os, sys
from pathlib import Path

import pkg

counter = Path(os.environ["AB_TEST_COUNTER"])
k = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(k + 1))
print("warming up", file=sys.stderr)
print("a line of progress")
print(json.dumps({
    "value": pkg.VALUE + k,
    "double": [2 * pkg.VALUE],
    "extra": float(os.environ.get("AB_TEST_EXTRA", "0")),
    "const": 5,
    "flag": True,
    "arm": os.environ["AB_ARM"],
}, indent=2))
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _commit_value(repo: Path, value: int) -> None:
    (repo / "pkg" / "__init__.py").write_text(f"VALUE = {value}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"value {value}")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with two commits (VALUE 1, then 3) and the benchmark script."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "bench.py").write_text(BENCH)
    _git(repo, "init", "-q")
    _commit_value(repo, 1)
    _commit_value(repo, 3)
    return repo


def _config(repo: Path, a: str, b: str, pairs: int, **kw: object) -> ABConfig:
    cmd = f"{sys.executable} bench.py"
    a_spec = ArmSpec(revision=a, command=cmd, env=kw.pop("a_env", {}))  # type: ignore[arg-type]
    b_spec = ArmSpec(revision=b, command=cmd, env=kw.pop("b_env", {}), before=kw.pop("before_b", None))  # type: ignore[arg-type]
    return ABConfig(a=a_spec, b=b_spec, pairs=pairs, repo=repo, cwd=repo, **kw)  # type: ignore[arg-type]


def _environ(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ) | {"AB_TEST_COUNTER": str(tmp_path / "counter"), "LIVINGRAG_API__ADMIN_KEY": "s3cret"}


def test_two_revisions_in_interleaved_pairs(repo: Path, tmp_path: Path) -> None:
    result = run_ab(_config(repo, "HEAD~1", "HEAD", 4), environ=_environ(tmp_path))
    # runs k = 0..7 in the order A B B A A B B A; value = VALUE + k with VALUE 1 on A and 3 on B
    assert [(r["arm"], r["pair"], r["output"]["value"]) for r in result["runs"]] == [
        ("A", 0, 1), ("B", 0, 4), ("B", 1, 5), ("A", 1, 4), ("A", 2, 5), ("B", 2, 8), ("B", 3, 9), ("A", 3, 8),
    ]  # fmt: skip
    figures = {f["figure"]: f for f in result["figures"]}
    assert set(figures) == {"value", "double.0", "extra", "const"}
    v = figures["value"]  # a = 1, 4, 5, 8; b = 4, 5, 8, 9: differences 3, 1, 3, 1
    half = stats.t.ppf(0.975, 3) * math.sqrt(4 / 3) / 2
    assert (v["a_mean"], v["b_mean"], v["diff"], v["b_higher"], v["pairs"]) == (4.5, 6.5, 2.0, 4, 4)
    assert (v["lo"], v["hi"]) == pytest.approx((2.0 - half, 2.0 + half))
    d = figures["double.0"]  # 2 against 6 in every pair: no spread
    assert (d["a_mean"], d["b_mean"], d["diff"], d["lo"], d["hi"], d["constant"]) == (2.0, 6.0, 4.0, 4.0, 4.0, False)
    assert d["diff_pct"] == pytest.approx(200.0)
    assert figures["const"]["constant"] and figures["const"]["diff"] == 0.0
    s = result["settings"]
    head, parent = _git(repo, "rev-parse", "HEAD"), _git(repo, "rev-parse", "HEAD~1")
    assert (s["a"]["revision"], s["a"]["commit"], s["b"]["commit"]) == ("HEAD~1", parent, head)
    assert s["order"] == ["A0", "B0", "B1", "A1", "A2", "B2", "B3", "A3"]
    assert s["environment"]["LIVINGRAG_API__ADMIN_KEY"] == "***"  # a secret is not written down
    # the temporary worktrees are gone
    assert _git(repo, "worktree", "list").count("\n") == 0
    text = format_report(result)
    rows = {line.split()[0] for line in text.splitlines()[4:] if line and not line.startswith("(")}
    assert rows == {"figure", "value", "double.0"}, text  # the header and the figures that vary
    assert "(2 figures identical in every run not shown)" in text


def test_the_working_tree_arm_runs_uncommitted_changes(repo: Path, tmp_path: Path) -> None:
    (repo / "pkg" / "__init__.py").write_text("VALUE = 10\n")
    result = run_ab(_config(repo, "HEAD", WORKING_TREE, 1), environ=_environ(tmp_path))
    figures = {f["figure"]: f for f in result["figures"]}
    assert (figures["value"]["a_mean"], figures["value"]["b_mean"]) == (3.0, 11.0)  # runs k = 0 and 1
    assert result["settings"]["b"]["uncommitted_changes"] is True
    assert result["settings"]["a"]["uncommitted_changes"] is False


def test_settings_per_arm_on_one_revision(repo: Path, tmp_path: Path) -> None:
    marker, after = tmp_path / "before-b", tmp_path / "after"
    cfg = _config(
        repo,
        WORKING_TREE,
        WORKING_TREE,
        2,
        b_env={"AB_TEST_EXTRA": "2.5"},
        before_b=f"echo x >> {marker}",
        after_each=f'echo "$AB_ARM$AB_PAIR" >> {after}',
    )
    result = run_ab(cfg, environ=_environ(tmp_path))
    extra = next(f for f in result["figures"] if f["figure"] == "extra")
    assert (extra["a_mean"], extra["b_mean"], extra["diff"]) == (0.0, 2.5, 2.5)
    assert marker.read_text().split() == ["x", "x"]  # once before each of B's runs
    assert after.read_text().split() == ["A0", "B0", "B1", "A1"]  # after every run, with its arm and pair
    assert [r["output"]["arm"] for r in result["runs"]] == ["A", "B", "B", "A"]


def test_a_failing_run_stops_the_comparison_and_the_worktrees_are_removed(repo: Path, tmp_path: Path) -> None:
    cfg = ABConfig(
        a=ArmSpec(revision="HEAD~1", command="echo no json"),
        b=ArmSpec(revision="HEAD", command="echo no json"),
        pairs=1,
        repo=repo,
        cwd=repo,
    )
    with pytest.raises(ABError, match="printed no JSON object"):
        run_ab(cfg, environ=_environ(tmp_path))
    assert _git(repo, "worktree", "list").count("\n") == 0
    with pytest.raises(ABError, match="exited 3"):
        run_ab(
            ABConfig(a=ArmSpec(command="exit 3"), b=ArmSpec(command="exit 3"), pairs=1, repo=repo, cwd=repo),
            environ=_environ(tmp_path),
        )
    with pytest.raises(ABError, match="no-such-revision"):
        run_ab(
            ABConfig(a=ArmSpec("no-such-revision", "true"), b=ArmSpec(command="true"), repo=repo, cwd=repo),
            environ=_environ(tmp_path),
        )


def test_the_command_writes_results_and_a_readme_with_the_exact_command(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "livingrag.cli.main", "bench", "ab", "--a", "HEAD~1", "--b", "HEAD", "--pairs", "2",
        "--cmd", "python bench.py", "--figure", "value", "--out", str(out),
    ]  # fmt: skip
    env = _environ(tmp_path)  # `python` in the command is this environment's, whatever PATH says
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "value" in done.stdout and "double" not in done.stdout
    saved = json.loads((out / "results.json").read_text())
    assert [f["figure"] for f in saved["figures"]] == ["value"]
    assert len(saved["runs"]) == 4 and saved["runs"][0]["output"]["value"] == 1
    readme = (out / "README.md").read_text()
    assert "\nlivingrag bench ab --a 'HEAD~1' --b HEAD --pairs 2 --cmd 'python bench.py' --figure value --out" in readme
    assert "Also set, not written here: LIVINGRAG_API__ADMIN_KEY." in readme and "s3cret" not in readme
    as_json = subprocess.run([*cmd[:-2], "--json"], cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["settings"]["pairs"] == 2


def test_mixed_load_refuses_an_ask_body_that_is_no_json_object() -> None:
    cmd = [sys.executable, "-m", "livingrag.cli.main", "bench", "mixed-load", "--ask-body", "[1]"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "must be a JSON object" in done.stderr, done.stderr
