"""Experience use counts, batched: what each answer used is counted in memory and written in one
statement per tenant at most every ``experience.use_flush_s`` seconds.

Counting each answer's uses in its own transaction made every question that fused the same
popular experiences wait on the same row locks (32 clients: one UPDATE of the same few rows per
question). Here an answer only adds to an in-process tally:

    fusion_uses[e]  += 1 for each fused e          scaffold_uses[e] += 1 for the scaffold e and each finding e
    answer_uses[e]  += 1 for the experience whose answer was given again (no LLM call)
    last_used_at[e]  = the latest use's time

and each use is one event of the experience's history (``used_fusion``, ``used_scaffold``,
``used_finding``, ``used_answer``; actor ``system``, with the question's ``query_log_id``),

and a flusher thread writes each tenant's tally with one UPDATE (its rows locked in id order). What
is lost: at most the last ``use_flush_s`` seconds of counts when the process is killed (a clean
close flushes). A failed flush keeps its counts for the next one. ``use_flush_s = 0`` writes each
answer's uses in its own transaction, as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as experience_repo
from livingrag.db.repositories import trust as trust_repo
from livingrag.errors import DatabaseUnavailable
from livingrag.experience.flusher import PeriodicFlusher

log = logging.getLogger(__name__)


@dataclass
class Tally:
    """One experience's uses since the last flush."""

    fusion: int = 0
    scaffold: int = 0
    last_used_at: datetime | None = None
    answer: int = 0

    def add(self, *, fusion: int, scaffold: int, at: datetime | None, answer: int = 0) -> None:
        """Add uses; ``last_used_at`` becomes the later of the two times."""
        self.fusion += fusion
        self.scaffold += scaffold
        self.answer += answer
        if at is not None and (self.last_used_at is None or at > self.last_used_at):
            self.last_used_at = at


def add_use(
    tally: dict[int, Tally],
    *,
    fused_ids: Sequence[int],
    shown_ids: Sequence[int],
    now: datetime,
    answer_id: int | None = None,
) -> None:
    """Add one answer's uses to ``tally``: one fusion use per distinct fused id, one scaffold use
    per distinct shown id (the scaffold and the findings), one answer use for ``answer_id``, last
    use ``now`` (the latest wins)."""
    for ids, fused in ((set(fused_ids), True), (set(shown_ids), False)):
        for i in ids:
            tally.setdefault(int(i), Tally()).add(fusion=int(fused), scaffold=int(not fused), at=now)
    if answer_id is not None:
        tally.setdefault(int(answer_id), Tally()).add(fusion=0, scaffold=0, at=now, answer=1)


def use_events(
    *,
    corpus_id: int,
    fused_ids: Sequence[int],
    scaffold_id: int | None,
    finding_ids: Sequence[int],
    answer_id: int | None,
    query_log_id: int | None,
    now: datetime,
) -> list[trust_repo.EventRow]:
    """The history events of one answer's uses (actor ``system``)."""
    kinds = [
        *(("used_fusion", i) for i in dict.fromkeys(fused_ids)),
        *((("used_scaffold", scaffold_id),) if scaffold_id is not None else ()),
        *(("used_finding", i) for i in dict.fromkeys(finding_ids) if i != scaffold_id),
        *((("used_answer", answer_id),) if answer_id is not None else ()),
    ]
    return [
        trust_repo.EventRow(
            experience_id=int(i), corpus_id=corpus_id, event=kind, actor="system", query_log_id=query_log_id, at=now
        )
        for kind, i in kinds
    ]


def _write(session: Session, tally: dict[int, Tally], events: Sequence[trust_repo.EventRow], tenant_id: int) -> int:
    """Write one tenant's tally and its events in the caller's transaction; returns rows updated."""
    ids = sorted(tally)
    updated = experience_repo.add_uses(
        session,
        ids=ids,
        fusion=[tally[i].fusion for i in ids],
        scaffold=[tally[i].scaffold for i in ids],
        last_used_at=[tally[i].last_used_at for i in ids],
    )
    trust_repo.add_answer_uses(session, {i: tally[i].answer for i in ids if tally[i].answer})
    if events:  # events of experiences deleted since their use are kept too: history outlives them
        trust_repo.insert_events(session, tenant_id, events)
    return updated


