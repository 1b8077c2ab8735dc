"""``livingrag db``: schema migrations and server status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from livingrag.cli.common import console, examples, load_settings, open_database, print_json

app = typer.Typer(help="Database schema and server." + examples("livingrag db status"), no_args_is_help=True)
replica_app = typer.Typer(
    help="Hot standbys of the embedded server that questions read from (LIVINGRAG_DB__READ_URLS); for tests and "
    "small deployments (with an external server, use its own read replicas: docs/production.md)."
    + examples("livingrag db replica create --data-dir /var/lib/livingrag-standby"),
    no_args_is_help=True,
)
app.add_typer(replica_app, name="replica")


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
            "replicas": _replicas_now(db),
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
        elif k == "replicas":
            for i, r in enumerate(v, 1):
                console.print(f"{f'replica {i}':>{width}}: {_replica_line(r)}", highlight=False)
            if not v:
                console.print(f"{k:>{width}}: none (LIVINGRAG_DB__READ_URLS unset)")
        elif k != "memory_restart_needed":
            console.print(f"{k:>{width}}: {v}")
    if not st.up_to_date:
        console.print("[yellow]schema is not current: run `livingrag db upgrade`[/yellow]")
    if pending:
        console.print(
            f"[yellow]{', '.join(pending)}: configured values take effect when the embedded server restarts "
            "(when no process uses it)[/yellow]"
        )


def _replicas_now(db: Any) -> list[dict[str, Any]]:
    """Each read standby's state and lag, checked now (``db.read_urls``; empty without)."""
    if db.replicas is None:
        return []
    db.replicas.check_once()
    return [{k: v for k, v in r.items() if k != "reads"} for r in db.replica_status()]


def _replica_line(r: dict[str, Any]) -> str:
    """One standby of :func:`_replicas_now` as text."""
    parts = [r["state"]]
    if r["lag_ms"] is not None:
        parts.append(f"lag {r['lag_ms']:g} ms")
    if r["replay_lsn"]:
        parts.append(f"replayed {r['replay_lsn']}" + (" (replay paused)" if r["replay_paused"] else ""))
    if r["error"]:
        parts.append(r["error"])
    return f"{', '.join(parts)}: {r['url']}"


_EMBEDDED_NOTE = (
    "the embedded server runs while a livingrag process holds it (this command lets it go when it ends, "
    "unless another one, such as `livingrag serve`, holds it); `livingrag db url --hold` keeps it up until "
    "Ctrl-C, `livingrag db psql` opens psql on it"
)


