"""What runs inside the transaction that changes a corpus's passages.

:func:`fire_passage_change` always marks the experiences that cited an updated or deleted passage
stale first (:func:`mark_stale_on_passage_change`): it is part of changing a passage, wired here
and not through an import side effect, so every process that changes passages (the CLI, the
service, a script) keeps the store consistent. Extra hooks can be registered; a hook receives the
session (the caller's transaction), the corpus id, the changed passage ids and the kind of change;
an exception aborts the whole change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Literal

from sqlalchemy.orm import Session

from livingrag.db.repositories import experiences as experience_repo

log = logging.getLogger(__name__)

ChangeKind = Literal["updated", "deleted"]
PassageChangeHook = Callable[[Session, int, Sequence[int], ChangeKind], None]

_hooks: list[PassageChangeHook] = []


def register_passage_change_hook(hook: PassageChangeHook) -> PassageChangeHook:
    """Register an extra ``hook`` (idempotent); usable as a decorator."""
    if hook not in _hooks:
        _hooks.append(hook)
    return hook


def mark_stale_on_passage_change(session: Session, corpus_id: int, passage_ids: Sequence[int], kind: ChangeKind) -> int:
    """Mark the active experiences citing ``passage_ids`` stale, in the caller's transaction, with
    the reason ``source passage <kind>: <ids>``; returns how many were marked."""
    ids = sorted({int(p) for p in passage_ids})
    shown = ", ".join(str(p) for p in ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    n = experience_repo.mark_stale_for_passages(session, corpus_id, ids, f"source passage {kind}: {shown}")
    if n:
        log.info("marked %d experiences of corpus %d stale (%s passages %s)", n, corpus_id, kind, shown)
    return n


def fire_passage_change(session: Session, corpus_id: int, passage_ids: Sequence[int], kind: ChangeKind) -> None:
    """Mark the citing experiences stale, then run every registered hook, in the caller's
    transaction; hooks get the distinct ids in ascending order, whatever order the change had."""
    ids = sorted({int(p) for p in passage_ids})
    if not ids:
        return
    mark_stale_on_passage_change(session, corpus_id, ids, kind)
    for hook in list(_hooks):
        hook(session, corpus_id, ids, kind)