class UseRecorder:
    """Counts uses per tenant and writes them every ``flush_s`` seconds (0: at once)."""

    def __init__(self, db: Database, flush_s: float) -> None:
        if flush_s < 0:
            raise ValueError(f"flush_s must be >= 0, got {flush_s}")
        self.db = db
        self.flush_s = flush_s
        self._pending: dict[int, dict[int, Tally]] = {}
        self._events: dict[int, list[trust_repo.EventRow]] = {}
        self._lock = threading.Lock()
        self._flusher = PeriodicFlusher(self.flush, flush_s or 1.0, name="experience-use-flusher")

    def record(
        self,
        tenant_id: int,
        *,
        fused_ids: Sequence[int],
        scaffold_id: int | None,
        finding_ids: Sequence[int],
        now: datetime,
        answer_id: int | None = None,
        corpus_id: int | None = None,
        query_log_id: int | None = None,
    ) -> None:
        """Count one answer's uses and their history events (written now when ``flush_s`` is 0,
        else by the next flush). ``answer_id``: the experience whose answer was given again;
        ``corpus_id`` (needed for the events) and ``query_log_id`` name the question."""
        shown = [*finding_ids, *([scaffold_id] if scaffold_id is not None else [])]
        if not fused_ids and not shown and answer_id is None:
            return
        tally: dict[int, Tally] = {}
        add_use(tally, fused_ids=fused_ids, shown_ids=shown, now=now, answer_id=answer_id)
        events = (
            use_events(
                corpus_id=corpus_id,
                fused_ids=fused_ids,
                scaffold_id=scaffold_id,
                finding_ids=finding_ids,
                answer_id=answer_id,
                query_log_id=query_log_id,
                now=now,
            )
            if corpus_id is not None
            else []
        )
        if self.flush_s == 0 or self._flusher.closed:
            with self.db.tenant_session(tenant_id, read_floor=False) as s:
                _write(s, tally, events, tenant_id)
            return
        with self._lock:
            into = self._pending.setdefault(tenant_id, {})
            for i, t in tally.items():
                into.setdefault(i, Tally()).add(
                    fusion=t.fusion, scaffold=t.scaffold, at=t.last_used_at, answer=t.answer
                )
            self._events.setdefault(tenant_id, []).extend(events)
        self._flusher.start()

    def flush(self) -> int:
        """Write every pending tally now; returns the experience rows updated. A tenant whose write
        fails keeps its counts (merged with newer ones) for the next flush."""
        with self._lock:
            pending, self._pending = self._pending, {}
            events, self._events = self._events, {}
        updated = 0
        for tenant_id in sorted(set(pending) | set(events)):
            tally, evs = pending.get(tenant_id, {}), events.get(tenant_id, [])
            try:
                with self.db.tenant_session(tenant_id, read_floor=False) as s:
                    updated += _write(s, tally, evs, tenant_id)
            except (DatabaseUnavailable, OSError, RuntimeError) as exc:
                log.warning(
                    "experience use counts of tenant %s not written yet (%s); kept for the next flush", tenant_id, exc
                )
                self._restore(tenant_id, tally, evs)
            except Exception:
                log.exception("experience use counts of tenant %s not written; kept for the next flush", tenant_id)
                self._restore(tenant_id, tally, evs)
        return updated

    def _restore(self, tenant_id: int, tally: dict[int, Tally], events: Sequence[trust_repo.EventRow] = ()) -> None:
        with self._lock:
            into = self._pending.setdefault(tenant_id, {})
            for i, t in tally.items():
                into.setdefault(i, Tally()).add(
                    fusion=t.fusion, scaffold=t.scaffold, at=t.last_used_at, answer=t.answer
                )
            self._events.setdefault(tenant_id, [])[:0] = list(events)

    def close(self) -> None:
        """Stop the flusher and write what is pending."""
        self._flusher.close()
