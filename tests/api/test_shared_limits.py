"""The limit table shared by ``serve --workers N``: exact bucket arithmetic on an injected clock, the
caps counted over processes (real child processes), the slots of a killed process given back,
entries reused when idle, and clear errors for a missing, foreign or full file."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from livingrag.api.fairness import TokenBucket
from livingrag.api.shared_limits import (
    TOTAL_KEY,
    SharedLimitsError,
    SharedLimitTable,
    SharedRateLimiter,
    SharedTenantSlots,
    SharedTotalSlots,
    serving_limit_file,
)


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def table_path(tmp_path: Path) -> Path:
    return SharedLimitTable.create(tmp_path / "limits", entries=16, processes=4)


def test_the_shared_bucket_computes_what_the_in_process_one_does(table_path: Path) -> None:
    clock = FakeClock()
    table = SharedLimitTable.attach(table_path, clock=clock)
    local = TokenBucket(2.0, 3, clock=clock)
    try:
        waits = []
        for dt in (0, 0, 0, 0, 0.25, 0.25, 10, 0):
            clock.t += dt
            waits.append((table.take_token(5, 2.0, 3), local.take()))
        assert [s for s, _ in waits] == pytest.approx([w for _, w in waits])
        assert [s for s, _ in waits] == pytest.approx([0.0, 0.0, 0.0, 0.5, 0.25, 0.0, 0.0, 0.0])
    finally:
        table.close()


def test_the_rate_limiter_refuses_naming_the_settings_and_is_per_tenant(table_path: Path) -> None:
    clock = FakeClock()
    table = SharedLimitTable.attach(table_path, clock=clock)
    try:
        rl = SharedRateLimiter(table, 0.5, 2)
        assert rl.admit(1) is None and rl.admit(1) is None
        refusal = rl.admit(1)
        assert refusal is not None and refusal.retry_after_s == 2
        assert "api.tenant_rate_per_s" in refusal.message and "0.5/s" in refusal.message
        assert rl.admit(2) is None
        clock.t += 2.0
        assert rl.admit(1) is None
        assert SharedRateLimiter(table, 0, 1).admit(1) is None  # 0: off
    finally:
        table.close()


def test_slots_cap_a_key_and_are_given_back(table_path: Path) -> None:
    table = SharedLimitTable.attach(table_path)
    try:
        slots, total = SharedTenantSlots(table, 2), SharedTotalSlots(table, 3)
        assert slots.try_acquire(1) and slots.try_acquire(1) and not slots.try_acquire(1)
        assert slots.try_acquire(2) and slots.held(1) == 2 and slots.held(2) == 1
        slots.release(1)
        assert slots.held(1) == 1 and slots.try_acquire(1)
        assert [total.try_acquire() for _ in range(4)] == [True, True, True, False]
        total.release()
        assert table.held(TOTAL_KEY) == 2
        with pytest.raises(RuntimeError, match="did not hold"):
            slots.release(3)
        with pytest.raises(ValueError, match="key 0"):
            table.try_hold(0, 1)
    finally:
        table.close()


def test_idle_entries_are_reused_and_a_full_table_admits(tmp_path: Path) -> None:
    clock = FakeClock()
    table = SharedLimitTable.attach(SharedLimitTable.create(tmp_path / "t", entries=2, processes=2), clock=clock)
    try:
        assert table.try_hold(1, 1) and table.try_hold(2, 1)
        assert table.try_hold(3, 1) and table.try_hold(3, 1)  # every entry busy: not limited
        assert table.held(3) == 0
        table.release(3)  # taken unlimited: nothing to give back, no error
        table.release(1)  # key 1 is idle now (no slot, no bucket): its entry is reused
        assert table.try_hold(3, 1) and not table.try_hold(3, 1) and table.held(3) == 1
        assert table.take_token(4, 1.0, 2) == 0.0  # key 2 still holds, key 3 holds: unlimited
        table.release(2)
        assert table.take_token(5, 1.0, 2) == 0.0 and table.take_token(5, 1.0, 2) == 0.0
        assert table.take_token(5, 1.0, 2) == pytest.approx(1.0)  # the bucket lives in key 2's old entry
        assert table.try_hold(6, 1)  # key 5's bucket is not full again: nothing idle, so unlimited
        clock.t += 2.0
        assert table.try_hold(6, 1) and not table.try_hold(6, 1)  # now it is, and 6 took it over
    finally:
        table.close()


def _child(path: str, key: int, hold: int, ready: Any, go: Any, exit_cleanly: bool) -> None:
    table = SharedLimitTable.attach(Path(path))
    for _ in range(hold):
        assert table.try_hold(key, 100)
    table.take_token(key, 0.001, 3)
    ready.set()
    go.wait(30)
    if exit_cleanly:
        table.close()
    else:
        os._exit(0)  # no close: its row stays until someone finds the process gone


def _spawn(path: Path, key: int, hold: int, *, exit_cleanly: bool = True) -> tuple[Any, Any]:
    ctx = mp.get_context("spawn")
    ready, go = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_child, args=(str(path), key, hold, ready, go, exit_cleanly))
    proc.start()
    assert ready.wait(60), "the child did not attach"
    return proc, go


def test_caps_and_buckets_count_over_processes(table_path: Path) -> None:
    table = SharedLimitTable.attach(table_path)
    try:
        proc, go = _spawn(table_path, 7, 2)
        assert table.held(7) == 2
        assert table.try_hold(7, 3) and not table.try_hold(7, 3)  # 2 in the child + 1 here
        assert table.take_token(7, 0.001, 3) == 0.0 and table.take_token(7, 0.001, 3) == 0.0
        assert table.take_token(7, 0.001, 3) > 0  # the child took the first of the 3 tokens
        go.set()
        proc.join(30)
        assert proc.exitcode == 0
        assert table.held(7) == 1 and table.try_hold(7, 3)  # closed: its slots are back
    finally:
        table.close()


@pytest.mark.parametrize("how", ["killed", "exited without closing"])
def test_the_slots_of_a_dead_process_are_given_back(table_path: Path, how: str) -> None:
    table = SharedLimitTable.attach(table_path)
    try:
        proc, go = _spawn(table_path, 9, 3, exit_cleanly=False)
        assert table.held(9) == 3 and not table.try_hold(9, 3)
        if how == "killed":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            go.set()
        proc.join(30)
        assert table.try_hold(9, 3)  # the cap was reached, the holder is gone: its slots came back
        assert table.held(9) == 1
    finally:
        table.close()


def test_attaching_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(SharedLimitsError, match="does not exist"):
        SharedLimitTable.attach(tmp_path / "missing")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(SharedLimitsError, match="is empty"):
        SharedLimitTable.attach(tmp_path / "empty")
    (tmp_path / "other").write_bytes(b"x" * 4096)
    with pytest.raises(SharedLimitsError, match="not a livingrag shared limit file"):
        SharedLimitTable.attach(tmp_path / "other")
    path = SharedLimitTable.create(tmp_path / "small", entries=4, processes=1)
    with open(path, "ab") as f:
        f.write(b"\0" * 8)
    with pytest.raises(SharedLimitsError, match="wrong size"):
        SharedLimitTable.attach(path)
    one = SharedLimitTable.create(tmp_path / "one", entries=4, processes=1)
    proc, go = _spawn(one, 1, 1)
    try:
        with pytest.raises(SharedLimitsError, match="no free row"):
            SharedLimitTable.attach(one)
    finally:
        go.set()
        proc.join(30)
    SharedLimitTable.attach(one).close()  # the child closed: its row is free
    with pytest.raises(ValueError, match=">= 1"):
        SharedLimitTable.create(tmp_path / "bad", entries=0)


def test_the_serving_file_lives_in_the_run_folder_and_stale_ones_go(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc, go = _spawn(SharedLimitTable.create(tmp_path / "t", entries=4, processes=2), 1, 1)
    try:
        alive = serving_limit_file(run, proc.pid)
        alive.write_bytes(b"")
    finally:
        go.set()
        proc.join(30)
    gone_pid = proc.pid  # exited and reaped: a table of a serve that is gone
    (run / "limits-notapid").write_bytes(b"")
    (run / f"limits-{os.getppid()}").write_bytes(b"")  # a serve that still runs
    mine = serving_limit_file(run)
    assert mine == run / f"limits-{os.getpid()}"
    assert not (run / f"limits-{gone_pid}").exists()
    assert (run / "limits-notapid").exists() and (run / f"limits-{os.getppid()}").exists()
