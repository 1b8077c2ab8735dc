"""torch's CPU thread count, set per call site.

Query encoding embeds one short text while spaCy runs NER in another thread; on a small machine
two torch threads plus NER oversubscribe the cores, and torch's OpenMP workers then spin instead
of working (measured here: one question 117 ms with 1 thread vs 559 ms with 2 under load).
Indexing embeds large batches and wants every core. torch keeps the OpenMP count per thread but
MKL's globally, so each caller sets what it needs right before it encodes.
"""

from __future__ import annotations

import os
import sys
import threading

_DEFAULT = max(1, os.cpu_count() or 1)
_local = threading.local()


def requested_threads() -> int:
    """The thread count this thread last asked for with :func:`set_torch_threads` (default: one
    per core)."""
    return int(getattr(_local, "threads", _DEFAULT))


def default_threads() -> int:
    """torch's own default: one thread per core."""
    return _DEFAULT


def set_torch_threads(n: int | None) -> None:
    """Use ``n`` torch threads from now on in this thread (None: the default); the ONNX encoder
    reads the same request (:func:`requested_threads`)."""
    n = n or _DEFAULT
    _local.threads = n
    if "torch" not in sys.modules:  # the ONNX backend runs without torch: importing it costs ~300 MB
        return
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


def limit_blas_threads(n: int = 1) -> None:
    """Cap numpy's BLAS (OpenBLAS) threads for the whole process.

    The retriever's products are small (a 6k x 384 matrix-vector product takes 0.2 ms); with two
    BLAS threads OpenBLAS keeps its second thread spinning after every call, which on a two-core
    machine takes a core from the query embedding (measured: ~100 ms of CPU burnt per 200 ms
    idle). Indexing does its heavy work in torch, which is not affected.
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n, user_api="blas")
