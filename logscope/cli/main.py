"""The Typer app: one module per command, registered here."""

from __future__ import annotations

from typing import Annotated

import typer

from logscope.cli.analyze import analyze
from logscope.cli.check import CONTEXT_SETTINGS as CHECK_CONTEXT
from logscope.cli.check import check
from logscope.cli.compare import compare
from logscope.cli.dashboard import dashboard
from logscope.cli.explain import explain
from logscope.cli.mcp import mcp
from logscope.cli.query import query
from logscope.cli.rules import rules
from logscope.cli.tail import tail

app = typer.Typer(
    name="logscope",
    help="Find what went wrong in a verl RL run, where, and which parameter to change.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from logscope import __version__

        typer.echo(f"logscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Find what went wrong in a verl RL run, where, and which parameter to change."""


app.command("analyze")(analyze)
app.command("rules")(rules)
app.command("tail")(tail)
app.command("check", context_settings=CHECK_CONTEXT)(check)
app.command("dashboard")(dashboard)
app.command("compare")(compare)
app.command("explain")(explain)
app.command("mcp")(mcp)
app.command("query")(query)


def main() -> None:
    """Console-script entry point."""
    app()
