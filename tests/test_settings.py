"""Settings: env prefix, nested groups, .env, validation errors naming the setting, masking."""

from __future__ import annotations

from pathlib import Path

import pytest

from livingrag.config import get_settings, mask_url
from livingrag.config_view import settings_as_dict
from livingrag.errors import ConfigError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for k in list(os.environ):
        if k.startswith("LIVINGRAG_"):
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)


def test_defaults_reproduce_paper_thresholds() -> None:
    s = get_settings()
    assert s.gates.tau_novel == 0.7
    assert s.gates.tau_gs == 0.6
    assert s.retrieval.damping == 0.5
    assert s.retrieval.passage_node_weight == 0.05
    assert s.db.url is None and s.db.embedded
    assert s.llm.price_prompt_per_m == 0.5 and s.llm.price_completion_per_m == 3.0


def test_nested_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_GATES__TAU_NOVEL", "0.8")
    monkeypatch.setenv("LIVINGRAG_DB__URL", "postgresql://u:secret@db.example:5432/lrg")
    monkeypatch.setenv("LIVINGRAG_DB__DATA_DIR", "/srv/lrg")
    s = get_settings()
    assert s.gates.tau_novel == 0.8
    assert s.db.url is not None
    assert s.db.url.get_secret_value() == "postgresql+psycopg://u:secret@db.example:5432/lrg"
    assert s.db.data_dir == Path("/srv/lrg")


def test_dotenv_is_honoured(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LIVINGRAG_EXPERIENCE__TOP_K=7\nLIVINGRAG_LLM__PROVIDER=openai\n")
    s = get_settings()
    assert s.experience.top_k == 7
    assert s.llm.provider == "openai"


def test_environment_beats_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("LIVINGRAG_EXPERIENCE__TOP_K=7\n")
    monkeypatch.setenv("LIVINGRAG_EXPERIENCE__TOP_K", "2")
    assert get_settings().experience.top_k == 2


@pytest.mark.parametrize(
    ("var", "value", "named"),
    [
        ("LIVINGRAG_GATES__VERIFIER", "magic", "gates.verifier (LIVINGRAG_GATES__VERIFIER)"),
        ("LIVINGRAG_GATES__TAU_GS", "1.5", "gates.tau_gs (LIVINGRAG_GATES__TAU_GS)"),
        ("LIVINGRAG_GATES__TAU_NOVEL", "-0.1", "gates.tau_novel"),
        ("LIVINGRAG_EXPERIENCE__ALPHA", "2", "experience.alpha"),
        ("LIVINGRAG_RETRIEVAL__DAMPING", "1", "retrieval.damping"),
        ("LIVINGRAG_DB__URL", "mysql://x@y/z", "db.url"),
        ("LIVINGRAG_DB__APP_ROLE", "bad role;", "db.app_role"),
        ("LIVINGRAG_LLM__PROVIDER", "magic", "llm.provider"),
        ("LIVINGRAG_RETRIEVAL__TOP_K", "zero", "retrieval.top_k"),
    ],
)
def test_invalid_values_name_the_setting(monkeypatch: pytest.MonkeyPatch, var: str, value: str, named: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as ei:
        get_settings()
    assert named in str(ei.value)


def test_unknown_setting_in_dotenv_is_named(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LIVINGRAG_GATES__TAU_NOVELTY=0.5\n")
    with pytest.raises(ConfigError) as ei:
        get_settings()
    assert "tau_novelty" in str(ei.value).lower()
    assert "unknown setting" in str(ei.value)


def test_chunk_overlap_must_be_smaller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_MODELS__CHUNK_TOKENS", "100")
    monkeypatch.setenv("LIVINGRAG_MODELS__CHUNK_OVERLAP", "100")
    with pytest.raises(ConfigError, match="chunk_overlap"):
        get_settings()


def test_secrets_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_DB__URL", "postgresql://app:hunter2@db:5432/lrg")
    monkeypatch.setenv("LIVINGRAG_LLM__API_KEY", "sk-verysecret")
    monkeypatch.setenv("LIVINGRAG_API__ADMIN_KEY", "adminsecret")
    d = settings_as_dict(get_settings())
    flat = repr(d)
    assert "hunter2" not in flat and "sk-verysecret" not in flat and "adminsecret" not in flat
    assert d["db"]["url"] == "postgresql+psycopg://app:********@db:5432/lrg"
    assert d["llm"]["api_key"] == "********"


def test_mask_url_leaves_passwordless_urls() -> None:
    assert mask_url("postgresql+psycopg://postgres:@/postgres?host=/tmp/x") == (
        "postgresql+psycopg://postgres:********@/postgres?host=/tmp/x"
    )
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_url("plain-secret") == "********"


def test_explicit_overrides() -> None:
    s = get_settings(gates={"tau_novel": 0.9})
    assert s.gates.tau_novel == 0.9
    with pytest.raises(ConfigError, match=r"gates\.tau_nli"):
        get_settings(gates={"tau_nli": 3})


def test_the_paper_profile_writes_the_equations_as_the_paper_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """experience.profile=paper: no floors, no map cut, scaffolds with names, no answer-form check; an
    explicitly given setting still wins, and the tuned profile keeps this project's defaults."""
    from livingrag.config import PAPER_EXPERIENCE, ExperienceSettings, get_settings

    tuned = get_settings()
    assert tuned.experience.profile == "tuned" and tuned.experience.fusion_floor == 0.5 and tuned.gates.answer_form
    monkeypatch.setenv("LIVINGRAG_EXPERIENCE__PROFILE", "paper")
    monkeypatch.setenv("LIVINGRAG_EXPERIENCE__SCAFFOLD_FLOOR", "0.2")
    paper = get_settings()
    e = paper.experience
    assert (e.fusion_floor, e.fusion_template_floor, e.top_h, e.scaffold, e.scaffold_entities) == (
        -1.0, 0.0, None, "on", "keep",
    )  # fmt: skip
    assert e.scaffold_template_floor == 0.0
    assert e.scaffold_floor == 0.2 and e.top_k == tuned.experience.top_k
    assert paper.gates.answer_form is False
    assert ExperienceSettings(profile="paper").model_dump(include=set(PAPER_EXPERIENCE)) == PAPER_EXPERIENCE
    monkeypatch.setenv("LIVINGRAG_EXPERIENCE__PROFILE", "papers")
    with pytest.raises(ConfigError, match="LIVINGRAG_EXPERIENCE__PROFILE"):
        get_settings()
