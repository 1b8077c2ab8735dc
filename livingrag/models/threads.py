"""torch's CPU thread count, set per call site.

Query encoding embeds one short text while spaCy runs NER in another thread; on a small machine
two torch threads plus NER oversubscribe the cores, and torch's OpenMP workers then spin instead
of working (measured here: one question 117 ms with 1 thread vs 559 ms with 2 under load).
Indexing embeds large batches and wants every core. torch keeps the OpenMP count per thread but
MKL's globally, so each caller sets what it needs right before it encodes.
"""

from __future__ import annotations

import os

_DEFAULT = max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """torch's own default: one thread per core."""
    return _DEFAULT


def set_torch_threads(n: int | None) -> None:
    """Use ``n`` torch threads from now on in this thread (None: the default)."""
    import torch

    n = n or _DEFAULT
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
