"""CLI: every command documented with an example; db/tenant/config commands against a real server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from livingrag.cli.main import app

runner = CliRunner()


def _walk(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, cmd
    # typer >= 0.2x builds its groups on its own vendored click (typer._click), so the commands are typed
    # Any and tested for sub-commands, not for a class
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        yield from _walk(sub, (*path, name))


def _all_commands() -> list[tuple[str, ...]]:
    return [p for p, _ in _walk(typer.main.get_command(app))]


@pytest.mark.parametrize("path", _all_commands(), ids=lambda p: " ".join(p) or "livingrag")
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output
    assert "$ livingrag" in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("livingrag ")


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)
    return {"LIVINGRAG_DB__URL": database_url}


@pytest.mark.db
def test_tenant_lifecycle(cli_env: dict[str, str], make_tenant: Callable[..., tuple[int, str]]) -> None:
    import uuid

    name = f"cli-{uuid.uuid4().hex[:8]}"
    res = runner.invoke(app, ["tenant", "create", name, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["tenant"] == name and data["api_key"].startswith("lrg_")
    res = runner.invoke(app, ["tenant", "list", "--json"])
    listed = json.loads(res.output)
    assert name in [t["name"] for t in listed]
    assert data["api_key"] not in res.output  # only a prefix is ever shown again
    dup = runner.invoke(app, ["tenant", "create", name])
    assert dup.exit_code != 0
    res = runner.invoke(app, ["tenant", "delete", name, "--yes"])
    assert res.exit_code == 0, res.output
    assert name not in [t["name"] for t in json.loads(runner.invoke(app, ["tenant", "list", "--json"]).output)]


@pytest.mark.db
def test_db_status_json(cli_env: dict[str, str]) -> None:
    res = runner.invoke(app, ["db", "status", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["server"] == "external" and data["up_to_date"] is True


@pytest.mark.db
def test_db_upgrade_migrates_an_empty_database(
    make_database_url: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from livingrag.db import migrate
    from livingrag.db.engine import Database
    from tests.conftest import db_settings_for

    url = make_database_url()
    monkeypatch.setenv("LIVINGRAG_DB__URL", url)
    res = runner.invoke(app, ["db", "upgrade"])
    assert res.exit_code == 0, res.output
    assert f"schema at revision {migrate.head_revision()}" in res.output
    db = Database(db_settings_for(url))
    try:
        assert migrate.status(db).up_to_date
    finally:
        db.dispose()


@pytest.mark.db
def test_a_command_on_an_unmigrated_external_database_names_db_upgrade(
    make_database_url: Callable[[], str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from livingrag.db import migrate
    from livingrag.db.engine import Database
    from tests.conftest import db_settings_for

    url = make_database_url()
    monkeypatch.setenv("LIVINGRAG_DB__URL", url)
    code, err = _run_main(monkeypatch, capsys, "tenant", "list")
    assert code == 1
    assert "no livingrag schema" in err and "livingrag db upgrade" in err
    db = Database(db_settings_for(url))
    try:
        assert migrate.status(db).current is None  # refused, not migrated: an external schema is its operator's
    finally:
        db.dispose()


def test_config_show_masks_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_LLM__API_KEY", "sk-topsecret")
    res = runner.invoke(app, ["config", "show", "--json"])
    assert res.exit_code == 0, res.output
    assert "sk-topsecret" not in res.output
    assert json.loads(res.output)["llm"]["api_key"] == "********"


def test_main_reports_bad_settings_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from livingrag.cli.main import main

    monkeypatch.setenv("LIVINGRAG_GATES__VERIFIER", "magic")
    monkeypatch.setattr("sys.argv", ["livingrag", "config", "show"])
    with pytest.raises(SystemExit) as ei:
        main()
    assert ei.value.code == 1
    err = capsys.readouterr().err
    assert "gates.verifier" in err and "magic" in err


def _run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run ``livingrag ARGS`` through :func:`main` (errors as the user sees them): (exit code, stderr)."""
    from livingrag.cli.main import main

    monkeypatch.setattr("sys.argv", ["livingrag", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.db
def test_key_create_list_revoke(cli_env: dict[str, str], make_tenant: Callable[..., tuple[int, str]]) -> None:
    tid, _ = make_tenant("cli-keys")
    res = runner.invoke(app, ["tenant", "list", "--json"])
    name = next(t["name"] for t in json.loads(res.output) if t["id"] == tid)
    res = runner.invoke(
        app, ["key", "create", "--tenant", name, "--name", "ci", "--scopes", "write,read", "--expires-in-days", "30",
              "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    made = json.loads(res.output)
    assert made["name"] == "ci" and made["scopes"] == ["read", "write"] and made["key"].startswith(made["prefix"])
    assert made["expires_at"] is not None and made["state"] == "active"
    res = runner.invoke(app, ["key", "list", "--tenant", str(tid), "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.output)
    assert [k["name"] for k in listed] == ["default", "ci"] and made["key"] not in res.output
    res = runner.invoke(app, ["key", "list", "--tenant", name])
    assert res.exit_code == 0 and made["key"] not in res.output  # the table (width as the terminal allows)
    res = runner.invoke(app, ["key", "revoke", "--tenant", name, "ci", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["state"] == "revoked"
    res = runner.invoke(app, ["key", "revoke", "--tenant", name, str(made["id"])])
    assert res.exit_code == 0 and "already revoked" in res.output
    res = runner.invoke(app, ["key", "revoke", "--tenant", name, "default", "--json"])
    assert res.exit_code == 0, res.output  # the operator may revoke the last admin key ...
    assert json.loads(res.output)["active_admin_keys"] == 0
    res = runner.invoke(app, ["key", "revoke", "--tenant", name, "default"])
    assert "no active admin key left" in res.output  # ... and is told what that means
    res = runner.invoke(app, ["tenant", "list", "--json"])
    assert next(t for t in json.loads(res.output) if t["id"] == tid)["active_keys"] == 0


@pytest.mark.db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["key", "create", "--tenant", "no-such-tenant-x", "--name", "ci"], "no tenant 'no-such-tenant-x'"),
        (["key", "create", "--tenant", "{t}", "--name", "default"], "already has a key named 'default'"),
        (["key", "create", "--tenant", "{t}", "--name", "ci", "--scopes", "read,root"], "unknown scope(s) 'root'"),
        (["key", "create", "--tenant", "{t}", "--name", "ci", "--scopes", ","], "at least one scope"),
        (["key", "create", "--tenant", "{t}", "--name", "ci", "--expires-in-days", "0"], "from 1 to 3650, got 0"),
        (["key", "create", "--tenant", "{t}", "--name", "ci", "--expires-in-days", "99999"], "got 99999"),
        (["key", "create", "--tenant", "{t}", "--name", "42"], "key name '42' is not valid"),
        (["key", "create", "--tenant", "{t}", "--name", "a b"], "key name 'a b' is not valid"),
        (["key", "revoke", "--tenant", "{t}", "nope"], "no key 'nope'"),
        (["key", "revoke", "--tenant", "{t}", "99999999999999999999"], "no key '99999999999999999999'"),
        (["key", "list", "--tenant", "no-such-tenant-x"], "no tenant 'no-such-tenant-x'"),
    ],
)
def test_key_commands_name_what_was_wrong_and_write_nothing(
    cli_env: dict[str, str],
    make_tenant: Callable[..., tuple[int, str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    tid, _ = make_tenant("cli-keys-bad")
    code, err = _run_main(monkeypatch, capsys, *[str(tid) if a == "{t}" else a for a in args])
    assert code == 1 and message in err and "Traceback" not in err, err
    res = runner.invoke(app, ["key", "list", "--tenant", str(tid), "--json"])
    assert [(k["name"], k["state"]) for k in json.loads(res.output)] == [("default", "active")]


@pytest.mark.db
def test_key_revoke_in_a_subprocess_refuses_the_next_api_request(
    database_url: str, db: Any, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    """``livingrag key revoke`` in its own process; the running app refuses the key on its next request."""
    import os
    import subprocess
    import sys

    from livingrag.db.repositories import api_keys
    from livingrag.testing.openai_server import OpenAICompatServer
    from tests.api_support import ROOT, api_settings, app_client, auth

    tid, default = make_tenant("cli-keys-sub")
    with db.owner_session() as s:
        _, ci = api_keys.create_key(s, tid, "ci", ["read"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVINGRAG_")}
    env |= {"PYTHONPATH": str(ROOT), "LIVINGRAG_DB__URL": database_url}
    with OpenAICompatServer() as llm, app_client(db, api_settings(database_url, llm.base_url)) as client:
        assert client.get("/v1/corpora", headers=auth(ci)).status_code == 200
        out = subprocess.run(
            [sys.executable, "-m", "livingrag.cli.main", "key", "revoke", "--tenant", str(tid), "ci"],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "revoked key ci" in out.stdout
        r = client.get("/v1/corpora", headers=auth(ci))
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        assert client.get("/v1/corpora", headers=auth(default)).status_code == 200
