"""Which per-scope HNSW indexes to build, rebuild or drop (pure: no database, no settings).

A scope (tenant, corpus) gets its own index once it holds at least ``min_experiences`` experiences:
under that an exact scan of its rows, or the shared index, is as fast, and each index costs every
write-back of the scope one more HNSW insert. An index whose build was interrupted (invalid) is
rebuilt; an index whose scope no longer exists (its corpus was deleted) or whose dimension is no
longer the corpus's is dropped. An index of a scope that shrank under the threshold is kept: it
still serves that scope correctly. A corpus whose embeddings have more dimensions than pgvector's
HNSW accepts (4,000 for halfvec) gets none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from livingrag.types import MAX_HNSW_DIM, ScopeIndex, ScopeSize


@dataclass(frozen=True)
class ScopeIndexPlan:
    """``create``: scopes to index; ``rebuild``: invalid indexes to drop and build again (their
    scopes); ``drop``: names of orphaned indexes; ``keep``: names of valid indexes left as they are."""

    create: tuple[ScopeSize, ...] = ()
    rebuild: tuple[ScopeSize, ...] = ()
    drop: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()


def plan_scope_indexes(
    scopes: Iterable[ScopeSize], existing: Iterable[ScopeIndex], *, min_experiences: int
) -> ScopeIndexPlan:
    """The plan for ``scopes`` given the ``existing`` indexes (both limited to the same tenants).

    For each scope ``s`` with index name ``n(s)`` (tenant, corpus, dim): create when
    ``s.experiences >= min_experiences`` and no index ``n(s)`` exists; rebuild when ``n(s)`` exists
    but is invalid (whatever the size); keep a valid ``n(s)``; drop every existing index whose
    (tenant, corpus, dim) is no scope's."""
    if min_experiences < 0:
        raise ValueError(f"min_experiences must be >= 0, got {min_experiences}")
    by_key = {(s.tenant_id, s.corpus_id, s.dim): s for s in scopes}
    found = {(i.tenant_id, i.corpus_id, i.dim): i for i in existing}
    create, rebuild, keep = [], [], []
    for key, scope in sorted(by_key.items()):
        index = found.get(key)
        if index is None:
            if scope.experiences >= min_experiences and scope.dim <= MAX_HNSW_DIM:
                create.append(scope)
        elif not index.valid:
            rebuild.append(scope)
        else:
            keep.append(index.name)
    drop = sorted(i.name for key, i in found.items() if key not in by_key)
    return ScopeIndexPlan(create=tuple(create), rebuild=tuple(rebuild), drop=tuple(drop), keep=tuple(keep))
