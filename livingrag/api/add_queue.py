"""Group commit of passage adds: concurrent ``POST /v1/corpora/{id}/passages`` requests of one
corpus are indexed together.

Each corpus's changes are serialised by its lock (:func:`~livingrag.api.routes.common.corpus_change`).
With one request per lock turn, 32 clients adding passages queued behind each other (add p50
4.9 s) and most were refused. Here a request joins its corpus's queue; one request at a time is
the *leader*: it holds the corpus lock, takes every request queued by then (up to
``max_batch_passages`` passages), and indexes their union in one :meth:`CorpusIndexer.index_documents` run (one
NER pass, one embedding pass, one write per indexer batch), then hands leadership to the oldest
request still queued. Each request gets its own counts and passage ids back, as if the requests
had been indexed one after another in queue order: a passage two requests of one batch both add
is indexed for the first and ``skipped_existing`` for the second.

If the union fails (a quota the union passes but each request alone might not, or any other
error), the batch falls back to one request at a time, so one request's failure is its own.
Past ``max_queued`` requests waiting on a corpus, a new one is refused at once (429), so no pile
of request threads parks on one corpus.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from livingrag.corpus.indexer import CorpusIndexer, IndexReport
from livingrag.corpus.ingest import Document

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """Too many requests already wait to add passages to this corpus."""

    def __init__(self, key: Hashable, queued: int) -> None:
        super().__init__(f"{queued} requests already wait to add passages to corpus {key!r}")
        self.key = key
        self.queued = queued


@dataclass
class AddOutcome:
    """One request's share of a group commit."""

    indexed: int
    skipped_existing: int
    duplicates_in_input: int
    new_entities: int
    version: int
    passage_ids: list[int]
    batched_with: int
    """Requests indexed in the same run (1: alone)."""
    timings_ms: dict[str, float] = field(default_factory=dict, compare=False)
    """Where the request's time went: ``wait`` (queued, until its batch started: the corpus lock
    and the batch before), ``index`` (its batch's indexing run), and that run's phases
    (``phase_<name>``); not part of the response body (the route sends them as ``Server-Timing``)."""


@dataclass
class _Entry:
    docs: Sequence[Document]
    passages: int
    queued_at: float = field(default_factory=time.perf_counter)
    done: bool = False
    leader: bool = False
    wake: threading.Event = field(default_factory=threading.Event)
    """Set when the request is finished or becomes the leader."""
    outcome: AddOutcome | None = None
    error: BaseException | None = None

    def finish(self, outcome: AddOutcome | None = None, error: BaseException | None = None) -> None:
        self.outcome, self.error, self.done = outcome, error, True
        self.wake.set()

    def promote(self) -> None:
        self.leader = True
        self.wake.set()


def run_timings(waited_s: float, ran_s: float, report: IndexReport) -> dict[str, float]:
    """Milliseconds: ``wait``, ``index`` and each of ``report``'s phases as ``phase_<name>``."""
    out = {"wait": round(waited_s * 1000.0, 1), "index": round(ran_s * 1000.0, 1)}
    out |= {f"phase_{k}": round(v * 1000.0, 1) for k, v in report.phases.items()}
    return out


def share_of(hashes: Sequence[str], report: IndexReport, claimed: set[str], batched_with: int) -> AddOutcome:
    """One request's counts from a run over several requests' passages.

    ``hashes`` are the request's passage hashes in order (duplicates kept); a hash the run
    indexed (``report.ids_by_hash``) counts as indexed for the first request that claims it
    (``claimed``, updated in place), as skipped for any later one; a hash the run did not index
    was already stored. ``new_entities`` and ``version`` are the run's.
    """
    unique = list(dict.fromkeys(hashes))
    ids: list[int] = []
    for h in unique:
        pid = report.ids_by_hash.get(h)
        if pid is not None and h not in claimed:
            claimed.add(h)
            ids.append(pid)
    return AddOutcome(
        indexed=len(ids),
        skipped_existing=len(unique) - len(ids),
        duplicates_in_input=len(hashes) - len(unique),
        new_entities=report.new_entities,
        version=report.version,
        passage_ids=ids,
        batched_with=batched_with,
    )


