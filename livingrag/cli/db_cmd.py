"""``livingrag db``: schema migrations and server status."""

from __future__ import annotations

import typer

from livingrag.cli.common import console, examples, open_database, print_json

app = typer.Typer(help="Database schema and server." + examples("livingrag db status"), no_args_is_help=True)


@app.command(help="Apply migrations up to REVISION (default: head)." + examples("livingrag db upgrade"))
def upgrade(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    from livingrag.db import migrate

    with open_database(check_schema=False) as db:
        migrate.upgrade(db, revision)
        st = migrate.status(db)
    console.print(f"schema at revision [bold]{st.current}[/bold] (head {st.head})")


@app.command(
    help="Revert migrations down to REVISION ('base' drops the whole schema and its data)."
    + examples("livingrag db downgrade 0001", "livingrag db downgrade base --yes")
)
def downgrade(
    revision: str = typer.Argument(..., help="Target revision, or 'base'."),
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation."),
) -> None:
    from livingrag.db import migrate

    if not yes and not typer.confirm(f"Downgrade the schema to {revision}? Data in dropped tables is lost."):
        raise typer.Exit(1)
    with open_database(check_schema=False) as db:
        migrate.downgrade(db, revision)
        st = migrate.status(db)
    console.print(f"schema at revision [bold]{st.current or 'base'}[/bold] (head {st.head})")


@app.command(help="Show the schema revision and the server in use." + examples("livingrag db status --json"))
def status(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    from livingrag.config import mask_url
    from livingrag.db import migrate

    with open_database(check_schema=False) as db:
        st = migrate.status(db)
        info = {
            "server": "embedded" if db.embedded else "external",
            "url": mask_url(db.owner_url),
            "data_dir": str(db.settings.data_dir) if db.embedded else None,
            "current": st.current,
            "head": st.head,
            "up_to_date": st.up_to_date,
        }
    if as_json:
        print_json(info)
        return
    for k, v in info.items():
        console.print(f"{k:>11}: {v}")
    if not st.up_to_date:
        console.print("[yellow]schema is not current: run `livingrag db upgrade`[/yellow]")
