"""The periodic flusher: flushes on its interval once started, and once more at close."""

from __future__ import annotations

import threading
import time

import pytest

from livingrag.experience.flusher import PeriodicFlusher


def test_flushes_on_its_interval_once_started_and_once_more_at_close() -> None:
    calls: list[float] = []
    twice = threading.Event()

    def flush() -> None:
        calls.append(time.monotonic())
        if len(calls) >= 2:
            twice.set()

    f = PeriodicFlusher(flush, 0.02, name="t-flusher")
    time.sleep(0.1)
    assert calls == []  # not started: no thread, no flush
    f.start()
    f.start()  # idempotent: one thread
    assert twice.wait(10)
    assert [t.name for t in threading.enumerate()].count("t-flusher") == 1
    f.close()
    n = len(calls)
    assert f.closed and not any(t.name == "t-flusher" for t in threading.enumerate())
    time.sleep(0.1)
    assert len(calls) == n  # stopped
    f.start()  # a closed flusher does not start again
    time.sleep(0.1)
    assert len(calls) == n


def test_close_without_start_flushes_once() -> None:
    calls: list[int] = []
    f = PeriodicFlusher(lambda: calls.append(1), 5, name="t-idle")
    f.close()
    assert calls == [1]


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s must be > 0, got 0"):
        PeriodicFlusher(lambda: None, 0, name="x")
