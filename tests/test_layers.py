"""The package layers, read from the source (every import, those inside functions included):

* the pure math modules import only the standard library, numpy, scipy and other pure modules
  (no database, no settings, no torch: they are unit-tested on hand-built inputs);
* the entry points (``bench``, ``api``, ``cli``, ``demo``, ``testing``, ``diagnostics``) sit on
  top: no domain package imports them;
* the database layer (``db``) imports no domain package above it, but for the debts named in
  :data:`KNOWN_DB_DEBTS` (a new one fails; a paid one must leave the list).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "livingrag"

PURE = {
    "livingrag.retrieval.core",
    "livingrag.retrieval.graph",
    "livingrag.retrieval.linking",
    "livingrag.retrieval.params",
    "livingrag.retrieval.ppr",
    "livingrag.retrieval.propagation",
    "livingrag.retrieval.scoring",
    "livingrag.experience.fusion",
    "livingrag.experience.matching",
    "livingrag.experience.novelty",
    "livingrag.experience.scaffold",
    "livingrag.experience.similarity",
    "livingrag.experience.sparsify",
    "livingrag.experience.scope_index_plan",
    "livingrag.db.server_memory",
    "livingrag.bench.stats",
    "livingrag.sparse",
    "livingrag.types",
    "livingrag.errors",
}
PURE_THIRD_PARTY = {"numpy", "scipy"}
ENTRY_POINTS = ("bench", "api", "cli", "demo", "testing", "diagnostics")
DOMAIN_ABOVE_DB = ("retrieval", "experience", "pipeline", "corpus", "generation", "evaluation", "models")
KNOWN_DB_DEBTS: set[tuple[str, str]] = set()


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
