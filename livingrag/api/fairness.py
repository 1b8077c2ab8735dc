"""Per-tenant fairness: token-bucket rate limits, in-flight caps and per-corpus index locks.

Everything here is in-process and pure of HTTP: the routes turn a refusal into 429/503 with
``Retry-After`` (:mod:`livingrag.api.deps`, :mod:`livingrag.api.routes.ask`). The clock is
injected (``time.monotonic`` by default) so that the arithmetic is tested with exact values.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

Clock = Callable[[], float]


@dataclass(frozen=True)
class Refusal:
    """Why a tenant's request is refused: the limit's setting name, its value and the wait."""

    limit: str
    value: float
    retry_after_s: int
    message: str


def retry_after_s(wait_s: float) -> int:
    """The ``Retry-After`` value (whole seconds, at least 1) for a wait of ``wait_s`` seconds."""
    return max(1, math.ceil(wait_s - 1e-9))


def bucket_refill(tokens: float, at: float, now: float, rate_per_s: float, burst: int) -> float:
    """The tokens at ``now`` of a bucket that held ``tokens`` at ``at``:
    ``min(burst, tokens + max(0, now - at) * rate)``."""
    return min(float(burst), tokens + max(0.0, now - at) * rate_per_s)


def bucket_take(tokens: float, at: float, now: float, rate_per_s: float, burst: int) -> tuple[float, float]:
    """One request against a token bucket last seen at ``at`` holding ``tokens``.

    Refill: ``t =`` :func:`bucket_refill`; then, when ``t >= 1``, one token is taken and the
    result is ``(t - 1, 0.0)``; otherwise nothing is taken and the result is ``(t, (1 - t) /
    rate)``, the seconds until a token will be there."""
    t = bucket_refill(tokens, at, now, rate_per_s, burst)
    if t >= 1.0:
        return t - 1.0, 0.0
    return t, (1.0 - t) / rate_per_s


def rate_refusal(rate_per_s: float, burst: int, wait_s: float) -> Refusal:
    """The refusal of a request over the tenant's request rate, naming the settings."""
    after = retry_after_s(wait_s)
    return Refusal(
        "api.tenant_rate_per_s",
        rate_per_s,
        after,
        f"this tenant is over its request rate ({rate_per_s:g}/s, burst {burst}: "
        f"api.tenant_rate_per_s, api.tenant_burst); retry in {after} s",
    )


class TokenBucket:
    """A bucket of ``burst`` tokens refilled at ``rate_per_s``; each admitted request takes one.

    :meth:`take` returns 0.0 when a token was taken, otherwise the seconds until one will be there
    (nothing is taken then)."""

    def __init__(self, rate_per_s: float, burst: int, *, clock: Clock = time.monotonic) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be > 0 and burst >= 1")
        self.rate_per_s = float(rate_per_s)
        self.burst = int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = bucket_refill(self._tokens, self._at, now, self.rate_per_s, self.burst)
        self._at = now

    @property
    def tokens(self) -> float:
        """Tokens in the bucket now."""
        self._refill()
        return self._tokens

    def take(self) -> float:
        """Take one token: 0.0 when admitted, else the seconds until the next token
        (:func:`bucket_take`)."""
        now = self._clock()
        self._tokens, wait = bucket_take(self._tokens, self._at, now, self.rate_per_s, self.burst)
        self._at = now
        return wait

    def idle_full(self) -> bool:
        """Whether the bucket is full (it can be forgotten: a new one is the same)."""
        return self.tokens >= self.burst


