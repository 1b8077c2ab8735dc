"""``livingrag admin``: operator maintenance of the experience store (expiry, pruning, statistics).

These commands use the owner connection and work across tenants unless ``--tenant`` narrows them.
Every command takes ``--dry-run``; the ones that change data then only report what they would do.
"""

from __future__ import annotations

from datetime import UTC, datetime

import typer
from rich.table import Column, Table

from livingrag.cli.common import console, examples, experience_state, open_database, print_json, when

app = typer.Typer(
    help="Experience-store maintenance: expiry, pruning, statistics." + examples("livingrag admin stats"),
    no_args_is_help=True,
)

TENANT = typer.Option(None, "--tenant", help="Only this tenant (name or id).")
CORPUS = typer.Option(None, "--corpus", help="Only this corpus (name or id; needs --tenant).")
DRY_RUN = typer.Option(False, "--dry-run", help="Report what would change; change nothing.")
JSON = typer.Option(False, "--json", help="Print one JSON object.")


def _fixed(header: str) -> Column:
    """A table column that keeps its values whole (the free-text columns wrap instead)."""
    return Column(header, no_wrap=True)


@app.command(
    help="Expire experiences created before a cutoff (they stay, counted as expired, until pruned)."
    + examples(
        "livingrag admin expire --older-than 30d --dry-run",
        "livingrag admin expire --before 2026-01-01 --tenant acme",
    )
)
def expire(
    before: str | None = typer.Option(None, "--before", help="ISO timestamp or date (UTC when no zone is given)."),
    older_than: str | None = typer.Option(None, "--older-than", help="Age such as 30d, 12h, 2w, 1y."),
    tenant: str | None = TENANT,
    corpus: str | None = CORPUS,
    dry_run: bool = DRY_RUN,
    as_json: bool = JSON,
) -> None:
    from livingrag.experience import lifecycle
    from livingrag.services import maintenance

    now = datetime.now(UTC)
    cut = lifecycle.cutoff(before=before, older_than=older_than, now=now)
    with open_database() as db:
        n = maintenance.expire(db, tenant=tenant, corpus=corpus, created_before=cut, now=now, dry_run=dry_run)
    if as_json:
        print_json({"expired": n, "created_before": cut, "dry_run": dry_run})
        return
    verb = "would expire" if dry_run else "expired"
    console.print(f"{verb} {n} experiences created before {cut.isoformat(timespec='seconds')}")


@app.command(
    help="Delete experiences: beyond a per-tenant maximum (least useful first: uses, then confidence, then age), "
    "under a confidence, unused for a while, expired or stale."
    + examples(
        "livingrag admin prune --max-per-tenant 10000 --dry-run",
        "livingrag admin prune --min-confidence 0.7 --unused-for 90d --expired --stale",
    )
)
def prune(
    max_per_tenant: int | None = typer.Option(None, "--max-per-tenant", min=0, help="Keep at most N per tenant."),
    min_confidence: float | None = typer.Option(
        None, "--min-confidence", min=0.0, max=1.0, help="Delete below this confidence."
    ),
    unused_since: str | None = typer.Option(
        None, "--unused-since", help="Delete if neither used nor created since this timestamp."
    ),
    unused_for: str | None = typer.Option(None, "--unused-for", help="Delete if unused for this long (e.g. 90d)."),
    expired: bool = typer.Option(False, "--expired", help="Delete expired experiences."),
    stale: bool = typer.Option(False, "--stale", help="Delete stale experiences (their source passages changed)."),
    tenant: str | None = TENANT,
    corpus: str | None = CORPUS,
    dry_run: bool = DRY_RUN,
    as_json: bool = JSON,
) -> None:
    from livingrag.errors import InvalidInput
    from livingrag.experience import lifecycle
    from livingrag.services import maintenance
    from livingrag.services.experiences import PruneCriteria

    now = datetime.now(UTC)
    if unused_since is not None and unused_for is not None:
        raise InvalidInput("give at most one of --unused-since and --unused-for")
    since = None
    if unused_since is not None:
        since = lifecycle.parse_timestamp(unused_since)
    elif unused_for is not None:
        since = now - lifecycle.parse_duration(unused_for)
    criteria = PruneCriteria(
        max_per_tenant=max_per_tenant, min_confidence=min_confidence, unused_since=since, expired=expired, stale=stale
    )
    with open_database() as db:
        counts = maintenance.prune(db, criteria, tenant=tenant, corpus=corpus, now=now, dry_run=dry_run)
    if as_json:
        print_json(counts | {"dry_run": dry_run})
        return
    verb = "would delete" if dry_run else "deleted"
    detail = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in counts.items() if k != "total")
    console.print(f"{verb} {counts['total']} experiences ({detail})")


