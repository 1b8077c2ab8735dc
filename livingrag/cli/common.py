"""Helpers shared by the CLI commands: settings, database, output."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console

from livingrag.config import Settings, get_settings

if TYPE_CHECKING:
    from livingrag.db.engine import Database
    from livingrag.services.experiences import ExperienceRecord

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def load_settings() -> Settings:
    return get_settings()


_EXIT_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))
_SHIELDED_SIGNALS = (signal.SIGINT, *_EXIT_SIGNALS)


def _set_handlers(handlers: dict[int, Any]) -> None:
    """Install ``handlers`` (signal -> handler); outside the main thread, where Python allows no
    handler, nothing changes."""
    for sig, handler in handlers.items():
        try:
            signal.signal(sig, handler)
        except ValueError:
            return


def _die_by(signum: int) -> None:
    """End the process by ``signum`` with its default action, as it would have without the handler
    (its parent sees it terminated by that signal)."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextmanager
def command_scope() -> Iterator[None]:
    """Run one command so that every embedded PostgreSQL it started is let go when it ends, however
    it ends: done, failed, Ctrl-C, or SIGTERM/SIGHUP (raised as ``SystemExit`` so that cleanups run,
    as for Ctrl-C). Once the cleanups ran, a command ended by one of these signals ends the process
    by that signal, as Python does for an unhandled Ctrl-C (a shell reports 130 for Ctrl-C, 143 for
    SIGTERM); a Ctrl-C the command handled itself (the ``answer`` prompt's) ends nothing. A server
    still held by another process (a running ``serve``, an evaluation on the same data directory)
    keeps running; so does any server this process held before the command (in-process callers).
    While the servers are released, Ctrl-C and SIGTERM wait, so that a second Ctrl-C cannot leave
    one half-stopped.

    Why Ctrl-C ends by the signal and not by exit status 130: CPython marks a KeyboardInterrupt
    that leaves code run by ``exec`` of a string (dataclasses and named tuples make their methods
    so, for instance while a module is imported) as unhandled, and then ends the process by SIGINT
    at exit even though the command caught it; which of the two a Ctrl-C gave depended on where it
    landed."""
    original = {sig: h for sig in _SHIELDED_SIGNALS if (h := signal.getsignal(sig)) is not None}
    before = _embedded_held()
    received: list[int] = []
    ended_by_exception = False

    def _exit_on_signal(signum: int, _frame: object) -> None:
        received.append(signum)
        raise SystemExit(128 + signum)

    def _interrupt(signum: int, frame: Any) -> None:
        received.append(signum)
        signal.default_int_handler(signum, frame)  # KeyboardInterrupt, as without this handler

    handlers: dict[int, Any] = {sig: _exit_on_signal for sig in _EXIT_SIGNALS}
    if original.get(signal.SIGINT) is signal.default_int_handler:  # an ignored Ctrl-C stays ignored
        handlers[signal.SIGINT] = _interrupt
    _set_handlers(handlers)
    try:
        yield
    except BaseException:
        ended_by_exception = True
        raise
    finally:
        _set_handlers({sig: signal.SIG_IGN for sig in _SHIELDED_SIGNALS})
        try:
            _release_embedded(keep=before)
        finally:
            _set_handlers(original)
        fatal = [sig for sig in received if sig != signal.SIGINT or ended_by_exception]
        if fatal:
            _die_by(fatal[0])


def _embedded_held() -> list[Any]:
    embedded = sys.modules.get("livingrag.db.embedded")  # not imported: no server was started
    return [] if embedded is None else embedded.held_servers()


def _release_embedded(keep: list[Any]) -> None:
    embedded = sys.modules.get("livingrag.db.embedded")
    if embedded is not None:
        embedded.release_servers(keep=keep)


@contextmanager
def open_database(settings: Settings | None = None, *, check_schema: bool = True) -> Iterator[Any]:
    """Open the database for one command and release it (and the embedded server) afterwards.

    With ``check_schema`` (every command but ``db ...``) the schema is brought to head first
    (:func:`livingrag.db.setup.open_database`: the embedded database is upgraded, an external one
    that is behind is refused naming ``livingrag db upgrade``); without it the database is only
    connected to."""
    from livingrag.db.engine import Database
    from livingrag.db.setup import open_database as open_migrated

    settings = settings or load_settings()
    db = open_migrated(settings.db) if check_schema else Database(settings.db)
    try:
        yield db
    finally:
        db.close()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def when(t: datetime | None) -> str:
    """A timestamp as the tables show it (seconds, ISO 8601), or ``-``."""
    return "-" if t is None else t.isoformat(timespec="seconds")


def json_option(help: str = "Print JSON.") -> Any:
    import typer

    return typer.Option(False, "--json", help=help)


MAX_ID = 2**63 - 1
"""The largest id a bigint column holds (a larger one is a usage error, not a database error)."""


def id_argument(help: str) -> Any:
    """A positional database id (a positive bigint)."""
    import typer

    return typer.Argument(..., min=1, max=MAX_ID, help=help, show_default=False)


def experience_state(rec: ExperienceRecord, now: datetime | None = None) -> str:
    """``retracted`` (a person said it is wrong), ``stale`` (a source passage changed), ``expired``
    or ``active``: why an experience is or is not used, the strongest reason first."""
    if rec.trust == "retracted":
        return "retracted"
    if rec.stale:
        return "stale"
    if rec.expires_at is not None and rec.expires_at <= (now or datetime.now(UTC)):
        return "expired"
    return "active"


def examples(*lines: str) -> str:
    """Format an 'Example' block for a command's help (kept verbatim by typer's rich markup)."""
    body = "\n\n".join(f"  $ {line}" for line in lines)
    return f"\n\n[bold]Example[/bold]\n\n{body}"


TENANT_HELP = (
    "Tenant that owns the corpus (env LIVINGRAG_TENANT). The tenant 'default' is created on first use; "
    "other tenants come from `livingrag tenant create`."
)


def tenant_option() -> Any:
    import typer

    return typer.Option("default", "--tenant", envvar="LIVINGRAG_TENANT", help=TENANT_HELP, show_default=True)


def resolve_tenant(db: Database, name: str) -> int:
    """The tenant's id; the tenant named 'default' is created (once) when missing."""
    from livingrag.corpus.service import DEFAULT_TENANT, ensure_tenant

    tenant_id, key = ensure_tenant(db, name, create=name == DEFAULT_TENANT)
    if key is not None:
        err_console.print(
            f"created tenant [bold]{name}[/bold] (id {tenant_id}); its API key, shown once: [bold]{key}[/bold]"
        )
    return tenant_id