class RateLimiter:
    """A per-tenant request rate of ``rate_per_s`` with bursts of ``burst`` (``rate_per_s`` 0: no
    limit); subclasses keep the buckets (:meth:`_take`: one request against a tenant's bucket, the
    wait as :func:`bucket_take` computes it)."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate_per_s = float(rate_per_s)
        self.burst = max(1, int(burst))

    @property
    def enabled(self) -> bool:
        return self.rate_per_s > 0

    def admit(self, tenant_id: int) -> Refusal | None:
        """None when ``tenant_id`` may make a request now (a token is taken), else the refusal."""
        if not self.enabled:
            return None
        wait = self._take(tenant_id)
        return None if wait == 0.0 else rate_refusal(self.rate_per_s, self.burst, wait)

    def _take(self, tenant_id: int) -> float:
        raise NotImplementedError


class TenantRateLimiter(RateLimiter):
    """One in-process :class:`TokenBucket` per tenant. Full buckets are forgotten past
    ``max_tenants`` so memory stays bounded."""

    def __init__(self, rate_per_s: float, burst: int, *, clock: Clock = time.monotonic, max_tenants: int = 10_000):
        super().__init__(rate_per_s, burst)
        self._clock = clock
        self._max = max_tenants
        self._buckets: OrderedDict[int, TokenBucket] = OrderedDict()
        self._lock = threading.Lock()

    def _take(self, tenant_id: int) -> float:
        with self._lock:
            bucket = self._buckets.get(tenant_id)
            if bucket is None:
                bucket = self._buckets[tenant_id] = TokenBucket(self.rate_per_s, self.burst, clock=self._clock)
                self._trim()
            self._buckets.move_to_end(tenant_id)
            return bucket.take()

    def _trim(self) -> None:
        while len(self._buckets) > self._max:
            oldest, bucket = next(iter(self._buckets.items()))
            if not bucket.idle_full():
                break
            del self._buckets[oldest]


class TenantSlots:
    """At most ``per_tenant`` concurrent holders per tenant (the tenant's questions in flight)."""

    def __init__(self, per_tenant: int) -> None:
        if per_tenant < 1:
            raise ValueError("per_tenant must be >= 1")
        self.per_tenant = per_tenant
        self._held: dict[int, int] = {}
        self._lock = threading.Lock()

    def try_acquire(self, tenant_id: int) -> bool:
        """Take a slot of ``tenant_id`` without waiting; False when all its slots are taken."""
        with self._lock:
            n = self._held.get(tenant_id, 0)
            if n >= self.per_tenant:
                return False
            self._held[tenant_id] = n + 1
            return True

    def release(self, tenant_id: int) -> None:
        with self._lock:
            n = self._held.get(tenant_id, 0) - 1
            if n < 0:
                raise RuntimeError(f"tenant {tenant_id} released a slot it did not hold")
            if n == 0:
                del self._held[tenant_id]
            else:
                self._held[tenant_id] = n

    def held(self, tenant_id: int) -> int:
        """Slots ``tenant_id`` holds now."""
        with self._lock:
            return self._held.get(tenant_id, 0)


class TotalSlots:
    """At most ``cap`` concurrent holders in all (the questions in flight over every tenant)."""

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError("cap must be >= 1")
        self.cap = cap
        self._sem = threading.BoundedSemaphore(cap)

    def try_acquire(self) -> bool:
        """Take a slot without waiting; False when all ``cap`` are taken."""
        return self._sem.acquire(blocking=False)

    def release(self) -> None:
        self._sem.release()


class LockBusy(Exception):
    """A keyed lock was not free within the wait allowed."""

    def __init__(self, key: Hashable, waited_s: float) -> None:
        super().__init__(f"{key!r} is busy (waited {waited_s:g} s)")
        self.key = key
        self.waited_s = waited_s


class KeyedLocks:
    """One lock per key (a corpus), created on first use and forgotten when nobody holds or
    waits for it; :meth:`hold` waits at most ``timeout_s`` and raises :class:`LockBusy` past it,
    so no caller blocks without bound and callers on other keys never wait at all."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[threading.Lock, int]] = {}
        self._guard = threading.Lock()

    def _enter(self, key: Hashable) -> tuple[threading.Lock, int]:
        """``key``'s lock (made on first use) and how many use it now, this caller included."""
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
            return lock, users + 1

    def _leave(self, key: Hashable) -> None:
        with self._guard:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    @contextmanager
    def hold(self, key: Hashable, timeout_s: float | None, *, max_waiters: int | None = None) -> Iterator[None]:
        """Hold ``key``'s lock for the block; ``timeout_s`` None waits without bound (background
        jobs only). With ``max_waiters``, a caller that finds more than ``max_waiters`` others
        holding or waiting for ``key`` is refused at once (no pile of threads parked on one key)."""
        lock, users = self._enter(key)
        try:
            if max_waiters is not None and users - 1 > max_waiters:
                raise LockBusy(key, 0.0)
            ok = lock.acquire() if timeout_s is None else lock.acquire(timeout=max(0.0, timeout_s))
            if not ok:
                raise LockBusy(key, timeout_s or 0.0)
            try:
                yield
            finally:
                lock.release()
        finally:
            self._leave(key)

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)


__all__ = [
    "KeyedLocks",
    "LockBusy",
    "RateLimiter",
    "Refusal",
    "TenantRateLimiter",
    "TenantSlots",
    "TokenBucket",
    "TotalSlots",
    "bucket_refill",
    "bucket_take",
    "rate_refusal",
    "retry_after_s",
]
