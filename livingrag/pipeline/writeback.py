"""The write-back worker: runs experience write-back off the answer path.

Items are processed in arrival order per key (tenant, corpus); different keys may run in
parallel on different threads. A full queue drops the new item and reports it, so answering
never blocks on the verifier. ``flush()`` waits until everything submitted so far is done and
``close()`` drains the queue before stopping.

With a ``batch_handler``, a thread hands it everything its queue holds when it wakes (up to
``max_batch`` items, in arrival order), so a backlog is written in few transactions.
"""

from __future__ import annotations

import enum
import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class _Stop(enum.Enum):
    """The sentinel that stops a worker thread (an enum member, so ``is _STOP`` narrows the type)."""

    STOP = "stop"


_STOP = _Stop.STOP


class WritebackWorker(Generic[T]):
    """A small pool of threads; each key is always served by the same thread (FIFO per key)."""

    def __init__(
        self,
        handler: Callable[[T], None] | None = None,
        *,
        batch_handler: Callable[[list[T]], None] | None = None,
        max_batch: int = 64,
        threads: int = 1,
        maxsize: int = 1000,
        on_drop: Callable[[T, str], None] | None = None,
        on_error: Callable[[T, BaseException], None] | None = None,
        name: str = "writeback",
    ) -> None:
        if threads < 1:
            raise ValueError("threads must be >= 1")
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        if (handler is None) == (batch_handler is None):
            raise ValueError("give one of handler (item by item) and batch_handler")
        self._handler = handler
        """Handles one item at a time (when there is no ``batch_handler``)."""
        self._batch_handler = batch_handler
        """Handles what a thread's queue holds at once."""
        self._max_batch = max_batch
        self._on_drop = on_drop
        self._on_error = on_error
        self._queues: list[queue.Queue[T | _Stop]] = [queue.Queue(maxsize=maxsize) for _ in range(threads)]
        self._pending = 0
        self._cond = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._run, args=(q,), name=f"{name}-{i}", daemon=True)
            for i, q in enumerate(self._queues)
        ]
        for t in self._threads:
            t.start()

    def _slot(self, key: Hashable) -> queue.Queue[T | _Stop]:
        h = zlib.crc32(repr(key).encode())
        return self._queues[h % len(self._queues)]

    def submit(self, key: Hashable, item: T) -> bool:
        """Queue ``item``; returns False (and reports a drop) when the queue is full or closed."""
        with self._cond:
            if self._closed:
                reason = "write-back worker is closed"
            else:
                reason = ""
                self._pending += 1
        if reason:
            self._drop(item, reason)
            return False
        try:
            self._slot(key).put_nowait(item)
        except queue.Full:
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()
            self._drop(item, "write-back queue is full")
            return False
        return True

    def _drop(self, item: T, reason: str) -> None:
        log.warning("write-back candidate dropped: %s", reason)
        if self._on_drop is not None:
            try:
                self._on_drop(item, reason)
            except Exception:
                log.exception("on_drop callback failed")

    def _run(self, q: queue.Queue[T | _Stop]) -> None:
        while True:
            item = q.get()
            if item is _STOP:
                return
            batch, stop = self._take_batch(q, item)
            try:
                if self._batch_handler is not None:
                    self._batch_handler(batch)
                else:
                    assert self._handler is not None
                    self._handler(item)
            except BaseException as exc:  # a failing write-back must never kill the worker
                log.exception("write-back failed")
                if self._on_error is not None:
                    for failed in batch:
                        try:
                            self._on_error(failed, exc)
                        except Exception:
                            log.exception("on_error callback failed")
            finally:
                with self._cond:
                    self._pending -= len(batch)
                    self._cond.notify_all()
            if stop:
                return

    def _take_batch(self, q: queue.Queue[T | _Stop], first: T) -> tuple[list[T], bool]:
        """``first`` and, with a batch handler, what else ``q`` holds now (up to ``max_batch`` in
        all); whether the stop sentinel was met behind them."""
        batch = [first]
        if self._batch_handler is None:
            return batch, False
        while len(batch) < self._max_batch:
            try:
                nxt = q.get_nowait()
            except queue.Empty:
                break
            if nxt is _STOP:
                return batch, True
            batch.append(nxt)
        return batch, False

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every item submitted so far is processed; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending > 0:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float | None = None) -> bool:
        """Stop accepting items, drain the queue, stop the threads. Returns whether it drained in time."""
        with self._cond:
            if self._closed:
                return True
            self._closed = True
        drained = self.flush(timeout)
        for q in self._queues:
            q.put(_STOP)
        for t in self._threads:
            t.join(timeout=5)
        return drained
