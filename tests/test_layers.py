"""The package layers, read from the source (every import, those inside functions included):

* the pure math modules import only the standard library, numpy, scipy and other pure modules
  (no database, no settings, no torch: they are unit-tested on hand-built inputs);
* the entry points (``bench``, ``api``, ``cli``, ``demo``, ``testing``, ``diagnostics``) sit on
  top: no domain package imports them;
* the database layer (``db``) imports no domain package above it, but for the debts named in
  :data:`KNOWN_DB_DEBTS` (a new one fails; a paid one must leave the list);
* only the database layer writes SQL: no ``sqlalchemy.text``, ``exec_driver_sql``,
  ``app_statement`` or statement given as a string literal to ``execute`` anywhere else (the
  benchmark harnesses too: their set-up and measurement SQL is in ``livingrag.db``, issue 43);
* import-linter's contracts in pyproject.toml (``[tool.importlinter]``) hold on the repository,
  cover every module in exactly one layer, list the same pure set as :data:`PURE`, and break on
  an injected upward import.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "livingrag"

PURE = {
    "livingrag.retrieval.ranking",
    "livingrag.retrieval.corpus_graph",
    "livingrag.retrieval.linking",
    "livingrag.retrieval.params",
    "livingrag.retrieval.ppr",
    "livingrag.retrieval.propagation",
    "livingrag.retrieval.scoring",
    "livingrag.retrieval.common_words",
    "livingrag.retrieval.pseudo_relevance",
    "livingrag.retrieval.title_pages",
    "livingrag.corpus.normalize",
    "livingrag.experience.fusion",
    "livingrag.experience.matching",
    "livingrag.experience.novelty",
    "livingrag.experience.scaffold",
    "livingrag.experience.similarity",
    "livingrag.experience.sparsify",
    "livingrag.experience.store_input",
    "livingrag.experience.scope_index_plan",
    "livingrag.experience.answer_form",
    "livingrag.experience.answer_reuse",
    "livingrag.experience.grounding",
    "livingrag.experience.keysent",
    "livingrag.experience.sentences",
    "livingrag.experience.template",
    "livingrag.experience.types",
    "livingrag.experience.trust",
    "livingrag.experience.calibration",
    "livingrag.db.server_memory",
    "livingrag.bench.stats",
    "livingrag.bench.tenant_figures",
    "livingrag.sparse",
    "livingrag.sorted_merge",
    "livingrag.types",
    "livingrag.errors",
    "livingrag.io",
}
PURE_THIRD_PARTY = {"numpy", "scipy"}
ENTRY_POINTS = ("bench", "api", "cli", "demo", "testing", "diagnostics")
DOMAIN_ABOVE_DB = ("retrieval", "experience", "pipeline", "corpus", "generation", "evaluation", "models", "services")
KNOWN_DB_DEBTS: set[tuple[str, str]] = set()
SQL_TEXT = {"sqlalchemy.text", "sqlalchemy.sql.text", "sqlalchemy.sql.expression.text", "sqlalchemy.sql.elements.text"}
RAW_SQL_CALLS = {"exec_driver_sql", "app_statement"}


def _module(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names |= {f"{node.module}.{a.name}" for a in node.names}  # `from pkg import module`
        out[_module(path)] = names
    return out


IMPORTS = _imports()


def _is_module(name: str) -> bool:
    return name in IMPORTS


def _top(name: str) -> str:
    return name.split(".")[0]


def test_the_pure_modules_exist_and_import_nothing_heavy() -> None:
    assert set(IMPORTS) >= PURE, f"listed pure modules that are gone: {sorted(PURE - set(IMPORTS))}"
    stdlib = sys.stdlib_module_names
    bad = {}
    for m in sorted(PURE):
        wrong = sorted(
            n
            for n in IMPORTS[m]
            if not (
                _top(n) in stdlib
                or _top(n) in PURE_THIRD_PARTY
                or n == "__future__"
                or (n.startswith("livingrag") and (n in PURE or (not _is_module(n) and n.rsplit(".", 1)[0] in PURE)))
            )
        )
        if wrong:
            bad[m] = wrong
    assert not bad, f"pure modules importing outside the pure layer: {bad}"


def test_no_domain_package_imports_an_entry_point() -> None:
    top = tuple(f"livingrag.{p}" for p in ENTRY_POINTS)
    bad = {
        m: sorted(n for n in names if n.startswith(top))
        for m, names in IMPORTS.items()
        if not m.startswith(top) and any(n.startswith(top) for n in names)
    }
    assert not bad, f"imports of entry-point packages from below them: {bad}"


def test_the_database_layer_imports_no_domain_package() -> None:
    above = tuple(f"livingrag.{p}" for p in DOMAIN_ABOVE_DB)
    found = {
        (m, n)
        for m, names in IMPORTS.items()
        if m.startswith("livingrag.db")
        for n in names
        if n.startswith(above) and _is_module(n)
    }
    assert found - KNOWN_DB_DEBTS == set(), f"new upward imports from db: {sorted(found - KNOWN_DB_DEBTS)}"
    assert KNOWN_DB_DEBTS - found == set(), f"paid debts still listed: {sorted(KNOWN_DB_DEBTS - found)}"


def _is_string(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _raw_sql(tree: ast.AST) -> list[str]:
    """Where a module writes SQL: ``sqlalchemy.text`` imported or used (under any alias),
    ``exec_driver_sql`` / ``app_statement`` called, or a string literal (an f-string too) given
    as the statement to ``execute``."""
    found: list[str] = []
    aliases: dict[str, str] = {}  # local name -> module it stands for (``import sqlalchemy as sa``)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {
                (a.asname or a.name).split(".")[0]: a.name if a.asname else a.name.split(".")[0] for a in node.names
            }
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            aliases |= {
                a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
            }  # ``from sqlalchemy import sql``
            found += [
                f"l.{node.lineno}: from {node.module} import {a.name}"
                for a in node.names
                if f"{node.module}.{a.name}" in SQL_TEXT
            ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts: list[str] = [node.attr]
            base: ast.expr = node.value
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                dotted = ".".join([aliases[base.id], *reversed(parts)])
                if dotted in SQL_TEXT:
                    found.append(f"l.{node.lineno}: {dotted}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name in RAW_SQL_CALLS:
                found.append(f"l.{node.lineno}: .{name}(...)")
            elif name == "execute" and node.args and _is_string(node.args[0]):
                found.append(f"l.{node.lineno}: .execute(<a string>)")
    return found


def test_only_the_database_layer_writes_sql() -> None:
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        module = _module(path)
        if module == "livingrag.db" or module.startswith("livingrag.db."):
            continue
        where = _raw_sql(ast.parse(path.read_text(encoding="utf-8")))
        if where:
            found[module] = where
    assert not found, f"SQL outside livingrag.db (move it into a repository of livingrag.db.repositories): {found}"


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("from sqlalchemy import text\n", "from sqlalchemy import text"),
        ("from sqlalchemy import text as sql\n", "from sqlalchemy import text"),
        ("import sqlalchemy as sa\nq = sa.text('SELECT 1')\n", "sqlalchemy.text"),
        ("import sqlalchemy.sql\nq = sqlalchemy.sql.text('SELECT 1')\n", "sqlalchemy.sql.text"),
        ("from sqlalchemy import sql\nq = sql.text('SELECT 1')\n", "sqlalchemy.sql.text"),
        ("def f(conn):\n    conn.exec_driver_sql('SELECT 1')\n", ".exec_driver_sql"),
        ("def f(cur, t):\n    cur.execute(f'SELECT * FROM {t}')\n", ".execute(<a string>)"),
        ("def f(db):\n    db.app_statement('SELECT 1', {})\n", ".app_statement"),
    ],
)
def test_the_sql_scan_finds_sql_written_any_way(source: str, shown: str) -> None:
    found = _raw_sql(ast.parse(source))
    assert any(shown in f for f in found), found


def test_the_sql_scan_leaves_statements_built_by_the_repositories_alone() -> None:
    source = "from sqlalchemy.orm import Session\ndef f(s: Session, stmt):\n    s.execute(stmt, {'a': 1})\n"
    assert _raw_sql(ast.parse(source)) == []


# ------------------------------------------------------------------ import-linter's contracts

CONTRACTS = {
    c["id"]: c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
}
# An entry in parentheses is an optional layer (a module still to be written): it counts once it exists.
LAYER_ENTRIES = [
    [m.strip().removeprefix("(").removesuffix(")") for m in layer.replace("|", ":").split(":")]
    for layer in CONTRACTS["layers"]["layers"]
]


def _under(module: str, entry: str) -> bool:
    return module == entry or module.startswith(entry + ".")


def _lint_imports(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` (import-linter, a dev dependency: missing is a failure) run in ``cwd``, on
    the pyproject.toml there."""
    if importlib.util.find_spec("importlinter") is None:
        pytest.fail("import-linter is not installed: it is a dev dependency (pip install -e '.[dev]')")
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache", "--no-logo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_every_module_lies_in_exactly_one_layer() -> None:
    entries = [e for layer in LAYER_ENTRIES for e in layer]
    assert len(entries) == len(set(entries)), f"a module listed twice in the layers: {entries}"
    unplaced, twice = [], {}
    for m in sorted(IMPORTS):
        owners = [e for e in entries if _under(m, e)]
        if len(owners) > 1:
            twice[m] = owners
        elif not owners:
            unplaced.append(m)
    assert not twice, f"modules in more than one layer: {twice}"
    # Left out: only the packages that hold split layers (livingrag, retrieval, experience, corpus,
    # services), and only while they import nothing of livingrag (an import there would escape
    # every layer).
    containers = {m for m in unplaced if any(e.startswith(m + ".") for e in entries)}
    assert unplaced == sorted(containers), (
        f"modules in no layer of pyproject.toml: {sorted(set(unplaced) - containers)}"
    )
    leaking = {m: sorted(n for n in IMPORTS[m] if _top(n) == "livingrag") for m in containers}
    assert not any(leaking.values()), f"split packages whose __init__ imports livingrag: {leaking}"


