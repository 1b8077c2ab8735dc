"""Limits shared by the worker processes of one ``livingrag serve --workers N``.

Without this each worker would keep its own counts, and a tenant capped at
``api.tenant_max_inflight`` questions could have N times as many in flight, and N times its
request rate. The serving command creates one small file under the data folder
(:func:`serving_limit_file`, :meth:`SharedLimitTable.create`); each
worker maps it (:meth:`SharedLimitTable.attach`) and every admission reads and writes it under an
exclusive ``flock`` (and a thread lock, since ``flock`` does not exclude the threads of one
process).

Layout (numpy views on a shared ``mmap``): a header, one row per attached process (its pid), and
``entries`` rows, one per key in use (a tenant id, or :data:`TOTAL_KEY` for the count over every
tenant): the key, the token bucket (tokens, last refill time, the time it is full again) and the
slots held by each process. A process's holdings are its own column, so the slots of a worker that
died (killed, crashed) are given back as soon as someone finds the cap reached and its pid gone,
or when a new worker takes over its row. The clock is ``time.monotonic`` (``CLOCK_MONOTONIC``,
one clock for every process of the machine). An entry is reused once nobody holds a slot under its
key and its bucket is full again; when every entry is busy, admission is not limited (logged once)
rather than refused: the table bounds memory, not tenants.
"""

from __future__ import annotations

import fcntl
import logging
import mmap
import os
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from livingrag.api.fairness import Clock, RateLimiter, bucket_take

log = logging.getLogger(__name__)

SHARED_LIMITS_ENV = "LIVINGRAG_SHARED_LIMITS_FILE"
"""The environment variable through which ``serve --workers N`` hands its workers the table's path."""

TOTAL_KEY = -1
"""The key counting the questions in flight over every tenant (tenant ids are positive)."""

MAGIC = b"LRGLIM01"
HEADER_BYTES = 64
DEFAULT_ENTRIES = 8192
DEFAULT_PROCESSES = 64


