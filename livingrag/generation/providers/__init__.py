"""LLM providers and the factory that builds the configured one.

``build_llm(settings.llm, data_dir=settings.db.data_dir)`` returns an object implementing
:class:`livingrag.generation.llm.LLM`:

* ``openai``: :class:`~livingrag.generation.providers.openai_provider.OpenAICompatibleLLM`, any
  OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp server).
* ``local``: :class:`~livingrag.generation.providers.local.LocalLLM`, a GGUF model run in-process
  with llama-cpp-python (the offline default); presets in
  :data:`~livingrag.generation.providers.local_models.PRESETS`.
"""

from __future__ import annotations

from pathlib import Path

from livingrag.config import LLMSettings, default_data_dir
from livingrag.errors import ConfigError
from livingrag.generation.llm import LLM

__all__ = ["build_llm", "models_dir_for"]


def models_dir_for(settings: LLMSettings, data_dir: Path | None = None) -> Path:
    """Where local model files live: ``settings.models_dir``, else ``<data_dir>/models``."""
    if settings.models_dir is not None:
        return Path(settings.models_dir).expanduser()
    return Path(data_dir if data_dir is not None else default_data_dir()) / "models"


def build_llm(settings: LLMSettings, *, data_dir: Path | None = None) -> LLM:
    """The provider that ``settings.provider`` names, configured from ``settings``.

    ``data_dir`` (normally ``settings.db.data_dir``) locates the local models folder when
    ``settings.models_dir`` is unset. Nothing is loaded or contacted here: a local model loads on
    its first call (or with ``.load()``), and a server is first contacted by the first call.
    """
    if settings.provider == "openai":
        from livingrag.generation.providers.openai_provider import OpenAICompatibleLLM

        return OpenAICompatibleLLM(settings)
    if settings.provider == "local":
        from livingrag.generation.providers.local import LocalLLM

        return LocalLLM(settings, models_dir=models_dir_for(settings, data_dir))
    raise ConfigError(f"unknown llm.provider {settings.provider!r} (LIVINGRAG_LLM__PROVIDER): use local or openai")