def test_the_pure_contract_and_the_pure_layer_list_the_pure_modules() -> None:
    assert set(CONTRACTS["pure"]["source_modules"]) == PURE
    others = [e for layer in LAYER_ENTRIES[:-1] for e in layer]
    assert set(LAYER_ENTRIES[-1]) == {m for m in PURE if not any(_under(m, e) for e in others)}


def test_lint_imports_keeps_every_contract_on_the_repository() -> None:
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    for contract in CONTRACTS.values():
        assert f"{contract['name']} KEPT" in run.stdout, run.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract", "shown"),
    [
        (
            "db/repositories/tenants.py",
            "import livingrag.cli",
            "layers",
            "livingrag.db is not allowed to import livingrag.cli",
        ),
        (
            "retrieval/ppr.py",
            "from livingrag.corpus import service",
            "layers",
            "livingrag.retrieval.ppr is not allowed",
        ),
        (
            "experience/novelty.py",
            "import sqlalchemy",
            "pure",
            "livingrag.experience.novelty is not allowed to import sqlalchemy",
        ),
        (
            "services/tenants.py",
            "from livingrag.services import keys",
            "layers",
            "livingrag.services.tenants is not allowed to import livingrag.services.keys",
        ),
        (
            "corpus/indexer.py",
            "from livingrag.retrieval import retriever",
            "layers",
            "livingrag.corpus.indexer is not allowed to import livingrag.retrieval.retriever",
        ),
        (
            "api/routes/tenants.py",
            "from livingrag.db.repositories import tenants as repo",
            "interfaces-use-services",
            "livingrag.api.routes.tenants -> livingrag.db.repositories.tenants",
        ),
        (
            "cli/tenant_cmd.py",
            "from sqlalchemy import text",
            "sql-in-db",
            "livingrag.cli.tenant_cmd -> sqlalchemy",
        ),
    ],
)
def test_an_injected_upward_import_breaks_its_contract(
    tmp_path: Path, module: str, line: str, contract: str, shown: str
) -> None:
    shutil.copytree(PKG, tmp_path / "livingrag", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "livingrag" / module).open("a", encoding="utf-8") as f:
        f.write(f"\n{line}  # injected by tests/test_layers.py\n")
    run = _lint_imports(tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    assert f"{CONTRACTS[contract]['name']} BROKEN" in out, out
    assert shown in out, out