class SharedLimitsError(RuntimeError):
    """The shared limit file is missing, not one of ours, or has no free process row."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def _size(entries: int, processes: int) -> int:
    return HEADER_BYTES + 8 * processes + entries * (8 + 8 + 8 + 8 + 4 * processes)


class SharedLimitTable:
    """The mapped table; see the module docstring. One instance per process."""

    def __init__(self, path: Path, *, clock: Clock = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        try:
            self._fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            raise SharedLimitsError(f"shared limit file {self.path} does not exist") from None
        try:
            self._map = mmap.mmap(self._fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except ValueError:
            os.close(self._fd)
            raise SharedLimitsError(f"shared limit file {self.path} is empty") from None
        if len(self._map) < HEADER_BYTES or bytes(self._map[:8]) != MAGIC:
            self._close_map()
            raise SharedLimitsError(f"{self.path} is not a livingrag shared limit file")
        self.entries, self.processes = struct.unpack_from("<qq", self._map, 8)
        if len(self._map) != _size(self.entries, self.processes):
            self._close_map()
            raise SharedLimitsError(f"shared limit file {self.path} has the wrong size")
        e, w = self.entries, self.processes
        off = HEADER_BYTES
        self._pids = np.frombuffer(self._map, dtype=np.int64, count=w, offset=off)
        off += 8 * w
        self._keys = np.frombuffer(self._map, dtype=np.int64, count=e, offset=off)
        off += 8 * e
        self._tokens = np.frombuffer(self._map, dtype=np.float64, count=e, offset=off)
        off += 8 * e
        self._at = np.frombuffer(self._map, dtype=np.float64, count=e, offset=off)
        off += 8 * e
        self._full_at = np.frombuffer(self._map, dtype=np.float64, count=e, offset=off)
        off += 8 * e
        self._held = np.frombuffer(self._map, dtype=np.int32, count=e * w, offset=off).reshape(e, w)
        self._thread_lock = threading.Lock()
        self._row: int | None = None
        self._full_logged = False
        self._unlimited: Counter[int] = Counter()  # slots taken (uncounted) while the table was full

    # -- life cycle --------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, *, entries: int = DEFAULT_ENTRIES, processes: int = DEFAULT_PROCESSES) -> Path:
        """Write a new, empty table at ``path`` (mode 0600) and return the path."""
        if entries < 1 or processes < 1:
            raise ValueError("entries and processes must be >= 1")
        path = Path(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, _size(entries, processes))
            os.pwrite(fd, MAGIC + struct.pack("<qq", entries, processes), 0)
        finally:
            os.close(fd)
        return path

    @classmethod
    def attach(cls, path: Path, *, clock: Clock = time.monotonic) -> SharedLimitTable:
        """Map the table at ``path`` and take a process row: a free one, or one whose process is
        gone (its holdings are given back first)."""
        table = cls(path, clock=clock)
        try:
            table._take_row()
        except BaseException:
            table._close_map()
            raise
        return table

    def _take_row(self) -> None:
        me = os.getpid()
        with self._locked():
            for r in range(self.processes):
                pid = int(self._pids[r])
                if pid == 0 or pid == me or not _pid_alive(pid):
                    self._held[:, r] = 0
                    self._pids[r] = me
                    self._row = r
                    return
        raise SharedLimitsError(f"shared limit file {self.path} has no free row: {self.processes} processes hold it")

    def close(self) -> None:
        """Give back this process's row and holdings, and unmap."""
        if self._row is not None:
            with self._locked():
                self._held[:, self._row] = 0
                self._pids[self._row] = 0
            self._row = None
        self._close_map()

    def _close_map(self) -> None:
        for name in ("_pids", "_keys", "_tokens", "_at", "_full_at", "_held"):
            self.__dict__.pop(name, None)  # the views pin the buffer
        try:
            self._map.close()
        finally:
            os.close(self._fd)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    # -- entries -----------------------------------------------------------------------------

    def _find(self, key: int) -> int | None:
        hit = np.flatnonzero(self._keys == key)
        return int(hit[0]) if hit.size else None

    def _entry(self, key: int, now: float) -> int | None:
        """The entry of ``key``, made on first use from an empty one or an idle one (no slot held,
        bucket full); None when every entry is busy."""
        if key == 0:
            raise ValueError("key 0 marks an empty entry; tenant ids are positive")
        found = self._find(key)
        if found is not None:
            return found
        empty = np.flatnonzero(self._keys == 0)
        if empty.size:
            e = int(empty[0])
        else:
            idle = np.flatnonzero((self._held.sum(axis=1) == 0) & (self._full_at <= now))
            if not idle.size:
                if not self._full_logged:
                    log.warning("shared limit table %s is full (%d keys busy): admitting unlimited", self.path,
                                self.entries)  # fmt: skip
                    self._full_logged = True
                return None
            e = int(idle[0])
        self._keys[e] = key
        self._tokens[e] = np.nan  # a fresh bucket: full on first use
        self._at[e] = now
        self._full_at[e] = 0.0
        self._held[e, :] = 0
        return e

    def _reap(self) -> bool:
        """Give back the holdings of processes that are gone; True when any were found."""
        reaped = False
        for r in range(self.processes):
            pid = int(self._pids[r])
            if pid != 0 and r != self._row and not _pid_alive(pid):
                self._held[:, r] = 0
                self._pids[r] = 0
                reaped = True
        return reaped

    def _room(self, e: int, cap: int) -> bool:
        """Whether entry ``e`` holds fewer than ``cap`` slots; at the cap, once the slots of
        processes that are gone have been given back (:meth:`_reap`)."""
        if int(self._held[e].sum()) < cap:
            return True
        return self._reap() and int(self._held[e].sum()) < cap

    # -- operations --------------------------------------------------------------------------

    def try_hold(self, key: int, cap: int) -> bool:
        """Take one of ``cap`` slots of ``key`` for this process, unless ``cap`` are held over all
        processes (after giving back those of dead processes); True when taken."""
        row = self._require_row()
        with self._locked():
            e = self._entry(key, self._clock())
            if e is None:
                self._unlimited[key] += 1
                return True
            if not self._room(e, cap):
                return False
            self._held[e, row] += 1
            return True

    def release(self, key: int) -> None:
        """Give back one slot of ``key`` taken by this process."""
        row = self._require_row()
        with self._locked():
            e = self._find(key)
            if e is not None and self._held[e, row] > 0:
                self._held[e, row] -= 1
            elif self._unlimited[key] > 0:  # taken while the table was full
                self._unlimited[key] -= 1
                if not self._unlimited[key]:
                    del self._unlimited[key]
            else:
                raise RuntimeError(f"key {key} released a slot this process did not hold")

    def held(self, key: int) -> int:
        """Slots of ``key`` held now over all processes."""
        with self._locked():
            e = self._find(key)
            return 0 if e is None else int(self._held[e].sum())

    def take_token(self, key: int, rate_per_s: float, burst: int) -> float:
        """One request against ``key``'s shared token bucket (:func:`bucket_take`): 0.0 when
        admitted, else the seconds until a token will be there."""
        with self._locked():
            now = self._clock()
            e = self._entry(key, now)
            if e is None:
                return 0.0
            tokens = float(self._tokens[e])
            if np.isnan(tokens):
                tokens = float(burst)
            tokens, wait = bucket_take(tokens, float(self._at[e]), now, rate_per_s, burst)
            self._tokens[e], self._at[e] = tokens, now
            self._full_at[e] = now + (burst - tokens) / rate_per_s
            return wait

    def _require_row(self) -> int:
        if self._row is None:
            raise SharedLimitsError("this process has not attached to the shared limit table")
        return self._row


