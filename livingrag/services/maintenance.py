"""The operator's maintenance of the experience store, on the owner's session and across tenants
unless a scope narrows it (``livingrag admin``, ``/v1/admin``): expiry, pruning, statistics and
listing, each within a :class:`~livingrag.experience.lifecycle.Scope` resolved here.

``names`` is what the caller calls the tenant and the corpus, for the messages: the command line's
options (``--tenant``, ``--corpus``, the default) or the API's fields (``tenant_id``, ``corpus_id``).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from livingrag.db.repositories import corpora, tenants
from livingrag.db.repositories import experiences as repo
from livingrag.db.repositories.experiences import ExperienceRecord, PruneCriteria
from livingrag.errors import InvalidInput, NotFound
from livingrag.experience import lifecycle
from livingrag.experience.lifecycle import Scope

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from livingrag.db.engine import Database

OPTIONS = ("--tenant", "--corpus")
"""The command line's names of the tenant and the corpus."""


def resolve_scope(
    session: Session, tenant: int | str | None, corpus: int | str | None, *, names: tuple[str, str] = OPTIONS
) -> Scope:
    """The scope of ``tenant`` (an id, or a name or id as text, looked up) and ``corpus`` (an id,
    or a name or id as text) of that tenant. A corpus needs its tenant (:class:`InvalidInput`); a
    corpus the tenant does not have, or a tenant named that does not exist, is :class:`NotFound`.
    An id given as a number is taken as it is when no corpus is named."""
    if corpus is not None and tenant is None:
        raise InvalidInput(f"{names[1]} needs {names[0]}")
    tenant_id = tenants.get_tenant(session, tenant).id if isinstance(tenant, str) else tenant
    corpus_id = None
    if corpus is not None:
        assert tenant_id is not None
        ref = int(corpus) if isinstance(corpus, str) and corpus.isdigit() else corpus
        corpus_id = corpora.find_corpus_id(session, tenant_id, ref)
        if corpus_id is None:
            raise NotFound(f"tenant {tenant!r} has no corpus {corpus!r}")
    return Scope(tenant_id=tenant_id, corpus_id=corpus_id)


def scope(
    db: Database, tenant: int | str | None, corpus: int | str | None, *, names: tuple[str, str] = OPTIONS
) -> Scope:
    """:func:`resolve_scope` in a transaction of its own."""
    with db.owner_session() as s:
        return resolve_scope(s, tenant, corpus, names=names)


def expire(
    db: Database,
    *,
    tenant: int | str | None,
    corpus: int | str | None,
    created_before: datetime,
    now: datetime,
    dry_run: bool,
    names: tuple[str, str] = OPTIONS,
) -> int:
    """Expire the scope's experiences created before ``created_before``; returns how many."""
    with db.owner_session() as s:
        where = resolve_scope(s, tenant, corpus, names=names)
        return lifecycle.expire(s, created_before=created_before, scope=where, now=now, dry_run=dry_run)


def prune(
    db: Database,
    criteria: PruneCriteria,
    *,
    tenant: int | str | None,
    corpus: int | str | None,
    now: datetime,
    dry_run: bool,
    names: tuple[str, str] = OPTIONS,
) -> dict[str, int]:
    """Delete the scope's experiences matching ``criteria``; returns the count per criterion."""
    with db.owner_session() as s:
        where = resolve_scope(s, tenant, corpus, names=names)
        return lifecycle.prune(s, criteria, scope=where, now=now, dry_run=dry_run)


def stats(
    db: Database, *, tenant: int | str | None, corpus: int | str | None, names: tuple[str, str] = OPTIONS
) -> list[dict[str, Any]]:
    """Per (tenant, corpus) of the scope: store health, gate statistics and reuse coverage."""
    with db.owner_session() as s:
        return lifecycle.stats(s, scope=resolve_scope(s, tenant, corpus, names=names))


def list_experiences(
    db: Database,
    *,
    tenant: int | str | None,
    corpus: int | str | None,
    include_inactive: bool,
    now: datetime,
    limit: int,
    offset: int,
    trust: str | None,
) -> list[ExperienceRecord]:
    """The scope's experiences, newest first."""
    with db.owner_session() as s:
        where = resolve_scope(s, tenant, corpus)
        return repo.list_experiences(
            s,
            tenant_id=where.tenant_id,
            corpus_id=where.corpus_id,
            include_inactive=include_inactive,
            now=now,
            limit=limit,
            offset=offset,
            trust=trust,
        )
