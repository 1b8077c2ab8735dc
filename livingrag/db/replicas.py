"""Reads from PostgreSQL hot standbys (``db.read_urls``): which server answers a read.

A :class:`ReplicaSet` holds one :class:`Standby` per read URL, each with two engines built like
the application's (the same role handling and tenant scope, see
:class:`~livingrag.db.engine.Database`): an autocommit engine for one-round-trip reads
(:meth:`Database.tenant_read`) and a session engine for reads that take a snapshot (graph loads).
Only reads the question path makes are routed here (the corpus version and preset checks, graph
loads, experience matching); every write goes to the primary.

Which standby: one that is up and whose lag is within ``db.max_replica_lag_ms``, in turn. Three
things keep a read off a standby:

* **down**: a standby that could not be reached, lost its connection or is no longer in recovery is
  skipped at once and tried again after ``db.replica_retry_s``; the read that met the failure is
  sent again, to another standby or the primary (a read is safe to send twice).
* **lag**: a monitor thread (started on first use) reads, every :data:`CHECK_INTERVAL_S`, the
  primary's WAL position and each standby's replay position, replay timestamp and pause state. A
  standby at the primary's position has lag 0; one behind it has the smaller of two upper bounds on
  how old its data is: the time since the primary was last seen at a position the standby has
  replayed, and the age of the last transaction it replayed (``pg_last_xact_replay_timestamp``,
  which alone would call an idle, caught-up standby late).
* **read your writes**: after a write transaction of a tenant (:meth:`note_write`, from the primary's
  ``pg_current_wal_insert_lsn()`` right after the commit), that tenant's reads in this process need
  a standby that has replayed that position; the read waits up to ``db.read_your_writes_wait_ms``
  (probing the standbys' ``pg_last_wal_replay_lsn()``), then goes to the primary. A requirement
  given by :meth:`requirement` (a question with ``min_corpus_version``: a check on the standby's
  rows, so it holds for writes made by any process) is met the same way, and the server chosen
  answers every read of that scope.

The lag state is cached: a read costs nothing beyond its own round trip unless it must wait.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from livingrag.errors import DatabaseUnavailable, ServerUnreachable

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.25
"""How often the monitor reads the primary's WAL position and each standby's replay state."""

Rows = list[tuple[Any, ...]]
RoundTrip = Callable[[Engine, Mapping[str, str], str, Mapping[str, Any]], Rows]
"""Runs one statement (after the ``set_config`` scope) on an autocommit connection of an engine."""

_XLOG_BLCKSZ = 8192
_PAGE_HEADERS = (24, 40)  # the short and the long (segment start) WAL page header

PRIMARY_LSN_SQL = "SELECT pg_current_wal_lsn()::text"
WRITE_LSN_SQL = "SELECT pg_current_wal_insert_lsn()::text"
REPLAY_LSN_SQL = "SELECT pg_last_wal_replay_lsn()::text"
STANDBY_STATE_SQL = (
    "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, "
    "(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000)::float8, "
    "pg_is_wal_replay_paused()"
)


def parse_lsn(text: str | None) -> int | None:
    """A ``pg_lsn`` as text (``16/B374D848``) as an integer (None stays None)."""
    if text is None:
        return None
    hi, _, lo = str(text).partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def format_lsn(lsn: int | None) -> str | None:
    """An integer WAL position as PostgreSQL writes it (``16/B374D848``)."""
    return None if lsn is None else f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def write_position(insert_lsn: int) -> int:
    """The position a standby must replay to hold everything inserted before ``insert_lsn`` (the
    primary's ``pg_current_wal_insert_lsn()``): at the start of a WAL page that function points
    past the page header, where no replayed record ends, so the page boundary is used instead."""
    offset = insert_lsn % _XLOG_BLCKSZ
    return insert_lsn - offset if offset in _PAGE_HEADERS else insert_lsn


def lag_ms(
    replay_lsn: int | None,
    replay_age_ms: float | None,
    primary_lsn: int | None,
    samples: Sequence[tuple[float, int]],
    now: float,
) -> float | None:
    """How old a standby's data may be, in ms (None: not known).

    0 when it has replayed ``primary_lsn`` (the primary's position just read). Otherwise the smaller
    of two upper bounds: the time since the newest sample ``(monotonic time, primary position)``
    whose position the standby has replayed (it holds everything the primary held then), and
    ``replay_age_ms``, the age of the last transaction it replayed (it holds everything committed
    before it); infinite with neither."""
    if replay_lsn is None or primary_lsn is None:
        return None
    if replay_lsn >= primary_lsn:
        return 0.0
    bounds = []
    for t, lsn in reversed(samples):
        if lsn <= replay_lsn:
            bounds.append(max(0.0, (now - t) * 1000.0))
            break
    if replay_age_ms is not None:
        bounds.append(max(0.0, float(replay_age_ms)))
    return min(bounds) if bounds else float("inf")


@dataclass(eq=False)
class Standby:
    """One read URL: its engines and what the last check found."""

    index: int
    shown: str
    """The URL with its password masked (what status and errors print)."""
    read_engine: Engine
    session_engine: Engine
    sessions: sessionmaker[Session]
    checked: bool = False
    up: bool = False
    retry_at: float = 0.0
    error: str | None = None
    replay_lsn: int | None = None
    replay_age_ms: float | None = None
    paused: bool = False
    lag_ms: float | None = None
    reads: int = 0
    """Reads this standby answered in this process."""

    def state(self, max_lag_ms: float) -> str:
        """``unknown`` (not checked yet), ``down``, ``lagging`` (past the lag bound) or ``up``."""
        if not self.checked and self.error is None:
            return "unknown"
        if not self.up:
            return "down"
        if self.lag_ms is not None and self.lag_ms > max_lag_ms:
            return "lagging"
        return "up"


@dataclass(eq=False)
class _Requirement:
    """What the reads of one scope (:meth:`ReplicaSet.requirement`) need of the server answering them."""

    owner: ReplicaSet
    tenant_id: int
    check: Callable[[Engine], bool]
    decided: bool = False
    chosen: Standby | None = None


_requirement: contextvars.ContextVar[_Requirement | None] = contextvars.ContextVar(
    "livingrag_read_requirement", default=None
)


@dataclass
class _Counters:
    primary: Counter[str] = field(default_factory=Counter)
    """Reads sent to the primary, by reason."""


class ReplicaSet:
    """The standbys of one database and the routing of its reads (module docstring)."""

    def __init__(
        self,
        urls: Sequence[tuple[str, str]],
        *,
        make_engine: Callable[[str, bool], Engine],
        round_trip: RoundTrip,
        primary_engine: Callable[[], Engine],
        max_lag_ms: int,
        wait_ms: int,
        retry_s: float,
        check_interval_s: float = CHECK_INTERVAL_S,
    ) -> None:
        """``urls``: (URL, URL as shown) per standby; ``make_engine(url, autocommit)`` builds an
        engine as the application's are built; ``round_trip`` runs one statement on an autocommit
        engine (raising :class:`ServerUnreachable` when no connection could be had or it was lost);
        ``primary_engine()`` is the primary's autocommit engine."""
        self.standbys: list[Standby] = []
        for i, (url, shown) in enumerate(urls):
            session_engine = make_engine(url, False)
            self.standbys.append(
                Standby(
                    index=i,
                    shown=shown,
                    read_engine=make_engine(url, True),
                    session_engine=session_engine,
                    sessions=sessionmaker(session_engine, expire_on_commit=False),
                )
            )
        self._round_trip = round_trip
        self._primary_engine = primary_engine
        self.max_lag_ms = max_lag_ms
        self.wait_s = wait_ms / 1000.0
        self.retry_s = retry_s
        self.check_interval_s = check_interval_s
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._floors: dict[int, int] = {}
        self._global_floor = 0
        self._samples: deque[tuple[float, int]] = deque()
        self.primary_lsn: int | None = None
        self._rr = itertools.count()
        self._gave_up: tuple[int, float] = (0, 0.0)
        """(position, when): the last read-your-writes wait that timed out."""
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._monitor_pid: int | None = None
        self.counters = _Counters()

    # ------------------------------------------------------------------ monitor

    def start(self) -> None:
        """Check every standby now and keep checking them on a thread of this process (idempotent;
        after a fork the child starts its own thread, on new connections)."""
        if self._monitor_pid == os.getpid():
            return
        with self._start_lock:
            if self._monitor_pid == os.getpid() or self._stop.is_set():
                return
            if self._monitor_pid is not None:  # inherited from the parent of a fork: its connections are the parent's
                for s in self.standbys:
                    s.read_engine.dispose(close=False)
                    s.session_engine.dispose(close=False)
            self.check_once()
            monitor = threading.Thread(target=self._watch, name="livingrag-replica-monitor", daemon=True)
            monitor.start()
            self._monitor, self._monitor_pid = monitor, os.getpid()

    def _watch(self) -> None:
        while not self._stop.wait(self.check_interval_s):
            try:
                self.check_once()
            except Exception as exc:  # the monitor must outlive any one failure
                log.warning("read standby check failed: %s", exc)

    def check_once(self) -> None:
        """Read the primary's WAL position and each standby's state (a standby that is down only
        once its retry time has come), and drop read-your-writes floors every standby has passed."""
        now = time.monotonic()
        primary_lsn = None
        try:
            primary_lsn = parse_lsn(self._round_trip(self._primary_engine(), {}, PRIMARY_LSN_SQL, {})[0][0])
        except DatabaseUnavailable as exc:
            log.debug("primary WAL position unavailable: %s", exc)
        with self._lock:
            if primary_lsn is not None:
                self.primary_lsn = primary_lsn
                self._samples.append((now, primary_lsn))
                horizon = max(60.0, 3 * self.max_lag_ms / 1000.0)
                while len(self._samples) > 1 and self._samples[0][0] < now - horizon:
                    self._samples.popleft()
            samples = tuple(self._samples)
        for s in self.standbys:
            if s.checked and not s.up and now < s.retry_at:
                continue
            try:
                rows = self._round_trip(s.read_engine, {}, STANDBY_STATE_SQL, {})
            except DatabaseUnavailable as exc:
                self.mark_down(s, exc)
                continue
            in_recovery, replay, age_ms, paused = rows[0]
            s.checked = True
            if not in_recovery:
                self.mark_down(s, "is not a hot standby (pg_is_in_recovery() is false: promoted, or a primary)")
                continue
            lsn = parse_lsn(replay)
            with self._lock:
                s.replay_lsn = lsn if s.replay_lsn is None or lsn is None else max(s.replay_lsn, lsn)
                s.replay_age_ms = age_ms
                s.paused = bool(paused)
                s.lag_ms = lag_ms(s.replay_lsn, age_ms, primary_lsn, samples, now)
                if not s.up and s.error is not None:
                    log.warning("read standby %s answers again", s.shown)
                s.up, s.error = True, None
        self._prune_floors()

    def mark_down(self, s: Standby, reason: BaseException | str) -> None:
        """Skip ``s`` until ``db.replica_retry_s`` from now (its pooled connections are dropped)."""
        text = reason if isinstance(reason, str) else _first_line(reason)
        with self._lock:
            was_up = s.up or not s.checked
            s.checked, s.up, s.error = True, False, text
            s.retry_at = time.monotonic() + self.retry_s
        if was_up:
            log.warning("read standby %s skipped for %.0f s: %s", s.shown, self.retry_s, text)
        s.read_engine.dispose(close=False)
        s.session_engine.dispose(close=False)

    def close(self) -> None:
        """Stop the monitor and close the standbys' connections."""
        self._stop.set()
        monitor = self._monitor
        if monitor is not None and monitor.is_alive() and monitor is not threading.current_thread():
            monitor.join(timeout=5)
        self.dispose()

    def dispose(self) -> None:
        """Close the standbys' pooled connections (new ones connect on demand)."""
        for s in self.standbys:
            s.read_engine.dispose()
            s.session_engine.dispose()

    # ------------------------------------------------------------------ read your writes

    def note_write(self, tenant_id: int | None, insert_lsn: int) -> None:
        """A write of ``tenant_id`` (None: of every tenant, e.g. the owner's maintenance) committed
        before the primary's insert position ``insert_lsn``: that tenant's later reads need it."""
        lsn = write_position(insert_lsn)
        with self._lock:
            if tenant_id is None:
                self._global_floor = max(self._global_floor, lsn)
            elif lsn > self._floors.get(tenant_id, 0):
                self._floors[tenant_id] = lsn

    def floor(self, tenant_id: int | None) -> int:
        """The WAL position ``tenant_id``'s reads need (0: none)."""
        own = self._floors.get(tenant_id, 0) if tenant_id is not None else 0
        return max(own, self._global_floor)

    def _prune_floors(self) -> None:
        """Forget floors every standby has replayed (positions only grow); a standby never seen
        keeps them all."""
        with self._lock:
            if any(s.replay_lsn is None for s in self.standbys):
                return
            low = min(s.replay_lsn or 0 for s in self.standbys)
            for tenant in [t for t, lsn in self._floors.items() if lsn <= low]:
                del self._floors[tenant]
            if self._global_floor <= low:
                self._global_floor = 0

    @contextmanager
    def requirement(self, tenant_id: int, check: Callable[[Engine], bool]) -> Iterator[None]:
        """Within this scope, ``tenant_id``'s reads go to a standby on which ``check(engine)`` holds
        (waiting up to ``db.read_your_writes_wait_ms`` for one), else to the primary; the server
        chosen by the first read answers the scope's other reads too."""
        token = _requirement.set(_Requirement(self, tenant_id, check))
        try:
            yield
        finally:
            _requirement.reset(token)

    # ------------------------------------------------------------------ routing

    def usable(self, exclude: Sequence[Standby] = ()) -> list[Standby]:
        """Standbys that are up, within the lag bound and not in ``exclude``."""
        return [
            s for s in self.standbys if s.up and s not in exclude and (s.lag_ms is None or s.lag_ms <= self.max_lag_ms)
        ]

    def route(self, tenant_id: int | None, exclude: Sequence[Standby] = ()) -> Standby | None:
        """The standby that answers a read of ``tenant_id`` (None: the primary)."""
        self.start()
        req = _requirement.get()
        if req is not None and (req.owner is not self or req.tenant_id != tenant_id):
            req = None
        if req is not None and req.decided and (req.chosen is None or req.chosen in self.usable(exclude)):
            if req.chosen is None:
                self.counters.primary["requirement"] += 1
            return req.chosen
        candidates = self.usable(exclude)
        if not candidates:
            self.counters.primary["no_usable_standby"] += 1
            chosen = None
        else:
            start = next(self._rr) % len(candidates)
            chosen = self._first_ready(candidates[start:] + candidates[:start], self.floor(tenant_id), req)
        if req is not None:
            req.decided, req.chosen = True, chosen
        return chosen

    def _first_ready(self, ordered: list[Standby], need: int, req: _Requirement | None) -> Standby | None:
        """The first of ``ordered`` that has replayed ``need`` and meets ``req``: from the cached
        state first, then probing them until ``db.read_your_writes_wait_ms`` has passed. A standby
        whose replay is paused short of ``need`` is not waited for, and once a wait for a position
        timed out, reads needing no more than it do not wait again for as long as a wait lasts (they
        would most likely time out the same way: every read of one question would pay the whole
        wait)."""
        if not need and req is None:
            return ordered[0]
        now = time.monotonic()
        gave_up_lsn, gave_up_at = self._gave_up
        wait = not (req is None and need <= gave_up_lsn and now - gave_up_at < self.wait_s)
        deadline = now + (self.wait_s if wait else 0.0)
        delay = 0.002
        for attempt in itertools.count():
            for s in ordered:
                if s.up and self._ready(s, need, req, probe=attempt > 0):
                    return s
            remaining = deadline - time.monotonic()
            waitable = [s for s in ordered if s.up and not (s.paused and (s.replay_lsn or 0) < need)]
            if not wait or remaining <= 0 or not waitable:
                break
            if attempt > 0:
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, 0.05)
        if req is None:
            self.counters.primary["read_your_writes"] += 1
            if wait:
                self._gave_up = (need, time.monotonic())
        else:
            self.counters.primary["requirement"] += 1
        return None

    def _ready(self, s: Standby, need: int, req: _Requirement | None, *, probe: bool) -> bool:
        """Whether ``s`` has replayed ``need`` (probing its position when ``probe`` and the cached
        one is short) and meets ``req``; a standby that fails the probe is marked down."""
        if need and (s.replay_lsn or 0) < need:
            if not probe or (s.paused and s.replay_lsn is not None):
                return False
            try:
                lsn = parse_lsn(self._round_trip(s.read_engine, {}, REPLAY_LSN_SQL, {})[0][0])
            except ServerUnreachable as exc:
                self.mark_down(s, exc)
                return False
            except DatabaseUnavailable:
                return False
            if lsn is not None:
                with self._lock:
                    s.replay_lsn = max(s.replay_lsn or 0, lsn)
            if (lsn or 0) < need:
                return False
        if req is None:
            return True
        try:
            return req.check(s.read_engine)
        except ServerUnreachable as exc:
            self.mark_down(s, exc)
        except DatabaseUnavailable:
            pass
        return False

    def read(
        self,
        tenant_id: int | None,
        scope: Mapping[str, str],
        statement: str,
        params: Mapping[str, Any],
        on_primary: Callable[[], Rows],
    ) -> Rows:
        """Run one read-only statement on the standby :meth:`route` chooses; a standby that fails
        is marked down (when it could not be reached) and the read is sent to the next choice, at
        last to the primary (``on_primary``)."""
        tried: list[Standby] = []
        while True:
            s = self.route(tenant_id, exclude=tried)
            if s is None:
                return on_primary()
            try:
                rows = self._round_trip(s.read_engine, scope, statement, params)
            except ServerUnreachable as exc:
                self.mark_down(s, exc)
                tried.append(s)
                continue
            except DatabaseUnavailable as exc:  # a timeout or a conflict with recovery: once more elsewhere
                log.info("read on standby %s failed, sent elsewhere: %s", s.shown, exc)
                tried.append(s)
                continue
            s.reads += 1
            return rows

    # ------------------------------------------------------------------ status

    def status(self) -> list[dict[str, Any]]:
        """Each standby: its URL (password masked), state (``up``, ``lagging``, ``down``,
        ``unknown``), lag in ms, replay position, whether replay is paused, the last error, the
        seconds until a down standby is tried again and the reads it answered."""
        now = time.monotonic()
        out = []
        for s in self.standbys:
            state = s.state(self.max_lag_ms)
            lag = s.lag_ms
            out.append(
                {
                    "url": s.shown,
                    "state": state,
                    "lag_ms": None if lag is None else (round(lag, 1) if lag != float("inf") else None),
                    "replay_lsn": format_lsn(s.replay_lsn),
                    "replay_paused": s.paused,
                    "error": s.error,
                    "retry_in_s": round(max(0.0, s.retry_at - now), 1) if state == "down" else None,
                    "reads": s.reads,
                }
            )
        return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = [
    "CHECK_INTERVAL_S",
    "ReplicaSet",
    "Standby",
    "format_lsn",
    "lag_ms",
    "parse_lsn",
    "write_position",
]
