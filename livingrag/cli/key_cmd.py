"""``livingrag key``: create, list and revoke a tenant's API keys (operator commands, owner URL)."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from livingrag.cli.common import console, examples, open_database, print_json, when

app = typer.Typer(
    help="A tenant's API keys: several named keys, each with scopes (read, write, feedback, admin), an optional "
    "expiry, revocable at any time." + examples("livingrag key list --tenant acme"),
    no_args_is_help=True,
)

TENANT = typer.Option(..., "--tenant", help="Tenant name or id.")
JSON = typer.Option(False, "--json", help="Print JSON.")


def _as_dict(rec: Any) -> dict[str, Any]:
    return {
        "id": rec.id,
        "name": rec.name,
        "prefix": rec.prefix,
        "scopes": list(rec.scopes),
        "state": rec.state(),
        "created_at": rec.created_at,
        "last_used_at": rec.last_used_at,
        "expires_at": rec.expires_at,
        "revoked_at": rec.revoked_at,
    }


@app.command(
    help="Create a key for a tenant and print it (shown once; only its hash is stored). Scopes: read (questions "
    "and every GET), write (corpora, passages, index jobs, deleting experiences), admin (the tenant's own keys)."
    + examples(
        "livingrag key create --tenant acme --name ci --scopes read,write --expires-in-days 90",
        "livingrag key create --tenant acme --name dashboard --json",
    )
)
def create(
    tenant: str = TENANT,
    name: str = typer.Option(..., "--name", help="Key name, unique within the tenant (letters, digits, . _ -)."),
    scopes: str = typer.Option(
        "read", "--scopes", help="Comma-separated: read, write, feedback (verdicts on answers; verify, retract), admin."
    ),
    expires_in_days: int | None = typer.Option(
        None, "--expires-in-days", help="Expire this many days from now (1 to 3650; default: never)."
    ),
    as_json: bool = JSON,
) -> None:
    from livingrag.services import keys, tenants

    # Everything the user typed is checked before the database is touched.
    key_name = keys.validate_key_name(name)
    wanted = keys.parse_scopes(scopes)
    keys.expiry(in_days=expires_in_days)
    with open_database() as db:
        t, rec, key = tenants.create_key(db, tenant, key_name, wanted, expires_in_days=expires_in_days)
    if as_json:
        print_json({"tenant": t.name, **_as_dict(rec), "key": key})
        return
    console.print(
        f"created key [bold]{rec.name}[/bold] (id {rec.id}) for tenant [bold]{t.name}[/bold]: "
        f"scopes {','.join(rec.scopes)}, expires {when(rec.expires_at)}"
    )
    console.print(f"API key (shown once, store it now): [bold]{key}[/bold]")


@app.command(
    name="list",
    help="List a tenant's keys, revoked and expired ones included (never the keys themselves)."
    + examples("livingrag key list --tenant acme", "livingrag key list --tenant acme --json"),
)
def list_(tenant: str = TENANT, as_json: bool = JSON) -> None:
    from livingrag.services import tenants

    with open_database() as db:
        rows = tenants.list_keys(db, tenant)
    if as_json:
        print_json([_as_dict(r) for r in rows])
        return
    table = Table("id", "name", "prefix", "scopes", "state", "created", "last used", "expires", "revoked")
    for r in rows:
        table.add_row(
            str(r.id),
            r.name,
            r.prefix + "…",
            ",".join(r.scopes),
            r.state(),
            when(r.created_at),
            when(r.last_used_at),
            when(r.expires_at),
            when(r.revoked_at),
        )
    console.print(table)


@app.command(
    help="Revoke a tenant's key by id or name: its next request is refused (401). The key stays listed."
    + examples("livingrag key revoke --tenant acme ci", "livingrag key revoke --tenant acme 12")
)
def revoke(
    key: str = typer.Argument(..., help="Key id or name."),
    tenant: str = TENANT,
    as_json: bool = JSON,
) -> None:
    from livingrag.services import tenants

    with open_database() as db:
        done = tenants.revoke_key(db, tenant, key)
    t, before, rec, admins_left = done.tenant, done.before, done.key, done.active_admin_keys
    if as_json:
        print_json({"tenant": t.name, **_as_dict(rec), "active_admin_keys": admins_left})
        return
    if before.revoked_at is not None:
        console.print(f"key [bold]{rec.name}[/bold] (id {rec.id}) was already revoked at {when(rec.revoked_at)}")
    else:
        console.print(f"revoked key [bold]{rec.name}[/bold] (id {rec.id}) of tenant [bold]{t.name}[/bold]")
    if admins_left == 0:
        console.print(
            f"note: tenant {t.name} has no active admin key left, so it cannot manage its keys itself; "
            f"create one with: livingrag key create --tenant {t.name} --name <name> --scopes read,write,admin"
        )
