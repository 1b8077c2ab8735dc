"""Group commit of passage adds (:mod:`livingrag.api.add_queue`): requests queued while a batch
runs are indexed together in the next run; each gets its own counts and ids, as if indexed one
after another in queue order; a failing union falls back to one request at a time; a refused lock
refuses every queued request; past ``max_queued`` a request is refused at once.

The indexer here is an in-memory one (passages keyed by text) so the queue's logic is tested on
exact values; tests/api/test_api_add_batching.py runs the real indexer behind the HTTP route."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from livingrag.api.add_queue import AddOutcome, AddQueue, QueueFull, run_timings, share_of
from livingrag.corpus.indexer import IndexReport
from livingrag.corpus.ingest import Document


class MemoryIndexer:
    """Passages keyed by their text; ``gate`` (if set) holds each run until it is set; a text
    starting with "bad" makes the run raise."""

    def __init__(self) -> None:
        self.stored: dict[str, int] = {}
        self.runs: list[list[str]] = []
        self.gate: threading.Event | None = None
        self.started = threading.Event()

    def content_hashes(self, docs: Sequence[Document]) -> list[str]:
        return [d.text for d in docs]

    def index_documents(self, docs: Sequence[Document]) -> IndexReport:
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        texts = [d.text for d in docs]
        if any(t.startswith("bad") for t in texts):
            raise ValueError(f"bad passage in {texts}")
        self.runs.append(texts)
        report = IndexReport(corpus="c", version=len(self.runs), new_entities=len(texts))
        for t in dict.fromkeys(texts):
            if t not in self.stored:
                self.stored[t] = 100 + len(self.stored)
                report.ids_by_hash[t] = self.stored[t]
        report.indexed = len(report.ids_by_hash)
        return report


@contextmanager
def free() -> Iterator[None]:
    yield


def docs(*texts: str) -> list[Document]:
    return [Document(title="", text=t) for t in texts]


def run_async(queue: AddQueue, idx: MemoryIndexer, texts: Sequence[str], hold: Any = free) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def go() -> None:
        try:
            out["outcome"] = queue.add("c", docs(*texts), idx, hold)  # type: ignore[arg-type]
        except BaseException as exc:
            out["error"] = exc

    out["thread"] = threading.Thread(target=go)
    out["thread"].start()
    return out


def wait_queued(queue: AddQueue, n: int) -> None:
    deadline = time.monotonic() + 10
    while queue.queued("c") < n:
        assert time.monotonic() < deadline, f"{queue.queued('c')} queued, waited for {n}"
        time.sleep(0.005)


def queue_in_order(queue: AddQueue, idx: MemoryIndexer, *requests: list[str]) -> list[dict[str, Any]]:
    """Start one request per list, each queued before the next starts (a run is in progress)."""
    out = []
    for texts in requests:
        n = queue.queued("c")
        out.append(run_async(queue, idx, texts))
        wait_queued(queue, n + 1)
    return out


def test_share_of_counts_first_claims_as_indexed_and_the_rest_as_skipped() -> None:
    report = IndexReport(corpus="c", version=7, new_entities=3, ids_by_hash={"a": 1, "b": 2})
    claimed: set[str] = set()
    first = share_of(["a", "x", "a"], report, claimed, 2)
    second = share_of(["b", "a"], report, claimed, 2)
    assert first == AddOutcome(1, 1, 1, 3, 7, [1], 2)  # x was stored before; a twice in the input
    assert second == AddOutcome(1, 1, 0, 3, 7, [2], 2)  # a went to the first request
    assert claimed == {"a", "b"}


def test_requests_queued_during_a_run_are_indexed_together_in_the_next() -> None:
    queue, idx = AddQueue(), MemoryIndexer()
    idx.gate = threading.Event()
    first = run_async(queue, idx, ["p0"])
    assert idx.started.wait(10)  # the first run is in progress
    rest = queue_in_order(queue, idx, ["p1"], ["p2", "p1"], ["p0", "p3"])
    idx.gate.set()
    for r in [first, *rest]:
        r["thread"].join(10)
    assert idx.runs == [["p0"], ["p1", "p2", "p1", "p0", "p3"]]
    assert first["outcome"] == AddOutcome(1, 0, 0, 1, 1, [100], 1)
    got = [r["outcome"] for r in rest]
    assert got[0] == AddOutcome(1, 0, 0, 5, 2, [101], 3)
    assert got[1] == AddOutcome(1, 1, 0, 5, 2, [102], 3)  # p1 is the earlier request's
    assert got[2] == AddOutcome(1, 1, 0, 5, 2, [103], 3)  # p0 was stored by the first run
    assert queue.runs == 2 and queue.queued("c") == 0


def test_each_request_says_how_long_it_waited_and_how_long_its_run_took() -> None:
    queue, idx = AddQueue(), MemoryIndexer()
    idx.gate = threading.Event()
    first = run_async(queue, idx, ["p0"])
    assert idx.started.wait(10)
    (second,) = queue_in_order(queue, idx, ["p1"])
    time.sleep(0.2)  # the second waits behind the first run for at least this long
    idx.gate.set()
    for r in (first, second):
        r["thread"].join(10)
    t1, t2 = first["outcome"].timings_ms, second["outcome"].timings_ms
    assert set(t1) == set(t2) == {"wait", "index"}  # the in-memory indexer reports no phases
    assert t1["wait"] < 100 and t1["index"] >= 190  # the first ran at once, held by the gate
    assert t2["wait"] >= 190 and t2["index"] < 100
    report = IndexReport(corpus="c", phases={"ner": 0.0123, "embed": 0.5})
    assert run_timings(0.25, 1.0, report) == {"wait": 250.0, "index": 1000.0, "phase_ner": 12.3, "phase_embed": 500.0}


def test_a_failing_union_falls_back_to_one_request_at_a_time() -> None:
    queue, idx = AddQueue(), MemoryIndexer()
    idx.gate = threading.Event()
    first = run_async(queue, idx, ["p0"])
    assert idx.started.wait(10)
    good, bad, good2 = queue_in_order(queue, idx, ["p1"], ["bad one"], ["p2"])
    idx.gate.set()
    for r in (first, good, bad, good2):
        r["thread"].join(10)
    assert good["outcome"].passage_ids == [101] and good2["outcome"].passage_ids == [102]
    assert good["outcome"].batched_with == 1
    assert isinstance(bad["error"], ValueError) and "bad one" in str(bad["error"])
    assert idx.runs == [["p0"], ["p1"], ["p2"]]


def test_a_refused_lock_refuses_every_queued_request_and_the_queue_recovers() -> None:
    queue, idx = AddQueue(), MemoryIndexer()

    @contextmanager
    def busy() -> Iterator[None]:
        raise TimeoutError("corpus busy")
        yield

    r = run_async(queue, idx, ["p0"], hold=busy)
    r["thread"].join(10)
    assert isinstance(r["error"], TimeoutError) and idx.runs == []
    assert queue.add("c", docs("p0"), idx, free).passage_ids == [100]  # type: ignore[arg-type]


def test_past_max_queued_a_request_is_refused_at_once() -> None:
    queue, idx = AddQueue(max_queued=2), MemoryIndexer()
    idx.gate = threading.Event()
    first = run_async(queue, idx, ["p0"])
    assert idx.started.wait(10)
    waiting = queue_in_order(queue, idx, ["p1"], ["p2"])
    with pytest.raises(QueueFull, match="2 requests already wait"):
        queue.add("c", docs("p9"), idx, free)  # type: ignore[arg-type]
    idx.gate.set()
    for r in (first, *waiting):
        r["thread"].join(10)
        assert "outcome" in r


def test_a_batch_is_bounded_by_max_batch_passages() -> None:
    queue, idx = AddQueue(max_batch_passages=3), MemoryIndexer()
    idx.gate = threading.Event()
    first = run_async(queue, idx, ["p0"])
    assert idx.started.wait(10)
    rest = queue_in_order(queue, idx, ["a1", "a2"], ["b1"], ["c1", "c2"])
    idx.gate.set()
    for r in (first, *rest):
        r["thread"].join(10)
    assert idx.runs == [["p0"], ["a1", "a2", "b1"], ["c1", "c2"]]
