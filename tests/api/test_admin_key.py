"""The admin key's minimum strength (issue 19, finding 4): ``livingrag serve`` refuses a weak
``api.admin_key`` with a message naming why and how to generate one."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from typing import Any

import pytest

from livingrag.api.admin_key import GENERATE, MIN_LENGTH, admin_key_problems, check_admin_key, estimated_bits
from livingrag.errors import ConfigError
from tests.api_support import ADMIN_KEY, ROOT


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("change-me", "characters; at least 32"),
        ("admin-test-key-0123456789", "characters; at least 32"),
        ("a" * 64, "different characters"),
        ("abc" * 20, "repeats one block"),
        ("0123456789" * 4, "repeats one block"),
        ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", "estimated entropy"),
        ("aaaaaaaabbbbbbbbccccccccddddddddeeeeeeeeffffffffgggggggghhhhhhhh", "estimated entropy"),
    ],
)
def test_weak_keys_are_named_weak(key: str, why: str) -> None:
    problems = admin_key_problems(key)
    assert any(why in p for p in problems), problems
    with pytest.raises(ConfigError, match="weak admin key") as ei:
        check_admin_key(key)
    assert GENERATE in str(ei.value) and key not in str(ei.value)  # the key itself is never printed


def test_generated_keys_pass() -> None:
    assert admin_key_problems(ADMIN_KEY) == []
    for _ in range(2000):
        key = secrets.token_urlsafe(32)
        assert admin_key_problems(key) == [], key
        assert estimated_bits(key) >= 200
    for _ in range(200):
        assert admin_key_problems(secrets.token_hex(32)) == []
    check_admin_key(None)  # no admin key: nothing to check (admin routes answer 403)


def _serve(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], key: str | None
) -> tuple[int, str, list[Any]]:
    """``livingrag serve`` through the CLI entry point with uvicorn stubbed: (exit code, stderr, runs)."""
    import uvicorn

    from livingrag.cli.main import main

    runs: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append((app, kw)))
    monkeypatch.setattr("livingrag.api.create_app", lambda settings: "app")
    if key is None:
        monkeypatch.delenv("LIVINGRAG_API__ADMIN_KEY", raising=False)
    else:
        monkeypatch.setenv("LIVINGRAG_API__ADMIN_KEY", key)
    monkeypatch.setattr("sys.argv", ["livingrag", "serve"])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err, runs


def test_serve_starts_with_a_strong_key_or_none(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in (ADMIN_KEY, None):
        code, err, runs = _serve(monkeypatch, capsys, key)
        assert code == 0 and len(runs) == 1, err


def test_serve_refuses_a_weak_key(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, err, runs = _serve(monkeypatch, capsys, "admin-test-key-0123456789")
    assert code == 1 and runs == []
    assert "refusing to serve with a weak admin key" in err and f"at least {MIN_LENGTH}" in err
    assert "secrets.token_urlsafe(32)" in err


def test_serve_process_refuses_a_weak_key() -> None:
    """The real command, in its own process: exit 1 with one line, before it opens the database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVINGRAG_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "LIVINGRAG_API__ADMIN_KEY": "change-me",
        "LIVINGRAG_DB__URL": "postgresql://nobody@127.0.0.1:1/none",
    }
    out = subprocess.run(
        [sys.executable, "-m", "livingrag.cli.main", "serve", "--port", "1"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "weak admin key" in out.stderr and "9 characters; at least 32" in out.stderr
    assert "Traceback" not in out.stderr and "change-me" not in out.stderr


def test_the_app_factory_for_asgi_servers_refuses_a_weak_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """``livingrag.api.app:app_from_environment`` (serve --workers, or gunicorn/uvicorn directly)."""
    from livingrag.api.app import app_from_environment

    monkeypatch.setenv("LIVINGRAG_API__ADMIN_KEY", "x" * 40)
    with pytest.raises(ConfigError, match="weak admin key"):
        app_from_environment()
