"""README and the docs stay true: the configuration table is the settings models' table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_docs_settings_table_is_current() -> None:
    spec = importlib.util.spec_from_file_location("sync_readme", ROOT / "scripts" / "sync_readme.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert mod.START in text and mod.END in text
    assert mod.render(text) == text, (
        "docs/configuration.md's settings table is stale: run `python scripts/sync_readme.py`"
    )


def test_readme_names_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "bash scripts/demo.sh" in text and "bash scripts/test.sh" in text
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_readme_is_one_screen_with_links_to_the_docs() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    for page in ("configuration", "database-and-tenancy", "experience-store", "http-api", "production", "evaluation"):
        assert f"docs/{page}.md" in text and (ROOT / "docs" / f"{page}.md").is_file(), page
