"""Build, rebuild and drop per-scope HNSW indexes (``livingrag admin index-scopes``).

Reads the scopes and the existing indexes in an owner session, plans with
:func:`~livingrag.experience.scope_index_plan.plan_scope_indexes`, then changes indexes one at a
time, each ``CONCURRENTLY`` on an autocommit owner connection, so that matching and write-backs go
on during a build. Each finished step is durable by itself: an interrupted run leaves the indexes
it finished, and at most one invalid index, which the next run rebuilds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from livingrag.db.repositories import scope_indexes as repo
from livingrag.experience.scope_index_plan import ScopeIndexPlan, plan_scope_indexes

if TYPE_CHECKING:
    from livingrag.db.engine import Database

DEFAULT_MIN_EXPERIENCES = 5000
DEFAULT_BUILD_MEMORY = "1GB"


@dataclass
class ScopeIndexReport:
    """What was (or, with ``dry_run``, would be) done, with the build time of each index."""

    plan: ScopeIndexPlan
    dry_run: bool
    built: dict[str, float] = field(default_factory=dict)  # index name -> seconds
    dropped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        def scope(s: repo.ScopeSize) -> dict[str, int | str]:
            return {
                "tenant_id": s.tenant_id,
                "corpus_id": s.corpus_id,
                "dim": s.dim,
                "experiences": s.experiences,
                "index": repo.index_name(s.tenant_id, s.corpus_id, s.dim),
            }

        return {
            "dry_run": self.dry_run,
            "create": [scope(s) for s in self.plan.create],
            "rebuild": [scope(s) for s in self.plan.rebuild],
            "drop": list(self.plan.drop),
            "keep": list(self.plan.keep),
            "built_s": {k: round(v, 1) for k, v in self.built.items()},
            "dropped": list(self.dropped),
        }


def index_scopes(
    db: Database,
    *,
    tenant_id: int | None = None,
    corpus_id: int | None = None,
    min_experiences: int = DEFAULT_MIN_EXPERIENCES,
    maintenance_work_mem: str = DEFAULT_BUILD_MEMORY,
    dry_run: bool = False,
    progress: Callable[[str], None] = lambda _m: None,
) -> ScopeIndexReport:
    """Plan for the scopes of ``tenant_id`` (all tenants: None; one corpus: ``corpus_id``) and,
    unless ``dry_run``, carry the plan out: drop orphans, rebuild invalid indexes, build new ones."""
    with db.owner_session() as s:
        scopes = repo.scope_sizes(s, tenant_id)
        existing = repo.list_scope_indexes(s)
        if tenant_id is not None:
            existing = [i for i in existing if i.tenant_id == tenant_id]
        if corpus_id is not None:
            scopes = [x for x in scopes if x.corpus_id == corpus_id]
            existing = [i for i in existing if i.corpus_id == corpus_id]
    plan = plan_scope_indexes(scopes, existing, min_experiences=min_experiences)
    report = ScopeIndexReport(plan=plan, dry_run=dry_run)
    if dry_run:
        return report
    with db.owner_engine.connect() as raw:
        conn = raw.execution_options(isolation_level="AUTOCOMMIT")
        repo.no_statement_timeout(conn)
        repo.set_build_memory(conn, maintenance_work_mem)
        for name in plan.drop:
            progress(f"dropping {name} (its scope no longer exists)")
            repo.drop_scope_index(conn, name)
            report.dropped.append(name)
        for scope in plan.rebuild:
            name = repo.index_name(scope.tenant_id, scope.corpus_id, scope.dim)
            progress(f"dropping the invalid {name} (an interrupted build) to build it again")
            repo.drop_scope_index(conn, name)
            report.dropped.append(name)
        for scope in (*plan.rebuild, *plan.create):
            name = repo.index_name(scope.tenant_id, scope.corpus_id, scope.dim)
            progress(f"building {name} over {scope.experiences} experiences")
            t0 = time.perf_counter()
            repo.create_scope_index(conn, scope.tenant_id, scope.corpus_id, scope.dim)
            report.built[name] = time.perf_counter() - t0
            progress(f"  {name}: {report.built[name]:.1f} s")
    return report
