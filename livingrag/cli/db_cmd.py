"""``livingrag db``: schema migrations and server status."""

from __future__ import annotations

from typing import Any

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


def _buffer_loader() -> str:
    """Where the embedded server's buffer loader is, or that it is missing and how to build it."""
    from livingrag.db.loader_build import installed_library

    path = installed_library()
    return str(path) if path else "not installed: python -m livingrag.db.loader_build build (needs a C compiler)"


@app.command(help="Show the schema revision and the server in use." + examples("livingrag db status --json"))
def status(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    from livingrag.config import mask_url
    from livingrag.db import migrate
    from livingrag.db.embedded import memory_plan_for
    from livingrag.services.database import MEMORY_SETTINGS, memory_in_use

    with open_database(check_schema=False) as db:
        st = migrate.status(db)
        running, store_bytes = memory_in_use(db)
        info: dict[str, Any] = {
            "server": "embedded" if db.embedded else "external",
            "url": mask_url(db.owner_url),
            "data_dir": str(db.settings.data_dir) if db.embedded else None,
            "current": st.current,
            "head": st.head,
            "up_to_date": st.up_to_date,
            "prewarm": db.embedded is not None and db.settings.prewarm,
            "prewarm_buffers_fraction": db.settings.prewarm_buffers_fraction if db.embedded else None,
            "buffer_loader": _buffer_loader() if db.embedded else None,
            "experience_store_mb": round(store_bytes / 1024**2, 1) if store_bytes is not None else None,
        }
        plan = memory_plan_for(db.settings) if db.embedded else None
    configured = plan.settings_mb() if plan else {}
    auto = plan.auto_by_name() if plan else {}
    memory = {
        name: {"running_mb": running.get(name), "configured_mb": configured.get(name), "auto": auto.get(name)}
        for name in MEMORY_SETTINGS
    }
    info["memory"] = memory
    info["memory_basis_mb"] = plan.memory_mb if plan else None
    pending = [k for k, v in memory.items() if v["configured_mb"] is not None and v["configured_mb"] != v["running_mb"]]
    info["memory_restart_needed"] = bool(pending)
    if as_json:
        print_json(info)
        return
    width = max(len(k) for k in (*info, *info["memory"]))
    for k, v in info.items():
        if k == "memory":
            for name, m in v.items():
                how = (
                    ""
                    if m["configured_mb"] is None
                    else (f" (configured {m['configured_mb']} MB, {'auto' if m['auto'] else 'set'})")
                )
                console.print(f"{name:>{width}}: {m['running_mb']} MB{how}")
        elif k != "memory_restart_needed":
            console.print(f"{k:>{width}}: {v}")
    if not st.up_to_date:
        console.print("[yellow]schema is not current: run `livingrag db upgrade`[/yellow]")
    if pending:
        console.print(
            f"[yellow]{', '.join(pending)}: configured values take effect when the embedded server restarts "
            "(when no process uses it)[/yellow]"
        )