class AddQueue:
    """Per-corpus queues of passage adds, committed in groups (see the module docstring)."""

    def __init__(self, *, max_batch_passages: int = 512, max_queued: int = 256) -> None:
        self.max_batch_passages = max_batch_passages
        self.max_queued = max_queued
        self._guard = threading.Lock()
        self._queues: dict[Hashable, list[_Entry]] = {}
        self._leading: set[Hashable] = set()
        self.runs = 0
        """Indexing runs made (a failed union counts, and so does each request of its fallback)."""

    def add(
        self,
        key: Hashable,
        docs: Sequence[Document],
        indexer: CorpusIndexer,
        hold: Callable[[], AbstractContextManager[object]],
    ) -> AddOutcome:
        """Index ``docs`` into ``key``'s corpus with whatever else is queued for it.

        ``hold()`` returns the corpus lock's context manager (it may raise, e.g. 429 after its
        wait: then every request of that batch gets the same error and nothing is written).
        Raises :class:`QueueFull` past ``max_queued`` waiting requests.
        """
        entry = _Entry(docs=docs, passages=max(1, len(docs)))
        with self._guard:
            queue = self._queues.setdefault(key, [])
            if len(queue) >= self.max_queued:
                raise QueueFull(key, len(queue))
            queue.append(entry)
            if key not in self._leading:  # nobody leads: the queue was empty
                self._leading.add(key)
                entry.promote()
        while not entry.done:
            entry.wake.wait()
            if not entry.done and entry.leader:
                self._lead(key, indexer, hold)  # the leader is the oldest queued: its batch holds it
        if entry.error is not None:
            raise entry.error
        assert entry.outcome is not None
        return entry.outcome

    def _take(self, key: Hashable) -> list[_Entry]:
        """The oldest queued requests, up to ``max_batch_passages`` passages (at least one)."""
        with self._guard:
            queue = self._queues.get(key, [])
            batch: list[_Entry] = []
            total = 0
            while queue and (not batch or total + queue[0].passages <= self.max_batch_passages):
                e = queue.pop(0)
                total += e.passages
                batch.append(e)
            return batch

    def _hand_over(self, key: Hashable) -> None:
        """Make the oldest queued request the leader, or end leadership when none waits."""
        with self._guard:
            queue = self._queues.get(key)
            if queue:
                queue[0].promote()
            else:
                self._leading.discard(key)
                self._queues.pop(key, None)

    def _lead(self, key: Hashable, indexer: CorpusIndexer, hold: Callable[[], AbstractContextManager[object]]) -> None:
        """Hold the corpus lock, then take what is queued by now (the leader, the oldest, among
        them) and index it. Refused the lock, every request queued shares the refusal."""
        batch: list[_Entry] = []
        try:
            with hold():
                batch = self._take(key)
                self._run(batch, indexer)
        except BaseException as exc:
            for e in batch or self._take_all(key):
                if not e.done:
                    e.finish(error=exc)
        finally:
            self._hand_over(key)

    def _take_all(self, key: Hashable) -> list[_Entry]:
        with self._guard:
            return self._queues.pop(key, [])

    def queued(self, key: Hashable) -> int:
        """Requests waiting to add passages to ``key``'s corpus (the running batch not counted)."""
        with self._guard:
            return len(self._queues.get(key, []))

    def _run(self, batch: list[_Entry], indexer: CorpusIndexer) -> None:
        """Index the batch's union; on failure of a group, each request alone."""
        self.runs += 1
        t = time.perf_counter()
        hashes = [indexer.content_hashes(e.docs) for e in batch]
        if len(batch) > 1:
            try:
                report = indexer.index_documents([d for e in batch for d in e.docs])
            except Exception as exc:
                report = None  # one request's problem (e.g. its quota) must not fail the others
                log.info("add queue: %d requests together failed (%s); one at a time", len(batch), exc)
            if report is not None:
                log.debug(
                    "add queue: %d requests, %d passages indexed together in %.0f ms",
                    len(batch), report.indexed, (time.perf_counter() - t) * 1000,
                )  # fmt: skip
                ran = time.perf_counter() - t
                claimed: set[str] = set()
                for e, hs in zip(batch, hashes, strict=True):
                    out = share_of(hs, report, claimed, len(batch))
                    out.timings_ms = run_timings(t - e.queued_at, ran, report)
                    e.finish(out)
                return
        for e, hs in zip(batch, hashes, strict=True):
            try:
                if len(batch) > 1:
                    self.runs += 1
                t_one = time.perf_counter()
                report = indexer.index_documents(e.docs)
                out = share_of(hs, report, set(), 1)
                out.timings_ms = run_timings(t - e.queued_at, time.perf_counter() - t_one, report)
                e.finish(out)
            except Exception as exc:
                e.finish(error=exc)
