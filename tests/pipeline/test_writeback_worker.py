"""The write-back worker: per-key order, parallel keys, drops when full, flush and drain."""

from __future__ import annotations

import threading
import time

from livingrag.pipeline.writeback import WritebackWorker


def test_fifo_per_key_and_flush() -> None:
    seen: list[tuple[str, int]] = []
    lock = threading.Lock()

    def handle(item: tuple[str, int]) -> None:
        time.sleep(0.001)
        with lock:
            seen.append(item)

    w: WritebackWorker[tuple[str, int]] = WritebackWorker(handle, threads=3)
    for i in range(50):
        for key in ("a", "b", "c", "d"):
            assert w.submit(key, (key, i))
    assert w.flush(timeout=30)
    assert w.pending == 0
    for key in ("a", "b", "c", "d"):
        assert [i for k, i in seen if k == key] == list(range(50))
    w.close()


def test_full_queue_drops_and_reports() -> None:
    gate = threading.Event()
    dropped: list[tuple[int, str]] = []

    def handle(item: int) -> None:
        gate.wait(10)

    w: WritebackWorker[int] = WritebackWorker(handle, threads=1, maxsize=2, on_drop=lambda i, r: dropped.append((i, r)))
    results = [w.submit("k", i) for i in range(6)]
    # one item is being handled, two wait in the queue, the rest are dropped
    time.sleep(0.05)
    assert results.count(True) >= 2
    assert all(r == "write-back queue is full" for _, r in dropped)
    assert len(dropped) == results.count(False) and dropped
    gate.set()
    assert w.flush(timeout=10)
    w.close()


def test_failing_handler_does_not_stop_the_worker() -> None:
    done: list[int] = []
    errors: list[int] = []

    def handle(item: int) -> None:
        if item % 2:
            raise RuntimeError("verifier exploded")
        done.append(item)

    w: WritebackWorker[int] = WritebackWorker(handle, on_error=lambda i, e: errors.append(i))
    for i in range(6):
        w.submit("k", i)
    assert w.flush(timeout=10)
    assert done == [0, 2, 4] and errors == [1, 3, 5]
    w.close()


def test_close_drains_then_refuses() -> None:
    done: list[int] = []
    dropped: list[int] = []

    def work(i: int) -> None:
        time.sleep(0.01)
        done.append(i)

    w: WritebackWorker[int] = WritebackWorker(work, on_drop=lambda i, r: dropped.append(i))
    for i in range(10):
        w.submit("k", i)
    assert w.close(timeout=10)
    assert done == list(range(10))
    assert not w.submit("k", 99)
    assert dropped == [99]


def test_flush_timeout() -> None:
    gate = threading.Event()

    def work(i: int) -> None:
        gate.wait(10)

    w: WritebackWorker[int] = WritebackWorker(work)
    w.submit("k", 1)
    assert w.flush(timeout=0.05) is False
    gate.set()
    assert w.flush(timeout=10)
    w.close()


def test_a_backlog_is_handed_over_in_batches_in_order() -> None:
    """With a batch handler, what waits in the queue when the thread wakes is handed over at once
    (up to max_batch), in arrival order; flush counts every item; close still drains."""
    gate, started = threading.Event(), threading.Event()
    batches: list[list[int]] = []

    def handle_batch(items: list[int]) -> None:
        started.set()
        gate.wait(10)
        batches.append(list(items))

    w: WritebackWorker[int] = WritebackWorker(batch_handler=handle_batch, max_batch=4)
    assert w.submit("k", 0)
    assert started.wait(10)  # the first item is being handled alone; the next nine wait
    for i in range(1, 10):
        assert w.submit("k", i)
    gate.set()
    assert w.flush(timeout=10) and w.pending == 0
    assert [i for b in batches for i in b] == list(range(10))
    assert batches[0] == [0] and batches[1] == [1, 2, 3, 4] and all(1 <= len(b) <= 4 for b in batches)
    assert w.submit("k", 10)
    assert w.close(timeout=10) and batches[-1] == [10]


def test_a_failing_batch_reports_each_of_its_items() -> None:
    errors: list[int] = []
    w: WritebackWorker[int] = WritebackWorker(
        batch_handler=lambda items: (_ for _ in ()).throw(RuntimeError("database gone")),
        on_error=lambda i, e: errors.append(i),
    )
    for i in range(5):
        w.submit("k", i)
    assert w.flush(timeout=10) and sorted(errors) == [0, 1, 2, 3, 4]
    w.close()


def test_max_batch_is_checked() -> None:
    import pytest

    with pytest.raises(ValueError, match="max_batch"):
        WritebackWorker(batch_handler=lambda items: None, max_batch=0)
    with pytest.raises(ValueError, match="one of handler"):
        WritebackWorker(lambda i: None, batch_handler=lambda items: None)
    with pytest.raises(ValueError, match="one of handler"):
        WritebackWorker()
