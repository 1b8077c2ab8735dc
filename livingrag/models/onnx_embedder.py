"""Sentence embeddings through ONNX Runtime: the same model and the same vectors as
:class:`~livingrag.models.embedder.Embedder`, faster on a CPU.

A sentence-transformers model made of a transformer, mean pooling and (optionally) normalisation
— the packaged all-MiniLM-L6-v2 is one — is exported once to ONNX (torch's exporter, ~2 s) into a
cache folder and run by ONNX Runtime from then on; a process that finds the export cached never
imports torch. The vector of a text is ``normalize(sum_t m_t h_t / sum_t m_t)`` over the model's
token states ``h_t`` and attention mask ``m_t`` (what sentence-transformers computes; measured here:
cosine 1.000000 with its vectors). Measured on this project's 2-core machine: one question 6.6 ms
instead of 22.5 ms, entity names 27 % faster, passages ~5 % faster (their cost is the matrix
products, which both runtimes do alike).

Threads: ONNX Runtime fixes a session's thread count when it is created, so there is one session
per count, made on first use; the count is the one the caller asked for with
:func:`livingrag.models.threads.set_torch_threads` (indexing: every core; query encoding: one).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from livingrag.errors import ModelUnavailable
from livingrag.models.spans import span_means
from livingrag.models.threads import requested_threads

log = logging.getLogger(__name__)

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
TOKENS_PER_BATCH = 2048  # padded tokens per forward pass (see OnnxEmbedder._batches)


def onnx_runtime_available() -> bool:
    """Whether the ``onnxruntime`` package can be imported."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def default_cache_dir() -> Path:
    """The user's cache folder for livingrag, ``onnx`` inside it (``~/.cache/livingrag/onnx`` on Linux)."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("livingrag")) / "onnx"


def mean_pooled_layout(model_dir: Path) -> int | None:
    """The maximum sequence length of a sentence-transformers folder whose modules are a
    transformer, mean pooling and optionally normalisation (what this backend reproduces) and that
    has a fast tokenizer (``tokenizer.json``), or None for any other layout."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
            return None
        pooling_dir = model_dir / modules[1].get("path", "1_Pooling")
        pooling = json.loads((pooling_dir / "config.json").read_text())
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v]
        if modes != ["pooling_mode_mean_tokens"] or int(pooling.get("word_embedding_dimension", 0)) < 1:
            return None
        if not (model_dir / "tokenizer.json").is_file():
            return None
        cfg = json.loads((model_dir / "sentence_bert_config.json").read_text())
        return int(cfg.get("max_seq_length") or 512)
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def _pooled_dimension(model_dir: Path) -> int:
    """The vector size the pooling module declares (``word_embedding_dimension``)."""
    modules = json.loads((model_dir / "modules.json").read_text())
    pooling = json.loads((model_dir / modules[1].get("path", "1_Pooling") / "config.json").read_text())
    return int(pooling["word_embedding_dimension"])


_WHOLE_FILE = 1 << 20  # files up to 1 MiB are hashed whole; larger ones by their first and last MiB


def _fingerprint(model_dir: Path) -> str:
    """A digest of the model's files (names, sizes, and their bytes: small files whole, large
    ones by their first and last MiB), so a changed model gets a new export while reinstalling the
    same model (new modification times) reuses the one cached. ~1 ms for a 90 MB model."""
    h = hashlib.sha256()
    for p in sorted(model_dir.rglob("*")):
        if not p.is_file():
            continue
        size = p.stat().st_size
        h.update(f"{p.relative_to(model_dir)}:{size}\n".encode())
        with p.open("rb") as fh:
            if size <= 2 * _WHOLE_FILE:
                h.update(fh.read())
            else:
                h.update(fh.read(_WHOLE_FILE))
                fh.seek(size - _WHOLE_FILE)
                h.update(fh.read(_WHOLE_FILE))
    return h.hexdigest()[:16]