@app.command(
    help="Store statistics per tenant and corpus: size, stale and expired counts, gate statistics (the paper's "
    "Table 6 columns) and reuse coverage (Table 16). Read-only."
    + examples("livingrag admin stats", "livingrag admin stats --tenant acme --json")
)
def stats(
    tenant: str | None = TENANT,
    corpus: str | None = CORPUS,
    dry_run: bool = typer.Option(False, "--dry-run", help="Accepted for uniformity; this command never writes."),
    as_json: bool = JSON,
) -> None:
    from livingrag.services import maintenance

    with open_database() as db:
        rows = maintenance.stats(db, tenant=tenant, corpus=corpus)
    if as_json:
        print_json(rows)
        return
    labels = {
        "experiences": "stored experiences", "active": "active", "stale": "stale", "expired": "expired",
        "avg_confidence": "average confidence", "questions": "candidates (Table 6: questions)",
        "ns_pass_pct": "NS pass %", "gs_checked": "GS checked", "gs_pass_pct": "GS pass %", "gs_reject": "GS reject",
        "stored": "stored by the gates", "errors": "errors", "dropped": "dropped",
        "topk_selections": "top-K selections (Table 16)", "fusion_coverage_pct": "fusion coverage %",
        "scaffold_uses": "scaffold uses", "scaffold_coverage_pct": "scaffold coverage %",
        "max_scaffold_uses": "max scaffold uses",
    }  # fmt: skip
    if not rows:
        console.print("no experiences")
    for r in rows:
        table = Table("metric", "value", title=f"tenant {r['tenant_id']}, corpus {r['corpus_id']}")
        for key, label in labels.items():
            table.add_row(label, "-" if r.get(key) is None else str(r[key]))
        console.print(table)


@app.command(
    name="list",
    help="List experiences, newest first, with who vouches for each (origin, trust) and its heuristic gate score "
    "GS (the grounding gate's score, not a probability of being right). Read-only."
    + examples(
        "livingrag admin list --tenant acme --limit 20",
        "livingrag admin list --tenant acme --trust verified --json",
    ),
)
def list_(
    tenant: str | None = TENANT,
    corpus: str | None = CORPUS,
    active: bool = typer.Option(False, "--active", help="Only active experiences (not stale, retracted or expired)."),
    trust: str | None = typer.Option(
        None, "--trust", help="Only this trust: unverified, auto_verified, verified or retracted."
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="At most this many."),
    offset: int = typer.Option(0, "--offset", min=0, help="Skip this many."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Accepted for uniformity; this command never writes."),
    as_json: bool = JSON,
) -> None:
    from dataclasses import asdict

    from livingrag.services import maintenance

    now = datetime.now(UTC)
    with open_database() as db:
        rows = maintenance.list_experiences(
            db,
            tenant=tenant,
            corpus=corpus,
            include_inactive=not active,
            now=now,
            limit=limit,
            offset=offset,
            trust=trust,
        )
    if as_json:
        print_json([asdict(r) | {"state": experience_state(r, now)} for r in rows])
        return
    table = Table(
        *map(_fixed, ("id", "scope")), "query", "answer", *map(_fixed, ("origin", "trust", "GS", "uses")), "created",
        _fixed("state"),
        caption="scope: tenant/corpus; GS: the grounding gate's heuristic score, not a confidence; "
        "uses: fusion/scaffold/answer",
    )  # fmt: skip
    for r in rows:
        table.add_row(
            str(r.id), f"{r.tenant_id}/{r.corpus_id}", r.query[:60], r.answer[:30], r.origin, r.trust,
            f"{r.confidence:.2f}", f"{r.fusion_uses}/{r.scaffold_uses}/{r.answer_uses}", when(r.created_at),
            experience_state(r, now),
        )  # fmt: skip
    console.print(table)


@app.command(
    name="index-scopes",
    help="Give each large (tenant, corpus) scope its own HNSW index of query embeddings, so that matching walks "
    "a graph of the scope's experiences instead of filtering the shared one; rebuild indexes whose build was "
    "interrupted and drop those of deleted corpora. Builds run CONCURRENTLY: matching and write-backs go on."
    + examples(
        "livingrag admin index-scopes --dry-run",
        "livingrag admin index-scopes --min-experiences 20000",
        "livingrag admin index-scopes --tenant acme --corpus wiki --json",
    ),
)
def index_scopes(
    min_experiences: int = typer.Option(
        5000, "--min-experiences", min=0, help="Index scopes holding at least this many experiences."
    ),
    maintenance_work_mem: str = typer.Option(
        "1GB", "--maintenance-work-mem", help="PostgreSQL maintenance_work_mem for the builds (e.g. 512MB, 2GB)."
    ),
    tenant: str | None = TENANT,
    corpus: str | None = CORPUS,
    dry_run: bool = DRY_RUN,
    as_json: bool = JSON,
) -> None:
    from livingrag.experience.scope_indexing import index_scopes as run
    from livingrag.services import maintenance

    with open_database() as db:
        scope = maintenance.scope(db, tenant, corpus)
        report = run(
            db,
            tenant_id=scope.tenant_id,
            corpus_id=scope.corpus_id,
            min_experiences=min_experiences,
            maintenance_work_mem=maintenance_work_mem,
            dry_run=dry_run,
            progress=(lambda m: None) if as_json else console.print,
        )
    out = report.as_dict()
    if as_json:
        print_json(out)
        return
    verb = "would" if dry_run else "did"
    console.print(
        f"{verb} build {len(out['create'])}, rebuild {len(out['rebuild'])} and drop {len(out['drop'])} scope "
        f"indexes; {len(out['keep'])} kept"
    )
    for item in (*out["create"], *out["rebuild"]):
        took = out["built_s"].get(item["index"])
        console.print(
            f"  {item['index']}: tenant {item['tenant_id']}, corpus {item['corpus_id']}, {item['experiences']} "
            f"experiences" + (f", {took} s" if took is not None else "")
        )
    for name in out["drop"]:
        console.print(f"  drop {name}")
