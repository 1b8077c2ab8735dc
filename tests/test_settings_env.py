"""Settings and warnings: an unknown ``LIVINGRAG_*`` variable is named (with the setting it was
probably meant to be), and the grounding gate's fallback to the offline verifier is a note once per
process that ``livingrag doctor`` reports, not a warning on every ``ask``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livingrag import config
from livingrag.cli.main import app
from livingrag.experience import verifiers
from livingrag.experience.verifiers import build_verifier, nli_model_problem
from tests.experience_helpers import HashingEncoder

runner = CliRunner()


def test_setting_names_cover_groups_and_fields() -> None:
    names = config.setting_env_names()
    assert {"LIVINGRAG_LLM", "LIVINGRAG_LLM__MODEL", "LIVINGRAG_DB__URL", "LIVINGRAG_LOG_LEVEL"} <= names
    assert "LIVINGRAG_LLM_MODEL" not in names


def test_unknown_variables_are_found_with_the_setting_meant() -> None:
    env = {
        "LIVINGRAG_LLM_MODEL": "x",  # one underscore where two belong
        "LIVINGRAG_RETRIVAL__PRESET": "musique",  # a typo
        "LIVINGRAG_SOMETHING_ELSE": "1",  # nothing close
        "LIVINGRAG_LLM__MODEL": "fine",
        "LIVINGRAG_TENANT": "acme",  # the CLI's, no setting
        "HOME": "/root",
    }
    assert config.unknown_env_vars(env) == [
        ("LIVINGRAG_LLM_MODEL", "LIVINGRAG_LLM__MODEL"),
        ("LIVINGRAG_RETRIVAL__PRESET", "LIVINGRAG_RETRIEVAL__PRESET"),
        ("LIVINGRAG_SOMETHING_ELSE", None),
    ]
    line = config.describe_unknown_env(config.unknown_env_vars(env))
    assert "LIVINGRAG_LLM_MODEL (did you mean LIVINGRAG_LLM__MODEL?)" in line and "LIVINGRAG_SOMETHING_ELSE" in line


def test_get_settings_warns_once_per_process(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("LIVINGRAG_LLM_MODEL", "qwen")
    monkeypatch.setattr(config, "_warned_env", set())
    with caplog.at_level(logging.WARNING, logger="livingrag.config"):
        config.get_settings()
        config.get_settings()
    said = [m for m in caplog.messages if "LIVINGRAG_LLM_MODEL" in m]
    assert said == ["unknown LIVINGRAG_* variables (no setting reads them): LIVINGRAG_LLM_MODEL (did you mean "
                    "LIVINGRAG_LLM__MODEL?)"]  # fmt: skip


def test_doctor_fails_the_settings_check_on_a_misspelling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_LLM_MODEL", "qwen")
    res = runner.invoke(app, ["doctor", "--only", "settings", "--json"])
    assert res.exit_code == 1, res.output
    (check,) = json.loads(res.stdout)["checks"]
    assert check["status"] == "fail" and "LIVINGRAG_LLM_MODEL (did you mean LIVINGRAG_LLM__MODEL?)" in check["detail"]
    assert check["fix"] == "rename LIVINGRAG_LLM_MODEL to LIVINGRAG_LLM__MODEL (or unset it)"


def test_the_fallback_is_a_note_once_per_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(verifiers, "_fallbacks_said", set())
    with caplog.at_level(logging.DEBUG, logger="livingrag.experience.verifiers"):
        for _ in range(3):
            r = build_verifier("auto", encoder=HashingEncoder(), evidence_k=2, nli_model="/nonexistent/nli")
            assert r.name == "offline" and r.fallback_reason
    levels = [rec.levelno for rec in caplog.records if "falling back to the offline verifier" in rec.getMessage()]
    assert levels == [logging.INFO, logging.DEBUG, logging.DEBUG]  # never a warning


def test_doctor_reports_the_verifier_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_GATES__NLI_MODEL", "/nonexistent/nli")
    res = runner.invoke(app, ["doctor", "--only", "verifier", "--json"])
    assert res.exit_code == 0, res.output
    (check,) = json.loads(res.stdout)["checks"]
    assert check["status"] == "ok" and check["detail"].startswith("gates.verifier=auto: the offline verifier, since")
    assert "/nonexistent/nli" in check["detail"]
    monkeypatch.setenv("LIVINGRAG_GATES__VERIFIER", "nli")
    res = runner.invoke(app, ["doctor", "--only", "verifier", "--json"])
    (check,) = json.loads(res.stdout)["checks"]
    assert res.exit_code == 1 and check["status"] == "fail" and "LIVINGRAG_GATES__NLI_MODEL" in check["fix"]
    monkeypatch.setenv("LIVINGRAG_GATES__VERIFIER", "offline")
    (check,) = json.loads(runner.invoke(app, ["doctor", "--only", "verifier", "--json"]).stdout)["checks"]
    assert check["status"] == "ok" and "offline" in check["detail"]


def test_nli_model_problem_looks_at_files(tmp_path: Path) -> None:
    assert "no folder" in (nli_model_problem("/nonexistent/nli") or "")
    assert "not available locally" in (nli_model_problem("cross-encoder/nli-deberta-v3-large") or "")
    assert "holds no config.json and weights" in (nli_model_problem(str(tmp_path)) or "")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert nli_model_problem(str(tmp_path)) is None