def export_onnx(model_dir: Path, target: Path) -> None:
    """Export the transformer of ``model_dir`` to ``target`` (written to a temporary name in the same
    folder, then renamed, so a concurrent reader never sees half a file)."""
    import warnings

    import torch
    from transformers import AutoModel, AutoTokenizer

    class _States(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = _States(AutoModel.from_pretrained(str(model_dir))).eval()
    sample = tok(["an example", "a second, longer example"], padding=True, return_tensors="pt")
    if "token_type_ids" not in sample:
        sample["token_type_ids"] = torch.zeros_like(sample["input_ids"])
    axes = {"0": "batch", "1": "tokens"}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model,
                tuple(sample[k] for k in _INPUTS),
                str(tmp),
                input_names=list(_INPUTS),
                output_names=["token_states"],
                dynamic_axes={n: {int(k): v for k, v in axes.items()} for n in (*_INPUTS, "token_states")},
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass
class ModelUsage:
    """What the model's forward passes took: real and padded tokens, and the seconds spent inside
    ONNX Runtime (the floor an indexing phase is compared with: tokens / seconds)."""

    runs: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0

    def add(self, tokens: int, padded: int, seconds: float) -> None:
        self.runs += 1
        self.tokens += tokens
        self.padded_tokens += padded
        self.seconds += seconds

    def since(self, before: ModelUsage) -> ModelUsage:
        """The usage added after ``before`` (a copy taken earlier)."""
        return ModelUsage(
            self.runs - before.runs,
            self.tokens - before.tokens,
            self.padded_tokens - before.padded_tokens,
            self.seconds - before.seconds,
        )


def quantize_int8(source: Path, target: Path) -> None:
    """ONNX Runtime's dynamic int8 quantization of ``source`` into ``target``: weights int8 per
    output channel, activations quantized per call (written to a temporary name, then renamed).

    Per-channel weights matter: per-tensor int8 gave question vectors at cosine 0.939-0.967 to the
    float32 ones on 2Wiki, per-channel 0.990-0.994 (``bench retrieval`` prints the figure).

    The quantizer runs in a child process (:mod:`livingrag.models.quantize`) whose working
    directory is a scratch folder beside ``target``, removed afterwards: its shape inference writes
    scratch files into the working directory.
    """
    source, target = Path(source).resolve(), Path(target).resolve()
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with tempfile.TemporaryDirectory(prefix=".quantize-", dir=target.parent) as scratch:
            done = subprocess.run(
                [sys.executable, "-m", "livingrag.models.quantize", str(source), str(tmp)],
                cwd=scratch,
                capture_output=True,
                text=True,
                check=False,
            )
        if done.returncode != 0 or not tmp.exists():
            tail = (done.stderr or done.stdout or "").strip()[-2000:]
            raise ModelUnavailable(f"int8 quantization of {source} failed (exit {done.returncode}): {tail}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


class OnnxEmbedder:
    """Encodes texts into normalised float32 vectors with ONNX Runtime (interface of
    :class:`~livingrag.models.embedder.Embedder`); ``quantized``: the int8 model (queries only:
    passages stay float32, see :func:`quantize_int8`)."""

    def __init__(
        self,
        name: str,
        model_dir: str | Path,
        *,
        batch_size: int = 64,
        cache_dir: str | Path | None = None,
        quantized: bool = False,
    ) -> None:
        self.name = name
        self.quantized = quantized
        self.backend = "onnx-int8" if quantized else "onnx"
        self.batch_size = batch_size
        self.model_dir = Path(model_dir)
        max_len = mean_pooled_layout(self.model_dir)
        if max_len is None:
            raise ModelUnavailable(
                f"embedding model {name!r} is not a mean-pooled sentence-transformers model; the onnx backend "
                "cannot reproduce it (use models.embedding_backend=torch)"
            )
        self.max_seq_length = max_len
        cache = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.") or "model"
        self.float_path = cache / f"{slug}-{_fingerprint(self.model_dir)}.onnx"
        self.onnx_path = self.float_path.with_suffix(".int8.onnx") if quantized else self.float_path
        try:
            from tokenizers import Tokenizer

            # the fast tokenizer's own file: transformers would import torch (~300 MB) to load it
            self.tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
            self.tokenizer.enable_truncation(max_length=max_len)
            self.tokenizer.no_padding()
            if not self.float_path.exists():
                log.info("exporting %s to ONNX at %s", name, self.float_path)
                export_onnx(self.model_dir, self.float_path)
            if quantized and not self.onnx_path.exists():
                log.info("quantizing %s to int8 at %s", name, self.onnx_path)
                quantize_int8(self.float_path, self.onnx_path)
            import onnxruntime  # noqa: F401
        except Exception as exc:  # export and tokenizer loading raise many kinds
            raise ModelUnavailable(f"could not prepare {name!r} for ONNX Runtime ({self.onnx_path}): {exc}") from exc
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()
        self.usage = ModelUsage()
        self.dim = _pooled_dimension(self.model_dir)

    def _session(self, threads: int) -> Any:
        with self._lock:
            s = self._sessions.get(threads)
            if s is None:
                import onnxruntime as ort

                opts = ort.SessionOptions()
                opts.intra_op_num_threads = threads
                opts.inter_op_num_threads = 1
                opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                s = ort.InferenceSession(str(self.onnx_path), opts, providers=["CPUExecutionProvider"])
                self._sessions[threads] = s
            return s

    @staticmethod
    def _arrays(encs: Sequence[Any], *, offsets: bool = False) -> dict[str, np.ndarray]:
        """Model inputs of one batch of tokenizer encodings, right-padded with zeros (and the
        character offsets of every token when asked)."""
        n, width = len(encs), max((len(e.ids) for e in encs), default=0)
        out = {k: np.zeros((n, width), dtype=np.int64) for k in _INPUTS}
        if offsets:
            out["offset_mapping"] = np.zeros((n, width, 2), dtype=np.int64)
        for i, e in enumerate(encs):
            k = len(e.ids)
            out["input_ids"][i, :k] = e.ids
            out["attention_mask"][i, :k] = e.attention_mask
            out["token_type_ids"][i, :k] = e.type_ids
            if offsets:
                out["offset_mapping"][i, :k] = e.offsets
        return out

    def _states(self, enc: dict[str, np.ndarray]) -> np.ndarray:
        """Token states ``(n, tokens, dim)`` of one batch (its run counted in :attr:`usage`)."""
        session = self._session(requested_threads())
        t = time.perf_counter()
        out = np.asarray(session.run(None, {k: enc[k] for k in _INPUTS})[0], dtype=np.float32)
        seconds = time.perf_counter() - t
        with self._lock:
            self.usage.add(int(enc["attention_mask"].sum()), int(enc["attention_mask"].size), seconds)
        return out

    @staticmethod
    def _pool(states: np.ndarray, mask: np.ndarray) -> np.ndarray:
        m = mask[..., None].astype(np.float32)
        v = (states * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        return (v / np.maximum(norms, 1e-12)).astype(np.float32)

    def _batches(self, texts: Sequence[str], batch_size: int | None) -> list[tuple[np.ndarray, list[Any]]]:
        """The texts tokenised, longest first (less padding), in batches of at most ``batch_size``
        texts and :data:`TOKENS_PER_BATCH` padded tokens: a batch's attention tensors grow with
        ``texts x tokens^2``, and ONNX Runtime's memory arena keeps the largest it has seen. Measured
        on 1,264 passages: 64 texts a batch peaked at 1.9 GB, 2,048 tokens at 0.44 GB, as fast."""
        encs = self.tokenizer.encode_batch(list(texts))
        order = np.argsort([-len(e.ids) for e in encs], kind="stable")
        # int8: one text per pass. Dynamic quantization scales a batch's activations together, so a
        # text's vector would depend on the texts beside it (a question's on whether its template
        # came along: cosine 0.994 to itself alone); questions come one or two at a time anyway.
        most = 1 if self.quantized else batch_size or self.batch_size
        out: list[tuple[np.ndarray, list[Any]]] = []
        i = 0
        while i < len(order):
            width = max(1, len(encs[order[i]].ids))  # the longest of the batch comes first
            take = max(1, min(most, TOKENS_PER_BATCH // width))
            idx = order[i : i + take]
            out.append((idx, [encs[j] for j in idx]))
            i += take
        return out

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None, progress: bool = False) -> np.ndarray:
        """Return an ``(n, dim)`` float32 array of unit vectors (zeros for an empty input list)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for idx, encs in self._batches(texts, batch_size):
            enc = self._arrays(encs)
            out[idx] = self._pool(self._states(enc), enc["attention_mask"])
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def encode_with_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]], *, batch_size: int | None = None
    ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """Text vectors and late-chunked span vectors from one forward pass (see
        :meth:`Embedder.encode_with_spans`)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        span_vecs: list[list[np.ndarray | None]] = [[None] * len(s) for s in spans]
        for idx, encs in self._batches(texts, batch_size):
            enc = self._arrays(encs, offsets=True)
            states, mask = self._states(enc), enc["attention_mask"]
            out[idx] = self._pool(states, mask)
            for row, i in enumerate(idx):
                if spans[i]:
                    n = int(mask[row].sum())
                    span_vecs[i] = span_means(states[row, :n], enc["offset_mapping"][row, :n], spans[i])
        return out, span_vecs
