"""``livingrag doctor``: check that this install can answer a question, and say how to fix what cannot."""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from livingrag.cli.common import console, examples, load_settings, print_json

if TYPE_CHECKING:
    from livingrag.diagnostics import Check

CHECKS_HELP = (
    "python (3.11+), settings (they validate), cpu and runtime (the local model's CPU and llama.cpp build; "
    "llm.provider=local only), data_dir (writable, free space), database (reachable, pgvector), schema (at the "
    "migrations' head), embedding and ner (the models load and run), verifier (the grounding gate's claim verifier; "
    "auto says when it falls back to the offline one), llm (one real completion)"
)

DOCTOR_HELP = (
    "Check the install, in order, and print one line per check (ok, fail or skip) with its detail, and for a "
    f"failure the fix. The checks: {CHECKS_HELP}. A failure never stops the checks after it. Doctor does not "
    "migrate the database: it says when the schema is behind and how to upgrade it. Exit status 0 when no "
    "check fails, 1 otherwise."
    + examples(
        "livingrag doctor",
        "livingrag doctor --skip-llm",
        "livingrag doctor --only database,schema --connect-timeout 2",
        "livingrag doctor --deep --json > doctor.json",
    )
)

_STYLE = {"ok": "green", "fail": "bold red", "skip": "yellow"}
_NAME_WIDTH = 9


def _names(values: list[str]) -> list[str]:
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def _print_check(check: Check) -> None:
    style = _STYLE.get(check.status, "")
    console.print(
        f"[{style}]{check.status:<4}[/{style}]  {check.name:<{_NAME_WIDTH}}  {escape(check.detail)}"
        f"  [dim]{check.seconds:.1f} s[/dim]",
        highlight=False,
    )
    if check.fix:
        console.print(f"{'':<4}  {'':<{_NAME_WIDTH}}  [bold]fix:[/bold] {escape(check.fix)}", highlight=False)


def _summary(checks: list[Check]) -> str:
    failed = [c.name for c in checks if c.status == "fail"]
    counts = {s: sum(c.status == s for c in checks) for s in ("ok", "fail", "skip")}
    tally = f"{counts['ok']} ok, {counts['fail']} failed, {counts['skip']} skipped"
    if failed:
        problems = f"{len(failed)} problem{'s' * (len(failed) > 1)}"
        return f"[bold red]doctor found {problems}[/bold red] ({', '.join(failed)}); {tally}"
    return f"[green]all checks passed[/green]; {tally}"


def doctor(
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object: ok, version and checks (name, status, detail, fix, seconds)."
    ),
    only: list[str] = typer.Option(
        [], "--only", help="Run only these checks (repeatable or comma-separated), e.g. --only database,schema."
    ),
    skip: list[str] = typer.Option([], "--skip", help="Skip these checks (repeatable or comma-separated)."),
    skip_llm: bool = typer.Option(
        False, "--skip-llm", help="Skip the llm check (it starts the local model, the slowest check): --skip llm."
    ),
    deep: bool = typer.Option(
        False, "--deep", help="Also disassemble the llama.cpp runtime for AVX-512/AMX/VNNI code (needs objdump)."
    ),
    connect_timeout: float = typer.Option(
        5.0,
        "--connect-timeout",
        min=0.5,
        help="Seconds to wait for the database server (LIVINGRAG_DB__CONNECT_TIMEOUT_S when that is shorter).",
    ),
) -> None:
    from livingrag import __version__
    from livingrag.diagnostics import CHECK_NAMES, all_passed, run_checks

    selected_only, selected_skip = _names(only), _names(skip) + (["llm"] if skip_llm else [])
    unknown = sorted((set(selected_only) | set(selected_skip)) - set(CHECK_NAMES))
    if unknown:
        raise typer.BadParameter(
            f"unknown check {', '.join(unknown)}; the checks are {', '.join(CHECK_NAMES)}",
            param_hint="--only/--skip",
        )
    live = not as_json and console.is_terminal
    checks: list[Check] = []
    spinner: Any = console.status("checking ...") if live else nullcontext()
    with spinner:

        def started(name: str) -> None:
            if live:
                spinner.update(f"checking {name} ...")

        for check in run_checks(
            load_settings,
            only=selected_only,
            skip=selected_skip,
            deep=deep,
            connect_timeout_s=connect_timeout,
            on_start=started,
        ):
            checks.append(check)
            if not as_json:
                _print_check(check)
    ok = all_passed(checks)
    if as_json:
        print_json({"ok": ok, "version": __version__, "checks": [c.as_dict() for c in checks]})
    else:
        console.print(_summary(checks), highlight=False)
    if not ok:
        raise typer.Exit(1)
