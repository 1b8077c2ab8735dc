"""Entry point of the ``livingrag`` command."""

from __future__ import annotations

import logging
import sys

import typer

from livingrag import __version__
from livingrag.cli import (
    admin_cmd,
    answer_cmd,
    bench_cmd,
    bench_gate_cmd,
    bench_paired_cmd,
    bench_retrieval_cmd,
    config_cmd,
    corpus_cmd,
    db_cmd,
    demo_cmd,
    doctor_cmd,
    eval_cmd,
    experience_cmd,
    gate_cmd,
    key_cmd,
    retrieve_cmd,
    serve_cmd,
    tenant_cmd,
)
from livingrag.cli.common import command_scope, err_console, examples
from livingrag.errors import LivingRAGError

app = typer.Typer(
    name="livingrag",
    help="Graph-RAG question answering that learns from its own traffic." + examples("livingrag demo"),
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
app.add_typer(db_cmd.app, name="db")
app.add_typer(tenant_cmd.app, name="tenant")
app.add_typer(key_cmd.app, name="key")
app.add_typer(config_cmd.app, name="config")
app.add_typer(corpus_cmd.app, name="corpus")
app.add_typer(corpus_cmd.passage_app, name="passage")
app.command(name="index", help=corpus_cmd.INDEX_HELP)(corpus_cmd.index)
app.command(name="retrieve", help=retrieve_cmd.RETRIEVE_HELP)(retrieve_cmd.retrieve)
app.command(name="ask", help=answer_cmd.ASK_HELP)(answer_cmd.ask)
app.command(name="chat", help=answer_cmd.CHAT_HELP)(answer_cmd.chat)
app.command(name="demo", help=demo_cmd.DEMO_HELP)(demo_cmd.demo)
app.command(name="doctor", help=doctor_cmd.DOCTOR_HELP)(doctor_cmd.doctor)
app.add_typer(eval_cmd.app, name="eval")
app.add_typer(admin_cmd.app, name="admin")
app.add_typer(experience_cmd.app, name="experience")
app.add_typer(gate_cmd.app, name="gate")
app.command(name="feedback", help=experience_cmd.FEEDBACK_HELP)(experience_cmd.feedback)
app.command(name="serve", help=serve_cmd.SERVE_HELP)(serve_cmd.serve)
bench_cmd.app.command(name="retrieval", help=bench_retrieval_cmd.RETRIEVAL_HELP)(bench_retrieval_cmd.retrieval)
bench_cmd.app.command(name="gate-learn", help=bench_gate_cmd.HELP)(bench_gate_cmd.gate_learn)
bench_cmd.app.command(name="paired", help=bench_paired_cmd.HELP)(bench_paired_cmd.paired)
app.add_typer(bench_cmd.app, name="bench")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"livingrag {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress details to stderr."),
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def main() -> None:
    """Run the CLI; expected errors print one clear line and exit 1. Whatever embedded PostgreSQL
    the command started is stopped when it ends, also on an error, Ctrl-C or SIGTERM (unless
    another process still holds it: :func:`~livingrag.cli.common.command_scope`)."""
    with command_scope():
        _run()


def _run() -> None:
    try:
        # Outside standalone mode click returns a command's typer.Exit code instead of exiting with it.
        code = app(standalone_mode=False)
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(1)
    except LivingRAGError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(1)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as exc:
        import click

        # a usage error: click's, or (typer >= 0.2x) its vendored click's, which is no click.ClickException
        if isinstance(exc, click.ClickException | typer.TyperException) and hasattr(exc, "show"):
            exc.show()
            sys.exit(getattr(exc, "exit_code", 2))
        raise


if __name__ == "__main__":
    main()
