"""A plain (non-editable) wheel holds what the package needs at run time: its migrations, the
web console's files and the prompts; and from it the migrations are found and run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")  # a copy of the sources: the build writes egg-info and build/
    for rel in ("pyproject.toml", "README.md", "livingrag"):
        src = ROOT / rel
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, build / rel)  # type: ignore[operator]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(build)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (whl,) = out.glob("livingrag-*.whl")
    return whl


@pytest.mark.slow
def test_the_wheel_ships_the_migrations(wheel: Path, tmp_path: Path, make_database_url: Callable[[], str]) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    versions = sorted(p.name for p in (ROOT / "livingrag/db/migrations/versions").glob("*.py"))
    assert {"livingrag/db/migrations/env.py", "livingrag/db/migrations/script.py.mako"} <= names
    assert {f"livingrag/db/migrations/versions/{v}" for v in versions} <= names
    assert any(n.startswith("livingrag/generation/prompts/") for n in names)
    pkg = ROOT / "livingrag"
    ui = {f"livingrag/{p.relative_to(pkg)}" for p in (pkg / "api/ui").rglob("*") if p.is_file()}
    assert ui and ui <= names, sorted(ui - names)  # the web console, every file of it
    # installed from the wheel alone (no source tree, no alembic.ini): migrate an empty database
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    url = make_database_url()
    code = (
        "import livingrag, sys; from pathlib import Path\n"
        f"assert Path(livingrag.__file__).is_relative_to({str(site)!r}), livingrag.__file__\n"
        "from pydantic import SecretStr\n"
        "from livingrag.config import DBSettings\n"
        "from livingrag.db.engine import Database\n"
        "from livingrag.db import migrate\n"
        "db = Database(DBSettings(url=SecretStr(sys.argv[1])))\n"
        "migrate.upgrade(db)\n"
        "print(migrate.status(db).current, migrate.head_revision())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run(
        [sys.executable, "-c", code, url], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    current, head = run.stdout.split()
    assert current == head == versions[-1].split("_")[0]
