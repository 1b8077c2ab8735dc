"""Reaching the database from outside: ``livingrag db url`` (the connection string for psql and other
libpq clients) and ``livingrag db psql``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livingrag.cli.main import app
from livingrag.db.client import client_env, libpq_url, psql_executable, url_password

runner = CliRunner()


@pytest.mark.parametrize(
    ("url", "plain", "with_password"),
    [
        (
            "postgresql+psycopg://postgres:@/postgres?host=/var/lib/livingrag/pgdata",
            "postgresql://postgres@/postgres?host=/var/lib/livingrag/pgdata",
            "postgresql://postgres@/postgres?host=/var/lib/livingrag/pgdata",
        ),
        (
            "postgresql+psycopg://owner:s%40cret@db.example:5433/livingrag?sslmode=require",
            "postgresql://owner@db.example:5433/livingrag?sslmode=require",
            "postgresql://owner:s%40cret@db.example:5433/livingrag?sslmode=require",
        ),
        ("postgresql://u@[::1]:5432/x", "postgresql://u@[::1]:5432/x", "postgresql://u@[::1]:5432/x"),
    ],
)
def test_libpq_url(url: str, plain: str, with_password: str) -> None:
    assert libpq_url(url) == plain and libpq_url(url, password=True) == with_password


def test_the_password_travels_in_the_environment() -> None:
    url = "postgresql+psycopg://owner:s%40cret@db.example/livingrag"
    assert url_password(url) == "s@cret" and client_env(url, {"A": "1"}) == {"A": "1", "PGPASSWORD": "s@cret"}
    assert url_password("postgresql+psycopg://postgres:@/postgres?host=/tmp") is None


def test_the_embedded_servers_psql_is_found() -> None:
    exe = psql_executable()
    assert exe is not None and Path(exe).name == "psql"


@pytest.mark.db
def test_db_url_and_psql_reach_the_database(database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)
    res = runner.invoke(app, ["db", "url"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == libpq_url(database_url)
    out = json.loads(runner.invoke(app, ["db", "url", "--json"]).stdout)
    assert out == {"url": libpq_url(database_url), "server": "external"}

    result = tmp_path / "out.txt"
    query = "SELECT count(*) FROM pg_views WHERE viewname = 'writeback_gate_stats'"
    res = runner.invoke(app, ["db", "psql", "--", "-X", "-A", "-t", "-c", query, "-o", str(result)])
    assert res.exit_code == 0, res.output
    assert result.read_text().strip() == "1"
    res = runner.invoke(app, ["db", "psql", "--", "-X", "-c", "SELECT * FROM no_such_table"])
    assert res.exit_code != 0  # psql's exit status is the command's
