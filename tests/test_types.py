"""The mypy configuration (pyproject.toml ``[tool.mypy]``) checks every pure math module strictly.

``strict = true`` in a per-module override would turn strict mode on for the whole package (mypy
applies it globally), so the override spells out the per-module flags of ``--strict``; this test
keeps its module list equal to the pure layer of tests/test_layers.py, so a new pure module is
checked strictly too.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from tests.test_layers import PURE

ROOT = Path(__file__).resolve().parents[1]
STRICT_FLAGS = {
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_untyped_calls",
    "disallow_untyped_decorators",
    "disallow_any_generics",
    "disallow_subclassing_any",
    "warn_return_any",
    "no_implicit_reexport",
    "strict_equality",
    "extra_checks",
}


def _mypy() -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    return config


def _is_tests(module: str) -> bool:
    return module == "tests" or module.startswith("tests.")


def _strict_overrides() -> list[dict[str, Any]]:
    """The package's overrides with flags of --strict (the tests' own override is checked below)."""
    overrides = _mypy().get("overrides", [])
    return [o for o in overrides if STRICT_FLAGS & set(o) and not all(_is_tests(m) for m in o["module"])]


def test_the_strict_override_lists_exactly_the_pure_modules() -> None:
    (strict,) = _strict_overrides()
    # a pure package (livingrag.io) is listed with its submodules ("livingrag.io.*")
    assert {m.removesuffix(".*") for m in strict["module"]} == PURE
    assert all(m.removesuffix(".*") in PURE for m in strict["module"] if m.endswith(".*"))
    assert all(strict[f] is True for f in STRICT_FLAGS), sorted(f for f in STRICT_FLAGS if strict.get(f) is not True)


def test_the_tests_are_checked_with_complete_signatures() -> None:
    config = _mypy()
    assert "tests" in config["files"]
    (override,) = [o for o in config.get("overrides", []) if any(_is_tests(m) for m in o["module"])]
    assert set(override["module"]) == {"tests", "tests.*"}
    assert override["disallow_untyped_defs"] is True and override["disallow_incomplete_defs"] is True


def test_strict_is_never_set_in_an_override() -> None:
    assert not [o["module"] for o in _mypy().get("overrides", []) if "strict" in o]


def test_missing_imports_are_ignored_only_by_module_name() -> None:
    config = _mypy()
    assert "ignore_missing_imports" not in config
    for o in config.get("overrides", []):
        if o.get("ignore_missing_imports"):
            assert all(not m.startswith("livingrag") for m in o["module"])
