"""The embedded server: starts, survives a client killed with -9, stops cleanly, works as a normal user."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.db

_CLIENT = """
import sys, time
from livingrag.db.embedded import start_embedded
import psycopg
s = start_embedded(sys.argv[1])
with psycopg.connect(s.url.replace('+psycopg', '')) as c:
    c.execute('SELECT 1')
print('ready', flush=True)
time.sleep(float(sys.argv[2]))
"""


def _postmaster_pid(pgdata: Path) -> int | None:
    f = pgdata / "postmaster.pid"
    if not f.exists():
        return None
    pid = int(f.read_text().splitlines()[0])
    return pid if psutil.pid_exists(pid) else None


def _wait_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def data_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="livingrag-emb-"))
    yield d
    pgdata = d / "pgdata"
    pid = _postmaster_pid(pgdata)
    if pid:
        os.kill(pid, signal.SIGTERM)
        _wait_gone(pid)
    shutil.rmtree(d, ignore_errors=True)


def _start_client(data_dir: Path, seconds: float) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-c", _CLIENT, str(data_dir), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    return p


def test_last_client_stops_the_server(data_dir: Path) -> None:
    p = _start_client(data_dir, 0.1)
    pid = _postmaster_pid(data_dir / "pgdata")
    assert pid is not None
    assert p.wait(30) == 0
    assert _wait_gone(pid), "server still running after its only client exited"


def test_survives_a_client_killed_with_sigkill(data_dir: Path) -> None:
    p = _start_client(data_dir, 60)
    pgdata = data_dir / "pgdata"
    pid = _postmaster_pid(pgdata)
    assert pid is not None
    p.send_signal(signal.SIGKILL)
    p.wait(10)
    assert p.pid in json.loads((pgdata / ".handle_pids.json").read_text())
    # A new client attaches, drops the dead handle, works, and stops the server when it exits.
    q = _start_client(data_dir, 0.1)
    assert q.wait(30) == 0
    assert _wait_gone(pid), "the dead client's handle kept the server running"
    # ... and a later start works again.
    r = _start_client(data_dir, 0.1)
    assert r.wait(30) == 0


def test_restarts_after_the_server_itself_was_killed(data_dir: Path) -> None:
    p = _start_client(data_dir, 60)
    pgdata = data_dir / "pgdata"
    pid = _postmaster_pid(pgdata)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    p.kill()
    p.wait(10)
    _wait_gone(pid)
    q = _start_client(data_dir, 0.1)
    assert q.wait(60) == 0


def test_connecting_leaves_the_schema_and_opening_upgrades_the_embedded_database(data_dir: Path) -> None:
    """``Database`` starts the embedded server and only connects; :func:`open_database` (what the
    commands, ``serve`` and ``demo`` call) upgrades the embedded database to head on first use."""
    from sqlalchemy import inspect

    from livingrag.config import DBSettings
    from livingrag.db import migrate
    from livingrag.db.engine import Database
    from livingrag.db.setup import open_database

    settings = DBSettings(data_dir=data_dir)
    bare = Database(settings)
    try:
        assert bare.embedded is not None
        with bare.owner_engine.connect() as conn:
            assert "alembic_version" not in inspect(conn).get_table_names()
        opened = open_database(settings)
        try:
            assert migrate.status(opened).up_to_date
        finally:
            opened.close()
    finally:
        bare.close()


def _interpreter_for(user: str) -> str | None:
    """A Python of this version that ``user`` can execute (a venv's python may live under /root)."""
    candidates = [sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"]
    for exe in candidates:
        ok = subprocess.run(
            ["runuser", "-u", user, "--", exe, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if ok.returncode == 0 and ok.stdout.strip() == str(tuple(sys.version_info[:2])):
            return exe
    return None


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("runuser") is None,
    reason="needs root to switch to an unprivileged user",
)
def test_works_as_a_normal_user() -> None:
    import pwd
    import site

    user = "nobody"
    pwd.getpwnam(user)
    exe = _interpreter_for(user)
    if exe is None:
        pytest.skip(f"no Python {sys.version_info[:2]} that {user} can execute")
    d = Path(tempfile.mkdtemp(prefix="livingrag-user-"))
    os.chmod(d, 0o777)
    paths = [str(Path(__file__).parents[2]), *site.getsitepackages()]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(d), "PYTHONPATH": os.pathsep.join(paths)}
    code = _CLIENT.replace(
        "s = start_embedded(sys.argv[1])", "import os; assert os.geteuid() != 0; s = start_embedded(sys.argv[1])"
    )
    try:
        res = subprocess.run(
            ["runuser", "-u", user, "--", exe, "-c", code, str(d / "data"), "0.1"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        if res.returncode != 0 and "Permission denied" in res.stderr and "No module named" not in res.stderr:
            pytest.skip(f"the environment is not readable by {user}: {res.stderr.strip().splitlines()[-1]}")
        assert res.returncode == 0, res.stderr
        assert "ready" in res.stdout
        # the data dir belongs to that user, not to root
        assert (d / "data" / "pgdata").stat().st_uid == pwd.getpwnam(user).pw_uid
    finally:
        shutil.rmtree(d, ignore_errors=True)
