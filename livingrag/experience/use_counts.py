"""Experience use counts, batched: what each answer used is counted in memory and written in one
statement per tenant at most every ``experience.use_flush_s`` seconds.

Counting each answer's uses in its own transaction made every question that fused the same
popular experiences wait on the same row locks (32 clients: one UPDATE of the same few rows per
question). Here an answer only adds to an in-process tally:

    fusion_uses[e]  += 1 for each fused e          scaffold_uses[e] += 1 for the scaffold e and each finding e
    last_used_at[e]  = the latest use's time

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

from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as experience_repo
from livingrag.errors import DatabaseUnavailable
from livingrag.experience.flusher import PeriodicFlusher

log = logging.getLogger(__name__)


@dataclass
class Tally:
    """One experience's uses since the last flush."""

    fusion: int = 0
    scaffold: int = 0
    last_used_at: datetime | None = None

    def add(self, *, fusion: int, scaffold: int, at: datetime | None) -> None:
        """Add uses; ``last_used_at`` becomes the later of the two times."""
        self.fusion += fusion
        self.scaffold += scaffold
        if at is not None and (self.last_used_at is None or at > self.last_used_at):
            self.last_used_at = at


def add_use(tally: dict[int, Tally], *, fused_ids: Sequence[int], shown_ids: Sequence[int], now: datetime) -> None:
    """Add one answer's uses to ``tally``: one fusion use per distinct fused id, one scaffold use
    per distinct shown id (the scaffold and the findings), last use ``now`` (the latest wins)."""
    for ids, fused in ((set(fused_ids), True), (set(shown_ids), False)):
        for i in ids:
            tally.setdefault(int(i), Tally()).add(fusion=int(fused), scaffold=int(not fused), at=now)


class UseRecorder:
    """Counts uses per tenant and writes them every ``flush_s`` seconds (0: at once)."""

    def __init__(self, db: Database, flush_s: float) -> None:
        if flush_s < 0:
            raise ValueError(f"flush_s must be >= 0, got {flush_s}")
        self.db = db
        self.flush_s = flush_s
        self._pending: dict[int, dict[int, Tally]] = {}
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
    ) -> None:
        """Count one answer's uses (written now when ``flush_s`` is 0, else by the next flush)."""
        shown = [*finding_ids, *([scaffold_id] if scaffold_id is not None else [])]
        if not fused_ids and not shown:
            return
        if self.flush_s == 0 or self._flusher.closed:
            with self.db.tenant_session(tenant_id) as s:
                experience_repo.record_use(
                    s, fused_ids=fused_ids, scaffold_id=scaffold_id, finding_ids=finding_ids, now=now
                )
            return
        with self._lock:
            add_use(self._pending.setdefault(tenant_id, {}), fused_ids=fused_ids, shown_ids=shown, now=now)
        self._flusher.start()

    def flush(self) -> int:
        """Write every pending tally now; returns the experience rows updated. A tenant whose write
        fails keeps its counts (merged with newer ones) for the next flush."""
        with self._lock:
            pending, self._pending = self._pending, {}
        updated = 0
        for tenant_id, tally in pending.items():
            ids = sorted(tally)
            try:
                with self.db.tenant_session(tenant_id) as s:
                    updated += experience_repo.add_uses(
                        s,
                        ids=ids,
                        fusion=[tally[i].fusion for i in ids],
                        scaffold=[tally[i].scaffold for i in ids],
                        last_used_at=[tally[i].last_used_at for i in ids],
                    )
            except (DatabaseUnavailable, OSError, RuntimeError) as exc:
                log.warning(
                    "experience use counts of tenant %s not written yet (%s); kept for the next flush", tenant_id, exc
                )
                self._restore(tenant_id, tally)
            except Exception:
                log.exception("experience use counts of tenant %s not written; kept for the next flush", tenant_id)
                self._restore(tenant_id, tally)
        return updated

    def _restore(self, tenant_id: int, tally: dict[int, Tally]) -> None:
        with self._lock:
            into = self._pending.setdefault(tenant_id, {})
            for i, t in tally.items():
                into.setdefault(i, Tally()).add(fusion=t.fusion, scaffold=t.scaffold, at=t.last_used_at)

    def close(self) -> None:
        """Stop the flusher and write what is pending."""
        self._flusher.close()
