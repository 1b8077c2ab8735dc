"""CLI: every command documented with an example; db/tenant/config commands against a real server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import click
import pytest
import typer
from typer.testing import CliRunner

from livingrag.cli.main import app

runner = CliRunner()


def _walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, cmd
    # typer >= 0.2x builds its groups on its own vendored click, so test for sub-commands, not the class
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
