"""A plain (non-editable) wheel holds what the package needs at run time: its migrations, the
web console's files and the prompts; and from it the migrations are found and run."""

from __future__ import annotations

import json
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
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, build / rel)
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


@pytest.mark.slow
def test_a_wheel_installed_into_a_fresh_venv_migrates_an_empty_embedded_database(wheel: Path, tmp_path: Path) -> None:
    """``pip install`` of the wheel (not ``-e``) into a new virtualenv; its dependencies come from
    this environment's site-packages as a plain path (so this checkout's editable install, a .pth
    finder there, is not loaded). ``livingrag db upgrade`` from that venv starts an embedded server
    in an empty data folder and migrates it to head, with the migrations found in the installed
    package."""
    import site
    import venv

    fresh = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(fresh)
    py = fresh / "bin" / "python"
    (fresh_site,) = (fresh / "lib").glob("python3*/site-packages")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(fresh_site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (fresh_site / "zz_livingrag_test_deps.pth").write_text("\n".join(deps) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LIVINGRAG_", "PYTHONPATH"))}
    env["LIVINGRAG_DB__DATA_DIR"] = str(tmp_path / "data")
    where = subprocess.run(
        [str(py), "-c", "import livingrag; print(livingrag.__file__)"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr[-2000:]
    assert Path(where.stdout.strip()).is_relative_to(fresh_site), where.stdout
    versions = sorted(p.name for p in (ROOT / "livingrag/db/migrations/versions").glob("*.py"))
    up = subprocess.run(
        [str(py), "-m", "livingrag.cli.main", "db", "upgrade"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert up.returncode == 0, (up.stdout + up.stderr)[-3000:]
    status = subprocess.run(  # the embedded server stops with each command's process
        [str(py), "-m", "livingrag.cli.main", "db", "status", "--json"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert status.returncode == 0, (status.stdout + status.stderr)[-3000:]
    out = json.loads(status.stdout)
    assert out["server"] == "embedded" and out["up_to_date"] is True, out
    assert out["current"] == out["head"] == versions[-1].split("_")[0], out
