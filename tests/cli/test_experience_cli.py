"""``livingrag admin``: expire, prune, stats and list against a real server, with --dry-run."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from livingrag.cli.main import app
from livingrag.db.engine import Database
from livingrag.db.repositories import tenants
from livingrag.experience.store import ExperienceStore
from tests.experience_helpers import CountingVerifier, HashingEncoder, candidate, make_corpus, settings, unit

pytestmark = pytest.mark.db
runner = CliRunner()
DIM = 8


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)


def _seed(db: Database, tenant: int) -> tuple[int, list[int]]:
    corpus = make_corpus(db, tenant, DIM)
    ids: list[int] = []
    for i, days in enumerate((60, 45, 1)):
        now = datetime.now(UTC) - timedelta(days=days)

        def clock(n: datetime = now) -> datetime:
            return n

        store = ExperienceStore(db, settings(), encoder=HashingEncoder(), verifier=CountingVerifier(1.0), clock=clock)
        exp_id = store.write_back(candidate(tenant, corpus, unit(DIM, (i, 1.0)), {i + 1: 1.0})).experience_id
        assert exp_id is not None
        ids.append(exp_id)
    return corpus, ids


def _name(db: Database, tenant: int) -> str:
    with db.owner_session() as s:
        return tenants.get_tenant(s, tenant).name


def test_admin_expire_dry_run_then_for_real(cli_env: None, db: Database, tenant: int) -> None:
    _corpus, ids = _seed(db, tenant)
    name = _name(db, tenant)
    res = runner.invoke(app, ["admin", "expire", "--older-than", "30d", "--tenant", name, "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["expired"] == 2
    with db.tenant_session(tenant) as s:
        assert s.execute(text("SELECT count(*) FROM experiences WHERE expires_at IS NOT NULL")).scalar() == 0
    res = runner.invoke(app, ["admin", "expire", "--older-than", "30d", "--tenant", name])
    assert res.exit_code == 0 and "expired 2 experiences" in res.output
    res = runner.invoke(app, ["admin", "stats", "--tenant", name, "--json"])
    row = json.loads(res.output)[0]
    assert row["experiences"] == 3 and row["expired"] == 2 and row["active"] == 1 and row["stored"] == 3
    res = runner.invoke(app, ["admin", "prune", "--expired", "--tenant", name, "--dry-run", "--json"])
    assert json.loads(res.output) == {"expired": 2, "total": 2, "dry_run": True}
    res = runner.invoke(app, ["admin", "prune", "--expired", "--tenant", name])
    assert res.exit_code == 0 and "deleted 2 experiences" in res.output
    res = runner.invoke(app, ["admin", "list", "--tenant", name, "--json"])
    assert [r["id"] for r in json.loads(res.output)] == [ids[2]]


def test_admin_prune_max_per_tenant_and_errors(cli_env: None, db: Database, tenant: int) -> None:
    corpus, ids = _seed(db, tenant)
    name = _name(db, tenant)
    with db.tenant_session(tenant) as s:
        s.execute(text("UPDATE experiences SET fusion_uses = 5 WHERE id = :i"), {"i": ids[0]})
    res = runner.invoke(app, ["admin", "prune", "--max-per-tenant", "1", "--tenant", name, "--corpus", str(corpus)])
    assert res.exit_code == 0, res.output
    with db.tenant_session(tenant) as s:
        assert list(s.execute(text("SELECT id FROM experiences")).scalars()) == [ids[0]]  # the used one stays
    assert runner.invoke(app, ["admin", "prune", "--tenant", name]).exit_code != 0  # no criterion
    assert runner.invoke(app, ["admin", "expire", "--tenant", name]).exit_code != 0  # no cutoff
    assert runner.invoke(app, ["admin", "expire", "--older-than", "3d", "--corpus", "x"]).exit_code != 0


def test_admin_list_and_stats_tables(cli_env: None, db: Database, tenant: int) -> None:
    _seed(db, tenant)
    name = _name(db, tenant)
    res = runner.invoke(app, ["admin", "list", "--tenant", name, "--limit", "2"])
    assert res.exit_code == 0 and "active" in res.output
    res = runner.invoke(app, ["admin", "stats", "--tenant", name])
    assert res.exit_code == 0 and "NS pass" in res.output