@app.command(
    help="Print the connection string of the database in use, for psql, pg_dump or any libpq client. For the "
    "embedded server that is its superuser 'postgres' over its unix socket (no password; the socket folder is "
    "in the string); it runs only while a livingrag process holds it: --hold keeps it up until Ctrl-C. An "
    "external server's password is left out unless --show-password."
    + examples("livingrag db url", "livingrag db url --hold", 'psql "$(livingrag db url)" -c "\\dv"')
)
def url(
    hold: bool = typer.Option(False, "--hold", help="Keep the embedded server running until Ctrl-C."),
    show_password: bool = typer.Option(False, "--show-password", help="Print an external server's password too."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    import contextlib
    import threading

    from livingrag.cli.common import err_console
    from livingrag.db.client import libpq_url

    settings = load_settings()
    # the embedded database is brought to head, as every command does (an external one is only reached)
    with open_database(settings, check_schema=settings.db.url is None) as db:
        embedded = db.embedded is not None
        shown = libpq_url(db.owner_url, password=show_password)
        if as_json:
            print_json({"url": shown, "server": "embedded" if embedded else "external"})
        else:
            typer.echo(shown)
            if embedded:
                err_console.print(f"[dim]{_EMBEDDED_NOTE}[/dim]")
        if hold and embedded:
            err_console.print("[dim]holding the embedded server; Ctrl-C lets it go[/dim]")
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help="Open psql on the database in use (the embedded server's own psql when there is one, else psql on "
    "PATH), as its owner: the superuser 'postgres' of the embedded server, or the LIVINGRAG_DB__URL login. "
    "Arguments after -- go to psql. The embedded server stays up until psql ends. A superuser sees every "
    "tenant's rows; `SET ROLE livingrag_app; SET livingrag.tenant_id = '3';` sees tenant 3's only, as the app does."
    + examples("livingrag db psql", "livingrag db psql -- -c 'SELECT * FROM writeback_gate_stats'"),
)
def psql(ctx: typer.Context) -> None:
    import os
    import signal
    import subprocess

    from livingrag.db.client import client_env, libpq_url, psql_executable
    from livingrag.errors import ConfigError

    exe = psql_executable()
    if exe is None:
        raise ConfigError("no psql found: install PostgreSQL's client (apt-get install postgresql-client)")
    settings = load_settings()
    with open_database(settings, check_schema=settings.db.url is None) as db:
        env = client_env(db.owner_url, dict(os.environ))
        previous = signal.getsignal(signal.SIGINT)
        # Ctrl-C belongs to psql (it cancels the running query); a handler, unlike SIG_IGN, is not
        # inherited by psql
        signal.signal(signal.SIGINT, lambda _signum, _frame: None)
        try:
            code = subprocess.call([exe, libpq_url(db.owner_url), *ctx.args], env=env)
        finally:
            signal.signal(signal.SIGINT, previous)
    raise typer.Exit(code)


_DATA_DIR_HELP = "The standby's folder (its data goes in DIR/pgdata); not the primary's LIVINGRAG_DB__DATA_DIR."


@replica_app.command(
    "create",
    help="Make a hot standby of the embedded server with pg_basebackup in DIR and start it: it streams the "
    "primary's changes and answers reads over its own unix socket (PORT names the socket). Prints the read URL "
    "for LIVINGRAG_DB__READ_URLS. A DIR that holds a standby already is only started. The standby keeps running "
    "after this command (`livingrag db replica stop`), also while the primary is stopped (it reconnects when the "
    "primary starts again)."
    + examples(
        "livingrag db replica create --data-dir /var/lib/livingrag-standby",
        'export LIVINGRAG_DB__READ_URLS="$(livingrag db replica create --data-dir /tmp/standby --port 5434 --url)"',
    ),
)
def replica_create(
    data_dir: Path = typer.Option(..., "--data-dir", help=_DATA_DIR_HELP),
    port: int = typer.Option(5433, "--port", min=1, max=65535, help="The standby's port (it names its socket)."),
    url_only: bool = typer.Option(False, "--url", help="Print only the read URL."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.cli.common import err_console
    from livingrag.db.standby import create_standby
    from livingrag.errors import ConfigError

    settings = load_settings()
    if settings.db.url is not None:
        raise ConfigError(
            "`livingrag db replica create` makes a standby of the embedded server, and LIVINGRAG_DB__URL names an "
            "external one: create its read replicas with its provider or pg_basebackup, then list them in "
            "LIVINGRAG_DB__READ_URLS (docs/production.md, Read replicas)"
        )
    folder, primary = data_dir.expanduser().resolve(), settings.db.data_dir.expanduser().resolve()
    if folder == primary or primary in folder.parents or folder in primary.parents:
        raise ConfigError(
            f"--data-dir {folder} overlaps the primary's LIVINGRAG_DB__DATA_DIR {primary}: give the standby a folder "
            "of its own"
        )
    with open_database(settings) as db:  # the embedded schema at head first, so the copy has it
        standby = create_standby(db.owner_url, folder, port=port)
    url = standby.url()
    if url_only:
        typer.echo(url)
    elif as_json:
        print_json({"url": url, "data_dir": str(standby.data_dir), "socket_dir": str(standby.socket_dir), "port": port})
    else:
        console.print(f"standby running in {standby.pgdata}", highlight=False)
        typer.echo(f"LIVINGRAG_DB__READ_URLS={url}")
        err_console.print(
            "[dim]it streams from the embedded primary while that runs (a `livingrag serve`, `db url --hold`); "
            "`livingrag db replica stop --data-dir ...` stops it[/dim]"
        )


@replica_app.command(
    "start",
    help="Start the standby that `db replica create` made in DIR (nothing when it runs); prints its read URL."
    + examples("livingrag db replica start --data-dir /var/lib/livingrag-standby"),
)
def replica_start(data_dir: Path = typer.Option(..., "--data-dir", help=_DATA_DIR_HELP)) -> None:
    from livingrag.db.standby import start_standby

    typer.echo(start_standby(data_dir).url())


@replica_app.command(
    "stop",
    help="Stop the standby in DIR (fast shutdown: its connections are closed; the service's reads go to the "
    "other standbys or the primary)." + examples("livingrag db replica stop --data-dir /var/lib/livingrag-standby"),
)
def replica_stop(data_dir: Path = typer.Option(..., "--data-dir", help=_DATA_DIR_HELP)) -> None:
    from livingrag.db.standby import stop_standby

    stopped = stop_standby(data_dir)
    console.print("stopped" if stopped else "not running", highlight=False)
