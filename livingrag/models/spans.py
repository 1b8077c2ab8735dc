"""Late chunking: a span's vector from the contextual token vectors of the text it lies in."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def span_means(tokens: np.ndarray, offsets: np.ndarray, spans: Sequence[tuple[int, int]]) -> list[np.ndarray | None]:
    """For each character span ``[a, b)``: ``normalize(mean of the token vectors t_i whose characters
    lie inside it)``, over the real tokens (offsets ``start < end``; special tokens have ``(0, 0)``).
    A span with no such token (cut off by the model's maximum length) gets None, as does one whose
    mean is the zero vector."""
    offs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    vecs = np.asarray(tokens, dtype=np.float32)
    real = offs[:, 1] > offs[:, 0]
    out: list[np.ndarray | None] = []
    for a, b in spans:
        sel = real & (offs[:, 0] >= a) & (offs[:, 1] <= b)
        if not sel.any():
            out.append(None)
            continue
        v = vecs[sel].mean(axis=0)
        norm = float(np.linalg.norm(v))
        out.append((v / norm).astype(np.float32) if norm > 0 else None)
    return out
