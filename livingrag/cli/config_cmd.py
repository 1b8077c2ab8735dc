"""``livingrag config``: show the effective settings."""

from __future__ import annotations

import typer

from livingrag.cli.common import console, examples, load_settings, print_json

app = typer.Typer(help="Settings." + examples("livingrag config show"), no_args_is_help=True)


@app.command(
    help="Print the effective settings (environment, .env and defaults), secrets masked."
    + examples("livingrag config show", "LIVINGRAG_GATES__TAU_NOVEL=0.8 livingrag config show --json")
)
def show(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    markdown: bool = typer.Option(False, "--markdown", help="Print docs/configuration.md's settings table (defaults)."),
) -> None:
    from livingrag.config_view import settings_as_dict, settings_table

    if markdown:
        typer.echo(settings_table())
        return
    data = settings_as_dict(load_settings())
    if as_json:
        print_json(data)
        return
    for group, values in data.items():
        if isinstance(values, dict):
            console.print(f"[bold]{group}[/bold]")
            for k, v in values.items():
                env = f"LIVINGRAG_{group.upper()}__{k.upper()}"
                console.print(f"  {k:<24} {v!s:<40} [dim]{env}[/dim]", highlight=False)
        else:
            console.print(f"[bold]{group}[/bold] {values}  [dim]LIVINGRAG_{group.upper()}[/dim]", highlight=False)
