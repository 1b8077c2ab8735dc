"""A background flusher: a daemon thread that calls ``flush()`` every ``interval_s`` seconds.

Shared by the batched writers of the experience layer (use counts, dropped decisions). The thread
starts on the first :meth:`PeriodicFlusher.start` and stops at :meth:`PeriodicFlusher.close`, which
then flushes once more, so that a clean close writes everything pending.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class PeriodicFlusher:
    """Calls ``flush`` every ``interval_s`` seconds on a thread of its own, once started."""

    def __init__(self, flush: Callable[[], object], interval_s: float, *, name: str) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self._flush = flush
        self.interval_s = interval_s
        self.name = name
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.closed = False

    def start(self) -> None:
        """Start the thread unless it runs (or the flusher is closed)."""
        with self._lock:
            if self._thread is None and not self.closed:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self.closed:
            self._wake.wait(self.interval_s)
            self._wake.clear()
            self._flush()

    def close(self, timeout: float = 30) -> None:
        """Stop the thread (waiting up to ``timeout`` seconds for a flush in progress), then flush once more."""
        with self._lock:
            self.closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(timeout=timeout)
        self._flush()
