"""The per-query latency bookkeeping of the answer pipeline: named steps in milliseconds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


def elapsed_ms(t: float) -> float:
    """Milliseconds since the :func:`time.perf_counter` reading ``t``."""
    return (time.perf_counter() - t) * 1000.0


class Stopwatch:
    """The latencies of one answer: ``ms`` maps each timed step to its milliseconds, in the order the
    steps first ran; ``start`` is the :func:`time.perf_counter` reading the answer's total counts from."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.ms: dict[str, float] = {}

    def since_start(self, name: str) -> None:
        """Record ``name`` as the time since the start (``setup``: everything before the first step)."""
        self.ms[name] = elapsed_ms(self.start)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block as ``name``; it is recorded also when the block raises."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = elapsed_ms(t)

    def total(self, *, excluding: tuple[str, ...] = ()) -> None:
        """Record ``total`` (since the start) and, when ``excluding`` names steps, ``overhead``: the
        total minus those steps' times."""
        self.ms["total"] = elapsed_ms(self.start)
        if excluding:
            overhead = self.ms["total"]
            for name in excluding:
                overhead -= self.ms[name]
            self.ms["overhead"] = overhead
