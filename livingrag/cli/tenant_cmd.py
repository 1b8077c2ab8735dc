"""``livingrag tenant``: create, list and delete tenants (operator commands)."""

from __future__ import annotations

import typer
from rich.table import Table

from livingrag.cli.common import console, examples, open_database, print_json

app = typer.Typer(
    help="Tenants (their API keys: `livingrag key`)." + examples("livingrag tenant list"), no_args_is_help=True
)


@app.command(
    help="Create a tenant and print its first API key, 'default', with every scope (shown once; only its hash "
    "is stored). More keys: `livingrag key create`."
    + examples("livingrag tenant create acme", "livingrag tenant create acme --json")
)
def create(
    name: str = typer.Argument(..., help="Unique tenant name."),
    as_json: bool = typer.Option(False, "--json", help='Print {"tenant": ..., "api_key": ...}.'),
) -> None:
    from livingrag.services import tenants

    with open_database() as db:
        rec, key = tenants.create_tenant(db, name)
    if as_json:
        print_json({"tenant": rec.name, "id": rec.id, "api_key": key})
        return
    console.print(f"created tenant [bold]{rec.name}[/bold] (id {rec.id})")
    console.print(f"API key 'default', every scope (shown once, store it now): [bold]{key}[/bold]")
    console.print(f"more keys, with fewer scopes or an expiry: livingrag key create --tenant {rec.name} --name <name>")


@app.command(name="list", help="List tenants." + examples("livingrag tenant list --json"))
def list_(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    from livingrag.services import tenants

    with open_database() as db:
        rows = tenants.list_tenants(db)
    if as_json:
        print_json(
            [{"id": r.id, "name": r.name, "active_keys": r.active_keys, "created_at": r.created_at} for r in rows]
        )
        return
    table = Table("id", "name", "active keys", "created")
    for r in rows:
        table.add_row(str(r.id), r.name, str(r.active_keys), r.created_at.isoformat(timespec="seconds"))
    console.print(table)


@app.command(
    help="Delete a tenant and everything it owns (corpora, experiences, logs)."
    + examples("livingrag tenant delete acme --yes")
)
def delete(
    name: str = typer.Argument(..., help="Tenant name or id."),
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation."),
) -> None:
    from livingrag.services import tenants

    with open_database() as db:
        rec = tenants.get_tenant(db, name)
        if not yes and not typer.confirm(f"Delete tenant {rec.name!r} and all its data?"):
            raise typer.Exit(1)
        tenants.delete_tenant(db, rec.id)
    console.print(f"deleted tenant [bold]{rec.name}[/bold]")
