"""Hooks run inside the transaction that changes a corpus's passages.

The experience store registers one to mark experiences that cited an updated or deleted passage
as stale. A hook receives the session (the caller's transaction), the corpus id, the changed
passage ids and the kind of change; an exception aborts the whole change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from sqlalchemy.orm import Session

ChangeKind = Literal["updated", "deleted"]
PassageChangeHook = Callable[[Session, int, Sequence[int], ChangeKind], None]

_hooks: list[PassageChangeHook] = []


def register_passage_change_hook(hook: PassageChangeHook) -> PassageChangeHook:
    """Register ``hook`` (idempotent); usable as a decorator."""
    if hook not in _hooks:
        _hooks.append(hook)
    return hook


def fire_passage_change(session: Session, corpus_id: int, passage_ids: Sequence[int], kind: ChangeKind) -> None:
    """Run every registered hook in the caller's transaction."""
    if not passage_ids:
        return
    for hook in list(_hooks):
        hook(session, corpus_id, passage_ids, kind)