def serving_limit_file(run_dir: Path, pid: int | None = None) -> Path:
    """Where the serving process ``pid`` (default: this one) keeps its limit table:
    ``run_dir/limits-<pid>``. Tables left by serving processes that are gone (killed before they
    could remove theirs) are removed first."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for old in run_dir.glob("limits-*"):
        suffix = old.name.removeprefix("limits-")
        if suffix.isdigit() and not _pid_alive(int(suffix)):
            old.unlink(missing_ok=True)
    return run_dir / f"limits-{os.getpid() if pid is None else pid}"


class SharedTenantSlots:
    """:class:`~livingrag.api.fairness.TenantSlots` over a :class:`SharedLimitTable`: at most
    ``per_tenant`` of a tenant's questions in flight over every worker."""

    def __init__(self, table: SharedLimitTable, per_tenant: int) -> None:
        if per_tenant < 1:
            raise ValueError("per_tenant must be >= 1")
        self.table, self.per_tenant = table, per_tenant

    def try_acquire(self, tenant_id: int) -> bool:
        return self.table.try_hold(tenant_id, self.per_tenant)

    def release(self, tenant_id: int) -> None:
        self.table.release(tenant_id)

    def held(self, tenant_id: int) -> int:
        return self.table.held(tenant_id)


class SharedTotalSlots:
    """:class:`~livingrag.api.fairness.TotalSlots` over a :class:`SharedLimitTable`: at most
    ``cap`` questions in flight over every worker and tenant."""

    def __init__(self, table: SharedLimitTable, cap: int) -> None:
        if cap < 1:
            raise ValueError("cap must be >= 1")
        self.table, self.cap = table, cap

    def try_acquire(self) -> bool:
        return self.table.try_hold(TOTAL_KEY, self.cap)

    def release(self) -> None:
        self.table.release(TOTAL_KEY)


class SharedRateLimiter(RateLimiter):
    """:class:`~livingrag.api.fairness.TenantRateLimiter` over a :class:`SharedLimitTable`: one
    token bucket per tenant for every worker together (``rate_per_s`` 0: no limit)."""

    def __init__(self, table: SharedLimitTable, rate_per_s: float, burst: int) -> None:
        super().__init__(rate_per_s, burst)
        self.table = table

    def _take(self, tenant_id: int) -> float:
        return self.table.take_token(tenant_id, self.rate_per_s, self.burst)


__all__ = [
    "SHARED_LIMITS_ENV",
    "TOTAL_KEY",
    "SharedLimitTable",
    "SharedLimitsError",
    "SharedRateLimiter",
    "SharedTenantSlots",
    "SharedTotalSlots",
    "serving_limit_file",
]
