"""Per-tenant fairness, pure parts: the token bucket and its Retry-After (exact values on an
injected clock), per-tenant question slots, per-corpus locks with a bounded wait, the quota check,
the bounded graph cache (LRU by count and bytes) and the index-job queue taking tenants in turn."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from livingrag.api.fairness import KeyedLocks, LockBusy, TenantRateLimiter, TenantSlots, TokenBucket, retry_after_s
from livingrag.corpus.graph_loader import GraphCache
from livingrag.errors import QuotaExceeded
from livingrag.quotas import check_quota, over_quota


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_token_bucket_admits_a_burst_then_refills_at_the_rate() -> None:
    clock = FakeClock()
    b = TokenBucket(2.0, 3, clock=clock)
    assert [b.take() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert b.take() == pytest.approx(0.5)  # empty: one token comes in 1/rate s
    clock.t += 0.25
    assert b.take() == pytest.approx(0.25)
    clock.t += 0.25
    assert b.take() == 0.0
    clock.t += 10
    assert b.tokens == 3.0  # never more than the burst


def test_retry_after_is_whole_seconds_at_least_one() -> None:
    assert [retry_after_s(x) for x in (0.0, 0.01, 1.0, 1.2, 2.0, 7.5)] == [1, 1, 1, 2, 2, 8]


def test_rate_limiter_is_per_tenant_and_names_the_limit() -> None:
    clock = FakeClock()
    rl = TenantRateLimiter(0.5, 2, clock=clock)
    assert rl.admit(1) is None and rl.admit(1) is None
    refusal = rl.admit(1)
    assert refusal is not None and refusal.retry_after_s == 2  # 1 token at 0.5/s
    assert "api.tenant_rate_per_s" in refusal.message and "0.5/s" in refusal.message
    assert rl.admit(2) is None  # another tenant has its own bucket
    clock.t += 2.0
    assert rl.admit(1) is None
    assert TenantRateLimiter(0, 1).admit(1) is None  # 0: off


def test_tenant_slots_cap_one_tenant_not_the_others() -> None:
    slots = TenantSlots(2)
    assert slots.try_acquire(1) and slots.try_acquire(1)
    assert not slots.try_acquire(1)
    assert slots.try_acquire(2)
    slots.release(1)
    assert slots.held(1) == 1 and slots.try_acquire(1)
    for t in (1, 1, 2):
        slots.release(t)
    assert slots.held(1) == slots.held(2) == 0
    with pytest.raises(RuntimeError):
        slots.release(1)


def test_keyed_locks_wait_bounded_on_one_key_and_not_at_all_on_another() -> None:
    locks = KeyedLocks()
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with locks.hold("a", None):
            held.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(5)
    t0 = time.monotonic()
    with locks.hold("b", 0.0):  # another key: free at once
        pass
    assert time.monotonic() - t0 < 0.1
    t0 = time.monotonic()
    with pytest.raises(LockBusy), locks.hold("a", 0.2):
        pass
    assert 0.15 < time.monotonic() - t0 < 2
    release.set()
    t.join(5)
    with locks.hold("a", 0.0):
        pass
    assert len(locks) == 0  # nobody holds or waits: forgotten


def test_keyed_locks_refuse_at_once_past_max_waiters() -> None:
    locks = KeyedLocks()
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with locks.hold("a", None):
            held.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(5)
    t0 = time.monotonic()
    with pytest.raises(LockBusy), locks.hold("a", 5.0, max_waiters=0):
        pass
    assert time.monotonic() - t0 < 0.5
    release.set()
    t.join(5)


def test_quota_check_names_the_setting_and_its_value() -> None:
    assert not over_quota(None, 10**9, 10**9)
    assert not over_quota(5, 3, 2) and over_quota(5, 3, 3) and not over_quota(5, 9, 0)
    check_quota("api.max_passages_per_corpus", 5, 3, 2, "passages")
    with pytest.raises(QuotaExceeded) as exc:
        check_quota("api.max_passages_per_corpus", 5, 3, 3, "passages")
    assert exc.value.quota == "api.max_passages_per_corpus" and exc.value.limit == 5
    assert "api.max_passages_per_corpus = 5" in str(exc.value) and "adds 3" in str(exc.value)


@dataclass
class FakeGraph:
    version: int
    size: int

    def nbytes(self) -> int:
        return self.size


def test_graph_cache_evicts_the_least_recently_used_past_the_count() -> None:
    cache = GraphCache(check_interval_s=3600, max_graphs=2)
    cache.put((1, 1), FakeGraph(1, 10))  # type: ignore[arg-type]
    cache.put((1, 2), FakeGraph(1, 10))  # type: ignore[arg-type]
    assert cache.get(None, 1, 1, 16).size == 10  # type: ignore[arg-type, attr-defined]  # fresh: no database read
    cache.put((2, 1), FakeGraph(1, 10))  # type: ignore[arg-type]
    assert cache.keys() == [(1, 1), (2, 1)] and cache.evictions == 1  # (1, 2) was the least recent


def test_graph_cache_keeps_to_its_byte_budget_but_keeps_the_newest() -> None:
    cache = GraphCache(max_graphs=10, max_bytes=100)
    for i, size in enumerate((40, 40, 40)):
        cache.put((1, i), FakeGraph(1, size))  # type: ignore[arg-type]
    assert cache.keys() == [(1, 1), (1, 2)] and cache.nbytes() == 80
    cache.put((1, 9), FakeGraph(1, 500))  # type: ignore[arg-type]  # alone over the budget: kept alone
    assert cache.keys() == [(1, 9)]
    cache.configure(max_graphs=10, max_bytes=None)
    cache.invalidate(tenant_id=1)
    assert cache.keys() == [] and cache.nbytes() == 0
